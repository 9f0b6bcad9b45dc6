package telemetry_test

import (
	"context"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

// A tool name the model made up (it may carry the user's words) is in no span and no
// metric label: it is recorded as telemetry.UnknownTool.
func TestUnknownToolNameIsNotRecorded(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	script := offline.NewScript("shop", []offline.ScriptTurn{
		{ToolCalls: []offline.ScriptToolCall{{Name: "user said " + canary, Arguments: map[string]any{}}}},
		{Text: "ok, done here."},
	})
	a := shopAgent(t, script, tp)
	ctx, rs := telemetry.StartRun(context.Background(), tp, mp, telemetry.RunInfo{Agent: "shop", Tools: map[string]bool{"lookup": true, "status": true}})
	res, err := a.Run(ctx, runtime.Request{Input: "hi", Observer: rs})
	rs.End(res, err)
	for _, s := range rec.Ended() {
		for _, x := range texts(s) {
			if strings.Contains(x, canary) {
				t.Errorf("span %s holds %q", s.Name(), x)
			}
		}
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					for _, kv := range dp.Attributes.ToSlice() {
						if strings.Contains(kv.Value.Emit(), canary) {
							t.Errorf("metric %s attr %s=%s", m.Name, kv.Key, kv.Value.Emit())
						}
					}
				}
			}
		}
	}
}
