package spec

// The rules of model.fallback, said once: the assembly builds chains by them, the
// prices follow them, and the checker compares entries by them.

// FallbackModel is a fallback entry as it runs. An entry of the base's provider
// (or of none) is the base's model with what the entry sets on top — its name,
// base_url, api_key_env, timeout, retries, temperature and max_tokens default to
// the base's, so `{name: gpt-4o-mini}` is enough. An entry of another provider
// shares nothing provider-specific (a URL or key meant for one provider must
// never reach another): it takes only the generic temperature, max_tokens,
// timeout and retries. The price goes with the name: an entry naming another
// model does not inherit the base's model.pricing.
func FallbackModel(base, entry Model) Model {
	m := entry
	m.Fallback = nil
	if m.Stream == nil {
		m.Stream = base.Stream
	}
	if m.Temperature == nil {
		m.Temperature = base.Temperature
	}
	if m.MaxTokens == 0 {
		m.MaxTokens = base.MaxTokens
	}
	if m.Timeout.Duration == 0 {
		m.Timeout = base.Timeout
	}
	if m.Retries == nil {
		m.Retries = base.Retries
	}
	if m.Provider != "" && ProviderOf(m) != ProviderOf(base) {
		return m
	}
	m.Provider = base.Provider
	if m.Name == "" {
		m.Name = base.Name
	}
	if m.BaseURL == "" {
		m.BaseURL = base.BaseURL
	}
	if m.APIKeyEnv == "" {
		m.APIKeyEnv = base.APIKeyEnv
	}
	if m.Pricing == nil && m.Name == base.Name {
		m.Pricing = base.Pricing
	}
	return m
}

// ProviderOf is m's provider, openai when it names none.
func ProviderOf(m Model) Provider {
	if m.Provider == "" {
		return ProviderOpenAI
	}
	return m.Provider
}

// OverrideFallback is the fallback chain of an override of the agent's model
// (judge.model, routing.model). An override's own fallback replaces the agent's.
// One without any keeps the agent's chain only while it is the agent's model (it
// names no other model or provider, changing say its temperature): the agent's
// fallbacks are alternatives to the agent's model, and a cheaper judge should not
// fall back to a dearer one. Like the price, the chain goes with the name.
func OverrideFallback(base Model, over *Model) []Model {
	if over == nil {
		return base.Fallback
	}
	if len(over.Fallback) > 0 {
		return over.Fallback
	}
	sameModel := (over.Name == "" || over.Name == base.Name) && (over.Provider == "" || ProviderOf(*over) == ProviderOf(base))
	if sameModel {
		return base.Fallback
	}
	return nil
}

// FallbackPrices are the prices of the fallback models of the spec's chains (the
// agent's, the judge's and the classifier's), by the name each runs under; a model
// of unknown price is absent. Where two entries share a name, the first one's
// price is kept.
func FallbackPrices(s *Spec) map[string]*Pricing {
	out := map[string]*Pricing{}
	add := func(base Model, chain []Model) {
		for _, e := range chain {
			m := FallbackModel(base, e)
			if _, seen := out[m.Name]; seen {
				continue
			}
			if p, _, ok := PriceOf(m); ok {
				out[m.Name] = &p
			}
		}
	}
	add(s.Model, s.Model.Fallback)
	if s.Judge != nil && s.Judge.Model != nil {
		add(overridden(s.Model, s.Judge.Model), OverrideFallback(s.Model, s.Judge.Model))
	}
	if s.Routing.Model != nil {
		add(overridden(s.Model, s.Routing.Model), OverrideFallback(s.Model, s.Routing.Model))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// overridden is what FallbackModel reads of the model an override's fallback
// entries fall back from: its provider, name and price.
func overridden(base Model, over *Model) Model {
	m := pricedModel(base, over)
	m.Provider = base.Provider
	if over.Provider != "" {
		m.Provider = over.Provider
	}
	return m
}
