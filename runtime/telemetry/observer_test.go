package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/spec"
)

func TestRunEvents(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, rs := telemetry.StartRun(context.Background(), tp, nil, telemetry.RunInfo{Agent: "a", Input: canary})
	var teed int
	obs := telemetry.Tee(rs, nil, runtime.ObserverFunc(func(runtime.Event) { teed++ }))
	no := false
	for _, e := range []runtime.Event{
		{Kind: runtime.EventIntent, Intent: "faq", RoutedBy: "llm"},
		{Kind: runtime.EventCache, CacheOutcome: runtime.CacheMissOutcome, Cached: &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: canary, Answer: canary, Score: 0.5}},
		{Kind: runtime.EventRetrieve, Passages: []knowledge.Passage{{ID: "S1", Text: canary}}},
		{Kind: runtime.EventGuard, Guard: runtime.GuardDuplicateCall, Tool: "lookup", CallID: "c1", Args: canary, Message: canary},
		{Kind: runtime.EventToolRefused, Tool: "lookup", CallID: "c2", Refusal: runtime.RefusedAccept, Args: canary, Error: canary},
		{Kind: runtime.EventFilter, Filter: "cards", Stage: spec.StageAnswer, Action: spec.ActionRedact, Message: canary},
		{Kind: runtime.EventVerdict, Passed: &no, Verdict: runtime.VerdictByJudge, Missing: canary},
		{Kind: runtime.EventToolResult, Tool: "lookup", Result: canary},
		{Kind: runtime.EventStop, Stop: runtime.StopModelError, Message: canary, Time: time.Now()},
	} {
		obs.Observe(e)
	}
	cost := 0.0125
	rs.End(&runtime.Result{Answer: canary, Stop: runtime.StopModelError, Intent: "faq", Cost: &cost}, nil)
	rs.End(nil, errors.New("ignored: the span has ended"))
	if teed != 9 {
		t.Errorf("the tee passed %d events on", teed)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, " "); got != "agentrun.intent agentrun.cache agentrun.retrieve agentrun.guard agentrun.tool_refused agentrun.filter agentrun.verdict agentrun.stop" {
		t.Errorf("events %s", got)
	}
	for _, x := range texts(s) {
		if strings.Contains(x, canary) {
			t.Errorf("content in the run span: %q", x)
		}
	}
	if s.Status().Code != codes.Error {
		t.Errorf("a model_error run: status %v", s.Status())
	}
	if v, _ := attr(s, telemetry.AttrCostUSD); v.AsFloat64() != 0.0125 {
		t.Errorf("cost %v", v.Emit())
	}
	if v, _ := attr(s, telemetry.AttrIntent); v.AsString() != "faq" {
		t.Errorf("intent %v", v.Emit())
	}
}

// fakeKnowledge answers every question with the canary.
type fakeKnowledge struct{ emb knowledge.Embedder }

func (f fakeKnowledge) CacheLookup(ctx context.Context, q knowledge.CacheQuery) (*knowledge.CacheHit, error) {
	f.emb.Embed(ctx, []string{q.Question})
	return &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: canary, Answer: canary, Score: 0.9}, nil
}

func (f fakeKnowledge) CacheLearn(context.Context, knowledge.CacheQuery, string, bool, time.Duration) error {
	return errors.New("read-only " + canary)
}

func (f fakeKnowledge) Retrieve(ctx context.Context, collection, query string, k int, minScore float64) ([]knowledge.Passage, error) {
	f.emb.Embed(ctx, []string{query})
	return []knowledge.Passage{{ID: "S1", Source: "faq.md", Text: canary}}, nil
}

func TestKnowledgeSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	local, err := knowledge.NewLocal(64)
	if err != nil {
		t.Fatal(err)
	}
	emb := telemetry.WrapEmbedder(local, tp)
	if emb.ID() != local.ID() || emb.Dimensions() != 64 {
		t.Errorf("the wrapper changed the embedder's ID or dimensions: %s %d", emb.ID(), emb.Dimensions())
	}
	k := telemetry.WrapKnowledge(fakeKnowledge{emb: emb}, tp)
	ctx, rs := telemetry.StartRun(context.Background(), tp, nil, telemetry.RunInfo{Agent: "a"})
	k.CacheLookup(ctx, knowledge.CacheQuery{Collection: "faq", Agent: "a", Intent: "ask", Question: canary})
	k.Retrieve(ctx, "docs", canary, 4, 0.3)
	if err := k.CacheLearn(ctx, knowledge.CacheQuery{Agent: "a", Intent: "ask", Question: canary}, canary, false, time.Hour); err == nil {
		t.Error("the error was lost")
	}
	rs.End(nil, nil)
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		for _, x := range texts(s) {
			if strings.Contains(x, canary) {
				t.Errorf("%s shows content: %q", s.Name(), x)
			}
		}
	}
	want := "embeddings local:v1 cache_lookup faq embeddings local:v1 retrieval docs cache_learn ask invoke_agent a"
	if got := strings.Join(names, " "); !strings.HasPrefix(got, "embeddings local:") || strings.Count(got, "embeddings") != 2 ||
		!strings.Contains(got, "cache_lookup faq") || !strings.Contains(got, "retrieval docs") || !strings.Contains(got, "cache_learn ask") {
		t.Errorf("spans %s, want like %s", got, want)
	}
}

func TestEmbedderModel(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := telemetry.WrapEmbedder(idEmbedder("openai:localhost:8080:text-embedding-3-small:dim=native"), tp)
	e.Embed(context.Background(), []string{"x"})
	s := rec.Ended()[0]
	if s.Name() != "embeddings text-embedding-3-small" {
		t.Errorf("span %q", s.Name())
	}
	if v, _ := attr(s, telemetry.AttrProviderName); v.AsString() != "openai" {
		t.Errorf("provider %q", v.AsString())
	}
}

type idEmbedder string

func (e idEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return make([][]float32, len(texts)), nil
}
func (e idEmbedder) ID() string      { return string(e) }
func (e idEmbedder) Dimensions() int { return 3 }
