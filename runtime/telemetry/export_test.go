package telemetry_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/otlptest"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// The endpoint, headers and timeouts reach the exporters from lookupEnv as
// explicit options, which win over the process environment: these tests set no
// real variable and may run in parallel.
func TestOTLPExport(t *testing.T) {
	t.Parallel()
	recv := otlptest.New(t)
	tel, err := telemetry.Setup(context.Background(), lookup(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL,
		"OTEL_SERVICE_NAME":           "shop-agent",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment=test",
		"OTEL_EXPORTER_OTLP_HEADERS":  "x-tenant=acme",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Enabled() || !tel.TracesEnabled() {
		t.Fatal("telemetry is off with an endpoint set")
	}
	res := tracedRun(t, tel.TracerProvider(), tel.MeterProvider())
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := recv.Service(); got != "shop-agent" {
		t.Errorf("service.name %q", got)
	}
	names := spanNames(recv.Spans())
	for _, name := range []string{"invoke_agent shop", "chat gpt-test", "execute_tool lookup", "execute_tool status"} {
		if !slices.Contains(names, name) {
			t.Errorf("the receiver got no span %q (got %v)", name, names)
		}
	}
	if len(names) != 4 { // the chat spans share a name
		t.Errorf("span names %v", names)
	}
	// str is the span's attribute k when it is a string ("" when it is not).
	str := func(s otlptest.Span, k string) string {
		if s.Types[k] != "string" {
			return ""
		}
		return s.Attrs[k]
	}
	for _, root := range recv.Named("invoke_agent shop") {
		for k, want := range map[string]string{
			"gen_ai.operation.name":  "invoke_agent",
			"gen_ai.agent.name":      "shop",
			"gen_ai.conversation.id": "c-1",
			"agentrun.stop_reason":   "completed",
		} {
			if got := str(root, k); got != want {
				t.Errorf("invoke_agent %s = %q (%s), want the string %q", k, root.Attrs[k], root.Types[k], want)
			}
		}
	}
	for _, s := range recv.Named("execute_tool lookup") {
		if got := str(s, "gen_ai.tool.call.id"); got != res.Steps[0].CallID {
			t.Errorf("tool call id %q (%s)", s.Attrs["gen_ai.tool.call.id"], s.Types["gen_ai.tool.call.id"])
		}
	}
	for _, s := range recv.Named("chat gpt-test") {
		if got := str(s, "gen_ai.provider.name"); got != "openai" {
			t.Errorf("provider %q (%s)", s.Attrs["gen_ai.provider.name"], s.Types["gen_ai.provider.name"])
		}
	}
	for _, m := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "agentrun.runs", "agentrun.tool.calls"} {
		if !recv.HasMetric(m) {
			t.Errorf("the receiver got no metric %s (got %v)", m, recv.Metrics())
		}
	}
}

// spanNames lists the distinct names of spans, in order of first appearance.
func spanNames(spans []otlptest.Span) []string {
	var out []string
	for _, s := range spans {
		if !slices.Contains(out, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// TestCollectorDown: a collector on a closed port, and one that accepts and never
// answers. The run does not wait for either (spans go to a batch processor), and
// Shutdown gives up at its context's deadline.
func TestCollectorDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); hanging.Close() })

	for name, endpoint := range map[string]string{"closed port": closed, "hanging": hanging.URL} {
		t.Run(name, func(t *testing.T) {
			tel, err := telemetry.Setup(context.Background(), lookup(map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
				"OTEL_EXPORTER_OTLP_TIMEOUT":  "10000", // 10s per export
				"OTEL_METRIC_EXPORT_INTERVAL": "50",
			}))
			if err != nil {
				t.Fatal(err)
			}
			tp, mp := tel.TracerProvider(), tel.MeterProvider()
			a := shopAgent(t, telemetry.WrapModel(roundModel{}, telemetry.ModelInfo{Provider: "openai", Model: "gpt-test"}, tp, mp), tp)
			for range 20 {
				start := time.Now()
				runShop(t, a, tp, mp)
				if d := time.Since(start); d > time.Second {
					t.Fatalf("a run took %v with the collector down (export timeout 10s)", d)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			tel.Shutdown(ctx) // an error is expected: nothing could be exported
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Shutdown took %v with a 300ms deadline", d)
			}
		})
	}
}
