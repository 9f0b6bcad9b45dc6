// Package otlptest is an OTLP/HTTP collector for tests: it takes traces and
// metrics as real OTLP protobuf at /v1/traces and /v1/metrics, decodes them, and
// tells what it got — the spans (names, ids, attributes, events, status), the
// resource's service.name, the metric names, and whether any export carried a
// given string. It is safe for concurrent use.
package otlptest

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is an exported span as the receiver decoded it. Ids are lower-case hex;
// Parent is "" for a root span.
type Span struct {
	Name, TraceID, SpanID, Parent string
	// Attrs maps each attribute to its value as text: a string as it is, a number
	// or a bool formatted by strconv, anything else in protobuf text form.
	Attrs map[string]string
	// Types maps each attribute to its value's type: "string", "int", "double",
	// "bool", "array", "kvlist", "bytes" or "" (no value).
	Types  map[string]string
	Events []Event
	Status Status
}

// Event is a span event, its attributes as text like a span's.
type Event struct {
	Name  string
	Attrs map[string]string
}

// Status is a span's status: Code is "Unset", "Ok" or "Error".
type Status struct{ Code, Message string }

// EventNames lists the names of the span's events in order.
func (s Span) EventNames() []string {
	var out []string
	for _, e := range s.Events {
		out = append(out, e.Name)
	}
	return out
}

// Receiver is the collector. Its zero value is not usable; see New.
type Receiver struct {
	// URL is the collector's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu      sync.Mutex
	spans   []Span
	service string
	metrics []string
	raw     [][]byte
}

// New starts a receiver; it stops when the test ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Spans returns a copy of the spans received so far, in order of arrival.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Named returns the spans received so far that are called name.
func (r *Receiver) Named(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Service is the service.name of the last resource received with one.
func (r *Receiver) Service() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.service
}

// Metrics lists the names of the metrics received so far, each once, in order
// of first arrival.
func (r *Receiver) Metrics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.metrics)
}

// HasMetric reports whether a metric called name was received.
func (r *Receiver) HasMetric(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.metrics, name)
}

// Contains reports whether any export received (spans or metrics: names,
// attributes, events, resource) carried s; protobuf stores strings as they are.
func (r *Receiver) Contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.raw {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// ServeHTTP takes one export.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var out proto.Message
	switch req.URL.Path {
	case "/v1/traces":
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			r.resource(rs.GetResource())
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, decodeSpan(s))
				}
			}
		}
		r.raw = append(r.raw, body)
		r.mu.Unlock()
		out = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		var msg colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rm := range msg.ResourceMetrics {
			r.resource(rm.GetResource())
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if !slices.Contains(r.metrics, m.Name) {
						r.metrics = append(r.metrics, m.Name)
					}
				}
			}
		}
		r.raw = append(r.raw, body)
		r.mu.Unlock()
		out = &colmetricpb.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, req)
		return
	}
	b, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// resource notes the resource's service.name; r.mu is held.
func (r *Receiver) resource(res *resourcepb.Resource) {
	for _, kv := range res.GetAttributes() {
		if kv.Key == "service.name" {
			r.service = kv.Value.GetStringValue()
		}
	}
}

func decodeSpan(s *tracepb.Span) Span {
	sp := Span{
		Name:    s.Name,
		TraceID: hex.EncodeToString(s.TraceId),
		SpanID:  hex.EncodeToString(s.SpanId),
		Parent:  hex.EncodeToString(s.ParentSpanId),
		Attrs:   map[string]string{},
		Types:   map[string]string{},
	}
	for _, kv := range s.Attributes {
		sp.Attrs[kv.Key] = text(kv.Value)
		sp.Types[kv.Key] = kind(kv.Value)
	}
	for _, ev := range s.Events {
		e := Event{Name: ev.Name, Attrs: map[string]string{}}
		for _, kv := range ev.Attributes {
			e.Attrs[kv.Key] = text(kv.Value)
		}
		sp.Events = append(sp.Events, e)
	}
	switch s.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_OK:
		sp.Status.Code = "Ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		sp.Status.Code = "Error"
	default:
		sp.Status.Code = "Unset"
	}
	sp.Status.Message = s.GetStatus().GetMessage()
	return sp
}

// text is an attribute value as text.
func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return v.String()
}

// kind is an attribute value's type.
func kind(v *commonpb.AnyValue) string {
	switch v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return "string"
	case *commonpb.AnyValue_IntValue:
		return "int"
	case *commonpb.AnyValue_DoubleValue:
		return "double"
	case *commonpb.AnyValue_BoolValue:
		return "bool"
	case *commonpb.AnyValue_ArrayValue:
		return "array"
	case *commonpb.AnyValue_KvlistValue:
		return "kvlist"
	case *commonpb.AnyValue_BytesValue:
		return "bytes"
	}
	return ""
}
