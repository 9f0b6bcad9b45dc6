package runtime_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
)

const finishSpec = `
version: 1
name: finish
instructions: Answer.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
`

// A text answer the model did not finish — cut at the token limit, or stopped by the
// provider's content filter — is no answer: the run stops, the user gets the
// fallback, and the partial text is kept only in the result.
func TestUnfinishedAnswers(t *testing.T) {
	for _, tt := range []struct {
		finish model.FinishReason
		stop   runtime.StopReason
	}{
		{model.FinishLength, runtime.StopTruncated},
		{model.FinishContentFilter, runtime.StopContentFilter},
	} {
		t.Run(string(tt.finish), func(t *testing.T) {
			m := &stubModel{agent: []stubReply{stubCall("c1", "lookup", `{"id":"1"}`), {text: "The order is on its wa", finish: tt.finish}}}
			a := compile(t, finishSpec+"guards: {fallback: FALLBACK}\n", m, map[string]*funcTool{"lookup": echo()})
			res, events := runAgent(t, context.Background(), a, "where is it?")
			if res.Stop != tt.stop || res.Answer != "FALLBACK" || res.Partial != "The order is on its wa" {
				t.Errorf("stop %s, answer %q, partial %q", res.Stop, res.Answer, res.Partial)
			}
			if got := res.FinishReasons; !slices.Equal(got, []model.FinishReason{"", tt.finish}) {
				t.Errorf("finish reasons %v", got)
			}
			if mentions(res.Messages, "on its wa") != 0 {
				t.Error("the partial answer is among the messages to keep")
			}
			responses := eventsOf(events, runtime.EventModelResponse)
			if len(responses) != 2 || responses[1].Finish != tt.finish {
				t.Errorf("model_response events %+v", responses)
			}
		})
	}
}

// A response with more tool calls than guards.max_calls_per_response runs only that
// many; every other call gets a tool error, in order, and one guard event says so.
func TestMaxCallsPerResponse(t *testing.T) {
	var many []model.ToolCall
	for i := range 40 {
		many = append(many, model.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "lookup", Arguments: fmt.Sprintf(`{"id":"%d"}`, i)})
	}
	m := &stubModel{agent: []stubReply{{calls: many, finish: model.FinishToolCalls}, stubSay("done")}}
	lookup := echo()
	a := compile(t, finishSpec+"guards: {max_calls_per_response: 32, duplicate_calls: allow}\n", m, map[string]*funcTool{"lookup": lookup})
	res, events := runAgent(t, context.Background(), a, "all of them")
	if res.Stop != runtime.StopCompleted || lookup.calls.Load() != 32 {
		t.Fatalf("stop %s, %d calls ran", res.Stop, lookup.calls.Load())
	}
	if g := guardsOf(events); !slices.Equal(g, []runtime.Guard{runtime.GuardMaxCalls}) {
		t.Errorf("guards %v", g)
	}
	second := m.agentReqs[1].Messages
	var ids []string
	for _, m := range second {
		if m.Role == model.RoleTool {
			ids = append(ids, m.ToolCallID)
		}
	}
	if len(ids) != 40 || ids[0] != "c0" || ids[39] != "c39" {
		t.Fatalf("tool messages %v", ids)
	}
	for i, s := range res.Steps {
		want := runtime.OutcomeOK
		if i >= 32 {
			want = runtime.OutcomeRefused
		}
		if s.Outcome != want || (i >= 32) != (s.Refusal == runtime.RefusedTooMany) || s.Finish != model.FinishToolCalls {
			t.Errorf("step %d: %s %s %s", i, s.Outcome, s.Refusal, s.Finish)
		}
	}
	if !strings.Contains(res.Steps[39].Result, "at most 32 run per response") {
		t.Errorf("the excess call's error: %q", res.Steps[39].Result)
	}
}

// guards.max_run_time bounds the whole run, here while a tool hangs.
func TestMaxRunTime(t *testing.T) {
	model := &stubModel{agent: []stubReply{stubCall("c1", "lookup", `{"id":"1"}`), stubSay("never")}}
	hang := &funcTool{fn: func(ctx context.Context, _ tool.Input) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	a := compile(t, finishSpec+"guards: {max_run_time: 100ms, tool_timeout: 1h, fallback: FALLBACK}\n", model, map[string]*funcTool{"lookup": hang})
	start := time.Now()
	res, _ := runAgent(t, context.Background(), a, "go")
	if res.Stop != runtime.StopTimeout || !strings.Contains(res.Detail, "max_run_time (100ms)") || res.Answer != "FALLBACK" {
		t.Errorf("stop %s (%s), answer %q", res.Stop, res.Detail, res.Answer)
	}
	if time.Since(start) > time.Minute {
		t.Error("the run outlived max_run_time by far")
	}
}

// Reasoning stays with the assistant messages that made tool calls — in later
// requests and in what the conversation keeps — and never with the answer.
func TestReasoningGoesBackWithToolCalls(t *testing.T) {
	think := &model.Reasoning{Field: "reasoning_content", Text: "I should look it up."}
	model := &stubModel{agent: []stubReply{
		{calls: []model.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"id":"1"}`}}, reasoning: think, finish: model.FinishToolCalls},
		{text: "It is A1.", reasoning: &model.Reasoning{Field: "reasoning_content", Text: "Now answer."}, finish: model.FinishStop},
	}}
	a := compile(t, finishSpec, model, map[string]*funcTool{"lookup": echo()})
	res, _ := runAgent(t, context.Background(), a, "which?")
	if res.Answer != "It is A1." || strings.Contains(res.Answer, "answer.") {
		t.Fatalf("answer %q", res.Answer)
	}
	if got := model.agentReqs[1].Messages[2]; got.Reasoning == nil || !reflect.DeepEqual(*got.Reasoning, *think) {
		t.Errorf("the tool-call message went back without its reasoning: %+v", got)
	}
	kept := res.Messages
	if kept[1].Reasoning == nil || kept[len(kept)-1].Reasoning != nil {
		t.Errorf("kept reasoning: tool call %+v, answer %+v", kept[1].Reasoning, kept[len(kept)-1].Reasoning)
	}
	if !slices.Equal(res.Reasoning, []string{"I should look it up.", "Now answer."}) {
		t.Errorf("result reasoning %q", res.Reasoning)
	}
}

// A conversation another user started is refused before any model call — not
// even the intent classifier runs for it.
func TestForeignConversationCostsNoModelCall(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	if err := st.Commit(ctx, store.Record{UserID: "alice", Conversation: "c-1", Messages: []model.Message{
		{Role: model.RoleUser, Content: "hi"}, {Role: model.RoleAssistant, Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	model := &stubModel{agent: []stubReply{stubSay("never")}}
	a, diags := runtime.Compile(loadSpec(t, `
version: 1
name: routed
intents:
  greet: {description: Greetings.}
  other: {description: Anything else.}
routing: {fallback: other}
`), runtime.Options{Model: model, Store: st})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, err := a.Run(ctx, runtime.Request{Input: "hi", User: tool.User{ID: "mallory"}, Conversation: "c-1"})
	if err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Fatalf("run: %v", err)
	}
	if n := len(model.agentReqs) + len(model.otherReqs); n != 0 {
		t.Errorf("%d model requests for a refused conversation", n)
	}
}

// The saved-memory event says what was written, and nothing that was not.
func TestSavedMemoryEvent(t *testing.T) {
	model := &stubModel{agent: []stubReply{stubSay("hello")}}
	a, diags := runtime.Compile(loadSpec(t, "version: 1\nname: m\n"), runtime.Options{Model: model, Store: memory.New()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, events := runAgent(t, context.Background(), a, "hi")
	var saved []string
	for _, e := range eventsOf(events, runtime.EventMemory) {
		if strings.HasPrefix(e.Message, "saved") {
			saved = append(saved, e.Message)
		}
	}
	if !slices.Equal(saved, []string{"saved 2 messages"}) {
		t.Errorf("saved events %q", saved)
	}
}

// A refused call's logged arguments never show a bound value the model forged.
func TestRefusedCallsHideForgedBoundValues(t *testing.T) {
	for _, args := range []string{
		`{"id":"nope","user_id":"victim"}`, // refused by accept
		`{"id":7,"user_id":"victim"}`,      // refused by the schema
	} {
		model := &stubModel{agent: []stubReply{stubCall("c1", "lookup", args), stubSay("done")}}
		a := compile(t, `
version: 1
name: bound
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    bind: {user_id: user.id}
    accept: args.id == "ok"
    http: {url: "https://example.com/x"}
`, model, map[string]*funcTool{"lookup": echo()})
		res, events := runAgent(t, context.Background(), a, "go")
		refused := eventsOf(events, runtime.EventToolRefused)
		if len(refused) != 1 || len(res.Steps) != 1 || res.Steps[0].Outcome != runtime.OutcomeRefused {
			t.Fatalf("%s: refused events %d, steps %+v", args, len(refused), res.Steps)
		}
		if strings.Contains(refused[0].Args, "victim") || strings.Contains(res.Steps[0].Arguments, "victim") {
			t.Errorf("%s: the forged value is logged: event %s, step %s", args, refused[0].Args, res.Steps[0].Arguments)
		}
		if !slices.Equal(res.Steps[0].Discarded, []string{"user_id"}) {
			t.Errorf("%s: discarded %v", args, res.Steps[0].Discarded)
		}
	}
}
