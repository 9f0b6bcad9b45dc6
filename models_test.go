package agentrun

import (
	"strings"
	"testing"

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
