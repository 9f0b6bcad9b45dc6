package runtime_test

import (
	"context"
	"testing"

	"github.com/agentrun/agentrun/runtime"
)

// cannedModel answers instantly from prepared responses: two rounds of tool calls,
// then an answer. It stands for the model so the benchmark measures the runtime.
type cannedModel struct{ first, second, answer *runtime.ModelResponse }

func (m *cannedModel) Complete(_ context.Context, req *runtime.ModelRequest) (*runtime.ModelResponse, error) {
	assistants := 0
	for i := range req.Messages {
		if req.Messages[i].Role == runtime.RoleAssistant {
			assistants++
		}
	}
	switch assistants {
	case 0:
		return m.first, nil
	case 1:
		return m.second, nil
	}
	return m.answer, nil
}

// BenchmarkRunThreeTurns is a whole run of three model calls (two with a tool call,
// one answer) against an in-process model: the runtime's own cost per run. Divide by
// three for the cost per model call.
func BenchmarkRunThreeTurns(b *testing.B) {
	call := func(id, args string) *runtime.ModelResponse {
		return &runtime.ModelResponse{Message: runtime.Message{Role: runtime.RoleAssistant,
			ToolCalls: []runtime.ToolCall{{ID: id, Name: "lookup", Arguments: args}}}}
	}
	model := &cannedModel{
		first:  call("call_1", `{"id":"A1"}`),
		second: call("call_2", `{"id":"B2"}`),
		answer: &runtime.ModelResponse{Message: runtime.Message{Role: runtime.RoleAssistant, Content: "Both orders are on their way."}},
	}
	lookup := &funcTool{fn: func(context.Context, runtime.ToolInput) (string, error) { return `{"status":"delivering"}`, nil }}
	a := compile(b, baseSpec, model, map[string]*funcTool{"lookup": lookup, "other": echo()})
	req := runtime.Request{Input: "Where are A1 and B2?", User: runtime.User{ID: "u-1", Attributes: map[string]string{"tenant": "acme"}}, Conversation: "c-1"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Run(ctx, req)
		if err != nil || res.Stop != runtime.StopCompleted || res.Turns != 3 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
