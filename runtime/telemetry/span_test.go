package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool"
)

func record(t *testing.T, opts ...telemetry.Options) ([]sdktrace.ReadOnlySpan, *runtime.Result) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	res := tracedRun(t, tp, metricnoop.NewMeterProvider(), opts...)
	return rec.Ended(), res
}

func TestSpanTree(t *testing.T) {
	spans, res := record(t)
	var root sdktrace.ReadOnlySpan
	byOp := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		op, _ := attr(s, telemetry.AttrOperationName)
		byOp[op.AsString()] = append(byOp[op.AsString()], s)
		if op.AsString() == telemetry.OpInvokeAgent {
			root = s
		}
	}
	if n := len(byOp[telemetry.OpInvokeAgent]); n != 1 {
		t.Fatalf("%d invoke_agent spans, want 1", n)
	}
	// Three agent turns (two tool rounds and the answer) and the judge's call.
	if n := len(byOp[telemetry.OpChat]); n != 4 || res.Turns != 3 {
		t.Fatalf("%d chat spans (turns %d), want 4", n, res.Turns)
	}
	if n := len(byOp[telemetry.OpExecuteTool]); n != 2 {
		t.Fatalf("%d execute_tool spans, want 2", n)
	}
	if len(spans) != 7 {
		t.Errorf("%d spans, want 7", len(spans))
	}
	if root.Name() != "invoke_agent shop" || root.Parent().IsValid() {
		t.Errorf("root %q, parent %v", root.Name(), root.Parent())
	}
	want := func(s sdktrace.ReadOnlySpan, kvs ...attribute.KeyValue) {
		t.Helper()
		for _, kv := range kvs {
			if v, ok := attr(s, kv.Key); !ok || v != kv.Value {
				t.Errorf("%s: %s = %v (present %v), want %v", s.Name(), kv.Key, v.Emit(), ok, kv.Value.Emit())
			}
		}
	}
	want(root, telemetry.AttrAgentName.String("shop"), telemetry.AttrConversationID.String("c-1"),
		telemetry.AttrStopReason.String("completed"), telemetry.AttrTurns.Int(3),
		telemetry.AttrInputTokens.Int64(res.Usage.PromptTokens), telemetry.AttrOutputTokens.Int64(res.Usage.CompletionTokens))
	purposes := map[string]int{}
	for _, s := range byOp[telemetry.OpChat] {
		if s.Name() != "chat gpt-test" || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("chat span %q kind %v", s.Name(), s.SpanKind())
		}
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s is not a child of invoke_agent", s.Name())
		}
		want(s, telemetry.AttrProviderName.String("openai"), telemetry.AttrRequestModel.String("gpt-test"),
			telemetry.AttrResponseModel.String("test"))
		for _, k := range []attribute.Key{telemetry.AttrInputTokens, telemetry.AttrOutputTokens, telemetry.AttrFinishReasons} {
			if _, ok := attr(s, k); !ok {
				t.Errorf("%s: no %s", s.Name(), k)
			}
		}
		p, _ := attr(s, telemetry.AttrPurpose)
		purposes[p.AsString()]++
	}
	if purposes[telemetry.PurposeAgent] != 3 || purposes[telemetry.PurposeJudge] != 1 {
		t.Errorf("purposes %v, want 3 agent and 1 judge", purposes)
	}
	tools := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range byOp[telemetry.OpExecuteTool] {
		tools[s.Name()] = s
		if s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s is not a child of invoke_agent", s.Name())
		}
	}
	for i, name := range []string{"lookup", "status"} {
		s, ok := tools["execute_tool "+name]
		if !ok {
			t.Fatalf("no execute_tool %s span among %v", name, tools)
		}
		want(s, telemetry.AttrToolName.String(name), telemetry.AttrToolCallID.String(res.Steps[i].CallID),
			telemetry.AttrToolType.String("function"), telemetry.AttrToolKind.String("http"))
	}
	events := map[string][]attribute.KeyValue{}
	for _, e := range root.Events() {
		events[e.Name] = e.Attributes
	}
	if kv := events[telemetry.EventStop]; len(kv) == 0 || kv[0] != telemetry.AttrStopReason.String("completed") {
		t.Errorf("stop event %v", kv)
	}
	if kv := events[telemetry.EventVerdict]; len(kv) == 0 || kv[0] != telemetry.AttrVerdictPass.Bool(true) {
		t.Errorf("verdict event %v", kv)
	}
	for _, s := range spans {
		for _, x := range texts(s) {
			if strings.Contains(x, canary) || strings.Contains(x, card) {
				t.Errorf("span %s shows content: %q", s.Name(), x)
			}
		}
		for _, k := range []attribute.Key{telemetry.AttrInputMessages, telemetry.AttrOutputMessages, telemetry.AttrToolCallArguments, telemetry.AttrToolCallResult} {
			if _, ok := attr(s, k); ok {
				t.Errorf("span %s has %s without the opt-in", s.Name(), k)
			}
		}
	}
}

func TestContentOptIn(t *testing.T) {
	spans, _ := record(t, telemetry.Options{RecordContent: true, Redact: redact})
	seen := map[string]bool{} // span name → shows the canary
	for _, s := range spans {
		for _, x := range texts(s) {
			if strings.Contains(x, card) {
				t.Errorf("span %s shows what redaction masks: %q", s.Name(), x)
			}
			if strings.Contains(x, canary) {
				seen[s.Name()] = true
			}
		}
	}
	for _, name := range []string{"invoke_agent shop", "chat gpt-test", "execute_tool lookup", "execute_tool status"} {
		if !seen[name] {
			t.Errorf("span %s does not show the content with the opt-in", name)
		}
	}
	for _, s := range spans {
		if s.Name() == "execute_tool status" {
			args, _ := attr(s, telemetry.AttrToolCallArguments)
			result, _ := attr(s, telemetry.AttrToolCallResult)
			if !strings.Contains(args.AsString(), canary+" [card]") || !strings.Contains(result.AsString(), canary) {
				t.Errorf("status: arguments %q, result %q", args.AsString(), result.AsString())
			}
		}
		if s.Name() == "invoke_agent shop" {
			in, _ := attr(s, telemetry.AttrInputMessages)
			out, _ := attr(s, telemetry.AttrOutputMessages)
			if !strings.Contains(in.AsString(), "[card]") || !strings.Contains(out.AsString(), "is on its way") {
				t.Errorf("invoke_agent: input %q, output %q", in.AsString(), out.AsString())
			}
		}
	}
}

// errModel fails every call as a provider would.
type errModel struct{}

func (errModel) Complete(context.Context, *model.Request) (*model.Response, error) {
	return nil, &model.Error{Status: 429, Err: errors.New("rate limited")}
}

func TestModelErrorAndPurpose(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	m := telemetry.WrapModel(errModel{}, telemetry.ModelInfo{Provider: "openai", Model: "m"}, tp, nil)
	for _, schema := range []string{"", model.SchemaVerdict, model.SchemaIntent, model.SchemaFacts} {
		req := &model.Request{}
		if schema != "" {
			req.JSONSchema = &model.JSONSchemaFormat{Name: schema}
		}
		if _, err := m.Complete(context.Background(), req); err == nil {
			t.Fatal("no error")
		}
	}
	var purposes []string
	for _, s := range rec.Ended() {
		if s.Status().Code != codes.Error {
			t.Errorf("status %v", s.Status())
		}
		if v, _ := attr(s, telemetry.AttrErrorType); v.AsString() != "429" {
			t.Errorf("error.type %q", v.AsString())
		}
		p, _ := attr(s, telemetry.AttrPurpose)
		purposes = append(purposes, p.AsString())
	}
	if got := strings.Join(purposes, ","); got != "agent,judge,classifier,extractor" {
		t.Errorf("purposes %s", got)
	}
}

func TestToolWrapping(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	plain := telemetry.WrapTool(&funcTool{fn: func(context.Context, tool.Input) (string, error) {
		return "", errors.New("order " + canary + " not found")
	}}, tp)
	if _, ok := plain.(tool.Describer); ok {
		t.Error("a tool that does not describe itself became a Describer")
	}
	described := telemetry.WrapTool(&describedTool{}, tp)
	if d, ok := described.(tool.Describer); !ok || d.Describe().Description != "described" {
		t.Error("the wrapper lost Describe")
	}
	if _, err := plain.Call(context.Background(), tool.Input{Name: "find", CallID: "call_9", Args: map[string]any{"id": canary}}); err == nil {
		t.Fatal("no error")
	}
	s := rec.Ended()[0]
	if s.Name() != "execute_tool find" || s.Status().Code != codes.Error {
		t.Errorf("%s %v", s.Name(), s.Status())
	}
	for _, x := range texts(s) {
		if strings.Contains(x, canary) {
			t.Errorf("the tool's error shows content: %q", x)
		}
	}
	reg := telemetry.WrapRegistry(tool.Registry{"builtin:x": nil}, tp)
	if f, ok := reg["builtin:x"]; !ok || f != nil {
		t.Error("a nil factory should stay nil")
	}
}

func TestNoopProviderRecordsNothing(t *testing.T) {
	// A no-op provider: the wrappers run, nothing records, the run is unchanged.
	res := tracedRun(t, tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider())
	if res.Turns != 3 {
		t.Fatal(res.Turns)
	}
}
