package scenario

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"testing"

	agent "github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/spec"
)

// Each expectation group reports its mismatches with the texts docs/testing.md and
// the CLI's tests show, and says nothing when the run meets it.
func TestCheck(t *testing.T) {
	ptr := func(s string) *string { return &s }
	two := 2
	completed := &agent.Result{Stop: agent.StopCompleted, Answer: "Order A1001 is on its way.", Intent: "order_status", IntentHow: agent.RoutedRules,
		Steps: []agent.Step{
			{Tool: "list_orders", Arguments: `{}`, Outcome: agent.OutcomeOK},
			{Tool: "cancel_order", Arguments: `{"id":"B9"}`, Outcome: agent.OutcomeRefused, Refusal: agent.RefusedAccept, Result: "Refused: never shown"},
			{Tool: "delete_all", Arguments: `{}`, Outcome: agent.OutcomeRefused, Refusal: agent.RefusedNotOffered, Result: `Error: there is no tool "delete_all" for this request.`},
			{Tool: "list_orders", Arguments: `{}`, Outcome: agent.OutcomeDuplicate},
		},
		Verdicts: []agent.Verdict{{Passed: false}, {Passed: true}},
	}
	structured := &agent.Result{Stop: agent.StopCompleted, Output: json.RawMessage(`{"order":{"id":"A1","lines":2},"tags":["x","y"]}`)}
	runOut := &agent.Result{Stop: agent.StopModelError, Detail: "script s: the model was called 2 times, but the script has only 1 turns"}
	tests := []struct {
		name      string
		expect    spec.Expect
		res       *agent.Result
		tripped   []string
		exhausted bool
		want      []string
	}{
		{name: "all met", res: completed, tripped: []string{"accept"}, expect: spec.Expect{
			Intent: "order_status", IntentHow: "rules", Calls: []spec.ExpectCall{{Tool: "list_orders", Outcome: "ok"}, {Tool: "cancel_order", Args: map[string]any{"id": "B9"}, Outcome: "refused"}},
			NotCalled: []string{"cancel_order", "update_address"}, Refused: []string{"cancel_order", "delete_all"}, Guards: []string{"accept"},
			Verdicts: []bool{false, true}, Stop: "completed", Answer: &spec.AnswerMatch{Contains: "A1001"}, Facts: map[string]*string{"diet": ptr("none"), "pending": nil},
		}},
		{name: "intent", res: completed, expect: spec.Expect{Intent: "faq", IntentHow: "llm", Refused: []string{"delete_all"}}, want: []string{
			"intent: expected faq, got order_status (rules)",
			"intent chosen by: expected llm, got rules",
		}},
		{name: "calls in order", res: completed, expect: spec.Expect{Calls: []spec.ExpectCall{{Tool: "cancel_order"}, {Tool: "list_orders", Outcome: "ok"}}, Refused: []string{"delete_all"}}, want: []string{
			"calls (in_order) differ:\n  expected:\n    - cancel_order\n    - list_orders → ok\n  actual:\n    - list_orders {} → ok\n    - cancel_order {\"id\":\"B9\"} → refused\n    - delete_all {} → refused\n    - list_orders {} → duplicate",
		}},
		{name: "calls exact", res: &agent.Result{}, expect: spec.Expect{Calls: []spec.ExpectCall{{Tool: "list_orders", Args: map[string]any{"n": 3}}}, Order: "exact", Stop: ""}, want: []string{
			"calls (exact) differ:\n  expected:\n    - list_orders {\"n\":3}\n  actual: no tool calls",
		}},
		{name: "calls any order takes each call once", res: completed, expect: spec.Expect{Calls: []spec.ExpectCall{{Tool: "cancel_order"}, {Tool: "cancel_order"}}, Order: "any_order", Refused: []string{"delete_all"}}, want: []string{
			"calls (any_order) differ:\n  expected:\n    - cancel_order\n    - cancel_order\n  actual:\n    - list_orders {} → ok\n    - cancel_order {\"id\":\"B9\"} → refused\n    - delete_all {} → refused\n    - list_orders {} → duplicate",
		}},
		{name: "not called and refused", res: completed, expect: spec.Expect{NotCalled: []string{"list_orders"}, Refused: []string{"delete_all", "list_orders"}}, want: []string{
			"not_called: list_orders was called (ok)",
			"refused: expected a refused call of list_orders, there is none",
		}},
		{name: "a tool the agent does not offer", res: completed, want: []string{
			`the model script calls delete_all, which the agent does not offer here: Error: there is no tool "delete_all" for this request.`,
		}},
		{name: "guards", res: completed, tripped: []string{"duplicate_call", "accept"}, expect: spec.Expect{Guards: []string{"max_turns"}, Refused: []string{"delete_all"}}, want: []string{
			"guards: expected max_turns to trip; tripped: accept, duplicate_call",
		}},
		{name: "verdicts", res: completed, expect: spec.Expect{Verdicts: []bool{true}, Refused: []string{"delete_all"}}, want: []string{
			"verdicts: expected [true], got [false true]",
		}},
		{name: "stop", res: completed, expect: spec.Expect{Stop: "max_turns", Refused: []string{"delete_all"}}, want: []string{
			"stop: expected max_turns, got completed ()",
		}},
		{name: "the script ran out", res: runOut, exhausted: true, want: []string{
			"the model script ran out: script s: the model was called 2 times, but the script has only 1 turns",
		}},
		{name: "a model error that is not the script's end", res: &agent.Result{Stop: agent.StopModelError, Detail: "HTTP 500"}},
		{name: "the script ran out where a stop is expected", res: runOut, exhausted: true, expect: spec.Expect{Stop: "completed"}, want: []string{
			"stop: expected completed, got model_error (script s: the model was called 2 times, but the script has only 1 turns)",
		}},
		{name: "answer equals", res: completed, expect: spec.Expect{Answer: &spec.AnswerMatch{Equals: "x"}, Refused: []string{"delete_all"}}, want: []string{
			`answer: expected "x", got "Order A1001 is on its way."`,
		}},
		{name: "answer contains", res: completed, expect: spec.Expect{Answer: &spec.AnswerMatch{Contains: "B2"}, Refused: []string{"delete_all"}}, want: []string{
			`answer: expected it to contain "B2", got "Order A1001 is on its way."`,
		}},
		{name: "answer matches", res: completed, expect: spec.Expect{Answer: &spec.AnswerMatch{Matches: "^B", Re: regexp.MustCompile("^B")}, Refused: []string{"delete_all"}}, want: []string{
			`answer: expected it to match ^B, got "Order A1001 is on its way."`,
		}},
		{name: "facts", res: completed, expect: spec.Expect{Facts: map[string]*string{"diet": nil, "tier": ptr("gold"), "zone": ptr("east")}, Refused: []string{"delete_all"}}, want: []string{
			`facts: expected no diet, got "none"`,
			`facts: expected tier = "gold", got "silver"`,
			`facts: expected zone = "east", got ""`,
		}},
		{name: "history", res: completed, expect: spec.Expect{HistoryTurns: &two, Refused: []string{"delete_all"}}, want: []string{
			"history: expected 2 turns stored, got 0",
		}},
		{name: "output subset matches", res: structured, expect: spec.Expect{Output: map[string]any{"order": map[string]any{"id": "A1"}, "tags": []any{"x", "y"}}}},
		{name: "output differs inside", res: structured, expect: spec.Expect{Output: map[string]any{"order": map[string]any{"id": "A2"}}}, want: []string{
			`output: expected {"order":{"id":"A2"}}, got {"order":{"id":"A1","lines":2},"tags":["x","y"]} (they differ at /order/id)`,
		}},
		{name: "output arrays are equal, not subsets", res: structured, expect: spec.Expect{Output: map[string]any{"tags": []any{"x"}}}, want: []string{
			`output: expected {"tags":["x"]}, got {"order":{"id":"A1","lines":2},"tags":["x","y"]} (they differ at /tags)`,
		}},
		{name: "output key missing", res: structured, expect: spec.Expect{Output: map[string]any{"order": map[string]any{"lines": 2, "total": 3}}}, want: []string{
			`output: expected {"order":{"lines":2,"total":3}}, got {"order":{"id":"A1","lines":2},"tags":["x","y"]} (they differ at /order/total)`,
		}},
		{name: "no output", res: &agent.Result{Stop: agent.StopOutputInvalid}, expect: spec.Expect{Output: map[string]any{"n": 1}, Stop: "output_invalid"}, want: []string{
			`output: expected {"n":1}, the run has no structured answer (stop output_invalid)`,
		}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := memory.New()
			err := st.Commit(ctx, store.Record{UserID: "u", Facts: []store.FactChange{
				{Op: store.FactSet, Key: "diet", Value: "none"}, {Op: store.FactSet, Key: "tier", Value: "silver"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			tripped := map[string]bool{}
			for _, g := range tt.tripped {
				tripped[g] = true
			}
			run := &observed{res: tt.res, steps: steps(tt.res), tripped: tripped, exhausted: tt.exhausted, store: st, user: "u", conv: "c"}
			if got := check(ctx, tt.expect, run); !slices.Equal(got, tt.want) {
				t.Errorf("check =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// An accept rule's refusal is what `guards: [accept]` names, beside the guards that
// trip as guards.
func TestTrippedGuards(t *testing.T) {
	got := trippedGuards([]agent.Event{
		{Kind: agent.EventGuard, Guard: agent.GuardDuplicateCall},
		{Kind: agent.EventToolRefused, Refusal: agent.RefusedAccept},
		{Kind: agent.EventToolRefused, Refusal: agent.RefusedSchema},
		{Kind: agent.EventToolResult, Tool: "x"},
	})
	if len(got) != 2 || !got["duplicate_call"] || !got["accept"] {
		t.Errorf("tripped %v", got)
	}
}
