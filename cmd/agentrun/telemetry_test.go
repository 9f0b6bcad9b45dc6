package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/internal/otlptest"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/serve"
)

// End-to-end tests of issue 17 through the CLI and serve: the cost in --json, the
// budget guard, OTLP export from exec, and W3C trace context from a serve request
// into an http tool's backend. The agent is testdata/telemetry/lookup.yaml; the
// model is internal/openaitest, which reports 20 prompt and 5 completion tokens
// per response.

const (
	// telQuestionCanary and telToolCanary are in the question and in the tool's
	// result: no exported span may carry them unless content capture is on.
	telQuestionCanary = "CANARY-QUESTION-7f3a91"
	telToolCanary     = "CANARY-TOOLRESULT-c0ffee"
	telQuestion       = "Where is order A1? " + telQuestionCanary
	telAnswer         = "Order A1 is out for delivery and should arrive tomorrow."
	telFallback       = "Sorry, I could not finish that."
)

// telEnv is the lookup agent's world: the fake model, the tool's backend and the
// spec written against them.
type telEnv struct {
	model   *openaitest.Server
	backend *telBackend
	spec    string
}

// telBackend is the order_status tool's backend; it records each request's
// traceparent header ("" when there was none).
type telBackend struct {
	URL          string
	mu           sync.Mutex
	traceparents []string
}

func (b *telBackend) Traceparents() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.traceparents...)
}

// telReply is the fake model: the judge passes, a request after the tool's result
// is answered, and any other asks for the tool.
func telReply(req openaitest.Request) openaitest.Reply {
	if req.Judge {
		return openaitest.Reply{Content: `{"passed":true,"missing":""}`}
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1]["role"] == "tool" {
		return openaitest.Reply{Content: telAnswer}
	}
	return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "order_status", Arguments: `{"number":"A1"}`}}}
}

// newTelEnv writes testdata/telemetry/lookup.yaml against a fresh fake model and
// backend, edited by edit, and points exec at the model (LLM_BASE_URL, LLM_API_KEY).
func newTelEnv(t *testing.T, edit func(string) string) *telEnv {
	t.Helper()
	e := &telEnv{model: openaitest.New(t, telReply), backend: &telBackend{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{number}", func(w http.ResponseWriter, r *http.Request) {
		e.backend.mu.Lock()
		e.backend.traceparents = append(e.backend.traceparents, r.Header.Get("traceparent"))
		e.backend.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"number":%q,"status":"delivering","note":%q}`, r.PathValue("number"), telToolCanary)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.backend.URL = srv.URL
	data, err := os.ReadFile("testdata/telemetry/lookup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "http://backend.invalid", srv.URL)
	if edit != nil {
		text = edit(text)
	}
	e.spec = filepath.Join(t.TempDir(), "lookup.yaml")
	if err := os.WriteFile(e.spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLM_BASE_URL", e.model.URL)
	t.Setenv("LLM_API_KEY", "sk-fake")
	return e
}

// counts is how many agent and judge requests the fake model saw.
func (e *telEnv) counts() (agent, judge int) {
	for _, r := range e.model.Requests() {
		if r.Judge {
			judge++
		} else {
			agent++
		}
	}
	return agent, judge
}

// withGuard adds a line under the fixture's guards.
func withGuard(line string) func(string) string {
	return func(s string) string {
		return strings.Replace(s, "\nguards:\n", "\nguards:\n  "+line+"\n", 1)
	}
}

// telResult is the part of exec --json these tests read.
type telResult struct {
	Answer string   `json:"answer"`
	Stop   string   `json:"stop"`
	Detail string   `json:"detail"`
	Turns  int      `json:"turns"`
	Cost   *float64 `json:"cost"`
	Usage  struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

func decodeTelResult(t *testing.T, stdout string) telResult {
	t.Helper()
	var r telResult
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	return r
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// The cost in --json is the model's price times the usage the fake reported, over
// every call: the agent's two and the judge's one.
func TestCostInJSON(t *testing.T) {
	start := time.Now()
	e := newTelEnv(t, nil)
	code, stdout, stderr := runCLI(t, "exec", "--json", e.spec, telQuestion)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	res := decodeTelResult(t, stdout)
	if res.Stop != "completed" || res.Answer != telAnswer {
		t.Errorf("stop %q, answer %q", res.Stop, res.Answer)
	}
	agent, judge := e.counts()
	if agent != 2 || judge != 1 {
		t.Fatalf("the fake saw %d agent and %d judge requests, want 2 and 1", agent, judge)
	}
	if len(e.backend.Traceparents()) != 1 {
		t.Errorf("the tool's backend was called %d times, want 1", len(e.backend.Traceparents()))
	}
	const perCall = (20*2.5 + 5*10) / 1e6
	want := float64(agent+judge) * perCall
	if res.Cost == nil {
		t.Fatalf("no cost in --json:\n%s", stdout)
	}
	if math.Abs(*res.Cost-want) > 1e-12 {
		t.Errorf("cost %v, want %v", *res.Cost, want)
	}
	if res.Usage.PromptTokens != 60 || res.Usage.CompletionTokens != 15 || res.Usage.TotalTokens != 75 {
		t.Errorf("usage %+v, want 60 + 15 = 75 tokens", res.Usage)
	}
	last := lastLine(stderr)
	if !strings.HasPrefix(last, "■ completed") || !strings.Contains(last, "75 tokens") || !strings.Contains(last, " · "+formatCost(want)+" · ") {
		t.Errorf("last progress line %q does not show the cost %s", last, formatCost(want))
	}
	t.Logf("took %v", time.Since(start))
}

// budgetProbe learns what the budget guard counts for the run's first model call,
// the estimated prompt: a run with max_tokens 1 stops before that call and says.
func budgetProbe(t *testing.T) int {
	t.Helper()
	e := newTelEnv(t, withGuard("max_tokens: 1"))
	code, stdout, stderr := runCLI(t, "exec", "--json", e.spec, telQuestion)
	if code != exitStopped {
		t.Fatalf("probe: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("probe: the fake saw %d requests before a budget of 1 token, want 0", n)
	}
	res := decodeTelResult(t, stdout)
	m := regexp.MustCompile(`about (\d+) in, up to 100 out`).FindStringSubmatch(res.Detail)
	if res.Stop != "budget" || m == nil {
		t.Fatalf("probe: stop %q, detail %q", res.Stop, res.Detail)
	}
	prompt, _ := strconv.Atoi(m[1])
	return prompt
}

// A budget that the first call fits and the second (20+5 tokens and one call's
// price spent, a longer prompt, 100 out) does not: the run stops before the
// second call, with stop reason budget, the fallback answer and exit status 3.
func TestBudgetStopsBeforeTheCallOverIt(t *testing.T) {
	start := time.Now()
	prompt := budgetProbe(t)
	const oneCall = (20*2.5 + 5*10) / 1e6
	// The first call counts prompt+100 tokens; the second at least 25+prompt+100.
	maxTokens := prompt + 100 + 12
	// Priced, the first call's worst case is (prompt×2.5 + 100×10)/1e6; the second's
	// is at least that plus the first call's cost.
	maxCost := (float64(prompt)*2.5+100*10)/1e6 + oneCall/2
	for _, tc := range []struct{ name, guard, detail string }{
		{"max_tokens", fmt.Sprintf("max_tokens: %d", maxTokens), fmt.Sprintf("25 of max_tokens %d are used", maxTokens)},
		{"max_cost", fmt.Sprintf("max_cost: %g", maxCost), fmt.Sprintf("$%.6f of max_cost $%g is spent", oneCall, maxCost)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTelEnv(t, withGuard(tc.guard))
			code, stdout, stderr := runCLI(t, "exec", "--json", e.spec, telQuestion)
			if code != exitStopped {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitStopped, stdout, stderr)
			}
			res := decodeTelResult(t, stdout)
			if res.Stop != "budget" || res.Answer != telFallback {
				t.Errorf("stop %q, answer %q; want budget and the fallback", res.Stop, res.Answer)
			}
			if !strings.Contains(res.Detail, "the agent's next model call") || !strings.Contains(res.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", res.Detail, tc.detail)
			}
			if agent, judge := e.counts(); agent != 1 || judge != 0 {
				t.Errorf("the fake saw %d agent and %d judge requests, want only the first", agent, judge)
			}
			if n := len(e.backend.Traceparents()); n != 1 {
				t.Errorf("the tool ran %d times, want 1 (the first call asked for it)", n)
			}
			if res.Turns != 1 || res.Cost == nil || math.Abs(*res.Cost-oneCall) > 1e-12 {
				t.Errorf("turns %d, cost %v; want one call's", res.Turns, res.Cost)
			}
			if !strings.Contains(stderr, "! guard budget") || !strings.HasPrefix(lastLine(stderr), "■ budget · 1 model calls · 25 tokens · "+formatCost(oneCall)) {
				t.Errorf("stderr does not show the budget stop:\n%s", stderr)
			}
		})
	}
	t.Logf("first prompt estimated at %d tokens; max_tokens %d, max_cost %g; took %v", prompt, maxTokens, maxCost, time.Since(start))
}

// validate reports a cost budget over a model without a price at guards.max_cost,
// with a note at the model's name.
func TestBudgetValidateUnpricedModel(t *testing.T) {
	file := "testdata/telemetry/unpriced.yaml"
	code, stdout, stderr := runCLI(t, "validate", file)
	if code != 1 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		file + `:10:13: error: guards.max_cost: max_cost needs the price of every model the run calls: model "house-model-7b" has none`,
		"hint: set model.pricing: {input: …, output: …}",
		"note: " + file + ":7:9: the model",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("validate output lacks %q:\n%s", want, stdout)
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func spanNames(spans []otlptest.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// exec with OTEL_EXPORTER_OTLP_ENDPOINT exports the run's spans and metrics by
// OTLP/HTTP; message text is in none of them unless
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT asks for it.
func TestOTLPExportFromExec(t *testing.T) {
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%v", capture), func(t *testing.T) {
			start := time.Now()
			e := newTelEnv(t, nil)
			recv := otlptest.New(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
			t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", strconv.FormatBool(capture))
			code, stdout, stderr := runCLI(t, "exec", "-q", e.spec, telQuestion)
			if code != 0 || strings.TrimSpace(stdout) != telAnswer {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			// exec flushes on its way out; the deadline only guards a slow machine.
			waitFor(t, 3*time.Second, "no invoke_agent span", func() bool { return len(recv.Named("invoke_agent lookup")) == 1 })
			spans := recv.Spans()
			root := recv.Named("invoke_agent lookup")[0]
			chats, tools := recv.Named("chat fake-model"), recv.Named("execute_tool order_status")
			if len(chats) < 2 || len(tools) != 1 {
				t.Fatalf("spans %v: want ≥2 chat fake-model and 1 execute_tool order_status", spanNames(spans))
			}
			if len(chats) != 3 { // the agent's two calls and the judge's
				t.Errorf("%d chat spans, want 3", len(chats))
			}
			if root.Attrs["gen_ai.agent.name"] != "lookup" || root.Attrs["gen_ai.operation.name"] != "invoke_agent" ||
				root.Attrs["agentrun.stop_reason"] != "completed" || root.Parent != "" {
				t.Errorf("invoke_agent span %+v", root)
			}
			if c, err := strconv.ParseFloat(root.Attrs["agentrun.cost_usd"], 64); err != nil || math.Abs(c-3*(20*2.5+5*10)/1e6) > 1e-12 {
				t.Errorf("invoke_agent agentrun.cost_usd = %q", root.Attrs["agentrun.cost_usd"])
			}
			if !slices.Contains(root.EventNames(), "agentrun.stop") || !slices.Contains(root.EventNames(), "agentrun.verdict") {
				t.Errorf("invoke_agent events %v, want agentrun.stop and agentrun.verdict", root.EventNames())
			}
			purposes := map[string]int{}
			for _, c := range chats {
				purposes[c.Attrs["agentrun.model.purpose"]]++
			}
			if purposes["agent"] != 2 || purposes["judge"] != 1 {
				t.Errorf("chat spans by purpose %v, want 2 agent and 1 judge", purposes)
			}
			for _, s := range spans {
				if s.TraceID != root.TraceID {
					t.Errorf("span %s is in trace %s, not the run's %s", s.Name, s.TraceID, root.TraceID)
				}
			}
			for _, c := range chats {
				if c.Attrs["gen_ai.request.model"] != "fake-model" || c.Attrs["gen_ai.usage.input_tokens"] != "20" ||
					c.Attrs["gen_ai.usage.output_tokens"] != "5" || c.Attrs["gen_ai.provider.name"] != "openai" {
					t.Errorf("chat span attributes %v", c.Attrs)
				}
				if c.Parent != root.SpanID {
					t.Errorf("chat span's parent %s, want invoke_agent %s", c.Parent, root.SpanID)
				}
			}
			if tl := tools[0]; tl.Attrs["gen_ai.tool.name"] != "order_status" || tl.Attrs["gen_ai.tool.call.id"] == "" || tl.Parent != root.SpanID {
				t.Errorf("execute_tool span %+v", tl)
			}
			waitFor(t, 3*time.Second, "no gen_ai.client.token.usage metric", func() bool {
				return recv.HasMetric("gen_ai.client.token.usage") && recv.HasMetric("gen_ai.client.operation.duration")
			})
			for _, canary := range []string{telQuestionCanary, telToolCanary} {
				if got := recv.Contains(canary); got != capture {
					t.Errorf("canary %s exported: %v, want %v", canary, got, capture)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			t.Logf("%d spans; took %v", len(spans), time.Since(start))
		})
	}
}

// A collector that is down (nothing listens at its port) never fails the run nor
// holds it up for long: exec answers and exits 0 within a few seconds.
func TestOTLPCollectorDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	e := newTelEnv(t, nil)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", closed)
	start := time.Now()
	code, stdout, stderr := runCLI(t, "exec", "-q", e.spec, telQuestion)
	d := time.Since(start)
	if code != 0 || strings.TrimSpace(stdout) != telAnswer {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if d > 4*time.Second {
		t.Errorf("exec took %v with the collector down", d)
	}
	t.Logf("took %v", d)
	// -q hides progress, not a failing exporter: it is said once.
	if n := strings.Count(stderr, "telemetry: "); n != 1 {
		t.Errorf("-q: %d telemetry warnings on stderr, want 1:\n%s", n, stderr)
	}
}

// A traceparent on a request to serve becomes the run's parent, and the trace goes
// on into the http tool's backend: for a run, a streamed run and an OpenAI-style
// chat completion.
func TestTraceContextThroughServe(t *testing.T) {
	start := time.Now()
	e := newTelEnv(t, nil)
	recv := otlptest.New(t)
	tel, err := telemetry.Setup(t.Context(), func(k string) (string, bool) {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return recv.URL, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	tel.Install() // the global propagator reads the request's and writes the tool's traceparent
	t.Cleanup(func() {
		tel.Shutdown(context.Background())
		if off, err := telemetry.Setup(context.Background(), nil); err == nil {
			off.Install() // no-op providers and the default propagator again
		}
	})
	vars := map[string]string{"LLM_BASE_URL": e.model.URL, "LLM_API_KEY": "sk-fake"}
	srv, err := serve.New(t.Context(), serve.Options{
		Config:         serve.Config{Addr: "127.0.0.1:0"},
		Specs:          []string{e.spec},
		Store:          "memory:",
		InsecureNoAuth: true,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		LookupEnv:      func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Telemetry:      tel,
	})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	type call struct {
		name, path, traceID, parentID string
		body                          map[string]any
		check                         func(body string) bool // the response carries the answer
	}
	calls := []call{
		{name: "run", path: "/v1/agents/lookup/runs", traceID: "4bf92f3577b34da6a3ce929d0e0e4736", parentID: "00f067aa0ba902b7",
			body: map[string]any{"input": telQuestion},
			check: func(b string) bool {
				var got struct {
					Result telResult `json:"result"`
				}
				return json.Unmarshal([]byte(b), &got) == nil && got.Result.Answer == telAnswer
			}},
		{name: "streamed run", path: "/v1/agents/lookup/runs", traceID: "5bf92f3577b34da6a3ce929d0e0e4737", parentID: "10f067aa0ba902b8",
			body:  map[string]any{"input": telQuestion, "stream": true},
			check: func(b string) bool { return strings.Contains(b, telAnswer) }},
		{name: "chat completion", path: "/v1/chat/completions", traceID: "6bf92f3577b34da6a3ce929d0e0e4738", parentID: "20f067aa0ba902b9",
			body:  map[string]any{"model": "lookup", "messages": []any{map[string]any{"role": "user", "content": telQuestion}}},
			check: func(b string) bool { return strings.Contains(b, telAnswer) }},
	}
	for i, c := range calls {
		body, _ := json.Marshal(c.body)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", hs.URL+c.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+c.traceID+"-"+c.parentID+"-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !c.check(string(out)) {
			t.Fatalf("%s: status %d: %s", c.name, resp.StatusCode, out)
		}
		if tps := e.backend.Traceparents(); len(tps) != i+1 {
			t.Fatalf("%s: the backend has had %d requests, want %d", c.name, len(tps), i+1)
		}
	}

	if err := tel.Shutdown(context.Background()); err != nil { // flushes the spans
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "not every invoke_agent span was exported", func() bool { return len(recv.Named("invoke_agent lookup")) == len(calls) })
	spans := recv.Spans()
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var root *otlptest.Span
			for _, s := range recv.Named("invoke_agent lookup") {
				if s.TraceID == c.traceID {
					root = &s
				}
			}
			if root == nil {
				t.Fatalf("no invoke_agent span in trace %s", c.traceID)
			}
			if root.Parent != c.parentID {
				t.Errorf("invoke_agent's parent %s, want the caller's %s", root.Parent, c.parentID)
			}
			tp := e.backend.Traceparents()[i]
			parts := strings.Split(tp, "-")
			if len(parts) != 4 || parts[1] != c.traceID {
				t.Fatalf("the backend's traceparent %q is not in trace %s", tp, c.traceID)
			}
			// The backend's caller is the tool call's span.
			var caller *otlptest.Span
			for _, s := range spans {
				if s.SpanID == parts[2] {
					caller = &s
				}
			}
			switch {
			case caller == nil:
				t.Errorf("the backend's parent span %s was not exported (spans %v)", parts[2], spanNames(spans))
			case caller.Name != "execute_tool order_status" || caller.TraceID != c.traceID || caller.Parent != root.SpanID:
				t.Errorf("the backend's parent span %+v, want execute_tool order_status under invoke_agent %s", *caller, root.SpanID)
			}
		})
	}
	if recv.Contains(telQuestionCanary) || recv.Contains(telToolCanary) {
		t.Error("serve exported message content without RecordContent")
	}
	t.Logf("took %v", time.Since(start))
}

// A model named by LLM_MODEL_NAME rather than model.name is priced from the
// bundled table like a named one, as validate assumes when it accepts max_cost for
// it; and its chat spans name it (both once broke: Build priced s.Model.Name
// only). gpt-4o's list price is the fixture's pricing.
func TestCostOfModelNamedByEnvironment(t *testing.T) {
	unnamed := func(s string) string {
		s = strings.Replace(s, "  name: fake-model\n", "", 1)
		return strings.Replace(s, "  pricing: {input: 2.5, cached_input: 1.25, output: 10}\n", "", 1)
	}
	t.Setenv("LLM_MODEL_NAME", "gpt-4o")
	t.Run("cost and spans", func(t *testing.T) {
		e := newTelEnv(t, unnamed)
		recv := otlptest.New(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
		code, stdout, stderr := runCLI(t, "exec", "--json", e.spec, telQuestion)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		res := decodeTelResult(t, stdout)
		if want := 3 * (20*2.5 + 5*10) / 1e6; res.Cost == nil || math.Abs(*res.Cost-want) > 1e-12 {
			t.Errorf("cost %v, want %v (gpt-4o from the price table)", res.Cost, want)
		}
		waitFor(t, 3*time.Second, "no invoke_agent span", func() bool { return len(recv.Named("invoke_agent lookup")) == 1 })
		chats := recv.Named("chat gpt-4o")
		if len(chats) != 3 {
			t.Fatalf("spans %v, want 3 chat gpt-4o", spanNames(recv.Spans()))
		}
		if got := chats[0].Attrs["gen_ai.request.model"]; got != "gpt-4o" {
			t.Errorf("gen_ai.request.model %q", got)
		}
	})
	t.Run("max_cost", func(t *testing.T) {
		e := newTelEnv(t, func(s string) string { return withGuard("max_cost: 0.000001")(unnamed(s)) })
		if code, stdout, _ := runCLI(t, "validate", e.spec); code != 0 {
			t.Fatalf("validate: exit %d\n%s", code, stdout)
		}
		code, stdout, stderr := runCLI(t, "exec", "--json", e.spec, telQuestion)
		if res := decodeTelResult(t, stdout); code != exitStopped || res.Stop != "budget" || len(e.model.Requests()) != 0 {
			t.Errorf("exit %d, stop %q, %d model requests; want 3, budget, 0\n%s", code, res.Stop, len(e.model.Requests()), stderr)
		}
	})
}
