package offline_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const recordSpec = `
version: 1
name: desk
instructions: Answer about orders.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://example.com/orders/{{ args.id }}"}
judge:
  criteria: ["The answer gives the delivery date."]
guards: {fallback: FALLBACK}
`

const recordWorkflow = `
version: 1
name: digest
guards: {fallback: FALLBACK}
workflow:
  steps:
    - name: s
      model:
        prompt: Summarise A1.
        schema: {type: object, properties: {order: {type: string}, status: {type: string}, eta_days: {type: integer}}, required: [order, status]}
  answer: "{{ steps.s.output.order }} {{ steps.s.output.status }} {{ steps.s.output.eta_days }}"
`

type lookup struct{}

func (lookup) Call(context.Context, tool.Input) (string, error) { return `{"status":"shipped"}`, nil }

// sent keeps the requests a model was sent, to compare what a run sends back.
type sent struct {
	model.Model
	reqs []model.Request
}

func (s *sent) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	cp := *req
	cp.Messages = append([]model.Message(nil), req.Messages...)
	s.reqs = append(s.reqs, cp)
	return s.Model.Complete(ctx, req)
}

func agent(t *testing.T, src string, m model.Model) *runtime.Agent {
	t.Helper()
	l, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.LookupEnv = func(string) (string, bool) { return "", false }
	s, diags := l.Load("agent.yaml", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	a, diags := runtime.Compile(s, runtime.Options{Model: m, Tools: tool.Registry{
		"http": func(*spec.Tool, string) (tool.Tool, error) { return lookup{}, nil }}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return a
}

// TestRecordReplay records runs of an Anthropic-shaped script through the real
// Recorder, saves the recording, loads it as --model script: does and replays the
// same runs: every result — answers, stop reasons, finish reasons, reasoning,
// usage, verdicts, the messages kept with their native thinking blocks — and every
// request the model was sent are the same, and the recording holds what a
// replay needs (finish reasons, blocks, a structured answer as output).
func TestRecordReplay(t *testing.T) {
	ctx := context.Background()
	source, err := offline.LoadScript("testdata/turns/anthropic_run.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inputs := []struct{ spec, input string }{
		{recordSpec, "Where is A1?"},    // a tool round with thinking blocks, a rejected draft, an answer
		{recordSpec, "And the refund?"}, // cut off at max_tokens
		{recordWorkflow, "digest"},      // a structured answer
	}
	rec := &offline.Recorder{}
	first := &sent{Model: rec.Wrap(source)}
	var want []*runtime.Result
	for _, in := range inputs {
		res, err := agent(t, in.spec, first).Run(ctx, runtime.Request{Input: in.input, User: tool.User{ID: "u-1"}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}
	if source.Unused() != 0 {
		t.Fatalf("the source script has %d turns unused", source.Unused())
	}
	file := filepath.Join(t.TempDir(), "run.yaml")
	if err := rec.Save(file); err != nil {
		t.Fatal(err)
	}
	recorded, _ := os.ReadFile(file)
	for _, s := range []string{"finish_reason: length", "provider: anthropic", "signature: EqQBCkYIAxgCIkBvYXN0",
		`'{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzZ"}'`, "cache_write_tokens: 200", "output:\n        order: A1\n        status: shipped", "missing: the delivery date"} {
		if !strings.Contains(string(recorded), s) {
			t.Errorf("the recording lacks %q:\n%s", s, recorded)
		}
	}
	replay, err := offline.LoadScript(file)
	if err != nil {
		t.Fatalf("the recording does not load: %v\n%s", err, recorded)
	}
	second := &sent{Model: replay}
	for i, in := range inputs {
		got, err := agent(t, in.spec, second).Run(ctx, runtime.Request{Input: in.input, User: tool.User{ID: "u-1"}})
		if err != nil {
			t.Fatal(err)
		}
		w := *want[i]
		w.Duration, got.Duration = 0, 0
		for j := range w.Steps {
			w.Steps[j].Duration, got.Steps[j].Duration = 0, 0
		}
		if !reflect.DeepEqual(&w, got) {
			a, _ := json.MarshalIndent(&w, "", " ")
			b, _ := json.MarshalIndent(got, "", " ")
			t.Errorf("run %d replays differently:\nrecorded %s\nreplayed %s", i, a, b)
		}
	}
	if replay.Unused() != 0 {
		t.Errorf("the replay left %d turns unused", replay.Unused())
	}
	if !reflect.DeepEqual(first.reqs, second.reqs) {
		t.Errorf("the replay sent other requests:\n%s\n%s", jsonOf(first.reqs), jsonOf(second.reqs))
	}
	// The facts of the first run, checked apart from the comparison: they must be
	// there in both.
	r := want[0]
	if r.Answer != "A1 shipped on Monday and arrives Thursday." || len(r.Verdicts) != 2 || r.Verdicts[0].Passed ||
		!reflect.DeepEqual(r.FinishReasons, []model.FinishReason{model.FinishToolCalls, model.FinishStop, model.FinishStop}) ||
		!reflect.DeepEqual(r.Reasoning, []string{"The user asks about A1; look it up first.", "The lookup says shipped."}) {
		t.Errorf("first run: %s", jsonOf(r))
	}
	var blocks []json.RawMessage
	for _, m := range r.Messages {
		if m.Reasoning != nil {
			blocks = append(blocks, m.Reasoning.Blocks...)
		}
	}
	if len(blocks) != 2 || string(blocks[0]) != `{"type":"thinking","thinking":"The user asks about A1; look it up first.","signature":"EqQBCkYIAxgCIkBvYXN0"}` {
		t.Errorf("the tool round's thinking blocks in the kept messages: %s", jsonOf(blocks))
	}
	if want[1].Stop != runtime.StopTruncated || want[2].Answer != "A1 shipped 3" {
		t.Errorf("truncated run %s %q, workflow %q", want[1].Stop, want[1].Partial, want[2].Answer)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
