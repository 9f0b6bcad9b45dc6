package tracecontext

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// InjectHTTP writes ctx's trace context (traceparent, tracestate, baggage) into
// header with the global propagator (see Install).
func InjectHTTP(ctx context.Context, header http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(header))
}

// ExtractHTTP returns ctx with the trace context header carries (an incoming
// traceparent), by the global propagator: spans started from it are its children.
func ExtractHTTP(ctx context.Context, header http.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(header))
}

// Transport returns a RoundTripper that adds the request context's trace context
// to every outgoing request (on a copy: the caller's request is not changed) and
// then sends it with base (http.DefaultTransport when nil).
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(ctx)
	if r.Header == nil {
		r.Header = http.Header{}
	}
	InjectHTTP(ctx, r.Header)
	return t.base.RoundTrip(r)
}
