package runtime_test

import (
	"context"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// The model's text streams to Request.OnDelta only where nothing after the
// draft can refuse or change it: a judge may reject a draft, an answer filter
// redact it, an output schema fail it; the user must never see such a draft.
// The model is asked to stream all the same, but for a structured answer.
func TestDraftsStreamOnlyWhenNothingCanChangeThem(t *testing.T) {
	const base = `
version: 1
name: streamed
instructions: Answer the question.
guards: {max_turns: 8, fallback: FALLBACK}
`
	for _, tt := range []struct {
		name, extra    string
		streams, shows bool
	}{
		{"nothing after the draft", "", true, true},
		{"a judge", "judge: {criteria: [Every question is answered.]}\n", true, false},
		{"an answer filter", "filters:\n  - {on: answer, action: redact, redact: '\\d{11}'}\n", true, false},
		{"an output schema", "output: {schema: {type: object, properties: {a: {type: string}}, required: [a]}}\n", false, false},
		{"an input filter only", "filters:\n  - {on: input, when: 'input contains \"password\"', action: block}\n", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &stubModel{agent: []stubReply{stubSay(`{"a": "fine"}`)}, judge: []stubReply{stubVerdict(true, "")}}
			reg := tool.Registry{"http": func(*spec.Tool, string) (tool.Tool, error) { return echo(), nil }}
			a, diags := runtime.Compile(loadSpec(t, base+tt.extra), runtime.Options{Tools: reg, Model: m})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			shown := ""
			res, err := a.Run(context.Background(), runtime.Request{Input: "hello", User: tool.User{ID: "u-1"}, OnDelta: func(s string) { shown += s }})
			if err != nil || res.Stop != runtime.StopCompleted {
				t.Fatalf("run: %v %+v", err, res)
			}
			onDelta := m.agentReqs[0].OnDelta
			if got := onDelta != nil; got != tt.streams {
				t.Fatalf("the model was asked to stream: %v, want %v", got, tt.streams)
			}
			if onDelta != nil {
				onDelta("draft") // as the model streams its text
			}
			if got := shown == "draft"; got != tt.shows {
				t.Errorf("the streamed draft was shown: %v, want %v", got, tt.shows)
			}
		})
	}
}
