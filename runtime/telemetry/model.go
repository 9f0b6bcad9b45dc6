package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/runtime/model"
)

// ModelInfo describes a wrapped model for its spans and metrics.
type ModelInfo struct {
	Provider string // gen_ai.provider.name: "openai" for OpenAI-compatible endpoints
	Model    string // gen_ai.request.model
	// Purpose is agent, judge or classifier when the model serves only that; ""
	// infers it per request from the structured answer asked for (see PurposeOf).
	Purpose     string
	Temperature *float64 // gen_ai.request.temperature, when set
	MaxTokens   int      // gen_ai.request.max_tokens, when set
}

// PurposeOf is what a request is for, by the structured answer it asks for: the
// judge's verdict, the classifier's intent, the extractor's facts, else the agent's
// own turn.
func PurposeOf(req *model.Request) string {
	if req.JSONSchema != nil {
		switch req.JSONSchema.Name {
		case model.SchemaVerdict:
			return PurposeJudge
		case model.SchemaIntent:
			return PurposeClassifier
		case model.SchemaFacts:
			return PurposeExtractor
		}
	}
	return PurposeAgent
}

// WrapModel returns m with a client span `chat {model}` around every Complete and
// the gen_ai.client.token.usage and gen_ai.client.operation.duration histograms.
// Requests and responses pass through untouched (OnDelta streams as before). A nil
// tp or mp means the global provider. opts is at most one Options; without one no
// content is recorded.
func WrapModel(m model.Model, info ModelInfo, tp trace.TracerProvider, mp metric.MeterProvider, opts ...Options) model.Model {
	meter := meterOf(mp)
	tokens, err := meter.Int64Histogram(MetricTokenUsage, metric.WithUnit(UnitTokens),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(TokenUsageBuckets...))
	if err != nil {
		otelHandle(err)
	}
	duration, err := meter.Float64Histogram(MetricOperationDuration, metric.WithUnit(UnitSeconds),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil {
		otelHandle(err)
	}
	fallbacks, err := meter.Int64Counter(MetricFallbacks, metric.WithUnit("{call}"),
		metric.WithDescription("Model calls a fallback model answered, by the model of the chain that failed before it and the one that answered."))
	if err != nil {
		otelHandle(err)
	}
	name := OpChat
	if info.Model != "" {
		name += " " + info.Model
	}
	w := &tracedModel{next: m, info: info, tracer: tracerOf(tp), tokens: tokens, duration: duration, fallbacks: fallbacks, opts: option(opts), name: name,
		measure: mp == nil || measuring(mp)}
	w.base = []attribute.KeyValue{AttrOperationName.String(OpChat)}
	if info.Provider != "" {
		w.base = append(w.base, AttrProviderName.String(info.Provider))
	}
	if info.Model != "" {
		w.base = append(w.base, AttrRequestModel.String(info.Model))
	}
	return w
}

type tracedModel struct {
	next     model.Model
	info     ModelInfo
	tracer   trace.Tracer
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	// fallbacks counts the calls a fallback chain's later model answered.
	fallbacks metric.Int64Counter
	opts      Options
	name      string
	base      []attribute.KeyValue // operation, provider, request model
	measure   bool
	cache     optCache // by purpose, response model, token type
}

// TakesPart: tracing changes nothing of what the wrapped model takes.
func (m *tracedModel) TakesPart(p model.Part) error { return model.TakesPart(m.next, p) }

func (m *tracedModel) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	start := time.Now()
	purpose := m.info.Purpose
	if purpose == "" {
		purpose = PurposeOf(req)
	}
	attrs := make([]attribute.KeyValue, 0, len(m.base)+5)
	attrs = append(attrs, m.base...)
	attrs = append(attrs, AttrPurpose.String(purpose))
	if m.info.Temperature != nil {
		attrs = append(attrs, AttrTemperature.Float64(*m.info.Temperature))
	}
	if m.info.MaxTokens > 0 {
		attrs = append(attrs, AttrMaxTokens.Int(m.info.MaxTokens))
	}
	if req.JSONSchema != nil || req.JSONObject {
		attrs = append(attrs, AttrOutputType.String(OutputJSON))
	} else {
		attrs = append(attrs, AttrOutputType.String(OutputText))
	}
	ctx, span := m.tracer.Start(ctx, m.name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	recording := span.IsRecording()
	if recording && m.opts.RecordContent {
		system, msgs := m.opts.messagesJSON(req.Messages)
		if system != "" {
			span.SetAttributes(AttrSystemInstructions.String(system))
		}
		span.SetAttributes(AttrInputMessages.String(msgs))
	}
	resp, err := m.next.Complete(ctx, req)
	elapsed := time.Since(start).Seconds()

	var respModel, et string
	if err != nil {
		et = errorType(err)
		if recording {
			span.SetAttributes(AttrErrorType.String(et))
			// A provider's error text can echo the request: only its type, unless
			// content is recorded.
			desc := et
			if m.opts.RecordContent {
				desc = m.opts.text(err.Error())
			}
			span.SetStatus(codes.Error, desc)
		}
	} else if resp != nil {
		respModel = answeringModel(resp)
		if recording {
			m.record(span, resp)
		}
	}
	if m.measure {
		m.duration.Record(ctx, elapsed, m.attrs(purpose, respModel, et, ""))
		if err == nil && resp != nil {
			m.tokens.Record(ctx, resp.Usage.PromptTokens, m.attrs(purpose, respModel, "", TokenInput))
			m.tokens.Record(ctx, resp.Usage.CompletionTokens, m.attrs(purpose, respModel, "", TokenOutput))
			m.countFallbacks(ctx, purpose, resp.Answered)
		}
	}
	span.End()
	return resp, err
}

// attrs are the attributes of a measurement: the model's, the purpose, and the
// response model, error type and token type when set.
func (m *tracedModel) attrs(purpose, respModel, errType, tokenType string) metric.MeasurementOption {
	return m.cache.get(optKey{purpose, respModel, errType, tokenType}, func() []attribute.KeyValue {
		attrs := append(append([]attribute.KeyValue(nil), m.base...), AttrPurpose.String(purpose))
		if respModel != "" {
			attrs = append(attrs, AttrResponseModel.String(respModel))
		}
		if errType != "" {
			attrs = append(attrs, AttrErrorType.String(errType))
		}
		if tokenType != "" {
			attrs = append(attrs, AttrTokenType.String(tokenType))
		}
		return attrs
	})
}

func (m *tracedModel) record(span trace.Span, resp *model.Response) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		AttrInputTokens.Int64(resp.Usage.PromptTokens),
		AttrOutputTokens.Int64(resp.Usage.CompletionTokens),
	)
	attrs = appendCacheTokens(attrs, resp.Usage)
	if rm := answeringModel(resp); rm != "" {
		attrs = append(attrs, AttrResponseModel.String(rm))
	}
	if a := resp.Answered; a != nil {
		attrs = append(attrs, AttrAnswered.String(a.Name), AttrAnsweredProvider.String(a.Provider))
		if len(a.FallbackFrom) > 0 {
			attrs = append(attrs, AttrFallbackFrom.StringSlice(a.FallbackFrom))
		}
	}
	if resp.FinishReason != "" {
		attrs = append(attrs, AttrFinishReasons.StringSlice([]string{string(resp.FinishReason)}))
	}
	if m.opts.RecordContent {
		attrs = append(attrs, AttrOutputMessages.String(marshal([]message{m.opts.message(resp.Message, resp.FinishReason)})))
	}
	span.SetAttributes(attrs...)
}

// answeringModel is gen_ai.response.model: the name the server that answered
// reported, else, for a fallback chain's call, the configured name of the model
// that answered; never the chain's first model when another answered.
func answeringModel(resp *model.Response) string {
	if resp.Model != "" {
		return resp.Model
	}
	if resp.Answered != nil {
		return resp.Answered.Name
	}
	return ""
}

// countFallbacks counts a call a fallback model answered, once for each model of
// the chain that failed (or was skipped) before it.
func (m *tracedModel) countFallbacks(ctx context.Context, purpose string, a *model.Answered) {
	if a == nil {
		return
	}
	for _, from := range a.FallbackFrom {
		m.fallbacks.Add(ctx, 1, metric.WithAttributes(AttrPurpose.String(purpose), AttrFallbackFrom.String(from), AttrFallbackTo.String(a.Name)))
	}
}

// errorType is error.type for err: the HTTP status of a model error, timeout or
// canceled for a context that ended, else the error's Go type.
func errorType(err error) string {
	var me *model.Error
	switch {
	case errors.As(err, &me) && me.Status != 0:
		return strconv.Itoa(me.Status)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case me != nil:
		return fmt.Sprintf("%T", me)
	}
	return fmt.Sprintf("%T", err)
}

// appendCacheTokens adds the prompt tokens a provider's cache served and wrote,
// when it reported any.
func appendCacheTokens(attrs []attribute.KeyValue, u model.Usage) []attribute.KeyValue {
	if u.CachedPromptTokens > 0 {
		attrs = append(attrs, AttrCacheReadTokens.Int64(u.CachedPromptTokens))
	}
	if u.CacheWriteTokens > 0 {
		attrs = append(attrs, AttrCacheWriteTokens.Int64(u.CacheWriteTokens))
	}
	return attrs
}
