package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
)

// flowSpec has every kind of control flow: a for_each over a tool's result, a
// condition that holds and one that does not, parallel branches (one of two steps),
// a bounded loop and a model step with a JSON schema.
const flowSpec = `
version: 1
name: flow
instructions: You summarise orders.
tools:
  - name: list
    parameters: {type: object, properties: {limit: {type: integer}}}
    http: {url: "https://example.com/list"}
    collect: {orders: result.ids}
  - name: detail
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://example.com/detail"}
  - name: status
    parameters: {type: object, properties: {n: {type: integer}}}
    http: {url: "https://example.com/status"}
workflow:
  steps:
    - name: orders
      tool: list
      args: {limit: 3}
    - name: details
      for_each: steps.orders.result.ids
      max_parallel: 3
      tool: detail
      args: {id: "{{ item }}"}
    - name: summary
      when: len(steps.details.items) > 2
      model:
        prompt: "Summarise for {{ input }}: {{ toJSON(map(steps.details.items, .result)) }}"
        schema:
          type: object
          properties: {total: {type: integer}, note: {type: string}}
          required: [total, note]
    - name: never
      when: len(steps.details.items) > 10
      tool: list
    - name: checks
      parallel:
        - - {name: a, tool: detail, args: {id: x}}
          - {name: a2, tool: detail, args: {id: "{{ steps.a.result.id }}-2"}}
        - - {name: b, tool: detail, args: {id: y}}
    - name: poll
      loop: {until: 'steps.st.result.n >= 3', max: 5}
      steps:
        - {name: st, tool: status, args: {n: "{{ len(steps.details.items) }}"}}
  answer: "{{ steps.summary.output.note }} | {{ len(steps.details.items) }} | {{ steps.a2.result.id }} | {{ steps.b.ok }} | {{ steps.never.skipped }} | {{ steps.poll.iterations }}"
`

// flowTools are the tools of flowSpec; detail sleeps a random while so parallel
// calls finish in any order, and status counts its calls.
func flowTools() map[string]*funcTool {
	var polls atomic.Int32
	return map[string]*funcTool{
		"list": {fn: func(context.Context, runtime.ToolInput) (string, error) {
			return `{"ids": ["o1", "o2", "o3"]}`, nil
		}},
		"detail": {fn: func(_ context.Context, in runtime.ToolInput) (string, error) {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			b, _ := json.Marshal(map[string]any{"id": in.Args["id"]})
			return string(b), nil
		}},
		"status": {fn: func(context.Context, runtime.ToolInput) (string, error) {
			return fmt.Sprintf(`{"n": %d}`, polls.Add(1)), nil
		}},
	}
}

// The acceptance test: with an offline model, a workflow with a condition, parallel
// branches and a bounded loop gives the same steps and answer on every run,
// whatever order its parallel calls finish in.
func TestWorkflowIsDeterministic(t *testing.T) {
	type shown struct {
		Tool, CallID, Arguments, Result string
		Outcome                         runtime.Outcome
	}
	var first []shown
	var firstAnswer string
	for i := range 20 {
		a := compile(t, flowSpec, offline.Test{}, flowTools())
		res, events := runAgent(t, context.Background(), a, "my orders")
		if res.Stop != runtime.StopCompleted {
			t.Fatalf("run %d: stop %s: %s", i, res.Stop, res.Detail)
		}
		var steps []shown
		for _, s := range res.Steps {
			steps = append(steps, shown{s.Tool, s.CallID, s.Arguments, s.Result, s.Outcome})
		}
		if i == 0 {
			first, firstAnswer = steps, res.Answer
			if want := "a | 3 | x-2 | true | true | 3"; res.Answer != want {
				t.Fatalf("answer %q, want %q", res.Answer, want)
			}
			var ids []string
			for _, s := range steps {
				ids = append(ids, s.CallID)
			}
			if want := "step:orders step:details[0] step:details[1] step:details[2] step:a step:a2 step:b step:st#1 step:st#2 step:st#3"; strings.Join(ids, " ") != want {
				t.Errorf("steps %s, want %s", strings.Join(ids, " "), want)
			}
			if res.Turns != 1 {
				t.Errorf("turns %d, want 1 (the model step)", res.Turns)
			}
			var statuses []string
			for _, e := range eventsOf(events, runtime.EventStep) {
				if e.StepStatus != runtime.StepStarted {
					statuses = append(statuses, e.Step+":"+string(e.StepStatus))
				}
			}
			// Events come as steps end: parallel branches' in any order.
			slices.Sort(statuses[4:8])
			if want := "orders:ok details:ok summary:ok never:skipped a2:ok a:ok b:ok checks:ok st:ok st:ok st:ok poll:ok"; strings.Join(statuses, " ") != want {
				t.Errorf("step events %s, want %s", strings.Join(statuses, " "), want)
			}
			requests := eventsOf(events, runtime.EventModelRequest)
			if len(requests) != 1 || requests[0].Purpose != runtime.PurposeWorkflow || requests[0].Step != "summary" {
				t.Errorf("model requests %+v", requests)
			}
			if got := contentsOf(res.Messages); !reflect.DeepEqual(got, []string{"my orders", res.Answer}) {
				t.Errorf("stored messages %q: only the input and the answer are kept", got)
			}
			continue
		}
		if !reflect.DeepEqual(steps, first) || res.Answer != firstAnswer {
			t.Fatalf("run %d differs:\n%+v\n%q\nfirst:\n%+v\n%q", i, steps, res.Answer, first, firstAnswer)
		}
	}
}

// on_error decides what a failing step does: fail stops the run with the
// fallback, continue records the error and goes on, fallback stands in a value.
func TestWorkflowOnError(t *testing.T) {
	const head = `
version: 1
name: errs
guards: {fallback: FALLBACK}
tools:
  - name: detail
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://example.com/detail"}
workflow:
  steps:
`
	tests := []struct {
		name, steps, answer string
		stop                runtime.StopReason
	}{
		{"fail", `
    - {name: bad, tool: detail, args: {id: 7}}
    - {name: after, tool: detail, args: {id: x}}
`, "FALLBACK", runtime.StopWorkflowFailed},
		{"continue", `
    - {name: bad, tool: detail, args: {id: 7}, on_error: continue}
  answer: "{{ steps.bad.ok }}: {{ steps.bad.error }}"
`, "false: invalid arguments for detail: at /id: got number, want string", runtime.StopCompleted},
		{"fallback", `
    - {name: bad, tool: detail, args: {id: 7}, on_error: fallback, fallback: {id: none}}
  answer: "{{ steps.bad.result.id }}"
`, "none", runtime.StopCompleted},
		{"for_each items continue", `
    - name: each
      for_each: '["a", "", "c"]'
      tool: detail
      args: {id: "{{ item }}"}
      on_error: continue
  answer: "{{ steps.each.ok }} {{ map(steps.each.items, .ok) }}"
`, "false [true false true]", runtime.StopCompleted},
		{"loop exhausted", `
    - name: poll
      loop: {until: 'steps.p.result.id == "done"', max: 2}
      steps: [{name: p, tool: detail, args: {id: x}}]
`, "FALLBACK", runtime.StopWorkflowFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := map[string]*funcTool{"detail": {fn: func(_ context.Context, in runtime.ToolInput) (string, error) {
				if in.Args["id"] == "" {
					return "", fmt.Errorf("no id")
				}
				b, _ := json.Marshal(in.Args)
				return string(b), nil
			}}}
			a := compile(t, head+tt.steps, offline.Test{}, tools)
			res, events := runAgent(t, context.Background(), a, "go")
			if res.Stop != tt.stop || res.Answer != tt.answer {
				t.Errorf("stop %s (%s), answer %q; want %s, %q", res.Stop, res.Detail, res.Answer, tt.stop, tt.answer)
			}
			if tt.name == "fail" {
				if tools["detail"].calls.Load() != 0 {
					t.Error("a step after the failed one ran")
				}
				states := eventsOf(events, runtime.EventState)
				if last := states[len(states)-1]; last.State != runtime.StateStopped || last.Trigger != runtime.Trigger(runtime.StopWorkflowFailed) {
					t.Errorf("last move %+v", last)
				}
			}
		})
	}
}

// A model step's answer must match its schema; a scripted turn plays it, and the
// output is typed at load, so steps.NAME.output.FIELD reads it.
func TestWorkflowModelSchema(t *testing.T) {
	src := `
version: 1
name: m
workflow:
  steps:
    - name: pick
      model:
        prompt: "Pick one of {{ input }}"
        schema: {type: object, properties: {choice: {type: string}, score: {type: number}}, required: [choice, score]}
    - name: why
      when: steps.pick.output.score > 0.5
      model: {prompt: "Why {{ steps.pick.output.choice }}?"}
  answer: "{{ steps.pick.output.choice }}: {{ steps.why.text }}"
`
	model := script(say("```json\n{\"choice\": \"tea\", \"score\": 0.9}\n```"), say("Because it is calm."))
	a := compile(t, src, model, nil)
	res, _ := runAgent(t, context.Background(), a, "tea or coffee")
	if res.Stop != runtime.StopCompleted || res.Answer != "tea: Because it is calm." {
		t.Fatalf("stop %s (%s), answer %q", res.Stop, res.Detail, res.Answer)
	}
	if len(model.requests) != 2 || model.requests[0].JSONSchema == nil || model.requests[1].JSONSchema != nil ||
		model.requests[1].Messages[len(model.requests[1].Messages)-1].Content != "Why tea?" {
		t.Errorf("requests %+v", model.requests)
	}

	bad := script(say(`{"choice": 3}`))
	res, _ = runAgent(t, context.Background(), compile(t, src, bad, nil), "x")
	if res.Stop != runtime.StopWorkflowFailed || !strings.Contains(res.Detail, "does not match the schema") {
		t.Errorf("stop %s (%s)", res.Stop, res.Detail)
	}
}

// A workflow's model steps count against max_turns like an agent's calls.
func TestWorkflowMaxTurns(t *testing.T) {
	src := `
version: 1
name: m
guards: {max_turns: 1, fallback: FALLBACK}
workflow:
  steps:
    - {name: one, model: {prompt: "1"}}
    - {name: two, model: {prompt: "2"}, on_error: continue}
`
	res, _ := runAgent(t, context.Background(), compile(t, src, offline.Test{}, nil), "x")
	if res.Stop != runtime.StopMaxTurns || res.Turns != 1 || res.Answer != "FALLBACK" {
		t.Errorf("stop %s (%s), turns %d, answer %q", res.Stop, res.Detail, res.Turns, res.Answer)
	}
}

// Tool steps get the checks of a model's call: bound parameters from the run
// context (an args value for one is discarded) and accept rules against the
// entities earlier steps revealed; the answer is stored like any run's.
func TestWorkflowToolChecks(t *testing.T) {
	src := `
version: 1
name: m
tools:
  - name: list
    bind: {user_id: user.id}
    http: {url: "https://example.com/list"}
    collect: {orders: result.ids}
  - name: detail
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    bind: {user_id: user.id}
    accept: args.id in seen("orders")
    http: {url: "https://example.com/detail"}
workflow:
  steps:
    - {name: orders, tool: list, args: {user_id: mallory}}
    - name: details
      for_each: '["o1", "o9"]'
      tool: detail
      args: {id: "{{ item }}"}
      on_error: continue
  answer: "{{ map(steps.details.items, .ok) }}"
`
	tools := map[string]*funcTool{
		"list": {fn: func(_ context.Context, in runtime.ToolInput) (string, error) {
			if in.Args["user_id"] != "u-1" {
				return "", fmt.Errorf("bound user %v", in.Args["user_id"])
			}
			return `{"ids": ["o1"]}`, nil
		}},
		"detail": echo(),
	}
	st := memory.New()
	a := compileWith(t, src, nil, runtime.Options{Model: offline.Test{}, Store: st}, tools)
	res, events := runAgent(t, context.Background(), a, "x")
	if res.Stop != runtime.StopCompleted || res.Answer != "[true false]" {
		t.Fatalf("stop %s (%s), answer %q", res.Stop, res.Detail, res.Answer)
	}
	if res.Steps[0].Discarded == nil || res.Steps[2].Refusal != runtime.RefusedAccept {
		t.Errorf("steps %+v", res.Steps)
	}
	if len(eventsOf(events, runtime.EventBindDiscarded)) != 1 {
		t.Error("no bind_discarded event")
	}
	conv, err := st.Conversation(context.Background(), "c-1", 10)
	if got := contentsOf(conv.Messages); err != nil || !reflect.DeepEqual(got, []string{"x", "[true false]"}) {
		t.Errorf("stored history %q, %v", got, err)
	}
}
