package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/internal/tracecontext"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

func TestMain(m *testing.M) {
	// Failed exports of the collector-down tests: not worth a line each.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	os.Exit(m.Run())
}

func TestSetupOff(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"nothing set":         {},
		"exporter none":       {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
		"sdk disabled":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		"service name only":   {"OTEL_SERVICE_NAME": "x"},
		"resource attributes": {"OTEL_RESOURCE_ATTRIBUTES": "a=b"},
	} {
		tel, err := telemetry.Setup(context.Background(), lookup(env))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tel.Enabled() {
			t.Errorf("%s: telemetry is on", name)
		}
		_, span := tel.TracerProvider().Tracer("t").Start(context.Background(), "s")
		if span.IsRecording() {
			t.Errorf("%s: a no-op provider records", name)
		}
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("%s: shutdown: %v", name, err)
		}
	}
}

func TestSetupOn(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"generic endpoint":     {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"traces endpoint":      {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"},
		"exporter otlp":        {"OTEL_TRACES_EXPORTER": "otlp"}, // the default endpoint, localhost:4318
		"protocol given":       {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
		"metrics only, header": {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://127.0.0.1:1/m", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x"},
	} {
		tel, err := telemetry.Setup(context.Background(), lookup(env))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !tel.Enabled() {
			t.Errorf("%s: telemetry is off", name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1)
		tel.Shutdown(ctx)
		cancel()
	}
	tel, err := telemetry.Setup(context.Background(), lookup(nil), telemetry.WithMetricReader(sdkmetric.NewManualReader()))
	if err != nil || !tel.Enabled() || tel.TracesEnabled() {
		t.Errorf("a metric reader alone: %v %v %v", err, tel.Enabled(), tel.TracesEnabled())
	}
}

func TestSetupErrors(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"grpc":               {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"console exporter":   {"OTEL_TRACES_EXPORTER": "console"},
		"bad endpoint":       {"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"},
		"bad timeout":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		"bad resource":       {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_RESOURCE_ATTRIBUTES": "novalue"},
		"unknown propagator": {"OTEL_PROPAGATORS": "b3"},
	} {
		if _, err := telemetry.Setup(context.Background(), lookup(env)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestQuietErrorHandler(t *testing.T) {
	var buf bytes.Buffer
	tel, err := telemetry.Setup(context.Background(), lookup(nil), telemetry.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		tel.Handle(errors.New("export failed"))
	}
	if tel.Errors() != 3 || strings.Count(buf.String(), "export failed") != 1 {
		t.Errorf("%d errors, log %q", tel.Errors(), buf.String())
	}
}

// TestPropagation: a traceparent arriving over HTTP becomes the run's parent, and
// Transport passes the current span on to outgoing requests. It sets otel's global
// propagator, as Install does, so it does not run in parallel.
func TestPropagation(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(tel.Propagator())
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	in := http.Header{"Traceparent": {parent}}
	ctx := tracecontext.ExtractHTTP(context.Background(), in)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, rs := telemetry.StartRun(ctx, tp, nil, telemetry.RunInfo{Agent: "a"})
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s", sc.TraceID())
	}

	var got http.Header
	rt := tracecontext.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.com/", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if tp := got.Get("Traceparent"); !strings.Contains(tp, sc.TraceID().String()) || !strings.Contains(tp, sc.SpanID().String()) {
		t.Errorf("outgoing traceparent %q, want the run's span %s", tp, sc.SpanID())
	}
	if req.Header.Get("Traceparent") != "" {
		t.Error("Transport changed the caller's request")
	}
	rs.End(nil, nil)
	if s := rec.Ended()[0]; s.Parent().SpanID().String() != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
		t.Errorf("the run's parent %v", s.Parent())
	}

	// Without a span, nothing is added.
	got = nil
	m, _ := baggage.New()
	req, _ = http.NewRequestWithContext(baggage.ContextWithBaggage(context.Background(), m), http.MethodGet, "http://example.com/", nil)
	rt.RoundTrip(req)
	if got.Get("Traceparent") != "" {
		t.Errorf("traceparent %q without a span", got.Get("Traceparent"))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
