package agentrun

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/anthropic"
	"github.com/agentrun/agentrun/runtime/model/fallback"
	"github.com/agentrun/agentrun/runtime/model/gemini"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/model/openai"
	"github.com/agentrun/agentrun/spec"
)

// newModel builds the model a spec's model names: its provider, or a fallback
// chain (runtime/model/fallback) of it and its model.fallback entries, each built
// by its own provider here. A script path in the spec is relative to the spec's
// directory. An offline model has no chain: it answers every call itself, and an
// offline run must never reach a network model.
func newModel(m spec.Model, specDir string, lookup func(string) (string, bool)) (model.Model, error) {
	if len(m.Fallback) == 0 || m.Provider == spec.ProviderTest || m.Provider == spec.ProviderScript {
		return newProvider(m, specDir, lookup)
	}
	base := m
	base.Fallback = nil
	first, err := newProvider(base, specDir, lookup)
	if err != nil {
		return nil, err
	}
	entries := []fallback.Entry{{Provider: providerName(base), Name: chainName(base, lookup), Model: first}}
	for i, f := range m.Fallback {
		if len(f.Fallback) > 0 {
			return nil, fmt.Errorf("model.fallback[%d]: a fallback model cannot have a fallback of its own", i)
		}
		e := spec.FallbackModel(base, f)
		built, err := newProvider(e, specDir, lookup)
		if err != nil {
			return nil, fmt.Errorf("model.fallback[%d] (%s): %w", i, cmp.Or(e.Name, string(spec.ProviderOf(e))), err)
		}
		entries = append(entries, fallback.Entry{Provider: providerName(e), Name: chainName(e, lookup), Model: built})
	}
	return fallback.New(entries, fallback.Options{})
}

// chainName is the name a chain reports for one of its models (model.Answered):
// the spec's name, or the one the openai provider takes from LLM_MODEL_NAME.
func chainName(m spec.Model, lookup func(string) (string, bool)) string {
	if m.Name == "" && spec.ProviderOf(m) == spec.ProviderOpenAI {
		if v, ok := lookup("LLM_MODEL_NAME"); ok && v != "" {
			return v
		}
	}
	return cmp.Or(m.Name, string(spec.ProviderOf(m)))
}

// newProvider builds one model by its provider.
func newProvider(m spec.Model, specDir string, lookup func(string) (string, bool)) (model.Model, error) {
	switch m.Provider {
	case "", spec.ProviderOpenAI:
		return openai.New(m, lookup)
	case spec.ProviderAnthropic:
		return anthropic.New(m, lookup)
	case spec.ProviderGemini:
		return gemini.New(m, lookup)
	case spec.ProviderTest:
		return offline.Test{}, nil
	case spec.ProviderScript:
		if m.Script == "" {
			return nil, errors.New("the script provider needs a script: set model.script or use --model script:FILE")
		}
		path := m.Script
		if !filepath.IsAbs(path) {
			path = filepath.Join(specDir, path)
		}
		return offline.LoadScript(path)
	}
	return nil, fmt.Errorf("unknown model provider %q", m.Provider)
}

// mergeModel is the agent's model with what an override (judge.model,
// routing.model) sets on top: a cheaper model usually differs only by name. Its
// fallback chain is spec.OverrideFallback's: the override's own, else the agent's
// only while the override is the agent's model.
func mergeModel(base, over spec.Model) spec.Model {
	m := base
	if over.Provider != "" {
		m.Provider = over.Provider
	}
	if over.Name != "" {
		m.Name = over.Name
	}
	if over.BaseURL != "" {
		m.BaseURL = over.BaseURL
	}
	if over.APIKeyEnv != "" {
		m.APIKeyEnv = over.APIKeyEnv
	}
	if over.Temperature != nil {
		m.Temperature = over.Temperature
	}
	if over.MaxTokens != 0 {
		m.MaxTokens = over.MaxTokens
	}
	if over.Timeout.Duration != 0 {
		m.Timeout = over.Timeout
	}
	if over.Retries != nil {
		m.Retries = over.Retries
	}
	if over.Script != "" {
		m.Script = over.Script
	}
	m.Fallback = spec.OverrideFallback(base, &over)
	m.Stream = nil // a judge or a classifier answers in JSON: nothing to show live
	return m
}

// OverrideModel applies a model override: test, script:FILE (relative to the
// working directory) or openai[:NAME]. "" changes nothing.
func OverrideModel(m *spec.Model, override string) error {
	if override == "" {
		return nil
	}
	provider, arg, _ := strings.Cut(override, ":")
	switch spec.Provider(provider) {
	case spec.ProviderTest:
		m.Provider = spec.ProviderTest
	case spec.ProviderScript:
		if arg == "" {
			return errors.New("--model script needs a file: --model script:turns.yaml")
		}
		abs, err := filepath.Abs(arg)
		if err != nil {
			return err
		}
		m.Provider, m.Script = spec.ProviderScript, abs
	case spec.ProviderOpenAI, spec.ProviderAnthropic, spec.ProviderGemini:
		if p := spec.Provider(provider); p != cmp.Or(m.Provider, spec.ProviderOpenAI) {
			// Another provider's server and key variable are no use to this one:
			// its own defaults apply, and so does its own name.
			m.Provider, m.BaseURL, m.APIKeyEnv, m.API, m.Name = p, "", "", "", ""
		}
		if arg != "" {
			m.Name = arg
		}
	default:
		return fmt.Errorf("unknown --model %q: use test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]", override)
	}
	return nil
}
