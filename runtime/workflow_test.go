package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
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
		"list": {fn: func(context.Context, tool.Input) (string, error) {
			return `{"ids": ["o1", "o2", "o3"]}`, nil
		}},
		"detail": {fn: func(_ context.Context, in tool.Input) (string, error) {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			b, _ := json.Marshal(map[string]any{"id": in.Args["id"]})
			return string(b), nil
		}},
		"status": {fn: func(context.Context, tool.Input) (string, error) {
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
			tools := map[string]*funcTool{"detail": detailByID()}
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

	// An answer that does not match goes back with its problems, as an agent's
	// structured answer does; after the retries the step fails.
	bad := script(say(`{"choice": 3}`), say(`{"choice": 3}`), say(`{"choice": 3}`))
	res, _ = runAgent(t, context.Background(), compile(t, src, bad, nil), "x")
	if res.Stop != runtime.StopWorkflowFailed || !strings.Contains(res.Detail, "does not match the schema") || len(bad.requests) != 1+spec.DefaultOutputRetries {
		t.Errorf("stop %s (%s) after %d calls", res.Stop, res.Detail, len(bad.requests))
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
// context (validate refuses an args value for one; were one there, it would be
// discarded) and accept rules against the entities earlier steps revealed; the
// answer is stored like any run's.
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
    - {name: orders, tool: list}
    - name: details
      for_each: '["o1", "o9"]'
      tool: detail
      args: {id: "{{ item }}"}
      on_error: continue
  answer: "{{ map(steps.details.items, .ok) }}"
`
	tools := map[string]*funcTool{
		"list": {fn: func(_ context.Context, in tool.Input) (string, error) {
			if in.Args["user_id"] != "u-1" {
				return "", fmt.Errorf("bound user %v", in.Args["user_id"])
			}
			return `{"ids": ["o1"]}`, nil
		}},
		"detail": echo(),
	}
	st := memory.New()
	forge := func(s *spec.Spec) { s.Workflow.Steps[0].Args = map[string]any{"user_id": "mallory"} }
	a := compileWith(t, src, forge, runtime.Options{Model: offline.Test{}, Store: st}, tools)
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

// jitter is a script that answers after a random pause, so concurrent calls reach
// it in any order; it stays ordered (the promoted Ordered method).
type jitter struct{ *offline.Script }

func (j jitter) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	return j.Script.Complete(ctx, req)
}

// A script answers a workflow's concurrent model steps — for_each items and
// parallel branches, a sub-agent's turns too — in declaration order, so a scenario
// test of such a workflow plays the same turns on every run.
func TestWorkflowScriptIsDeterministic(t *testing.T) {
	src := `
version: 1
name: m
tools:
  - name: detail
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/detail"}
workflow:
  steps:
    - name: each
      for_each: '["x", "y", "z", "w"]'
      max_parallel: 4
      model: {prompt: "say {{ item }}"}
    - name: both
      parallel:
        - - {name: slow, tool: detail, args: {id: a}}
          - {name: one, model: {prompt: "one"}}
        - - {name: two, model: {prompt: "two"}}
  answer: "{{ join(map(steps.each.items, .text), ',') }} {{ steps.one.text }} {{ steps.two.text }}"
`
	for i := range 20 {
		model := jitter{offline.NewScript("s", []offline.ScriptTurn{say("X"), say("Y"), say("Z"), say("W"), say("ONE"), say("TWO")})}
		tools := map[string]*funcTool{"detail": {fn: func(context.Context, tool.Input) (string, error) {
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			return "{}", nil
		}}}
		res, _ := runAgent(t, context.Background(), compile(t, src, model, tools), "go")
		if want := "X,Y,Z,W ONE TWO"; res.Stop != runtime.StopCompleted || res.Answer != want {
			t.Fatalf("run %d: stop %s (%s), answer %q, want %q", i, res.Stop, res.Detail, res.Answer, want)
		}
	}
}

// Parallel branches see only what their own earlier steps revealed, never another
// branch's (they run at once), and the run takes in their entities and fact
// writes after the join, in branch order, whatever finished first.
func TestWorkflowParallelReveals(t *testing.T) {
	src := `
version: 1
name: m
tools:
  - name: list
    parameters: {type: object, properties: {n: {type: string}}}
    http: {url: "https://example.com/list"}
    collect: {orders: result.ids}
  - name: slow
    parameters: {type: object, properties: {}}
    http: {url: "https://example.com/slow"}
  - name: detail
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://example.com/detail"}
    accept: 'args.id in seen("orders")'
memory:
  facts:
    from_tools:
      - {on: list, set: {last: 'args.n'}}
workflow:
  steps:
    - name: par
      parallel:
        - - {name: s, tool: slow}
          - {name: l1, tool: list, args: {n: first}}
          - {name: own, tool: detail, args: {id: o1}, on_error: continue}
        - - {name: l2, tool: list, args: {n: second}}
          - {name: s2, tool: slow}
          - {name: other, tool: detail, args: {id: o1}, on_error: continue}
    - {name: after, tool: detail, args: {id: o2}}
  answer: "{{ steps.own.ok }} {{ steps.other.ok }} {{ steps.after.ok }}"
`
	tests := []struct {
		name                string
		slow, second, first time.Duration
	}{
		{"the first branch finishes first", 0, 30 * time.Millisecond, 0},
		{"the second branch finishes first", 30 * time.Millisecond, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := map[string]*funcTool{
				"list": {fn: func(_ context.Context, in tool.Input) (string, error) {
					if in.Args["n"] == "first" {
						time.Sleep(tt.first)
						return `{"ids": ["o1"]}`, nil
					}
					time.Sleep(tt.second)
					return `{"ids": ["o2"]}`, nil
				}},
				"slow": {fn: func(context.Context, tool.Input) (string, error) {
					time.Sleep(tt.slow + 10*time.Millisecond)
					return "{}", nil
				}},
				"detail": echo(),
			}
			st := memory.New()
			a := compileWith(t, src, nil, runtime.Options{Model: offline.Test{}, Store: st}, tools)
			res, _ := runAgent(t, context.Background(), a, "x")
			if want := "true false true"; res.Stop != runtime.StopCompleted || res.Answer != want {
				t.Fatalf("stop %s (%s), answer %q, want %q", res.Stop, res.Detail, res.Answer, want)
			}
			facts, _ := st.Facts(context.Background(), "u-1")
			last := ""
			for _, f := range facts {
				if f.Key == "last" {
					last = f.Value
				}
			}
			if last != "second" {
				t.Errorf("fact last = %q, want the second branch's write, taken in last", last)
			}
		})
	}
}

// Corner cases of a workflow's run: what a step reads of steps that never ran,
// lists of any type, integers a schema declares, and an answer nobody gave.
func TestWorkflowOutputs(t *testing.T) {
	const head = `
version: 1
name: m
guards: {fallback: FALLBACK}
tools:
  - name: detail
    parameters: {type: object, properties: {id: {}}}
    http: {url: "https://example.com/detail"}
workflow:
  steps:
`
	tests := []struct {
		name, steps string
		model       []offline.ScriptTurn
		stop        runtime.StopReason
		answer      string
	}{
		{name: "the steps a failed parallel step never ran read as not ok", steps: `
    - name: par
      on_error: continue
      parallel:
        - - {name: bad, tool: detail, args: {id: ""}}
          - {name: q, tool: detail, args: {id: q}}
          - name: lp
            loop: {until: "true", max: 2}
            steps: [{name: deep, tool: detail, args: {id: d}}]
        - - {name: fine, tool: detail, args: {id: f}}
    - name: poll
      on_error: continue
      loop: {until: "true", max: 1}
      steps:
        - {name: p1, tool: detail, args: {id: ""}}
        - {name: p2, tool: detail, args: {id: x}}
  answer: "{{ steps.par.ok }} {{ steps.q.ok }} {{ steps.deep.ok }} {{ steps.lp.iterations }} {{ steps.fine.ok }} {{ steps.p2.ok }}"
`, stop: runtime.StopCompleted, answer: "false false false 0 true false"},
		{name: "for_each over a range", steps: `
    - name: each
      for_each: 1..3
      tool: detail
      args: {id: "{{ item * 10 }}"}
  answer: "{{ join(map(steps.each.items, .text), ' ') }}"
`, stop: runtime.StopCompleted, answer: `{"id":10} {"id":20} {"id":30}`},
		{name: "integers a schema declares are ints", steps: `
    - name: s
      model:
        prompt: n
        schema: {type: object, properties: {n: {type: integer}, tags: {type: array, items: {type: string}}, r: {type: number}}, required: [n, tags, r]}
  answer: "{{ steps.s.output.n % 2 }} {{ repeat('x', steps.s.output.n) }} {{ steps.s.output.tags[steps.s.output.n - 2] }} {{ steps.s.output.r / 2 }}"
`, model: []offline.ScriptTurn{say(`{"n": 3, "tags": ["p", "q"], "r": 3}`)}, stop: runtime.StopCompleted, answer: "1 xxx q 1.5"},
		{name: "no answer template and a last step that failed", steps: `
    - {name: ok, tool: detail, args: {id: a}}
    - {name: bad, tool: detail, args: {id: ""}, on_error: continue}
`, stop: runtime.StopWorkflowFailed, answer: "FALLBACK"},
		{name: "no answer template and a last for_each step that failed for every item", steps: `
    - {name: bad, for_each: '["", ""]', tool: detail, args: {id: "{{ item }}"}, on_error: continue}
`, stop: runtime.StopWorkflowFailed, answer: "FALLBACK"},
		{name: "no answer template and a fallback value", steps: `
    - {name: bad, tool: detail, args: {id: ""}, on_error: fallback, fallback: none}
`, stop: runtime.StopCompleted, answer: "none"},
		{name: "no answer template and a for_each step that failed for some items", steps: `
    - {name: some, for_each: '["a", ""]', tool: detail, args: {id: "{{ item }}"}, on_error: continue}
`, stop: runtime.StopCompleted, answer: `{"id":"a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := map[string]*funcTool{"detail": detailByID()}
			var model model.Model = offline.Test{}
			if tt.model != nil {
				model = offline.NewScript("s", tt.model)
			}
			res, _ := runAgent(t, context.Background(), compile(t, head+tt.steps, model, tools), "go")
			if res.Stop != tt.stop || res.Answer != tt.answer {
				t.Errorf("stop %s (%s), answer %q; want %s, %q", res.Stop, res.Detail, res.Answer, tt.stop, tt.answer)
			}
		})
	}
}

// A run whose time runs out, or that is canceled, during a tool step stops with
// timeout or canceled, whatever the step's on_error makes of its error.
func TestWorkflowContextEnds(t *testing.T) {
	src := `
version: 1
name: m
guards: {fallback: FALLBACK}
tools:
  - name: wait
    parameters: {type: object, properties: {}}
    http: {url: "https://example.com/wait"}
workflow:
  steps:
    - {name: w, tool: wait, on_error: %s}
    - {name: after, tool: wait}
`
	tests := []struct {
		name, onError string
		cancel        bool
		stop          runtime.StopReason
	}{
		{"deadline, fail", "fail", false, runtime.StopTimeout},
		{"deadline, continue", "continue", false, runtime.StopTimeout},
		{"canceled, fail", "fail", true, runtime.StopCanceled},
		{"canceled, continue", "continue", true, runtime.StopCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if !tt.cancel {
				ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
			}
			defer cancel()
			tools := map[string]*funcTool{"wait": {fn: func(ctx context.Context, _ tool.Input) (string, error) {
				if tt.cancel {
					cancel()
				}
				<-ctx.Done()
				return "", ctx.Err()
			}}}
			st := memory.New()
			a := compileWith(t, fmt.Sprintf(src, tt.onError), nil, runtime.Options{Model: offline.Test{}, Store: st}, tools)
			res, _ := runAgent(t, ctx, a, "go")
			if res.Stop != tt.stop {
				t.Errorf("stop %s (%s), want %s", res.Stop, res.Detail, tt.stop)
			}
			if tools["wait"].calls.Load() != 1 {
				t.Errorf("the wait tool ran %d times", tools["wait"].calls.Load())
			}
		})
	}
}

// slowModel answers after a pause with a fixed usage, so concurrent model steps
// are in flight together.
type slowModel struct{ calls atomic.Int32 }

func (m *slowModel) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	m.calls.Add(1)
	time.Sleep(20 * time.Millisecond)
	return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "ok"}, FinishReason: model.FinishStop,
		Usage: model.Usage{PromptTokens: 5, CompletionTokens: 100, TotalTokens: 105}}, nil
}

// Concurrent model steps cannot overshoot max_tokens together: each reserves its
// worst case before it starts, so the ones that could break the budget stop the
// run instead of running.
func TestWorkflowBudgetConcurrent(t *testing.T) {
	src := `
version: 1
name: m
model: {max_tokens: 100}
guards: {max_tokens: 260, fallback: FALLBACK}
workflow:
  steps:
    - name: each
      for_each: '["a", "b", "c", "d"]'
      max_parallel: 4
      model: {prompt: "say {{ item }}"}
`
	model := &slowModel{}
	res, _ := runAgent(t, context.Background(), compile(t, src, model, nil), "go")
	if res.Stop != runtime.StopBudget || res.Usage.TotalTokens > 260 || model.calls.Load() != 2 {
		t.Errorf("stop %s (%s), %d tokens used in %d calls; want budget, at most 260 in 2", res.Stop, res.Detail, res.Usage.TotalTokens, model.calls.Load())
	}
}

// The Turn of a tool step inside a parallel step is the run's model calls when the
// parallel step started, whatever a model step in another branch did meanwhile.
func TestWorkflowParallelTurns(t *testing.T) {
	src := `
version: 1
name: m
tools:
  - name: slow
    parameters: {type: object, properties: {}}
    http: {url: "https://example.com/slow"}
workflow:
  steps:
    - {name: first, model: {prompt: "x"}}
    - name: par
      parallel:
        - - {name: m, model: {prompt: "x"}}
        - - {name: s1, tool: slow}
          - {name: s2, tool: slow}
    - {name: last, tool: slow}
`
	tools := map[string]*funcTool{"slow": {fn: func(context.Context, tool.Input) (string, error) {
		time.Sleep(10 * time.Millisecond)
		return "{}", nil
	}}}
	res, _ := runAgent(t, context.Background(), compile(t, src, offline.Test{}, tools), "go")
	var turns []string
	for _, s := range res.Steps {
		turns = append(turns, fmt.Sprintf("%s:%d", s.CallID, s.Turn))
	}
	if want := "step:s1:1 step:s2:1 step:last:2"; strings.Join(turns, " ") != want {
		t.Errorf("turns %s, want %s", strings.Join(turns, " "), want)
	}
}

// An agent step is a step of the run, as a model's call of the agent's tool would
// be: the entry's name, the task as its arguments, the answer or error as its
// result and the sub-run under Agent, in declaration order with the tool steps.
func TestWorkflowAgentStepIsAStep(t *testing.T) {
	sub := filepath.Join(t.TempDir(), "refunds.yaml")
	if err := os.WriteFile(sub, []byte(specialistSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `
version: 1
name: flow
guards: {max_turns: 3}
agents: [{name: refunds, spec: ` + sub + `, description: Refunds.}]
workflow:
  steps:
    - name: ask
      agent: refunds
      task: "Refund {{ input }}"
    - name: again
      agent: refunds
      task: "Refund it again"
      on_error: continue
  answer: "{{ steps.ask.answer }}"
`
	model := &stubModel{agent: []stubReply{stubCall("s-1", "refund", `{"order":"A1"}`), stubSay("A1 refunded."), stubCall("s-2", "refund", `{"order":"A1"}`)}}
	a := compileWith(t, src, nil, runtime.Options{Model: model}, map[string]*funcTool{"refund": echo()})
	res, _ := runAgent(t, context.Background(), a, "A1")
	if res.Stop != runtime.StopCompleted {
		t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
	}
	type shown struct {
		Tool, CallID, Arguments string
		Outcome                 runtime.Outcome
		Result                  string
		Stop                    runtime.StopReason
		SubSteps                int
	}
	var got []shown
	for _, s := range res.Steps {
		sh := shown{Tool: s.Tool, CallID: s.CallID, Arguments: s.Arguments, Outcome: s.Outcome}
		sh.Result, _, _ = strings.Cut(s.Result, " (")
		if s.Agent != nil {
			sh.Stop, sh.SubSteps = s.Agent.Stop, len(s.Agent.Steps)
		}
		got = append(got, sh)
	}
	want := []shown{
		{"refunds", "step:ask", `{"task":"Refund A1"}`, runtime.OutcomeOK, "A1 refunded.", runtime.StopCompleted, 1},
		{"refunds", "step:again", `{"task":"Refund it again"}`, runtime.OutcomeError, "Error: the agent refunds stopped without an answer", runtime.StopMaxTurns, 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want)
	}
}

// detailByID echoes its arguments, and fails for an empty id.
func detailByID() *funcTool {
	return &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
		if in.Args["id"] == "" {
			return "", fmt.Errorf("no id")
		}
		b, _ := json.Marshal(in.Args)
		return string(b), nil
	}}
}
