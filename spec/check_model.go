package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// AnthropicMinThinkingBudget is the least budget_tokens Anthropic's extended
// thinking takes; the API refuses a request with less.
const AnthropicMinThinkingBudget = 1024

// checkModels checks every place a model is declared — model, routing.model,
// judge.model and each one's fallback entries — for settings its provider
// refuses or ignores, and the fallback chains for entries that cannot work.
// (Fact extraction uses the agent's model, and model.api has its own check.)
func (c *checker) checkModels() {
	s := c.spec
	c.checkModel(s.Model, &s.Model, []string{"model"})
	for _, o := range []struct {
		model *Model
		at    []string
	}{{s.Routing.Model, []string{"routing", "model"}}, {jmodel(s.Judge), []string{"judge", "model"}}} {
		if o.model != nil {
			c.checkModel(overriddenForCheck(s.Model, *o.model), o.model, o.at)
		}
	}
}

// overriddenForCheck is what the checks read of an override as it runs: its
// provider, name, base_url, key and max_tokens over the agent's model's.
func overriddenForCheck(base, over Model) Model {
	m := over
	if m.Provider == "" {
		m.Provider = base.Provider
	}
	if m.Name == "" {
		m.Name = base.Name
	}
	if m.BaseURL == "" {
		m.BaseURL = base.BaseURL
	}
	if m.APIKeyEnv == "" {
		m.APIKeyEnv = base.APIKeyEnv
	}
	if m.MaxTokens == 0 {
		m.MaxTokens = base.MaxTokens
	}
	return m
}

// checkModel checks one declared model: eff is it as it runs (an override merged
// over the agent's model), own what this place of the spec sets itself.
func (c *checker) checkModel(eff Model, own *Model, at []string) {
	c.checkProviderSettings(eff, own, at)
	c.checkFamily(eff, own, at)
	for i, f := range own.Fallback {
		fat := append(append([]string(nil), at...), "fallback", strconv.Itoa(i))
		if len(f.Fallback) > 0 {
			c.errorf(c.at(append(fat, "fallback")...).keyPos(c.file),
				fmt.Sprintf("list every model once, in order, in %s.fallback", joinTokens(at)),
				"a fallback model cannot have a fallback of its own")
		}
		if f.Provider == ProviderTest || f.Provider == ProviderScript {
			c.errorf(c.at(append(fat, "provider")...),
				"a fallback is tried when a model service fails, and test and script never do; run offline with --model test or script:FILE instead",
				"offline models cannot be a fallback (provider %s)", f.Provider)
			continue
		}
		e := FallbackModel(eff, f)
		if sameEndpoint(e, eff) {
			c.warnf(c.at(fat...), "name another model, provider or base_url: the same model on the same server fails the same way",
				"the fallback is the model it falls back from")
		}
		c.checkProviderSettings(e, &f, fat)
		c.checkFamily(e, &f, fat)
	}
}

// familyPrefixes tell a model's maker from its name, for checkFamily.
var familyPrefixes = []struct {
	prefix   string
	provider Provider
}{
	{"claude", ProviderAnthropic}, {"gemini", ProviderGemini},
	{"gpt-", ProviderOpenAI}, {"chatgpt", ProviderOpenAI}, {"o1", ProviderOpenAI}, {"o3", ProviderOpenAI}, {"o4", ProviderOpenAI},
}

// checkFamily warns of a model asked of a native API that does not serve it: a
// gpt-4o under provider anthropic, most often a fallback that named no provider
// and so took the agent's. The openai provider is left alone: OpenAI-compatible
// gateways serve every maker's models.
func (c *checker) checkFamily(eff Model, own *Model, at []string) {
	provider := ProviderOf(eff)
	if provider != ProviderAnthropic && provider != ProviderGemini || own.Name == "" {
		return
	}
	name := strings.ToLower(strings.TrimPrefix(own.Name, "models/"))
	for _, f := range familyPrefixes {
		if !strings.HasPrefix(name, f.prefix) || f.provider == provider {
			continue
		}
		how := "it names provider " + string(provider)
		hint := fmt.Sprintf("name a %s model, or set provider: %s", provider, f.provider)
		if own.Provider == "" {
			how = "it takes provider " + string(provider) + " from the model it falls back from"
			hint = fmt.Sprintf("set provider: %s on it (with its own base_url and api_key_env unless the defaults do)", f.provider)
		}
		c.warnf(c.at(append(append([]string(nil), at...), "name")...), hint,
			"%s is by its name a model of provider %s, but %s, whose API does not serve it", own.Name, f.provider, how)
		return
	}
}

// sameEndpoint reports whether two models are one model on one server with one key.
func sameEndpoint(a, b Model) bool {
	return ProviderOf(a) == ProviderOf(b) && a.Name == b.Name && a.BaseURL == b.BaseURL && a.APIKeyEnv == b.APIKeyEnv
}

// checkProviderSettings checks cache and reasoning against the provider that
// runs them: each provider takes its own of them and ignores or refuses the rest.
func (c *checker) checkProviderSettings(eff Model, own *Model, at []string) {
	key := func(tokens ...string) location {
		return c.at(append(append([]string(nil), at...), tokens...)...).keyPos(c.file)
	}
	provider := ProviderOf(eff)
	if own.Cache != nil && provider != ProviderAnthropic {
		c.warnf(key("cache"), "prompt caching is switched on and off for anthropic only; openai and gemini cache long prompts by themselves",
			"cache has no effect with provider %s", provider)
	}
	r := own.Reasoning
	if r == nil {
		return
	}
	switch provider {
	case ProviderAnthropic:
		if r.Effort != "" {
			c.warnf(key("reasoning", "effort"), "Anthropic's extended thinking takes reasoning.budget_tokens (1024 or more)",
				"reasoning.effort has no effect with provider anthropic")
		}
		switch {
		case r.BudgetTokens == 0:
		case r.BudgetTokens < AnthropicMinThinkingBudget:
			c.errorf(key("reasoning", "budget_tokens"), fmt.Sprintf("set budget_tokens to %d or more", AnthropicMinThinkingBudget),
				"budget_tokens %d is below Anthropic's minimum of %d", r.BudgetTokens, AnthropicMinThinkingBudget)
		case eff.MaxTokens > 0 && r.BudgetTokens >= eff.MaxTokens:
			c.errorf(key("reasoning", "budget_tokens"), "Anthropic counts thinking within max_tokens: raise max_tokens above budget_tokens, or lower budget_tokens",
				"budget_tokens (%d) must be less than max_tokens (%d)", r.BudgetTokens, eff.MaxTokens)
		}
	case ProviderOpenAI:
		if r.BudgetTokens != 0 {
			c.warnf(key("reasoning", "budget_tokens"), "OpenAI's reasoning models take reasoning.effort (minimal, low, medium or high)",
				"reasoning.budget_tokens has no effect with provider openai")
		}
	}
}

// joinTokens is a YAML path of plain keys: judge.model.
func joinTokens(tokens []string) string {
	out := ""
	for _, t := range tokens {
		out = joinKey(out, t)
	}
	return out
}
