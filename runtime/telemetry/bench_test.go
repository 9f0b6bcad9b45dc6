package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool"
)

// benchSpec is the shop agent without a judge: three model calls per run (two with
// a tool call, one answer), as runtime's BenchmarkRunThreeTurns.
const benchSpec = shopToolsSpec

// BenchmarkTracing is the three-turn run with tracing left out (no wrappers), with
// the wrappers on no-op providers (what a run pays when no OTEL_* variable is set
// and the assembly wraps anyway), and with SDK providers whose span exporter drops
// everything (a batch processor as in production; metrics kept by a reader that is
// never read). ns-added/model-call is the difference from the run without tracing,
// divided by the three model calls.
func BenchmarkTracing(b *testing.B) {
	var baseline float64
	cases := []struct {
		name string
		tp   trace.TracerProvider
		mp   metric.MeterProvider
	}{
		{name: "disabled"},
		{name: "noop", tp: tracenoop.NewTracerProvider(), mp: metricnoop.NewMeterProvider()},
		{name: "sdk-sampled-out", tp: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())), mp: metricnoop.NewMeterProvider()},
		{name: "sdk-drop",
			tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter())),
			mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var model model.Model = roundModel{}
			reg := registry(shopTools())
			if c.tp != nil {
				model = telemetry.WrapModel(model, telemetry.ModelInfo{Provider: "openai", Model: "gpt-test"}, c.tp, c.mp)
				reg = telemetry.WrapRegistry(reg, c.tp)
			}
			a, diags := runtime.Compile(loadSpec(b, benchSpec), runtime.Options{Tools: reg, Model: model})
			if diags.HasErrors() {
				b.Fatal(diags)
			}
			req := runtime.Request{Input: "Where is A1?", User: tool.User{ID: "u-1"}, Conversation: "c-1"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ctx, req := ctx, req
				var rs *telemetry.RunSpan
				if c.tp != nil {
					ctx, rs = telemetry.StartRun(ctx, c.tp, c.mp, telemetry.RunInfo{Agent: "shop", Conversation: "c-1"})
					req.Observer = rs
				}
				res, err := a.Run(ctx, req)
				if rs != nil {
					rs.End(res, err)
				}
				if err != nil || res.Stop != runtime.StopCompleted || res.Turns != 3 {
					b.Fatalf("%v %+v", err, res)
				}
			}
			perRun := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if c.tp == nil {
				baseline = perRun
			} else if baseline > 0 {
				b.ReportMetric((perRun-baseline)/3, "ns-added/model-call")
			}
		})
	}
}
