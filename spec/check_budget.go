package spec

import (
	"fmt"
	"strings"
)

// calledModel is a model a run calls, as the budget sees it: its name and price
// after judge.model or routing.model is merged over the agent's model.
type calledModel struct {
	Model
	at       []string // where the spec declares it: model, judge.model, routing.model
	nameAt   []string // the key its name comes from; the agent's when the override has none
	priceAt  []string // where its pricing would go: the override's when it names another model
	provider Provider
	// maxTokensAt is the key its max_tokens comes from; nil when neither sets it.
	maxTokensAt []string
	maxTokens   int
	fromEnv     bool // the name is LLM_MODEL_NAME's, for want of model.name
}

// calledModels are the models a run may call: the agent's, the judge's when there is
// a judge, and the classifier's when the llm recognizer chooses among intents.
func (c *checker) calledModels() []calledModel {
	s := c.spec
	models := []calledModel{c.calledModel(nil, []string{"model"})}
	if s.Judge != nil {
		models = append(models, c.calledModel(s.Judge.Model, []string{"judge", "model"}))
	}
	if len(s.Intents) > 0 && Resolve(s).Routing.Recognizer == RecognizerLLM {
		models = append(models, c.calledModel(s.Routing.Model, []string{"routing", "model"}))
	}
	return models
}

func (c *checker) calledModel(over *Model, at []string) calledModel {
	base := c.spec.Model
	agent := []string{"model"}
	m := calledModel{Model: pricedModel(base, over), at: at, nameAt: agent, priceAt: agent, provider: base.Provider, maxTokens: base.MaxTokens}
	if base.MaxTokens != 0 {
		m.maxTokensAt = agent
	}
	if over == nil {
		return m
	}
	if over.Name != "" {
		m.nameAt = at
		if over.Name != base.Name {
			m.priceAt = at
		}
	}
	if over.Pricing != nil {
		m.priceAt = at
	}
	if over.Provider != "" {
		m.provider = over.Provider
	}
	if over.MaxTokens != 0 {
		m.maxTokens, m.maxTokensAt = over.MaxTokens, at
	}
	return m
}

// checkBudget checks model prices and the run's budget against each other: a cost
// budget needs the price of every model the run calls, and a token budget below a
// call's output limit lets no such call be made.
func (c *checker) checkBudget() {
	g := c.spec.Guards
	costAt := c.at("guards", "max_cost")
	budgeted := g.MaxCost > 0 && !c.failed[costAt.path]
	for _, at := range [][]string{{"model"}, {"judge", "model"}, {"routing", "model"}} {
		c.checkPricing(at, budgeted)
	}
	models := c.calledModels()
	if budgeted {
		seen := map[string]bool{}
		for _, m := range models {
			if m.Name == "" && (m.provider == "" || m.provider == ProviderOpenAI) {
				// The openai provider takes a missing name from LLM_MODEL_NAME when it runs.
				m.Name, _ = c.loader.lookupEnv()("LLM_MODEL_NAME")
				m.fromEnv = m.Name != ""
			}
			if _, _, ok := PriceOf(m.Model); ok || c.failedUnder(c.at(append(m.priceAt, "pricing")...).path) {
				continue
			}
			who, hint := c.unpricedModel(m)
			if seen[who] {
				continue
			}
			seen[who] = true
			nameAt := c.at(append(m.nameAt, "name")...)
			if nameAt.node == nil {
				nameAt = c.at(m.at...).keyPos(c.file)
			}
			c.diags = append(c.diags, c.withEnd(Diagnostic{Severity: Error, Pos: costAt.pos, Path: costAt.path,
				Message: fmt.Sprintf("max_cost needs the price of every model the run calls: model %s has none", who),
				Hint:    hint,
				Notes:   []Note{{Pos: nameAt.pos, Message: "the model"}}}))
		}
	}
	tokensAt := c.at("guards", "max_tokens")
	if g.MaxTokens <= 0 || c.failed[tokensAt.path] {
		return
	}
	warned := map[string]bool{}
	for _, m := range models {
		limit, from := int64(m.maxTokens), strings.Join(append(m.maxTokensAt, "max_tokens"), ".")
		if m.maxTokensAt == nil {
			limit, from = DefaultBudgetOutput, "model.max_tokens"
		}
		if g.MaxTokens >= limit || warned[from] {
			continue
		}
		warned[from] = true
		if m.maxTokensAt == nil {
			c.warnf(tokensAt, "set model.max_tokens to what one answer needs, or raise guards.max_tokens",
				"max_tokens (%d) is less than the %d output tokens a call without model.max_tokens is counted at, so no model call fits the budget",
				g.MaxTokens, DefaultBudgetOutput)
			continue
		}
		c.warnf(tokensAt, fmt.Sprintf("raise guards.max_tokens, or lower %s", from),
			"max_tokens (%d) is less than %s (%d): a single call could exceed it, so no such call fits the budget",
			g.MaxTokens, from, limit)
	}
}

// unpricedModel names a model without a price for a message, and says how to give
// it one.
func (c *checker) unpricedModel(m calledModel) (who, hint string) {
	set := fmt.Sprintf("set %s.pricing: {input: …, output: …} (US dollars per million tokens)", strings.Join(m.priceAt, "."))
	switch vars := c.unset[c.at(append(m.nameAt, "name")...).node].vars; {
	case vars != nil:
		return "${" + vars[0] + "}", fmt.Sprintf("%s is not set, so the model is not known: set it, or %s", vars[0], set)
	case m.fromEnv:
		return fmt.Sprintf("%q (from LLM_MODEL_NAME)", m.Name), set
	case m.Name != "":
		return fmt.Sprintf("%q", m.Name), set
	case m.provider == "" || m.provider == ProviderOpenAI:
		return "${LLM_MODEL_NAME}", fmt.Sprintf("%s.name is not set and neither is LLM_MODEL_NAME, so the model is not known: set one, or %s",
			strings.Join(m.nameAt, "."), set)
	}
	return "(no name)", set
}

// checkPricing warns about prices that are likely mistakes.
func (c *checker) checkPricing(at []string, budgeted bool) {
	pAt := c.at(append(at, "pricing")...)
	if pAt.node == nil || c.failedUnder(pAt.path) {
		return
	}
	m := map[string]*Model{"model": &c.spec.Model, "judge": jmodel(c.spec.Judge), "routing": c.spec.Routing.Model}[at[0]]
	if m == nil || m.Pricing == nil {
		return
	}
	p := m.Pricing
	if p.CachedInput > p.Input {
		c.warnf(c.at(append(at, "pricing", "cached_input")...), "a provider's cache makes prompt tokens cheaper: check the two prices",
			"cached_input (%g) is more than input (%g)", p.CachedInput, p.Input)
	}
	if budgeted && p.Input == 0 && p.Output == 0 {
		c.warnf(pAt.keyPos(c.file), "for a free (local) model, limit the run with guards.max_tokens instead",
			"the model is free (input and output are 0), so max_cost does not limit its calls")
	}
}

// failedUnder reports whether the schema rejected path or anything below it.
func (c *checker) failedUnder(path string) bool {
	for p := range c.failed {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}
