package runtime_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

const outputSpec = machineSpec + `guards: {fallback: FALLBACK}
output:
  schema:
    type: object
    properties:
      order: {type: string}
      status: {enum: [paid, unpaid]}
    required: [order, status]
    additionalProperties: false
`

// A structured answer: every agent call asks for the schema along with the tools;
// a draft that does not validate goes back with its problems at JSON pointers, and
// neither it nor the correction is ever kept; after output.retries the run stops
// with output_invalid and the fallback.
func TestOutputRuns(t *testing.T) {
	valid := `{"order": "A1", "status": "paid"}`
	tests := []struct {
		name     string
		retries  string
		agent    []stubReply
		stop     runtime.StopReason
		output   string   // Result.Output; "" none
		problems []string // what the correction messages say, in order
	}{
		{name: "valid after tools", agent: []stubReply{stubCall("c1", "lookup", `{"id":"A1"}`), stubSay("```json\n" + valid + "\n```")},
			stop: runtime.StopCompleted, output: `{"order":"A1","status":"paid"}`},
		{name: "invalid twice, then valid", agent: []stubReply{
			stubCall("c1", "lookup", `{"id":"A1"}`), stubSay(`{"order": 1, "status": "paid"}`), stubSay("The order is paid."), stubSay(valid)},
			stop: runtime.StopCompleted, output: `{"order":"A1","status":"paid"}`,
			problems: []string{"at /order: got number, want string", "at /: the answer is not one JSON value"}},
		{name: "never valid", retries: "1", agent: []stubReply{stubSay(`{"order": "A1"}`), stubSay(`{"order": "A1", "status": "lost", "x": 1}`)},
			stop:     runtime.StopOutputInvalid,
			problems: []string{"at /: missing property 'status'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := outputSpec
			if tt.retries != "" {
				src += "  retries: " + tt.retries + "\n"
			}
			m := &stubModel{agent: tt.agent}
			a := compile(t, src, m, map[string]*funcTool{"lookup": echo(), "wait": echo()})
			res, events := runAgent(t, context.Background(), a, "where is A1?")
			if res.Stop != tt.stop || string(res.Output) != tt.output {
				t.Fatalf("stop %s (%s), output %s", res.Stop, res.Detail, res.Output)
			}
			switch {
			case tt.stop == runtime.StopCompleted && res.Answer != tt.output:
				t.Errorf("answer %q, want the value's JSON", res.Answer)
			case tt.stop != runtime.StopCompleted && res.Answer != "FALLBACK":
				t.Errorf("answer %q, want the fallback", res.Answer)
			}
			if len(m.agentReqs) != len(tt.agent) {
				t.Fatalf("%d agent calls, want %d", len(m.agentReqs), len(tt.agent))
			}
			for i, req := range m.agentReqs {
				if req.JSONSchema == nil || req.JSONSchema.Name != model.SchemaAnswer || req.JSONSchema.Schema["required"] == nil || len(req.Tools) != 2 {
					t.Errorf("request %d: schema %+v with %d tools", i, req.JSONSchema, len(req.Tools))
				}
			}
			// The model saw each refused draft and what is wrong with it.
			last := m.agentReqs[len(m.agentReqs)-1].Messages
			var corrections []string
			for i, msg := range last {
				if msg.Role == model.RoleUser && strings.HasPrefix(msg.Content, runtime.OutputFeedbackPrefix) {
					if last[i-1].Role != model.RoleAssistant || last[i-1].Content == "" {
						t.Errorf("correction %d does not follow the draft: %+v", i, last[i-1])
					}
					corrections = append(corrections, msg.Content)
				}
			}
			wantCorrections := len(tt.problems)
			if tt.stop == runtime.StopOutputInvalid {
				wantCorrections = len(tt.agent) - 1
			}
			if len(corrections) != wantCorrections {
				t.Fatalf("%d corrections in the last request, want %d: %+v", len(corrections), wantCorrections, last)
			}
			for i, p := range tt.problems {
				if !strings.Contains(corrections[i], p) {
					t.Errorf("correction %d %q does not say %q", i, corrections[i], p)
				}
			}
			// History keeps none of it: the input, the tool round, the accepted answer.
			for _, msg := range res.Messages {
				if strings.HasPrefix(msg.Content, runtime.OutputFeedbackPrefix) || msg.Role == model.RoleAssistant && len(msg.ToolCalls) == 0 && msg.Content != tt.output {
					t.Errorf("history keeps %+v", msg)
				}
			}
			guards := 0
			for _, e := range events {
				if e.Kind == runtime.EventGuard && e.Guard == runtime.GuardOutputInvalid {
					guards++
				}
			}
			if rejected := len(tt.agent) - len(slices.DeleteFunc(slices.Clone(tt.agent), func(r stubReply) bool { return r.text != "" })); tt.stop == runtime.StopCompleted && guards != rejected-1 ||
				tt.stop == runtime.StopOutputInvalid && guards != rejected {
				t.Errorf("%d output_invalid guard events for %d drafts", guards, rejected)
			}
		})
	}
}

// An intent's output wins over the agent's; an intent without one answers with
// the agent's.
func TestIntentOutputOverridesTheAgents(t *testing.T) {
	src := outputSpec + `intents:
  count:
    description: Counting.
    tools: [lookup]
    output: {schema: {type: object, properties: {n: {type: integer}}, required: [n]}}
  order:
    description: Orders.
    tools: [lookup]
routing: {fallback: order}
`
	for _, tt := range []struct {
		intent, answer, output string
		required               []any
	}{
		{"count", `{"n": 3}`, `{"n":3}`, []any{"n"}},
		{"order", `{"order": "A1", "status": "unpaid"}`, `{"order":"A1","status":"unpaid"}`, []any{"order", "status"}},
	} {
		t.Run(tt.intent, func(t *testing.T) {
			m := &stubModel{agent: []stubReply{stubSay(tt.answer)}}
			a := compile(t, src, m, map[string]*funcTool{"lookup": echo(), "wait": echo()})
			res, err := a.Run(context.Background(), runtime.Request{Input: "go", Intent: tt.intent})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stop != runtime.StopCompleted || string(res.Output) != tt.output {
				t.Fatalf("stop %s (%s), output %s", res.Stop, res.Detail, res.Output)
			}
			if got := m.agentReqs[0].JSONSchema.Schema["required"]; !reflect.DeepEqual(got, tt.required) {
				t.Errorf("the request asked for required %v, want %v", got, tt.required)
			}
		})
	}
}

// The judge reads the value as compact JSON, not the model's fenced draft.
func TestJudgeSeesTheOutputValue(t *testing.T) {
	src := outputSpec + "judge: {criteria: [Complete.]}\n"
	m := &stubModel{agent: []stubReply{stubSay("```json\n{\n  \"order\": \"A1\",\n  \"status\": \"paid\"\n}\n```")}, judge: []stubReply{stubVerdict(true, "")}}
	a := compile(t, src, m, map[string]*funcTool{"lookup": echo(), "wait": echo()})
	res, _ := runAgent(t, context.Background(), a, "go")
	if res.Stop != runtime.StopCompleted || len(m.judgeReqs) != 1 {
		t.Fatalf("stop %s (%s), %d judge calls", res.Stop, res.Detail, len(m.judgeReqs))
	}
	prompt := m.judgeReqs[0].Messages[len(m.judgeReqs[0].Messages)-1].Content
	if !strings.Contains(prompt, `{"order":"A1","status":"paid"}`) || strings.Contains(prompt, "```") {
		t.Errorf("the judge saw %q", prompt)
	}
}

// An output schema that does not compile is a diagnostic of Compile, which
// validate runs, at the output.
func TestOutputSchemaThatDoesNotCompile(t *testing.T) {
	s := loadSpec(t, "version: 1\nname: o\noutput: {schema: {type: object, properties: {a: {$ref: '#/$defs/missing'}}}}\n")
	_, diags := runtime.Compile(s, runtime.Options{Model: &stubModel{}})
	if len(diags) != 1 || !strings.Contains(diags.Error(), "schema: json-pointer") || diags[0].Path != "output" || diags[0].Pos.Line != 3 {
		t.Fatalf("diagnostics %v", diags)
	}
}

// A workflow's model step goes through the same check: a draft that does not
// match goes back with its problems, and the next one is the step's output.
func TestWorkflowModelStepSharesTheOutputCheck(t *testing.T) {
	src := `
version: 1
name: m
workflow:
  steps:
    - name: pick
      model:
        prompt: "Pick one of {{ input }}"
        schema: {type: object, properties: {choice: {type: string}}, required: [choice]}
  answer: "{{ steps.pick.output.choice }}"
`
	m := script(say(`{"choice": 3}`), say(`{"choice": "tea"}`))
	a := compile(t, src, m, nil)
	res, _ := runAgent(t, context.Background(), a, "tea or coffee")
	if res.Stop != runtime.StopCompleted || res.Answer != "tea" || len(m.requests) != 2 {
		t.Fatalf("stop %s (%s), answer %q, %d calls", res.Stop, res.Detail, res.Answer, len(m.requests))
	}
	second := m.requests[1].Messages
	if n := len(second); n < 3 || second[n-2].Content != `{"choice": 3}` || !strings.Contains(second[n-1].Content, "at /choice: got number, want string") {
		t.Errorf("second request %+v", second)
	}
	if m.requests[1].JSONSchema == nil || m.requests[1].JSONSchema.Name != "step_pick" {
		t.Errorf("second request schema %+v", m.requests[1].JSONSchema)
	}
}
