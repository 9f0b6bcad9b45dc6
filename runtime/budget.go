package runtime

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/agentrun/agentrun/spec"
)

// price is what the model answering a purpose's calls costs; nil when unknown.
// Fact extraction uses the agent's model, so it pays the agent's price.
func (a *Agent) price(p Purpose) *spec.Pricing {
	switch p {
	case PurposeJudge:
		return a.prices.Judge
	case PurposeClassifier:
		return a.prices.Router
	}
	return a.prices.Agent
}

// maxOutput is the most a call for the purpose may write, as the budgets count it:
// the max_tokens of the model answering it (a judge's or router's model inherits
// the agent's, as the assembly merges them), else spec.DefaultBudgetOutput.
func (a *Agent) maxOutput(p Purpose) int {
	s := a.spec
	var own *spec.Model
	switch p {
	case PurposeJudge:
		if s.Judge != nil {
			own = s.Judge.Model
		}
	case PurposeClassifier:
		own = s.Routing.Model
	}
	if own != nil && own.MaxTokens > 0 {
		return own.MaxTokens
	}
	return cmp.Or(s.Model.MaxTokens, spec.DefaultBudgetOutput)
}

// overBudget runs before every model call. It reports why the call could break the
// run's budget — the tokens used so far, plus the worst case of the calls still in
// flight (the run's and its sub-runs', which may run in parallel), plus this call's
// worst case (its estimated prompt and its whole max output) over guards.max_tokens,
// or the same priced at its model's price over guards.max_cost, of the run or of any
// run above it — and emits the guard event; "" when the call may go ahead. Then the
// call's worst case is held toward those budgets until release is called, which the
// caller does once the call ended (its real usage counted by account). The caller
// stops the run (StopBudget) or, for a call the run can do without, skips it.
func (r *run) overBudget(p Purpose, req *ModelRequest) (detail string, release func()) {
	none := func() {}
	limited := false
	for x := r; x != nil; x = x.parentRun() {
		g := x.agent.settings.Guards
		limited = limited || g.MaxTokens > 0 || g.MaxCost > 0
	}
	if !limited {
		return "", none
	}
	prompt, output := int64(EstimateRequestTokens(req)), int64(r.agent.maxOutput(p))
	price := r.agent.price(p)
	worst := spend{tokens: prompt + output}
	if price != nil {
		worst.cost = price.Cost(prompt, 0, output)
	}
	r.tally.Lock()
	for x := r; x != nil && detail == ""; x = x.parentRun() {
		g := x.agent.settings.Guards
		whose := ""
		if x != r {
			whose = fmt.Sprintf(" (the budget of the agent %s, which this run is part of)", x.agent.Name())
		}
		held := ""
		if x.spent.heldTokens > 0 {
			held = fmt.Sprintf(", %d more held by calls in flight", x.spent.heldTokens)
		}
		s := x.spent
		if g.MaxTokens > 0 && s.tokens+s.heldTokens+worst.tokens > g.MaxTokens {
			detail = fmt.Sprintf("the %s's next model call could use %d tokens (about %d in, up to %d out); %d of max_tokens %d are used%s%s",
				p, worst.tokens, prompt, output, s.tokens, g.MaxTokens, held, whose)
			break
		}
		if g.MaxCost > 0 && price != nil && s.cost+s.heldCost+worst.cost > g.MaxCost {
			detail = fmt.Sprintf("the %s's next model call could cost $%.6f (about %d tokens in, up to %d out); $%.6f of max_cost $%g is spent%s",
				p, worst.cost, prompt, output, s.cost, g.MaxCost, whose)
		}
	}
	if detail == "" {
		r.hold(worst, 1)
	}
	r.tally.Unlock()
	if detail == "" && price == nil && !r.costUnchecked && r.costLimited() {
		r.costUnchecked = true
		r.emit(Event{Kind: EventGuard, Guard: GuardBudget, Purpose: p,
			Message: fmt.Sprintf("max_cost is not checked: the price of the %s's model is unknown", p)})
	}
	if detail != "" {
		r.emit(Event{Kind: EventGuard, Guard: GuardBudget, Purpose: p, Message: detail})
		return detail, none
	}
	// The call was counted at output tokens: it may not produce more, so the
	// worst case is a bound, also for a model without max_tokens of its own.
	req.MaxTokens = int(output)
	var once sync.Once
	return "", func() {
		once.Do(func() {
			r.tally.Lock()
			r.hold(worst, -1)
			r.tally.Unlock()
		})
	}
}

// hold adds (sign 1) or removes (sign -1) a call's worst case to what the calls in
// flight hold toward the budgets of the run and every run above it. r.tally is held.
func (r *run) hold(worst spend, sign int) {
	for x := r; x != nil; x = x.parentRun() {
		x.spent.heldTokens += int64(sign) * worst.tokens
		x.spent.heldCost += float64(sign) * worst.cost
	}
}

// costLimited reports whether the run or a run above it has a max_cost.
func (r *run) costLimited() bool {
	for x := r; x != nil; x = x.parentRun() {
		if x.agent.settings.Guards.MaxCost > 0 {
			return true
		}
	}
	return false
}

// account adds a model call's usage to the run's and prices it by the model that
// answered. It returns the call's cost, nil when that model's price is unknown.
func (r *run) account(p Purpose, u Usage) *float64 {
	r.result.Usage.Add(u)
	price := r.agent.price(p)
	if price == nil {
		r.costUnknown = true
		r.charge(u, 0)
		return nil
	}
	c := price.Cost(u.PromptTokens, u.CachedPromptTokens, u.CompletionTokens)
	r.cost += c
	r.charge(u, c)
	return &c
}

// runCost is the run's cost so far, nil when it is unknown: the agent's model has no
// price, or a call's model had none.
func (r *run) runCost() *float64 {
	if r.costUnknown || r.agent.prices.Agent == nil {
		return nil
	}
	c := r.cost
	return &c
}
