package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// used makes a stub reply report total tokens of usage.
func used(r stubReply, total int64) stubReply {
	r.usage = &model.Usage{TotalTokens: total}
	return r
}

// withUsage makes a stub reply report u.
func withUsage(r stubReply, u model.Usage) stubReply {
	r.usage = &u
	return r
}

const budgetSpec = `
version: 1
name: budgeted
instructions: Look things up, then answer.
model: {max_tokens: 100}
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
guards: {max_turns: 8, fallback: FALLBACK}
`

// callUsage is what every agent call of the budget tests reports.
var callUsage = model.Usage{PromptTokens: 900, CachedPromptTokens: 300, CompletionTokens: 100, TotalTokens: 1000}

// threeLookups are the agent's replies: three tool rounds, then the answer.
func threeLookups() []stubReply {
	var out []stubReply
	for _, id := range []string{"1", "2", "3"} {
		out = append(out, withUsage(stubCall("c-"+id, "lookup", `{"id":"`+id+`"}`), callUsage))
	}
	return append(out, withUsage(stubSay("done"), callUsage))
}

// worstCases runs the agent without a budget and returns each agent call's worst
// case as the budget counts it: the estimated prompt plus model.max_tokens.
func worstCases(t *testing.T) []int64 {
	t.Helper()
	m := &stubModel{agent: threeLookups()}
	a := compile(t, budgetSpec, m, map[string]*funcTool{"lookup": echo()})
	if res, _ := runAgent(t, context.Background(), a, "go"); res.Stop != runtime.StopCompleted {
		t.Fatalf("without a budget: stop %s (%s)", res.Stop, res.Detail)
	}
	var out []int64
	for _, req := range m.agentReqs {
		out = append(out, int64(model.EstimateRequestTokens(&req))+100)
	}
	return out
}

// checkBudgetStop asserts a run stopped with budget, the fallback and one budget
// guard event, after exactly turns agent calls.
func checkBudgetStop(t *testing.T, res *runtime.Result, events []runtime.Event, model *stubModel, turns int) {
	t.Helper()
	if res.Stop != runtime.StopBudget || res.Answer != "FALLBACK" {
		t.Errorf("stop %s (%s), answer %q; want budget and the fallback", res.Stop, res.Detail, res.Answer)
	}
	if res.Turns != turns || len(model.agentReqs) != turns {
		t.Errorf("%d turns, %d agent requests; want %d", res.Turns, len(model.agentReqs), turns)
	}
	if got := guardsOf(events); !slices.Equal(got, []runtime.Guard{runtime.GuardBudget}) {
		t.Errorf("guards %v, want one budget", got)
	}
	states := eventsOf(events, runtime.EventState)
	if last := states[len(states)-1]; last.State != runtime.StateStopped || last.Trigger != runtime.Trigger(runtime.StopBudget) {
		t.Errorf("the run ends with %s on %s", last.State, last.Trigger)
	}
}

// The token budget stops a run before the call whose worst case would break it: not
// earlier, not later.
func TestTokenBudget(t *testing.T) {
	w := worstCases(t)
	if len(w) != 4 {
		t.Fatalf("%d agent calls without a budget, want 4", len(w))
	}
	used := callUsage.TotalTokens
	tests := []struct {
		name   string
		budget int64
		turns  int // agent calls made; 4 completes
	}{
		{name: "the first call's worst case is over", budget: w[0] - 1, turns: 0},
		{name: "exactly the first call's worst case", budget: w[0], turns: 1},
		{name: "one token short of the second call", budget: used + w[1] - 1, turns: 1},
		{name: "two calls but not a third", budget: used + w[1], turns: 2},
		{name: "three calls but not a fourth", budget: 2*used + w[2], turns: 3},
		{name: "every call", budget: 3*used + w[3], turns: 4},
		{name: "no budget", budget: 0, turns: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &stubModel{agent: threeLookups()}
			a := compileWith(t, budgetSpec, func(s *spec.Spec) { s.Guards.MaxTokens = tt.budget },
				runtime.Options{Model: model}, map[string]*funcTool{"lookup": echo()})
			res, events := runAgent(t, context.Background(), a, "go")
			if tt.turns == 4 {
				if res.Stop != runtime.StopCompleted || res.Turns != 4 {
					t.Fatalf("stop %s (%s) after %d turns, want completed after 4", res.Stop, res.Detail, res.Turns)
				}
				return
			}
			checkBudgetStop(t, res, events, model, tt.turns)
			if res.Usage.TotalTokens != int64(tt.turns)*used {
				t.Errorf("usage %d, want %d", res.Usage.TotalTokens, int64(tt.turns)*used)
			}
		})
	}
}

// The cost budget stops a run the same way, the worst case priced at the agent's
// model's price (every prompt token at the uncached price).
func TestCostBudget(t *testing.T) {
	w := worstCases(t)
	price := &spec.Pricing{Input: 2, CachedInput: 0.5, Output: 8}
	call := price.Cost(callUsage.PromptTokens, callUsage.CachedPromptTokens, callUsage.CacheWriteTokens, callUsage.CompletionTokens)
	worst := func(i int) float64 { return price.Cost(w[i]-100, 0, 0, 100) }
	// Budgets halfway between the last call allowed and the first refused, so float
	// rounding decides nothing.
	tests := []struct {
		name   string
		budget float64
		turns  int
	}{
		{name: "the first call's worst case is over", budget: worst(0) / 2, turns: 0},
		{name: "one call", budget: (worst(0) + call + worst(1)) / 2, turns: 1},
		{name: "two calls but not a third", budget: (call + worst(1) + 2*call + worst(2)) / 2, turns: 2},
		{name: "every call", budget: 3*call + worst(3) + 1e-6, turns: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &stubModel{agent: threeLookups()}
			a := compileWith(t, budgetSpec, func(s *spec.Spec) { s.Guards.MaxCost = tt.budget },
				runtime.Options{Model: model, Prices: runtime.Prices{Agent: price}}, map[string]*funcTool{"lookup": echo()})
			res, events := runAgent(t, context.Background(), a, "go")
			if tt.turns == 4 {
				if res.Stop != runtime.StopCompleted || res.Turns != 4 {
					t.Fatalf("stop %s (%s) after %d turns, want completed after 4", res.Stop, res.Detail, res.Turns)
				}
			} else {
				checkBudgetStop(t, res, events, model, tt.turns)
			}
			if res.Cost == nil || !near(*res.Cost, float64(tt.turns)*call) {
				t.Errorf("cost %v, want %g", res.Cost, float64(tt.turns)*call)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// A judge call that could break the budget is not made: the run stops with budget
// in VALIDATING, the draft unaccepted.
func TestJudgeCallOverBudget(t *testing.T) {
	src := budgetSpec + "judge:\n  criteria: [Complete.]\n"
	model := &stubModel{agent: []stubReply{withUsage(stubSay("draft"), callUsage)}, judge: []stubReply{stubVerdict(true, "")}}
	// The judge's worst case (its prompt, its schema, 100 out) is far more than
	// the agent's first call's minus the tokens that call used.
	a := compileWith(t, src, func(s *spec.Spec) { s.Guards.MaxTokens = callUsage.TotalTokens + 150 },
		runtime.Options{Model: model}, map[string]*funcTool{"lookup": echo()})
	res, events := runAgent(t, context.Background(), a, "go")
	checkBudgetStop(t, res, events, model, 1)
	if len(model.judgeReqs) != 0 || len(res.Verdicts) != 0 {
		t.Errorf("%d judge requests, verdicts %v; want none", len(model.judgeReqs), res.Verdicts)
	}
	for _, e := range eventsOf(events, runtime.EventGuard) {
		if e.Purpose != runtime.PurposeJudge {
			t.Errorf("the budget guard names purpose %q, want judge", e.Purpose)
		}
	}
}

// intentModel answers the classifier with one intent and reports usage.
type intentModel struct {
	mu    sync.Mutex
	calls int
	usage model.Usage
}

func (m *intentModel) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	if req.JSONSchema == nil || req.JSONSchema.Name != model.SchemaIntent {
		return nil, fmt.Errorf("intentModel: not a classifier request")
	}
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"intent": "billing", "confidence": 0.9})
	return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: string(b)}, Usage: m.usage}, nil
}

const routedSpec = budgetSpec + `intents:
  billing: {description: Payments, tools: [lookup]}
  other: {kind: chat}
routing: {recognizer: llm, fallback: other}
`

// The classifier's call counts like the others: a budget it could break stops the
// run before any model call, and its usage and cost are the run's.
func TestClassifierBudgetAndCost(t *testing.T) {
	t.Run("over budget", func(t *testing.T) {
		model := &stubModel{agent: []stubReply{stubSay("never")}}
		router := &intentModel{}
		a := compileWith(t, routedSpec, func(s *spec.Spec) { s.Guards.MaxTokens = 120 },
			runtime.Options{Model: model, RouterModel: router}, map[string]*funcTool{"lookup": echo()})
		res, events := runAgent(t, context.Background(), a, "go")
		checkBudgetStop(t, res, events, model, 0)
		if router.calls != 0 || res.Intent != "" {
			t.Errorf("%d classifier calls, intent %q; want none", router.calls, res.Intent)
		}
		if n := len(eventsOf(events, runtime.EventStop)); n != 1 {
			t.Errorf("%d stop events, want 1", n)
		}
	})
	t.Run("counted and priced", func(t *testing.T) {
		m := &stubModel{agent: []stubReply{withUsage(stubSay("paid"), callUsage)}}
		router := &intentModel{usage: model.Usage{PromptTokens: 300, CompletionTokens: 20, TotalTokens: 320}}
		agentPrice, routerPrice := &spec.Pricing{Input: 2, Output: 8}, &spec.Pricing{Input: 0.1, Output: 0.4}
		a := compileWith(t, routedSpec, nil,
			runtime.Options{Model: m, RouterModel: router, Prices: runtime.Prices{Agent: agentPrice, Router: routerPrice}},
			map[string]*funcTool{"lookup": echo()})
		res, events := runAgent(t, context.Background(), a, "go")
		if res.Stop != runtime.StopCompleted || res.Intent != "billing" {
			t.Fatalf("stop %s (%s), intent %q", res.Stop, res.Detail, res.Intent)
		}
		if res.Usage.TotalTokens != 1320 {
			t.Errorf("usage %+v, want the classifier's 320 and the agent's 1000", res.Usage)
		}
		want := routerPrice.Cost(300, 0, 0, 20) + agentPrice.Cost(900, 300, 0, 100)
		if res.Cost == nil || !near(*res.Cost, want) {
			t.Errorf("cost %v, want %g", res.Cost, want)
		}
		var purposes []runtime.Purpose
		for _, e := range eventsOf(events, runtime.EventModelResponse) {
			purposes = append(purposes, e.Purpose)
		}
		if !slices.Equal(purposes, []runtime.Purpose{runtime.PurposeClassifier, runtime.PurposeAgent}) {
			t.Errorf("model responses of %v", purposes)
		}
	})
}

// The run's cost is every call's usage (input, cached input, output) at the price
// of the model that answered it, and each model_response event carries its call's.
func TestRunCost(t *testing.T) {
	agentPrice := &spec.Pricing{Input: 2, CachedInput: 0.5, Output: 8}
	judgePrice := &spec.Pricing{Input: 10, Output: 30} // cached input at the input price
	judgeUsage := model.Usage{PromptTokens: 400, CachedPromptTokens: 100, CompletionTokens: 20, TotalTokens: 420}
	agentCall := agentPrice.Cost(900, 300, 0, 100)
	tests := []struct {
		name      string
		ownJudge  bool // the judge has a model of its own (Options.JudgeModel)
		prices    runtime.Prices
		agentCost *float64 // of each agent call; nil: unknown
		judgeCost *float64 // of each judge call
		cost      *float64 // of the run
		maxCost   float64
		guards    []runtime.Guard
	}{
		{name: "agent and judge at their own prices", ownJudge: true,
			prices:    runtime.Prices{Agent: agentPrice, Judge: judgePrice},
			agentCost: ptr(agentCall), judgeCost: ptr(judgePrice.Cost(400, 100, 0, 20)),
			cost: ptr(3*agentCall + 2*judgePrice.Cost(400, 100, 0, 20))},
		{name: "a judge on the agent's model pays the agent's price",
			prices:    runtime.Prices{Agent: agentPrice},
			agentCost: ptr(agentCall), judgeCost: ptr(agentPrice.Cost(400, 100, 0, 20)),
			cost: ptr(3*agentCall + 2*agentPrice.Cost(400, 100, 0, 20))},
		{name: "a judge with a model of its own and no price: the run's cost is unknown", ownJudge: true,
			prices:    runtime.Prices{Agent: agentPrice},
			agentCost: ptr(agentCall)},
		{name: "no prices"},
		{name: "max_cost with an unknown judge price: said once, not checked", ownJudge: true,
			prices: runtime.Prices{Agent: agentPrice}, agentCost: ptr(agentCall), maxCost: 1,
			guards: []runtime.Guard{runtime.GuardBudget}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := budgetSpec + "judge:\n  criteria: [Complete.]\n"
			model := &stubModel{
				agent: []stubReply{withUsage(stubCall("c-1", "lookup", `{"id":"1"}`), callUsage),
					withUsage(stubSay("draft"), callUsage), withUsage(stubSay("done"), callUsage)},
				judge: []stubReply{withUsage(stubVerdict(false, "more"), judgeUsage), withUsage(stubVerdict(true, ""), judgeUsage)},
			}
			opts := runtime.Options{Model: model, Prices: tt.prices}
			if tt.ownJudge {
				opts.JudgeModel = model
			}
			a := compileWith(t, src, func(s *spec.Spec) { s.Guards.MaxCost = tt.maxCost }, opts, map[string]*funcTool{"lookup": echo()})
			res, events := runAgent(t, context.Background(), a, "go")
			if res.Stop != runtime.StopCompleted {
				t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
			}
			if want := 3*callUsage.TotalTokens + 2*judgeUsage.TotalTokens; res.Usage.TotalTokens != want {
				t.Errorf("usage %d, want %d", res.Usage.TotalTokens, want)
			}
			if !sameCost(res.Cost, tt.cost) {
				t.Errorf("cost %v, want %v", show(res.Cost), show(tt.cost))
			}
			responses := eventsOf(events, runtime.EventModelResponse)
			for _, e := range responses {
				if e.Purpose != runtime.PurposeAgent || !sameCost(e.Cost, tt.agentCost) {
					t.Errorf("a %s model_response costs %v, want %v", e.Purpose, show(e.Cost), show(tt.agentCost))
				}
			}
			verdicts := eventsOf(events, runtime.EventVerdict)
			for _, e := range verdicts {
				if e.Usage == nil || *e.Usage != judgeUsage || !sameCost(e.Cost, tt.judgeCost) {
					t.Errorf("a verdict event's judge call: usage %v, cost %v; want %v, %v", e.Usage, show(e.Cost), judgeUsage, show(tt.judgeCost))
				}
			}
			if len(responses) != 3 || len(verdicts) != 2 {
				t.Errorf("%d model_response and %d verdict events, want 3 and 2", len(responses), len(verdicts))
			}
			stops := eventsOf(events, runtime.EventStop)
			if len(stops) != 1 || !sameCost(stops[0].Cost, tt.cost) {
				t.Errorf("stop events %+v, want one with the run's cost", stops)
			}
			if got := guardsOf(events); !slices.Equal(got, tt.guards) {
				t.Errorf("guards %v, want %v", got, tt.guards)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func sameCost(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return near(*a, *b)
}

func show(c *float64) string {
	if c == nil {
		return "unknown"
	}
	return fmt.Sprintf("$%g", *c)
}

// A response the provider refused after it arrived (a tool call cut off at
// max_tokens) was billed: the run counts its usage and cost before it stops.
func TestRefusedResponseIsStillCounted(t *testing.T) {
	price := &spec.Pricing{Input: 2, Output: 8}
	billed := model.Usage{PromptTokens: 700, CompletionTokens: 300, TotalTokens: 1000}
	model := &stubModel{agent: []stubReply{stubErr(&model.Error{Err: errors.New("the arguments were cut off at max_tokens"), Usage: billed})}}
	a := compileWith(t, budgetSpec, nil, runtime.Options{Model: model, Prices: runtime.Prices{Agent: price}}, map[string]*funcTool{"lookup": echo()})
	res, _ := runAgent(t, context.Background(), a, "go")
	if res.Stop != runtime.StopModelError {
		t.Fatalf("stop %s", res.Stop)
	}
	if res.Usage != billed || res.Cost == nil || *res.Cost != price.Cost(700, 0, 0, 300) {
		t.Errorf("usage %+v cost %v; want %+v and $%g", res.Usage, res.Cost, billed, price.Cost(700, 0, 0, 300))
	}
}
