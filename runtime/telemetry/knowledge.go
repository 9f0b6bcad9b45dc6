package telemetry

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// Span names of the FAQ cache (outside the conventions, which have no cache).
const (
	SpanCacheLookup = "cache_lookup"
	SpanCacheLearn  = "cache_learn"
)

// WrapKnowledge returns k with spans: `retrieval {collection}` around Retrieve
// (gen_ai.operation.name=retrieval, gen_ai.data_source.id), `cache_lookup
// {collection}` and `cache_learn {intent}` around the FAQ cache. Questions, answers
// and passages are content: recorded only with Options.RecordContent (the query,
// redacted). A nil tp means the global provider.
func WrapKnowledge(k knowledge.Knowledge, tp trace.TracerProvider, opts ...Options) knowledge.Knowledge {
	if k == nil {
		return nil
	}
	return &knowledgeT{next: k, tracer: tracerOf(tp), opts: option(opts)}
}

type knowledgeT struct {
	next   knowledge.Knowledge
	tracer trace.Tracer
	opts   Options
}

func spanName(op, what string) string {
	if what == "" {
		return op
	}
	return op + " " + what
}

func cacheAttrs(q knowledge.CacheQuery) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrAgentName.String(q.Agent)}
	if q.Collection != "" {
		attrs = append(attrs, AttrCollection.String(q.Collection), AttrDataSourceID.String(q.Collection))
	}
	if q.Intent != "" {
		attrs = append(attrs, AttrIntent.String(q.Intent))
	}
	return attrs
}

func (k *knowledgeT) CacheLookup(ctx context.Context, q knowledge.CacheQuery) (*knowledge.CacheHit, error) {
	ctx, span := k.tracer.Start(ctx, spanName(SpanCacheLookup, q.Collection), trace.WithAttributes(cacheAttrs(q)...))
	hit, err := k.next.CacheLookup(ctx, q)
	if span.IsRecording() {
		if k.opts.RecordContent {
			span.SetAttributes(AttrRetrievalQuery.String(k.opts.text(q.Question)))
		}
		if hit != nil {
			span.SetAttributes(AttrCacheKind.String(string(hit.Kind)), AttrCacheScore.Float64(hit.Score))
		}
		setError(span, err)
	}
	span.End()
	return hit, err
}

func (k *knowledgeT) CacheLearn(ctx context.Context, q knowledge.CacheQuery, answer string, perUser bool, ttl time.Duration) error {
	ctx, span := k.tracer.Start(ctx, spanName(SpanCacheLearn, q.Intent), trace.WithAttributes(cacheAttrs(q)...))
	err := k.next.CacheLearn(ctx, q, answer, perUser, ttl)
	if span.IsRecording() {
		setError(span, err)
	}
	span.End()
	return err
}

func (k *knowledgeT) Retrieve(ctx context.Context, collection, query string, n int, minScore float64) ([]knowledge.Passage, error) {
	ctx, span := k.tracer.Start(ctx, spanName(OpRetrieval, collection), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrOperationName.String(OpRetrieval), AttrDataSourceID.String(collection), AttrCollection.String(collection)))
	ps, err := k.next.Retrieve(ctx, collection, query, n, minScore)
	if span.IsRecording() {
		span.SetAttributes(AttrTopK.Int(n), AttrMinScore.Float64(minScore), AttrPassages.Int(len(ps)))
		if k.opts.RecordContent {
			span.SetAttributes(AttrRetrievalQuery.String(k.opts.text(query)))
		}
		setError(span, err)
	}
	span.End()
	return ps, err
}

// setError marks span failed with err's type (error messages of stores and
// embedders are operational, but they may quote a query: only the type).
func setError(span trace.Span, err error) {
	if err == nil {
		return
	}
	et := errorType(err)
	span.SetAttributes(AttrErrorType.String(et))
	span.SetStatus(codes.Error, et)
}

// WrapEmbedder returns e with a client span `embeddings {model}` around every Embed
// (gen_ai.operation.name=embeddings, gen_ai.request.model and gen_ai.provider.name
// from e's ID, gen_ai.embeddings.dimension.count). ID and Dimensions are e's.
func WrapEmbedder(e knowledge.Embedder, tp trace.TracerProvider) knowledge.Embedder {
	if e == nil {
		return nil
	}
	provider, model := embedderModel(e.ID())
	return &embedder{Embedder: e, tracer: tracerOf(tp), name: spanName(OpEmbeddings, model),
		attrs: []attribute.KeyValue{AttrOperationName.String(OpEmbeddings), AttrProviderName.String(provider), AttrRequestModel.String(model)}}
}

// embedderModel reads the provider and model from an embedder's ID:
// "openai:<host[:port]>:<model>:dim=<n>" or "local:v<n>:dim=<n>".
func embedderModel(id string) (provider, model string) {
	provider, rest, _ := strings.Cut(id, ":")
	if i := strings.LastIndex(rest, ":dim="); i >= 0 {
		rest = rest[:i]
	}
	if provider == "openai" {
		if i := strings.LastIndex(rest, ":"); i >= 0 {
			return provider, rest[i+1:]
		}
		return provider, rest
	}
	return "agentrun." + provider, provider + ":" + rest
}

type embedder struct {
	knowledge.Embedder
	tracer trace.Tracer
	name   string
	attrs  []attribute.KeyValue
}

func (e *embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	ctx, span := e.tracer.Start(ctx, e.name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(e.attrs...))
	vs, err := e.Embedder.Embed(ctx, texts)
	if span.IsRecording() {
		span.SetAttributes(AttrInputs.Int(len(texts)), AttrEmbeddingsDims.Int(e.Dimensions()))
		setError(span, err)
	}
	span.End()
	return vs, err
}
