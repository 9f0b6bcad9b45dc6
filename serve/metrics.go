package serve

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentrun/agentrun/runtime"
)

// Label values that stand for a value the metrics do not take as it is, so that
// no label's cardinality depends on what a client or a model sends.
const (
	labelNone    = "none"      // a run without an intent, or with one routing never chose
	labelOther   = "other"     // a value outside a closed vocabulary
	labelUnknown = "(unknown)" // a tool name the model chose that may name no tool
	labelNoRoute = "unmatched" // a request no route pattern matched
)

// Buckets, in seconds. Runs take from a cache hit (tens of milliseconds) to a long
// tool loop (minutes); model calls from a fast local model to a slow reasoning one.
var (
	runBuckets   = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	modelBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120}
	httpBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// rateLimitReasons are the reasons RateLimited accepts; others count as "other".
var rateLimitReasons = []string{"rate", "concurrency", "total"}

// Metrics are the server's Prometheus metrics, on a registry of their own (never
// the global default one). Every method is safe for concurrent use.
//
// Labels hold only bounded values: agent names (the server's specs), intent and
// tool names (the specs' own), closed vocabularies (stop reasons, purposes, tool
// outcomes, status classes) and route patterns. Never a user id, a conversation or
// run id, an input or an answer.
type Metrics struct {
	reg *prometheus.Registry

	runs          *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	inFlight      *prometheus.GaugeVec
	modelCalls    *prometheus.CounterVec
	modelDuration *prometheus.HistogramVec
	fallbacks     *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	cacheLookups  *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
	httpRequests  *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	// The OpenTelemetry GenAI client metrics, in Prometheus' naming.
	genAITokens   *prometheus.HistogramVec
	genAIDuration *prometheus.HistogramVec
	cost          *prometheus.CounterVec
	decisions     *prometheus.CounterVec

	// intents are, per agent, the intents routing has chosen (EventIntent names
	// only the spec's intents). A Result's Intent can be the request's unchecked
	// pre-recognised intent (an agent without intents, a run blocked before routing),
	// so only these names become label values.
	mu      sync.RWMutex
	intents map[string]map[string]bool
}

// NewMetrics builds the metrics on a new registry, with the Go runtime and process
// collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		intents: map[string]map[string]bool{},
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_runs_total",
			Help: "Runs finished, by agent, intent and stop reason.",
		}, []string{"agent", "intent", "stop"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentrun_run_duration_seconds",
			Help:    "How long runs took.",
			Buckets: runBuckets,
		}, []string{"agent"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentrun_runs_in_flight",
			Help: "Runs started and not yet finished.",
		}, []string{"agent"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_model_calls_total",
			Help: "Model responses received, by what the call was for.",
		}, []string{"agent", "purpose"}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentrun_model_call_duration_seconds",
			Help:    "How long model calls took.",
			Buckets: modelBuckets,
		}, []string{"agent", "purpose"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_model_fallbacks_total",
			Help: "Model calls a fallback model answered, by the chain's model that failed (or was skipped) and the one that answered (model.fallback names).",
		}, []string{"agent", "purpose", "from", "to"}),
		genAITokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_token_usage",
			Help:    "Tokens per model call (gen_ai.client.token.usage), by token type (input, output).",
			Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864},
		}, []string{"agent", "gen_ai_operation_name", "gen_ai_token_type"}),
		genAIDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gen_ai_client_operation_duration_seconds",
			Help:    "Duration of model calls (gen_ai.client.operation.duration).",
			Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92},
		}, []string{"agent", "gen_ai_operation_name"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_cost_usd_total",
			Help: "What finished runs cost, in US dollars (runs whose models have prices).",
		}, []string{"agent"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_approval_decisions_total",
			Help: "Decisions on tool calls that waited for approval: approve, reject, or expired (nobody decided in time).",
		}, []string{"agent", "decision"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_tokens_total",
			Help: "Model tokens of finished runs: in (prompt) and out (completion); of the prompt tokens, cache_read and cache_write (a provider's prompt cache).",
		}, []string{"agent", "direction"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_tool_calls_total",
			Help: "Tool calls, by outcome: ok, error or refused.",
		}, []string{"agent", "tool", "outcome"}),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_cache_lookups_total",
			Help: "FAQ cache lookups, by outcome: hit or miss.",
		}, []string{"agent", "outcome"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_rate_limited_total",
			Help: "Requests refused by a limit: rate, concurrency (per user) or total.",
		}, []string{"reason"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrun_http_requests_total",
			Help: "HTTP requests, by route pattern, method and status class.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentrun_http_request_duration_seconds",
			Help:    "How long HTTP requests took, streams included.",
			Buckets: httpBuckets,
		}, []string{"route"}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.runs, m.runDuration, m.inFlight, m.modelCalls, m.modelDuration, m.fallbacks, m.tokens,
		m.toolCalls, m.cacheLookups, m.rateLimited, m.httpRequests, m.httpDuration,
		m.genAITokens, m.genAIDuration, m.cost, m.decisions,
	)
	for _, r := range rateLimitReasons {
		m.rateLimited.WithLabelValues(r) // shown as 0 before the first refusal
	}
	return m
}

// Handler serves the metrics in the Prometheus exposition format, for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry the metrics are on, for a caller that adds its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Observer counts what one agent's run events show: model calls and their
// durations, tool calls by outcome, FAQ cache lookups. agent must be the name of an
// agent the server runs, never a name from a request.
func (m *Metrics) Observer(agent string) runtime.Observer {
	return runtime.ObserverFunc(func(e runtime.Event) { m.observe(agent, e) })
}

func (m *Metrics) observe(agent string, e runtime.Event) {
	switch e.Kind {
	case runtime.EventModelResponse:
		purpose := purposeLabel(e.Purpose)
		m.modelCalls.WithLabelValues(agent, purpose).Inc()
		m.modelDuration.WithLabelValues(agent, purpose).Observe(e.Duration.Seconds())
		// The names of a chain's models are the spec's (model.Answered), never
		// what a server reported: their number is the spec's.
		for _, from := range e.FallbackFrom {
			m.fallbacks.WithLabelValues(agent, purpose, from, e.Model).Inc()
		}
		m.genAIDuration.WithLabelValues(agent, "chat").Observe(e.Duration.Seconds())
		if u := e.Usage; u != nil {
			m.genAITokens.WithLabelValues(agent, "chat", "input").Observe(float64(max(u.PromptTokens, 0)))
			m.genAITokens.WithLabelValues(agent, "chat", "output").Observe(float64(max(u.CompletionTokens, 0)))
		}
	case runtime.EventToolResult:
		// Only an offered tool runs, so the name is one of the agent's tools.
		outcome := string(runtime.OutcomeOK)
		if e.Error != "" {
			outcome = string(runtime.OutcomeError)
		}
		m.toolCalls.WithLabelValues(agent, e.Tool, outcome).Inc()
	case runtime.EventToolRefused:
		m.toolCalls.WithLabelValues(agent, refusedToolLabel(e), string(runtime.OutcomeRefused)).Inc()
	case runtime.EventCache:
		switch e.CacheOutcome {
		case runtime.CacheHitOutcome, runtime.CacheMissOutcome:
			m.cacheLookups.WithLabelValues(agent, string(e.CacheOutcome)).Inc()
		}
	case runtime.EventIntent:
		if e.Intent != "" {
			m.learnIntent(agent, e.Intent)
		}
	}
}

// RunStarted counts a run of agent as in flight.
func (m *Metrics) RunStarted(agent string) {
	m.inFlight.WithLabelValues(agent).Inc()
}

// RunFinished ends a run RunStarted counted: the run by intent and stop reason,
// its duration and its tokens. res is nil when the run failed without a result;
// its stop is then "error".
func (m *Metrics) RunFinished(agent string, res *runtime.Result, d time.Duration) {
	m.inFlight.WithLabelValues(agent).Dec()
	m.runDuration.WithLabelValues(agent).Observe(d.Seconds())
	if res == nil {
		m.runs.WithLabelValues(agent, labelNone, "error").Inc()
		return
	}
	m.runs.WithLabelValues(agent, m.intentLabel(agent, res.Intent), stopLabel(res.Stop)).Inc()
	m.tokens.WithLabelValues(agent, "in").Add(float64(max(res.Usage.PromptTokens, 0)))
	m.tokens.WithLabelValues(agent, "out").Add(float64(max(res.Usage.CompletionTokens, 0)))
	// Of the prompt tokens, those a provider's prompt cache served and wrote: a
	// series only for agents whose provider reports them.
	if n := res.Usage.CachedPromptTokens; n > 0 {
		m.tokens.WithLabelValues(agent, "cache_read").Add(float64(n))
	}
	if n := res.Usage.CacheWriteTokens; n > 0 {
		m.tokens.WithLabelValues(agent, "cache_write").Add(float64(n))
	}
	if res.Cost != nil {
		m.cost.WithLabelValues(agent).Add(max(*res.Cost, 0))
	}
}

// approvalDecisions are the decisions ApprovalDecided counts.
var approvalDecisions = []string{"approve", "reject", "expired"}

// ApprovalDecided counts n decisions on calls that waited for approval: "approve",
// "reject", or "expired" (nobody decided in time). agent must be the name of an
// agent the server runs.
func (m *Metrics) ApprovalDecided(agent, decision string, n int) {
	if !contains(approvalDecisions, decision) {
		decision = labelOther
	}
	m.decisions.WithLabelValues(agent, decision).Add(float64(max(n, 0)))
}

// RateLimited counts a request a limit refused: reason is "rate", "concurrency" or
// "total".
func (m *Metrics) RateLimited(reason string) {
	if !contains(rateLimitReasons, reason) {
		reason = labelOther
	}
	m.rateLimited.WithLabelValues(reason).Inc()
}

// Request counts an HTTP request. route is the pattern that matched (an
// http.Request's Pattern, such as "POST /v1/agents/{agent}/runs"), never the raw
// path, which holds ids; "" when no route matched.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	if route == "" {
		route = labelNoRoute
	}
	m.httpRequests.WithLabelValues(route, methodLabel(method), statusClass(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

func (m *Metrics) learnIntent(agent, intent string) {
	m.mu.RLock()
	known := m.intents[agent][intent]
	m.mu.RUnlock()
	if known {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.intents[agent] == nil {
		m.intents[agent] = map[string]bool{}
	}
	m.intents[agent][intent] = true
}

// intentLabel is the intent if routing ever chose it for agent, else "none".
func (m *Metrics) intentLabel(agent, intent string) string {
	if intent == "" {
		return labelNone
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.intents[agent][intent] {
		return intent
	}
	return labelNone
}

// refusedToolLabel is the refused call's tool name, unless the model may have made
// it up: a call to no offered tool, or one beyond max_calls_per_response (refused
// before its name is checked).
func refusedToolLabel(e runtime.Event) string {
	switch e.Refusal {
	case runtime.RefusedNotOffered, runtime.RefusedTooMany, "":
		return labelUnknown
	}
	return e.Tool
}

func purposeLabel(p runtime.Purpose) string {
	switch p {
	case runtime.PurposeAgent, runtime.PurposeClassifier:
		return string(p)
	case "":
		return string(runtime.PurposeAgent)
	}
	return labelOther
}

func stopLabel(s runtime.StopReason) string {
	if contains(runtime.StopReasons, s) {
		return string(s)
	}
	return labelOther
}

// methodLabel keeps the standard methods; a client may send any token.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return labelOther
}

// statusClass is "2xx" for 200..299 and so on; "other" outside 100..599.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return labelOther
	}
	return strconv.Itoa(status/100) + "xx"
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
