package telemetry_test

import (
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := tracenoop.NewTracerProvider()
	a := shopAgent(t, telemetry.WrapModel(roundModel{}, telemetry.ModelInfo{Provider: "openai", Model: "gpt-test"}, tp, mp), tp)
	res := runShop(t, a, tp, mp)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m.Data
		}
	}
	usage, ok := got[telemetry.MetricTokenUsage].(metricdata.Histogram[int64])
	if !ok {
		t.Fatalf("no int histogram %s: %v", telemetry.MetricTokenUsage, got)
	}
	sums := map[string]int64{} // token type → sum over the agent's and the judge's calls
	for _, p := range usage.DataPoints {
		tt, _ := p.Attributes.Value(telemetry.AttrTokenType)
		sums[tt.AsString()] += p.Sum
		if v, _ := p.Attributes.Value(telemetry.AttrRequestModel); v.AsString() != "gpt-test" {
			t.Errorf("token point without the request model: %v", p.Attributes)
		}
	}
	if sums["input"] != res.Usage.PromptTokens || sums["output"] != res.Usage.CompletionTokens {
		t.Errorf("token sums %v, usage %+v", sums, res.Usage)
	}
	dur, ok := got[telemetry.MetricOperationDuration].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("no float histogram %s", telemetry.MetricOperationDuration)
	}
	ops := map[string]uint64{}
	for _, p := range dur.DataPoints {
		op, _ := p.Attributes.Value(telemetry.AttrOperationName)
		ops[op.AsString()] += p.Count
	}
	if ops["chat"] != 4 || ops["invoke_agent"] != 1 {
		t.Errorf("durations by operation %v, want 4 chat and 1 invoke_agent", ops)
	}
	calls, ok := got[telemetry.MetricToolCalls].(metricdata.Sum[int64])
	if !ok || len(calls.DataPoints) != 2 {
		t.Fatalf("tool calls %v", got[telemetry.MetricToolCalls])
	}
	for _, p := range calls.DataPoints {
		if o, _ := p.Attributes.Value(telemetry.AttrToolOutcome); o.AsString() != "ok" || p.Value != 1 {
			t.Errorf("tool call point %v = %d", p.Attributes, p.Value)
		}
	}
	runs, ok := got[telemetry.MetricRuns].(metricdata.Sum[int64])
	if !ok || len(runs.DataPoints) != 1 || !runs.DataPoints[0].Attributes.HasValue(telemetry.AttrStopReason) {
		t.Fatalf("runs %v", got[telemetry.MetricRuns])
	}
	if v, _ := runs.DataPoints[0].Attributes.Value(telemetry.AttrStopReason); v != attribute.StringValue("completed") {
		t.Errorf("stop reason %v", v)
	}
}

// The execution that resumes a paused run records what it added: its result
// carries the earlier executions' steps, usage and cost (Result.Prior), which
// their own spans counted already.
func TestResumedRunCountsOnlyItsOwnPart(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := tracenoop.NewTracerProvider()
	total, before := 0.75, 0.5
	res := &runtime.Result{Stop: runtime.StopCompleted, Cost: &total,
		Usage: model.Usage{PromptTokens: 300, CompletionTokens: 30},
		Steps: []runtime.Step{{Tool: "lookup", Outcome: runtime.OutcomeOK}, {Tool: "lookup", Outcome: runtime.OutcomeOK}, {Tool: "cancel", Outcome: runtime.OutcomeOK}},
		Prior: &runtime.Prior{Steps: 2, Usage: model.Usage{PromptTokens: 200, CompletionTokens: 20}, Cost: before}}
	_, span := telemetry.StartRun(context.Background(), tp, mp, telemetry.RunInfo{Agent: "shop"})
	span.End(res, nil)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	var cost float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == telemetry.MetricToolCalls {
					for _, p := range d.DataPoints {
						tool, _ := p.Attributes.Value(telemetry.AttrToolName)
						calls[tool.AsString()] += p.Value
					}
				}
			case metricdata.Sum[float64]:
				if m.Name == telemetry.MetricCost {
					for _, p := range d.DataPoints {
						cost += p.Value
					}
				}
			}
		}
	}
	if len(calls) != 1 || calls["cancel"] != 1 {
		t.Errorf("tool calls %v, want only the resumed execution's cancel", calls)
	}
	if math.Abs(cost-(total-before)) > 1e-12 {
		t.Errorf("cost %v, want %v", cost, total-before)
	}
}
