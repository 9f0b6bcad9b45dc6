package telemetry

import (
	"context"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

// RunInfo describes a run for its span.
type RunInfo struct {
	Agent        string // gen_ai.agent.name: the spec's name
	Conversation string // gen_ai.conversation.id
	Intent       string // a pre-recognised intent, if any (agentrun.intent)
	// Input is the question: recorded (redacted) as gen_ai.input.messages only
	// with Options.RecordContent.
	Input string
	// Tools are the agent's tool names. A name the model made up (a call refused
	// as not offered) is recorded as UnknownTool: it may hold the user's words, and
	// as a metric label it would have no bound. nil records every name.
	Tools map[string]bool
}

// UnknownTool stands for a tool name the agent does not have.
const UnknownTool = "_unknown"

// toolName is name as spans and metrics may show it.
func (i *RunInfo) toolName(name string) string {
	if i.Tools != nil && !i.Tools[name] {
		return UnknownTool
	}
	return name
}

// RunSpan is the span of one run, `invoke_agent {agent}`. It is the run's
// runtime.Observer (Tee it with the caller's own): stop reasons, guard trips, judge
// verdicts, filter actions, routing, cache outcomes and retrieval become span
// events carrying only their non-sensitive fields. End it with the run's result.
// It is safe for concurrent use.
type RunSpan struct {
	span    trace.Span
	ctx     context.Context
	start   time.Time
	info    RunInfo
	opts    Options
	ins     *runInstruments
	mu      sync.Mutex
	cost    *float64
	endOnce sync.Once
}

// StartRun starts the span of a run; ctx carries it, so model, tool and knowledge
// spans made with the returned context are its children. A nil tp or mp means the
// global provider; opts is at most one Options.
func StartRun(ctx context.Context, tp trace.TracerProvider, mp metric.MeterProvider, info RunInfo, opts ...Options) (context.Context, *RunSpan) {
	name := OpInvokeAgent
	if info.Agent != "" {
		name += " " + info.Agent
	}
	attrs := []attribute.KeyValue{AttrOperationName.String(OpInvokeAgent), AttrAgentName.String(info.Agent)}
	if info.Conversation != "" {
		attrs = append(attrs, AttrConversationID.String(info.Conversation))
	}
	if info.Intent != "" {
		attrs = append(attrs, AttrIntent.String(info.Intent))
	}
	o := option(opts)
	if o.RecordContent && info.Input != "" {
		attrs = append(attrs, AttrInputMessages.String(marshal([]message{o.message(model.Message{Role: model.RoleUser, Content: info.Input}, "")})))
	}
	ctx, span := tracerOf(tp).Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &RunSpan{span: span, ctx: ctx, start: time.Now(), info: info, opts: o, ins: instrumentsOf(mp)}
}

// Span is the run's span.
func (r *RunSpan) Span() trace.Span { return r.span }

// SetCost records the run's cost in US dollars (agentrun.cost_usd and the
// agentrun.cost counter) when End comes, in place of Result.Cost.
func (r *RunSpan) SetCost(usd float64) {
	r.mu.Lock()
	r.cost = &usd
	r.mu.Unlock()
}

// Observe turns a run's event into a span event; events of other kinds are left
// out, and so is every field that may hold content.
func (r *RunSpan) Observe(e runtime.Event) {
	if !r.span.IsRecording() {
		return
	}
	var name string
	var attrs []attribute.KeyValue
	switch e.Kind {
	case runtime.EventStop:
		name = EventStop
		attrs = append(attrs, AttrStopReason.String(string(e.Stop)))
		if r.opts.RecordContent && e.Message != "" {
			attrs = append(attrs, AttrDetail.String(r.opts.text(e.Message)))
		}
	case runtime.EventGuard:
		name = EventGuard
		attrs = append(attrs, AttrGuard.String(string(e.Guard)))
		if e.Tool != "" {
			attrs = append(attrs, AttrToolName.String(r.info.toolName(e.Tool)), AttrToolCallID.String(e.CallID))
		}
	case runtime.EventVerdict:
		name = EventVerdict
		if e.Passed != nil {
			attrs = append(attrs, AttrVerdictPass.Bool(*e.Passed))
		}
		attrs = append(attrs, AttrVerdictHow.String(string(e.Verdict)))
		if r.opts.RecordContent && e.Missing != "" {
			attrs = append(attrs, AttrMissing.String(r.opts.text(e.Missing)))
		}
	case runtime.EventFilter:
		name = EventFilter
		attrs = append(attrs, AttrFilter.String(e.Filter), AttrFilterStage.String(string(e.Stage)), AttrFilterAct.String(string(e.Action)))
	case runtime.EventCache:
		name = EventCache
		if e.CacheOutcome != "" {
			attrs = append(attrs, AttrCache.String(string(e.CacheOutcome)))
		}
		if e.Cached != nil {
			attrs = append(attrs, AttrCacheKind.String(string(e.Cached.Kind)), AttrCacheScore.Float64(e.Cached.Score))
		}
	case runtime.EventRetrieve:
		name = EventRetrieve
		attrs = append(attrs, AttrPassages.Int(len(e.Passages)))
	case runtime.EventIntent:
		name = EventIntent
		attrs = append(attrs, AttrIntent.String(e.Intent), AttrRoutedBy.String(string(e.RoutedBy)))
		r.span.SetAttributes(AttrIntent.String(e.Intent))
	case runtime.EventToolRefused:
		name = EventToolRefused
		attrs = append(attrs, AttrToolName.String(r.info.toolName(e.Tool)), AttrToolCallID.String(e.CallID), AttrRefusal.String(string(e.Refusal)))
	case runtime.EventRemote:
		if e.Remote == nil {
			return
		}
		name = EventRemoteAgent
		attrs = append(attrs, AttrToolName.String(r.info.toolName(e.Tool)), AttrToolCallID.String(e.CallID))
		attrs = append(attrs, remoteAttrs(*e.Remote)...)
	default:
		return
	}
	opts := []trace.EventOption{trace.WithAttributes(attrs...)}
	if !e.Time.IsZero() {
		opts = append(opts, trace.WithTimestamp(e.Time))
	}
	r.span.AddEvent(name, opts...)
}

// End ends the run's span with what res says: token totals, stop reason, turns,
// finish reasons, cost (Result.Cost, or SetCost's), and an error status for an error, a model_error or a
// timeout (other stops end normally: the run answered with its fallback). It
// records the run's metrics. Calls after the first do nothing.
func (r *RunSpan) End(res *runtime.Result, err error) {
	r.endOnce.Do(func() { r.end(res, err) })
}

func (r *RunSpan) end(res *runtime.Result, err error) {
	r.mu.Lock()
	cost := r.cost
	r.mu.Unlock()
	if cost == nil && res != nil && res.Cost != nil {
		cost = res.Cost
	}
	// A resumed run's result includes what its earlier executions did, which
	// their own spans counted: this one records what it added.
	var usage model.Usage
	var steps []runtime.Step
	if res != nil {
		usage, steps = res.Usage, res.Steps
		if p := res.Prior; p != nil {
			usage.PromptTokens -= p.Usage.PromptTokens
			usage.CompletionTokens -= p.Usage.CompletionTokens
			usage.CachedPromptTokens -= p.Usage.CachedPromptTokens
			usage.CacheWriteTokens -= p.Usage.CacheWriteTokens
			steps = steps[min(p.Steps, len(steps)):]
			if cost != nil {
				added := *cost - p.Cost
				cost = &added
			}
		}
	}
	var errType string
	switch {
	case err != nil:
		errType = errorType(err)
	case res != nil && (res.Stop == runtime.StopModelError || res.Stop == runtime.StopTimeout):
		errType = string(res.Stop)
	}
	if r.span.IsRecording() {
		if res != nil {
			attrs := []attribute.KeyValue{
				AttrInputTokens.Int64(usage.PromptTokens),
				AttrOutputTokens.Int64(usage.CompletionTokens),
				AttrStopReason.String(string(res.Stop)),
				AttrTurns.Int(res.Turns),
				AttrToolRounds.Int(res.ToolRounds),
			}
			attrs = appendCacheTokens(attrs, usage)
			if res.Intent != "" {
				attrs = append(attrs, AttrIntent.String(res.Intent))
			}
			if len(res.FinishReasons) > 0 {
				fr := make([]string, len(res.FinishReasons))
				for i, f := range res.FinishReasons {
					fr[i] = string(f)
				}
				attrs = append(attrs, AttrFinishReasons.StringSlice(fr))
			}
			if r.opts.RecordContent {
				attrs = append(attrs, AttrOutputMessages.String(marshal([]message{r.opts.message(model.Message{Role: model.RoleAssistant, Content: res.Answer}, "")})))
			}
			r.span.SetAttributes(attrs...)
		}
		if cost != nil {
			r.span.SetAttributes(AttrCostUSD.Float64(*cost))
		}
		if errType != "" {
			r.span.SetAttributes(AttrErrorType.String(errType))
			desc := errType
			if err != nil && r.opts.RecordContent {
				desc = r.opts.text(err.Error())
			}
			r.span.SetStatus(codes.Error, desc)
		}
	}
	ctx, ins, agent := r.ctx, r.ins, r.info.Agent
	if ins.measure {
		ins.duration.Record(ctx, time.Since(r.start).Seconds(), ins.opts.get(optKey{"duration", agent, errType, ""}, func() []attribute.KeyValue {
			attrs := []attribute.KeyValue{AttrOperationName.String(OpInvokeAgent), AttrAgentName.String(agent)}
			if errType != "" {
				attrs = append(attrs, AttrErrorType.String(errType))
			}
			return attrs
		}))
		if res != nil {
			ins.runs.Add(ctx, 1, ins.opts.get(optKey{"runs", agent, string(res.Stop), ""}, func() []attribute.KeyValue {
				return []attribute.KeyValue{AttrAgentName.String(agent), AttrStopReason.String(string(res.Stop))}
			}))
			for _, s := range steps {
				tool := r.info.toolName(s.Tool)
				ins.toolCalls.Add(ctx, 1, ins.opts.get(optKey{"tools:" + agent, tool, string(s.Outcome), ""}, func() []attribute.KeyValue {
					return []attribute.KeyValue{AttrAgentName.String(agent), AttrToolName.String(tool), AttrToolOutcome.String(string(s.Outcome))}
				}))
			}
		}
		if cost != nil {
			ins.cost.Add(ctx, *cost, ins.opts.get(optKey{"cost", agent, "", ""}, func() []attribute.KeyValue {
				return []attribute.KeyValue{AttrAgentName.String(agent)}
			}))
		}
	}
	r.span.End()
}

type runInstruments struct {
	measure   bool
	opts      optCache
	duration  metric.Float64Histogram
	runs      metric.Int64Counter
	toolCalls metric.Int64Counter
	cost      metric.Float64Counter
}

// instruments caches the run instruments of each meter provider: a run should not
// pay for looking them up.
var instruments sync.Map // metric.MeterProvider → *runInstruments

func instrumentsOf(mp metric.MeterProvider) *runInstruments {
	cacheable := mp != nil && reflect.TypeOf(mp).Comparable()
	if cacheable {
		if ins, ok := instruments.Load(mp); ok {
			return ins.(*runInstruments)
		}
	}
	meter := meterOf(mp)
	ins := runInstruments{measure: mp == nil || measuring(mp)}
	var err error
	if ins.duration, err = meter.Float64Histogram(MetricOperationDuration, metric.WithUnit(UnitSeconds),
		metric.WithDescription("GenAI operation duration."), metric.WithExplicitBucketBoundaries(DurationBuckets...)); err != nil {
		otelHandle(err)
	}
	if ins.runs, err = meter.Int64Counter(MetricRuns, metric.WithUnit("{run}"), metric.WithDescription("Runs by stop reason.")); err != nil {
		otelHandle(err)
	}
	if ins.toolCalls, err = meter.Int64Counter(MetricToolCalls, metric.WithUnit("{call}"), metric.WithDescription("Tool calls by outcome.")); err != nil {
		otelHandle(err)
	}
	if ins.cost, err = meter.Float64Counter(MetricCost, metric.WithUnit("USD"), metric.WithDescription("What runs cost, in US dollars.")); err != nil {
		otelHandle(err)
	}
	if cacheable {
		actual, _ := instruments.LoadOrStore(mp, &ins)
		return actual.(*runInstruments)
	}
	return &ins
}

// Tee is an observer that passes each event to every non-nil one of obs, in order.
func Tee(obs ...runtime.Observer) runtime.Observer {
	var list []runtime.Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	if len(list) == 1 {
		return list[0]
	}
	return runtime.ObserverFunc(func(e runtime.Event) {
		for _, o := range list {
			o.Observe(e)
		}
	})
}
