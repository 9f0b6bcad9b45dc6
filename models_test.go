package agentrun

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model/fallback"
	"github.com/agentrun/agentrun/spec"
)

// Every provider the spec accepts builds a model here: a provider added to
// spec.Providers (and the schema) but not to newModel fails this test, not a
// user's run. Configuration errors (a missing script) are fine; only "unknown" is
// the forgotten case.
func TestEveryProviderHasAModel(t *testing.T) {
	dir := t.TempDir()
	for _, p := range spec.Providers {
		_, err := newModel(spec.Model{Provider: p, Name: "m", BaseURL: "http://127.0.0.1:1"}, dir, func(string) (string, bool) { return "key", true })
		if err != nil && strings.Contains(err.Error(), "unknown model provider") {
			t.Errorf("provider %q: %v — build it in newModel (models.go)", p, err)
		}
	}
	if _, err := newModel(spec.Model{Provider: "nope"}, dir, nil); err == nil || !strings.Contains(err.Error(), "unknown model provider") {
		t.Errorf("an unknown provider: %v, want the unknown-provider error", err)
	}
}

// newModel builds a chain for a model with fallback entries, each by its own
// provider; a nested fallback and an entry a provider cannot build are errors
// naming the entry; an offline model has no chain.
func TestNewModelBuildsFallbackChains(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) (string, bool) { return "key", k == "LLM_API_KEY" || k == "OTHER_KEY" }
	base := spec.Model{Name: "gpt-4o", BaseURL: "http://127.0.0.1:1", APIKeyEnv: "LLM_API_KEY"}

	withChain := base
	withChain.Fallback = []spec.Model{{Name: "gpt-4o-mini"}, {Provider: spec.ProviderOpenAI, Name: "other", BaseURL: "http://127.0.0.1:2", APIKeyEnv: "OTHER_KEY"}}
	m, err := newModel(withChain, dir, env)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := m.(*fallback.Chain)
	if !ok {
		t.Fatalf("%T, want a fallback chain", m)
	}
	var names []string
	for _, e := range c.Entries() {
		names = append(names, e.Provider+"/"+e.Name)
	}
	if want := []string{"openai/gpt-4o", "openai/gpt-4o-mini", "openai/other"}; !slices.Equal(names, want) {
		t.Errorf("chain %v, want %v", names, want)
	}

	nested := base
	nested.Fallback = []spec.Model{{Name: "a", Fallback: []spec.Model{{Name: "b"}}}}
	if _, err := newModel(nested, dir, env); err == nil || !strings.Contains(err.Error(), "model.fallback[0]: a fallback model cannot have a fallback") {
		t.Errorf("nested fallback: %v", err)
	}
	broken := base
	broken.Fallback = []spec.Model{{Provider: spec.ProviderOpenAI, Name: "x", BaseURL: "ftp://nowhere"}}
	if _, err := newModel(broken, dir, env); err == nil || !strings.Contains(err.Error(), "model.fallback[0] (x)") {
		t.Errorf("an entry that cannot be built: %v", err)
	}
	offline := spec.Model{Provider: spec.ProviderTest, Fallback: withChain.Fallback}
	if m, err := newModel(offline, dir, env); err != nil {
		t.Fatal(err)
	} else if _, chained := m.(*fallback.Chain); chained {
		t.Error("an offline model got a chain: an offline run could reach a network model")
	}
}

// A judge or classifier override keeps the agent's chain only while it is the
// agent's model; its own replaces it.
func TestMergeModelFallback(t *testing.T) {
	temp := 0.0
	chain := []spec.Model{{Name: "gpt-4o-mini"}}
	base := spec.Model{Name: "gpt-4o", Fallback: chain}
	if got := mergeModel(base, spec.Model{Temperature: &temp}).Fallback; !slices.Equal(names(got), []string{"gpt-4o-mini"}) {
		t.Errorf("same model: %v", got)
	}
	if got := mergeModel(base, spec.Model{Name: "gpt-4.1-nano"}).Fallback; got != nil {
		t.Errorf("another model: %v", got)
	}
	own := []spec.Model{{Name: "own"}}
	if got := mergeModel(base, spec.Model{Name: "gpt-4.1-nano", Fallback: own}).Fallback; !slices.Equal(names(got), []string{"own"}) {
		t.Errorf("own chain: %v", got)
	}
}

func names(ms []spec.Model) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}
