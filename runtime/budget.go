package runtime

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// budgetState is the budgets' part of a run: what its model calls cost and what
// it and its sub-runs spent toward guards.max_turns, max_tokens and max_cost.
type budgetState struct {
	// cost is what the priced model calls cost so far; costUnknown: a call's model
	// had no price; costUnchecked: the guard event saying max_cost cannot be
	// checked was emitted.
	cost                       float64
	costUnknown, costUnchecked bool
	spent                      spend       // what the run and its sub-runs spent (see spend)
	tally                      *sync.Mutex // guards spent of every run of the tree: the top run's
}

// spend is what a run and every sub-run below it have spent so far. A sub-run's
// model calls count toward the limits of each run above it (guards.max_turns,
// max_tokens, max_cost), so a sub-agent cannot spend past its parent's budget.
// Sub-runs of one response run in parallel: every spend of a tree of runs is
// guarded by the tree's one mutex (run.budget.tally).
type spend struct {
	turns  int
	tokens int64
	cost   float64
	// heldTokens and heldCost are the worst cases of the model calls in flight
	// (see overBudget): parallel sub-runs must not each spend the same remainder.
	heldTokens int64
	heldCost   float64
}

func (r *run) spentSoFar() spend {
	r.budget.tally.Lock()
	defer r.budget.tally.Unlock()
	return r.budget.spent
}

func (r *run) spentTurns() int { return r.spentSoFar().turns }

// charge adds a model call's usage and cost to the run and every run above it.
func (r *run) charge(u model.Usage, cost float64) {
	tokens := max(u.TotalTokens, u.PromptTokens+u.CompletionTokens)
	r.budget.tally.Lock()
	defer r.budget.tally.Unlock()
	for x := r; x != nil; x = x.parentRun() {
		x.budget.spent.tokens += tokens
		x.budget.spent.cost += cost
	}
}

// takeTurn counts the agent's next model call toward the max_turns of the run and
// of every run above it, in one step, so parallel sub-runs cannot both take the
// last turn. It returns which limit the call would break instead ("" when it was
// counted).
func (r *run) takeTurn() (detail string) {
	r.budget.tally.Lock()
	defer r.budget.tally.Unlock()
	for x := r; x != nil; x = x.parentRun() {
		limit := x.agent.settings.Guards.MaxTurns
		switch {
		case x.budget.spent.turns < limit:
		case x == r && x.result.Turns == limit:
			return fmt.Sprintf("the model was called %d times without finishing", limit)
		case x == r:
			return fmt.Sprintf("the run and its sub-agents made %d model calls, its max_turns", limit)
		default:
			return fmt.Sprintf("the agent %s's runs made %d model calls, its max_turns", x.agent.Name(), limit)
		}
	}
	for x := r; x != nil; x = x.parentRun() {
		x.budget.spent.turns++
	}
	return ""
}

// budgetError is why a model call was not made: it could break the run's budget.
type budgetError struct{ detail string }

func (e *budgetError) Error() string { return e.detail }

// answeredBy is the model that answered resp (see Result.Models) and the models of
// its fallback chain that failed before it.
func answeredBy(resp *model.Response) (name string, fallbackFrom []string) {
	if resp.Answered != nil {
		return resp.Answered.Name, resp.Answered.FallbackFrom
	}
	return resp.Model, nil
}

// answeringPrice is the price of the model that answered a call for the purpose:
// the purpose's model, or the fallback model that answered instead (answered, nil
// for a model that is no chain); nil when unknown.
func (a *Agent) answeringPrice(p Purpose, answered *model.Answered) *spec.Pricing {
	if answered != nil && len(answered.FallbackFrom) > 0 { // not the chain's first model
		return a.prices.Fallback[answered.Name]
	}
	return a.price(p)
}

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
func (r *run) overBudget(p Purpose, req *model.Request) (detail string, release func()) {
	none := func() {}
	limited := false
	for x := r; x != nil; x = x.parentRun() {
		g := x.agent.settings.Guards
		limited = limited || g.MaxTokens > 0 || g.MaxCost > 0
	}
	if !limited {
		return "", none
	}
	prompt, output := int64(model.EstimateRequestTokens(req)), int64(r.agent.maxOutput(p))
	price := r.agent.price(p)
	worst := spend{tokens: prompt + output}
	if price != nil {
		worst.cost = price.Cost(prompt, 0, 0, output)
	}
	r.budget.tally.Lock()
	for x := r; x != nil && detail == ""; x = x.parentRun() {
		g := x.agent.settings.Guards
		whose := ""
		if x != r {
			whose = fmt.Sprintf(" (the budget of the agent %s, which this run is part of)", x.agent.Name())
		}
		held := ""
		if x.budget.spent.heldTokens > 0 {
			held = fmt.Sprintf(", %d more held by calls in flight", x.budget.spent.heldTokens)
		}
		s := x.budget.spent
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
	r.budget.tally.Unlock()
	if detail == "" && price == nil && !r.budget.costUnchecked && r.costLimited() {
		r.budget.costUnchecked = true
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
			r.budget.tally.Lock()
			r.hold(worst, -1)
			r.budget.tally.Unlock()
		})
	}
}

// hold adds (sign 1) or removes (sign -1) a call's worst case to what the calls in
// flight hold toward the budgets of the run and every run above it. r.budget.tally is held.
func (r *run) hold(worst spend, sign int) {
	for x := r; x != nil; x = x.parentRun() {
		x.budget.spent.heldTokens += int64(sign) * worst.tokens
		x.budget.spent.heldCost += float64(sign) * worst.cost
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
// answered: the purpose's model, or the fallback model that answered instead
// (answered, nil for a model that is no chain). It returns the call's cost, nil
// when that model's price is unknown.
func (r *run) account(p Purpose, u model.Usage, answered *model.Answered) *float64 {
	r.result.Usage.Add(u)
	price := r.agent.answeringPrice(p, answered)
	if price == nil {
		r.budget.costUnknown = true
		r.charge(u, 0)
		return nil
	}
	c := price.Cost(u.PromptTokens, u.CachedPromptTokens, u.CacheWriteTokens, u.CompletionTokens)
	r.budget.cost += c
	r.charge(u, c)
	return &c
}

// runCost is the run's cost so far, nil when it is unknown: the agent's model has no
// price, or a call's model had none.
func (r *run) runCost() *float64 {
	if r.budget.costUnknown || r.agent.prices.Agent == nil {
		return nil
	}
	c := r.budget.cost
	return &c
}
