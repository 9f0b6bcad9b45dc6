package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentrun/agentrun/runtime/telemetry"
)

// receiver is an OTLP/HTTP collector that decodes real OTLP protobuf.
type receiver struct {
	mu      sync.Mutex
	spans   map[string]map[string]string // span name → attribute → value (as text)
	service string
	metrics map[string]bool
}

func newReceiver(t *testing.T) *httptest.Server {
	r := &receiver{spans: map[string]map[string]string{}, metrics: map[string]bool{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch req.URL.Path {
	case "/v1/traces":
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range msg.ResourceSpans {
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					r.service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range s.Attributes {
						attrs[kv.Key] = kv.Value.String()
					}
					r.spans[s.Name] = attrs
				}
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	case "/v1/metrics":
		var msg colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range msg.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					r.metrics[m.Name] = true
				}
			}
		}
		out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	default:
		http.NotFound(w, req)
	}
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// The endpoint, headers and timeouts reach the exporters from lookupEnv as
// explicit options, which win over the process environment: these tests set no
// real variable and may run in parallel.
func TestOTLPExport(t *testing.T) {
	t.Parallel()
	srv := newReceiver(t)
	tel, err := telemetry.Setup(context.Background(), lookup(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
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
	r := srv.Config.Handler.(*receiver)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.service != "shop-agent" {
		t.Errorf("service.name %q", r.service)
	}
	for _, name := range []string{"invoke_agent shop", "chat gpt-test", "execute_tool lookup", "execute_tool status"} {
		if _, ok := r.spans[name]; !ok {
			t.Errorf("the receiver got no span %q (got %v)", name, keys(r.spans))
		}
	}
	if len(r.spans) != 4 { // the chat spans share a name
		t.Errorf("span names %v", keys(r.spans))
	}
	root := r.spans["invoke_agent shop"]
	for k, want := range map[string]string{
		"gen_ai.operation.name":  `string_value:"invoke_agent"`,
		"gen_ai.agent.name":      `string_value:"shop"`,
		"gen_ai.conversation.id": `string_value:"c-1"`,
		"agentrun.stop_reason":   `string_value:"completed"`,
	} {
		if got := root[k]; got != want {
			t.Errorf("invoke_agent %s = %s, want %s", k, got, want)
		}
	}
	if got := r.spans["execute_tool lookup"]["gen_ai.tool.call.id"]; got != `string_value:"`+res.Steps[0].CallID+`"` {
		t.Errorf("tool call id %s", got)
	}
	if got := r.spans["chat gpt-test"]["gen_ai.provider.name"]; got != `string_value:"openai"` {
		t.Errorf("provider %s", got)
	}
	for _, m := range []string{"gen_ai.client.token.usage", "gen_ai.client.operation.duration", "agentrun.runs", "agentrun.tool.calls"} {
		if !r.metrics[m] {
			t.Errorf("the receiver got no metric %s (got %v)", m, r.metrics)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
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
