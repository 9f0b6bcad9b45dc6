package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// canary is put in the question, the tool arguments, the tool results and the
// answer: content that no span may carry unless content is opted in.
const canary = "CANARY-7f3a"

// card is content a redaction filter masks.
const card = "4111-1111"

func redact(s string) string { return strings.ReplaceAll(s, card, "[card]") }

// shopToolsSpec is the shop agent with its two tools; shopSpec adds a judge.
const shopToolsSpec = `
version: 1
name: shop
instructions: Help the customer.
tools:
  - name: lookup
    parameters:
      type: object
      properties: {id: {type: string}}
      required: [id]
    http: {url: "https://example.com/x"}
  - name: status
    parameters:
      type: object
      properties: {ref: {type: string}}
      required: [ref]
    http: {url: "https://example.com/y"}
`

const shopSpec = shopToolsSpec + `judge:
  criteria: [Every question is answered.]
`

const question = "Where is order " + canary + "? I paid with " + card + "."

func loadSpec(t testing.TB, src string) *spec.Spec {
	t.Helper()
	l, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.LookupEnv = func(string) (string, bool) { return "", false }
	s, diags := l.Load("agent.yaml", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("spec: %v", diags)
	}
	return s
}

// funcTool is a tool whose behaviour a test chooses; it counts its calls.
type funcTool struct {
	calls atomic.Int32
	fn    func(ctx context.Context, in tool.Input) (string, error)
}

func (f *funcTool) Call(ctx context.Context, in tool.Input) (string, error) {
	f.calls.Add(1)
	return f.fn(ctx, in)
}

// describedTool also describes itself, as builtins and MCP tools do.
type describedTool struct{ funcTool }

func (d *describedTool) Describe() tool.Info {
	return tool.Info{Description: "described"}
}

func shopTools() map[string]tool.Tool {
	return map[string]tool.Tool{
		"lookup": &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
			b, _ := json.Marshal(map[string]any{"order": in.Args["id"], "note": "result " + canary})
			return string(b), nil
		}},
		"status": &describedTool{funcTool{fn: func(context.Context, tool.Input) (string, error) {
			return `{"status":"delivering","secret":"` + canary + `"}`, nil
		}}},
	}
}

func registry(tools map[string]tool.Tool) tool.Registry {
	return tool.Registry{"http": func(st *spec.Tool, _ string) (tool.Tool, error) {
		t, ok := tools[st.Name]
		if !ok {
			return nil, fmt.Errorf("test has no tool %s", st.Name)
		}
		return t, nil
	}}
}

// shopScript calls lookup, then status, then answers.
func shopScript() *offline.Script {
	return offline.NewScript("shop", []offline.ScriptTurn{
		{ToolCalls: []offline.ScriptToolCall{{Name: "lookup", Arguments: map[string]any{"id": canary}}}},
		{ToolCalls: []offline.ScriptToolCall{{Name: "status", Arguments: map[string]any{"ref": canary + " " + card}}}},
		{Text: "Order " + canary + " is on its way."},
	})
}

// shopAgent compiles the shop agent with model and the registry wrapped, as the
// assembly does.
func shopAgent(t testing.TB, model model.Model, tp trace.TracerProvider, opts ...telemetry.Options) *runtime.Agent {
	t.Helper()
	reg := telemetry.WrapRegistry(registry(shopTools()), tp, opts...)
	a, diags := runtime.Compile(loadSpec(t, shopSpec), runtime.Options{Tools: reg, Model: model})
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	return a
}

// runShop runs a inside StartRun, as the assembly does.
func runShop(t testing.TB, a *runtime.Agent, tp trace.TracerProvider, mp metric.MeterProvider, opts ...telemetry.Options) *runtime.Result {
	t.Helper()
	ctx, rs := telemetry.StartRun(context.Background(), tp, mp, telemetry.RunInfo{Agent: "shop", Conversation: "c-1", Input: question}, opts...)
	res, err := a.Run(ctx, runtime.Request{Input: question, User: tool.User{ID: "u-1"}, Conversation: "c-1", Observer: rs})
	rs.End(res, err)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 2 || res.Turns != 3 {
		t.Fatalf("run: %+v", res)
	}
	return res
}

// tracedRun is one scripted run of the shop agent with every wrapper.
func tracedRun(t testing.TB, tp trace.TracerProvider, mp metric.MeterProvider, opts ...telemetry.Options) *runtime.Result {
	t.Helper()
	m := telemetry.WrapModel(shopScript(), telemetry.ModelInfo{Provider: "openai", Model: "gpt-test"}, tp, mp, opts...)
	return runShop(t, shopAgent(t, m, tp, opts...), tp, mp, opts...)
}

// roundModel plays the shop script by the round of the exchange (the assistant
// messages since the user's), so one agent serves many runs; the judge passes.
type roundModel struct{}

var (
	lookupCall = &model.Response{Message: model.Message{Role: model.RoleAssistant,
		ToolCalls: []model.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"id":"A1"}`}}}, FinishReason: model.FinishToolCalls,
		Usage: model.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}, Model: "test"}
	statusCall = &model.Response{Message: model.Message{Role: model.RoleAssistant,
		ToolCalls: []model.ToolCall{{ID: "call_2", Name: "status", Arguments: `{"ref":"A1"}`}}}, FinishReason: model.FinishToolCalls,
		Usage: model.Usage{PromptTokens: 120, CompletionTokens: 10, TotalTokens: 130}, Model: "test"}
	answer = &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "Order A1 is on its way."},
		FinishReason: model.FinishStop, Usage: model.Usage{PromptTokens: 140, CompletionTokens: 8, TotalTokens: 148}, Model: "test"}
	passed = &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: `{"passed":true}`},
		FinishReason: model.FinishStop, Usage: model.Usage{PromptTokens: 50, CompletionTokens: 4, TotalTokens: 54}, Model: "test"}
)

func (roundModel) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	if req.JSONSchema != nil {
		return passed, nil
	}
	round := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != model.RoleUser; i-- {
		if req.Messages[i].Role == model.RoleAssistant {
			round++
		}
	}
	return []*model.Response{lookupCall, statusCall, answer}[min(round, 2)], nil
}

// texts lists every string a span shows: its name, attribute keys and values,
// events with theirs, and its status.
func texts(s sdktrace.ReadOnlySpan) []string {
	out := []string{s.Name(), s.Status().Description}
	add := func(kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			out = append(out, string(kv.Key), kv.Value.Emit())
		}
	}
	add(s.Attributes())
	for _, e := range s.Events() {
		out = append(out, e.Name)
		add(e.Attributes)
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}
