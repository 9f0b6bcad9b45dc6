package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/telemetry"
)

// cached answers with the usage a provider with a prompt cache reports.
type cached model.Usage

func (c cached) Complete(context.Context, *model.Request) (*model.Response, error) {
	return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "hi"}, FinishReason: model.FinishStop,
		Usage: model.Usage(c)}, nil
}

// A call's span carries the tokens the provider's prompt cache served and wrote,
// and only those it reported.
func TestModelSpansCarryCacheTokens(t *testing.T) {
	for _, tt := range []struct {
		name        string
		usage       model.Usage
		read, write int64 // 0: the attribute is absent
	}{
		{"both", model.Usage{PromptTokens: 1200, CompletionTokens: 5, CachedPromptTokens: 1000, CacheWriteTokens: 150}, 1000, 150},
		{"read only", model.Usage{PromptTokens: 1200, CompletionTokens: 5, CachedPromptTokens: 1000}, 1000, 0},
		{"none", model.Usage{PromptTokens: 1200, CompletionTokens: 5}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			m := telemetry.WrapModel(cached(tt.usage), telemetry.ModelInfo{Provider: "anthropic", Model: "claude-sonnet-4-5"}, tp, sdkmetric.NewMeterProvider())
			if _, err := m.Complete(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}); err != nil {
				t.Fatal(err)
			}
			span := rec.Ended()[0]
			for key, want := range map[attribute.Key]int64{telemetry.AttrCacheReadTokens: tt.read, telemetry.AttrCacheWriteTokens: tt.write} {
				v, ok := attr(span, key)
				if ok != (want > 0) || ok && v.AsInt64() != want {
					t.Errorf("%s = %v (set %v), want %d", key, v.AsInterface(), ok, want)
				}
			}
		})
	}
}
