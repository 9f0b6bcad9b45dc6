package spec

import "strconv"

// checkModelAPI warns about model.api on a provider other than openai: only the
// OpenAI provider has more than one wire protocol, so there the key does nothing.
// It looks at every model the spec names and at each one's fallbacks.
func (c *checker) checkModelAPI() {
	s := c.spec
	c.checkAPIOf(&s.Model, "model")
	if s.Routing.Model != nil {
		c.checkAPIOf(s.Routing.Model, "routing", "model")
	}
	if m := jmodel(s.Judge); m != nil {
		c.checkAPIOf(m, "judge", "model")
	}
}

func (c *checker) checkAPIOf(m *Model, at ...string) {
	if m.API != "" && m.Provider != "" && m.Provider != ProviderOpenAI {
		c.warnf(c.at(append(at, "api")...).keyPos(c.file), "remove api, or set provider: openai",
			"api: %s applies to the openai provider only; provider %s has one API", m.API, m.Provider)
	}
	for i := range m.Fallback {
		c.checkAPIOf(&m.Fallback[i], append(at[:len(at):len(at)], "fallback", strconv.Itoa(i))...)
	}
}
