package serve

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

// scrapeMetrics fetches m's handler the way Prometheus does and returns the raw
// text and its parsed families.
func scrapeMetrics(t *testing.T, m *Metrics) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse exposition: %v\n%s", err, body)
	}
	return string(body), fams
}

// metricValue is the value of the series of family name whose labels are exactly
// labels (a counter's or gauge's value, a histogram's sample count), and whether
// it exists.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
	for _, mt := range fam.GetMetric() {
		if len(mt.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, lp := range mt.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		switch {
		case mt.Counter != nil:
			return mt.Counter.GetValue(), true
		case mt.Gauge != nil:
			return mt.Gauge.GetValue(), true
		case mt.Histogram != nil:
			return float64(mt.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

type wantSeries struct {
	name   string
	labels map[string]string
	value  float64
}

func checkSeries(t *testing.T, fams map[string]*dto.MetricFamily, want []wantSeries) {
	t.Helper()
	for _, w := range want {
		got, ok := metricValue(fams, w.name, w.labels)
		if !ok {
			t.Errorf("%s%v: no such series", w.name, w.labels)
			continue
		}
		if got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
}

func TestMetricsRuns(t *testing.T) {
	m := NewMetrics()
	obs := m.Observer("shop")
	events := []runtime.Event{
		{Kind: runtime.EventIntent, Intent: "order_status", RoutedBy: runtime.RoutedLLM},
		{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeClassifier, Duration: 80 * time.Millisecond},
		{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeAgent, Calls: 2, Duration: 300 * time.Millisecond,
			Usage: &model.Usage{PromptTokens: 999, CompletionTokens: 999}}, // tokens come from the Result only
		{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeAgent, Duration: 1200 * time.Millisecond,
			Model: "mini", FallbackFrom: []string{"big"}}, // the fallback answered
		{Kind: runtime.EventToolCall, Tool: "search_orders"},
		{Kind: runtime.EventToolResult, Tool: "search_orders", Result: "[]"},
		{Kind: runtime.EventToolResult, Tool: "search_orders", Result: "[]"},
		{Kind: runtime.EventToolResult, Tool: "get_order_detail", Error: "HTTP 500"},
		{Kind: runtime.EventToolRefused, Tool: "cancel_order", Refusal: runtime.RefusedSchema},
		{Kind: runtime.EventToolRefused, Tool: "made_up_by_the_model", Refusal: runtime.RefusedNotOffered},
		{Kind: runtime.EventCache, CacheOutcome: runtime.CacheHitOutcome},
		{Kind: runtime.EventCache, CacheOutcome: runtime.CacheMissOutcome},
		{Kind: runtime.EventCache, Message: "learned the answer for everyone"}, // not a lookup
		{Kind: runtime.EventGuard, Guard: runtime.GuardMaxTurns},               // not counted
	}
	for _, e := range events {
		obs.Observe(e)
	}
	for range 4 {
		m.RunStarted("shop")
	}
	m.RunFinished("shop", &runtime.Result{Intent: "order_status", Stop: runtime.StopCompleted,
		Usage: model.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedPromptTokens: 60, CacheWriteTokens: 30}}, 2*time.Second)
	m.RunFinished("shop", &runtime.Result{Intent: "order_status", Stop: runtime.StopCompleted,
		Usage: model.Usage{PromptTokens: 50, CompletionTokens: 5, TotalTokens: 55}}, 3*time.Second)
	// A pre-recognised intent that routing never chose (the request's own text).
	m.RunFinished("shop", &runtime.Result{Intent: "whatever the client sent", Stop: runtime.StopBlocked}, time.Millisecond)
	m.RunFinished("shop", nil, time.Second)

	_, fams := scrapeMetrics(t, m)
	checkSeries(t, fams, []wantSeries{
		{"agentrun_runs_total", map[string]string{"agent": "shop", "intent": "order_status", "stop": "completed"}, 2},
		{"agentrun_runs_total", map[string]string{"agent": "shop", "intent": "none", "stop": "blocked"}, 1},
		{"agentrun_runs_total", map[string]string{"agent": "shop", "intent": "none", "stop": "error"}, 1},
		{"agentrun_run_duration_seconds", map[string]string{"agent": "shop"}, 4},
		{"agentrun_runs_in_flight", map[string]string{"agent": "shop"}, 0},
		{"agentrun_tokens_total", map[string]string{"agent": "shop", "direction": "in"}, 150},
		{"agentrun_tokens_total", map[string]string{"agent": "shop", "direction": "out"}, 25},
		{"agentrun_tokens_total", map[string]string{"agent": "shop", "direction": "cache_read"}, 60},
		{"agentrun_tokens_total", map[string]string{"agent": "shop", "direction": "cache_write"}, 30},
		{"agentrun_model_calls_total", map[string]string{"agent": "shop", "purpose": "agent"}, 2},
		{"agentrun_model_calls_total", map[string]string{"agent": "shop", "purpose": "classifier"}, 1},
		{"agentrun_model_call_duration_seconds", map[string]string{"agent": "shop", "purpose": "agent"}, 2},
		{"agentrun_model_fallbacks_total", map[string]string{"agent": "shop", "purpose": "agent", "from": "big", "to": "mini"}, 1},
		{"agentrun_tool_calls_total", map[string]string{"agent": "shop", "tool": "search_orders", "outcome": "ok"}, 2},
		{"agentrun_tool_calls_total", map[string]string{"agent": "shop", "tool": "get_order_detail", "outcome": "error"}, 1},
		{"agentrun_tool_calls_total", map[string]string{"agent": "shop", "tool": "cancel_order", "outcome": "refused"}, 1},
		{"agentrun_tool_calls_total", map[string]string{"agent": "shop", "tool": "(unknown)", "outcome": "refused"}, 1},
		{"agentrun_cache_lookups_total", map[string]string{"agent": "shop", "outcome": "hit"}, 1},
		{"agentrun_cache_lookups_total", map[string]string{"agent": "shop", "outcome": "miss"}, 1},
	})
	if got := len(fams["agentrun_tool_calls_total"].GetMetric()); got != 4 {
		t.Errorf("agentrun_tool_calls_total has %d series, want 4", got)
	}
	if got := len(fams["agentrun_model_fallbacks_total"].GetMetric()); got != 1 {
		t.Errorf("agentrun_model_fallbacks_total has %d series, want 1 (only a fallback's call counts)", got)
	}
	if got := len(fams["agentrun_cache_lookups_total"].GetMetric()); got != 2 {
		t.Errorf("agentrun_cache_lookups_total has %d series, want 2", got)
	}

	// The run duration histogram's buckets reach from 0.05 s to 10 min.
	h := fams["agentrun_run_duration_seconds"].GetMetric()[0].GetHistogram()
	var bounds []float64
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) { // the text format lists +Inf too
			bounds = append(bounds, b.GetUpperBound())
		}
	}
	if len(bounds) == 0 || bounds[0] != 0.05 || bounds[len(bounds)-1] != 600 {
		t.Errorf("run duration buckets %v, want 0.05 .. 600", bounds)
	}
	if got, want := h.GetSampleSum(), 2+3+0.001+1.0; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("run duration sum = %v, want %v", got, want)
	}
	for _, mt := range fams["agentrun_model_call_duration_seconds"].GetMetric() {
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == "purpose" && lp.GetValue() == "agent" {
				if got := mt.GetHistogram().GetSampleSum(); got < 1.5-1e-9 || got > 1.5+1e-9 {
					t.Errorf("agent model call duration sum = %v, want 1.5", got)
				}
			}
		}
	}

	// The Go and process collectors are on the registry.
	if fams["go_goroutines"] == nil {
		t.Error("no go_goroutines: the Go collector is missing")
	}
}

func TestMetricsRequestsAndLimits(t *testing.T) {
	m := NewMetrics()
	m.Request("POST /v1/agents/{agent}/runs", http.MethodPost, 200, 50*time.Millisecond)
	m.Request("POST /v1/agents/{agent}/runs", http.MethodPost, 201, 70*time.Millisecond)
	m.Request("POST /v1/agents/{agent}/runs", http.MethodPost, 429, time.Millisecond)
	m.Request("GET /v1/runs/{id}", http.MethodGet, 404, time.Millisecond)
	m.Request("", "BREW", 999, time.Millisecond)
	m.RateLimited("rate")
	m.RateLimited("rate")
	m.RateLimited("total")
	m.RateLimited("some new reason")

	_, fams := scrapeMetrics(t, m)
	checkSeries(t, fams, []wantSeries{
		{"agentrun_http_requests_total", map[string]string{"route": "POST /v1/agents/{agent}/runs", "method": "POST", "code": "2xx"}, 2},
		{"agentrun_http_requests_total", map[string]string{"route": "POST /v1/agents/{agent}/runs", "method": "POST", "code": "4xx"}, 1},
		{"agentrun_http_requests_total", map[string]string{"route": "GET /v1/runs/{id}", "method": "GET", "code": "4xx"}, 1},
		{"agentrun_http_requests_total", map[string]string{"route": "unmatched", "method": "other", "code": "other"}, 1},
		{"agentrun_http_request_duration_seconds", map[string]string{"route": "POST /v1/agents/{agent}/runs"}, 3},
		{"agentrun_http_request_duration_seconds", map[string]string{"route": "GET /v1/runs/{id}"}, 1},
		{"agentrun_rate_limited_total", map[string]string{"reason": "rate"}, 2},
		{"agentrun_rate_limited_total", map[string]string{"reason": "concurrency"}, 0}, // shown before the first
		{"agentrun_rate_limited_total", map[string]string{"reason": "total"}, 1},
		{"agentrun_rate_limited_total", map[string]string{"reason": "other"}, 1},
	})
}

func TestMetricLabelVocabularies(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"status 200", statusClass(200), "2xx"},
		{"status 302", statusClass(302), "3xx"},
		{"status 499", statusClass(499), "4xx"},
		{"status 503", statusClass(503), "5xx"},
		{"status 0", statusClass(0), "other"},
		{"status 600", statusClass(600), "other"},
		{"method GET", methodLabel("GET"), "GET"},
		{"method lower case", methodLabel("get"), "other"},
		{"method made up", methodLabel("X-" + strings.Repeat("A", 100)), "other"},
		{"stop known", stopLabel(runtime.StopJudgeRejected), "judge_rejected"},
		{"stop empty", stopLabel(""), "other"},
		{"stop unknown", stopLabel("exploded"), "other"},
		{"purpose agent", purposeLabel(runtime.PurposeAgent), "agent"},
		{"purpose classifier", purposeLabel(runtime.PurposeClassifier), "classifier"},
		{"purpose empty", purposeLabel(""), "agent"},
		{"purpose unknown", purposeLabel("judge"), "other"},
		{"refused accept keeps the tool", refusedToolLabel(runtime.Event{Tool: "cancel_order", Refusal: runtime.RefusedAccept}), "cancel_order"},
		{"refused not offered hides the name", refusedToolLabel(runtime.Event{Tool: "x", Refusal: runtime.RefusedNotOffered}), "(unknown)"},
		{"refused too many hides the name", refusedToolLabel(runtime.Event{Tool: "x", Refusal: runtime.RefusedTooMany}), "(unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

// TestMetricsHoldNoPrivateData feeds events and results full of a user's data and
// checks that none of it reaches a label (or anywhere in the exposition).
func TestMetricsHoldNoPrivateData(t *testing.T) {
	const (
		userID       = "user-4711-alice"
		conversation = "conv-9f3a2b"
		runID        = "run-0c1d2e"
		input        = "please cancel my order 5551234 to Elm Street"
		answer       = "Your order 5551234 is cancelled"
	)
	secrets := []string{userID, conversation, runID, input, answer, "5551234", "Elm Street"}
	m := NewMetrics()
	obs := m.Observer("shop")
	passed := false
	for _, e := range []runtime.Event{
		{Kind: runtime.EventIntent, Intent: "cancel_order", Message: input},
		{Kind: runtime.EventModelRequest, Purpose: runtime.PurposeAgent, Message: input},
		{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeAgent, Reasoning: input, Message: conversation, Duration: time.Second},
		{Kind: runtime.EventToolCall, Tool: "cancel_order", CallID: runID, Args: `{"user":"` + userID + `","ref":"5551234"}`},
		{Kind: runtime.EventToolResult, Tool: "cancel_order", CallID: runID, Result: answer, Message: userID},
		{Kind: runtime.EventToolResult, Tool: "cancel_order", CallID: runID, Error: "no order 5551234 for " + userID},
		{Kind: runtime.EventToolRefused, Tool: input, Refusal: runtime.RefusedNotOffered, Args: input, Error: userID},
		{Kind: runtime.EventToolRefused, Tool: userID, Refusal: runtime.RefusedTooMany},
		{Kind: runtime.EventVerdict, Passed: &passed, Missing: input},
		{Kind: runtime.EventCache, CacheOutcome: runtime.CacheHitOutcome, Message: input},
		{Kind: runtime.EventStop, Stop: runtime.StopCompleted, Message: answer},
	} {
		obs.Observe(e)
	}
	m.RunStarted("shop")
	m.RunFinished("shop", &runtime.Result{
		Answer: answer, Intent: input, Stop: runtime.StopCompleted, Detail: userID, Partial: input,
		Messages: []model.Message{{Role: model.RoleUser, Content: input}},
		Seen:     map[string][]string{"orders": {"5551234"}},
	}, time.Second)
	m.RunStarted("shop")
	m.RunFinished("shop", &runtime.Result{Intent: userID, Stop: runtime.StopReason(conversation)}, time.Second)
	m.Request("GET /v1/conversations/{id}", http.MethodGet, 200, time.Millisecond)

	text, _ := scrapeMetrics(t, m)
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("the exposition holds %q", s)
		}
	}
}

// TestMetricsConcurrent observes from many goroutines at once, the way tool events
// of parallel calls and many runs arrive, while the metrics are scraped.
func TestMetricsConcurrent(t *testing.T) {
	const (
		goroutines = 32
		perG       = 100
	)
	m := NewMetrics()
	agents := []string{"shop", "faq"}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			agent := agents[g%len(agents)]
			obs := m.Observer(agent)
			for i := range perG {
				m.RunStarted(agent)
				obs.Observe(runtime.Event{Kind: runtime.EventIntent, Intent: "faq"})
				obs.Observe(runtime.Event{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeAgent, Duration: time.Duration(i) * time.Millisecond})
				obs.Observe(runtime.Event{Kind: runtime.EventToolResult, Tool: "lookup"})
				obs.Observe(runtime.Event{Kind: runtime.EventCache, CacheOutcome: runtime.CacheMissOutcome})
				m.RunFinished(agent, &runtime.Result{Intent: "faq", Stop: runtime.StopCompleted,
					Usage: model.Usage{PromptTokens: 3, CompletionTokens: 1}}, time.Duration(i)*time.Millisecond)
				m.Request("POST /v1/agents/{agent}/runs", http.MethodPost, 200, time.Millisecond)
				if i%10 == 0 {
					m.RateLimited("concurrency")
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("scrape during the runs: %d", rec.Code)
			}
		}
	})
	wg.Wait()

	_, fams := scrapeMetrics(t, m)
	each := float64(goroutines / len(agents) * perG)
	var want []wantSeries
	for _, agent := range agents {
		want = append(want,
			wantSeries{"agentrun_runs_total", map[string]string{"agent": agent, "intent": "faq", "stop": "completed"}, each},
			wantSeries{"agentrun_runs_in_flight", map[string]string{"agent": agent}, 0},
			wantSeries{"agentrun_run_duration_seconds", map[string]string{"agent": agent}, each},
			wantSeries{"agentrun_model_calls_total", map[string]string{"agent": agent, "purpose": "agent"}, each},
			wantSeries{"agentrun_model_call_duration_seconds", map[string]string{"agent": agent, "purpose": "agent"}, each},
			wantSeries{"agentrun_tool_calls_total", map[string]string{"agent": agent, "tool": "lookup", "outcome": "ok"}, each},
			wantSeries{"agentrun_cache_lookups_total", map[string]string{"agent": agent, "outcome": "miss"}, each},
			wantSeries{"agentrun_tokens_total", map[string]string{"agent": agent, "direction": "in"}, 3 * each},
			wantSeries{"agentrun_tokens_total", map[string]string{"agent": agent, "direction": "out"}, each},
		)
	}
	want = append(want,
		wantSeries{"agentrun_http_requests_total", map[string]string{"route": "POST /v1/agents/{agent}/runs", "method": "POST", "code": "2xx"}, goroutines * perG},
		wantSeries{"agentrun_rate_limited_total", map[string]string{"reason": "concurrency"}, goroutines * perG / 10},
	)
	checkSeries(t, fams, want)
}

// TestMetricsRegistriesAreIndependent checks that two servers in one process (as
// tests build them) do not share or collide on a registry.
func TestMetricsRegistriesAreIndependent(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	a.RateLimited("rate")
	_, fams := scrapeMetrics(t, b)
	checkSeries(t, fams, []wantSeries{{"agentrun_rate_limited_total", map[string]string{"reason": "rate"}, 0}})
}

// The GenAI client metrics come from each model response; the cost from the
// finished runs that have one.
func TestMetricsGenAIAndCost(t *testing.T) {
	m := NewMetrics()
	obs := m.Observer("shop")
	obs.Observe(runtime.Event{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeAgent, Duration: 300 * time.Millisecond,
		Usage: &model.Usage{PromptTokens: 100, CompletionTokens: 7}})
	obs.Observe(runtime.Event{Kind: runtime.EventModelResponse, Purpose: runtime.PurposeJudge, Duration: 100 * time.Millisecond,
		Usage: &model.Usage{PromptTokens: 40, CompletionTokens: 3}})
	cost := 0.0125
	m.RunStarted("shop")
	m.RunFinished("shop", &runtime.Result{Stop: runtime.StopCompleted, Cost: &cost}, time.Second)
	m.RunStarted("shop")
	m.RunFinished("shop", &runtime.Result{Stop: runtime.StopCompleted}, time.Second) // no price: no cost
	text, _ := scrapeMetrics(t, m)
	for _, want := range []string{
		`gen_ai_client_token_usage_count{agent="shop",gen_ai_operation_name="chat",gen_ai_token_type="input"} 2`,
		`gen_ai_client_token_usage_sum{agent="shop",gen_ai_operation_name="chat",gen_ai_token_type="input"} 140`,
		`gen_ai_client_token_usage_sum{agent="shop",gen_ai_operation_name="chat",gen_ai_token_type="output"} 10`,
		`gen_ai_client_operation_duration_seconds_count{agent="shop",gen_ai_operation_name="chat"} 2`,
		`agentrun_cost_usd_total{agent="shop"} 0.0125`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
