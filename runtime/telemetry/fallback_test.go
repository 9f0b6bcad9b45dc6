package telemetry_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/fallback"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

// overloaded fails every call the way a provider reports Anthropic's 529 after
// its retries.
type overloaded struct{}

func (overloaded) Complete(context.Context, *model.Request) (*model.Response, error) {
	return nil, &model.Error{Status: 529, Err: errors.New("overloaded")}
}

// unnamed answers without saying which model it is, as some servers do.
type unnamed struct{}

func (unnamed) Complete(context.Context, *model.Request) (*model.Response, error) {
	return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "hi"}, FinishReason: model.FinishStop,
		Usage: model.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}}, nil
}

// A call a fallback model answered says so in its span — the answering model as
// gen_ai.response.model, the chain's failed ones — and counts in agentrun.model.fallbacks.
func TestAFallbackIsTracedAndCounted(t *testing.T) {
	chain, err := fallback.New([]fallback.Entry{
		{Provider: "anthropic", Name: "claude-sonnet-4-5", Model: overloaded{}},
		{Provider: "openai", Name: "gpt-4o-mini", Model: unnamed{}},
	}, fallback.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m := telemetry.WrapModel(chain, telemetry.ModelInfo{Provider: "anthropic", Model: "claude-sonnet-4-5"}, tp, mp)
	if _, err := m.Complete(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	for key, want := range map[attribute.Key]string{
		telemetry.AttrRequestModel:     "claude-sonnet-4-5",
		telemetry.AttrResponseModel:    "gpt-4o-mini",
		telemetry.AttrAnswered:         "gpt-4o-mini",
		telemetry.AttrAnsweredProvider: "openai",
	} {
		if v, ok := attr(spans[0], key); !ok || v.AsString() != want {
			t.Errorf("%s = %v, want %q", key, v.AsInterface(), want)
		}
	}
	if v, _ := attr(spans[0], telemetry.AttrFallbackFrom); !slices.Equal(v.AsStringSlice(), []string{"claude-sonnet-4-5"}) {
		t.Errorf("%s = %v", telemetry.AttrFallbackFrom, v.AsInterface())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != telemetry.MetricFallbacks {
				continue
			}
			sum := mt.Data.(metricdata.Sum[int64])
			if len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != 1 {
				t.Fatalf("fallback points %+v", sum.DataPoints)
			}
			p := sum.DataPoints[0]
			from, _ := p.Attributes.Value(telemetry.AttrFallbackFrom)
			to, _ := p.Attributes.Value(telemetry.AttrFallbackTo)
			if from.AsString() != "claude-sonnet-4-5" || to.AsString() != "gpt-4o-mini" {
				t.Errorf("fallback point %v", p.Attributes)
			}
			found = true
		}
		for _, mt := range sm.Metrics {
			if mt.Name != telemetry.MetricTokenUsage {
				continue
			}
			for _, p := range mt.Data.(metricdata.Histogram[int64]).DataPoints {
				if v, _ := p.Attributes.Value(telemetry.AttrResponseModel); v.AsString() != "gpt-4o-mini" {
					t.Errorf("token usage point without the answering model: %v", p.Attributes)
				}
			}
		}
	}
	if !found {
		t.Errorf("no %s metric", telemetry.MetricFallbacks)
	}
}
