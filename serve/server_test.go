package serve_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/serve"
	"github.com/agentrun/agentrun/spec"
)

// The in-process tests of serve: a Server built from testdata/support.yaml, its
// model an openaitest fake and its http tool a fake backend that records whose
// orders were asked for, served with httptest.

const (
	aliceToken  = "alice-static-token-0123456789"
	bobToken    = "bob-static-token-0123456789"
	carolToken  = "carol-static-token-0123456789"
	jwtSecret   = "an-hs256-secret-long-enough-for-rfc-7518"
	jwtIssuer   = "https://id.example.test"
	jwtAudience = "agentrun-serve-test"

	// finalAnswer is what the fake model answers after the tool ran.
	finalAnswer = "Your order A1 is on its way."
	// greeting is what it answers to anything that asks for no tool.
	greeting = "Hello! How can I help?"
	// ordersInput makes the fake model call list_orders first (two model calls).
	ordersInput = "where are my orders?"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// shopReply is the fake model: a request whose last message is a tool result gets
// the final answer; a user message about orders gets a list_orders call (which
// tries to name another user: bound parameters must discard it); anything else
// gets the greeting.
func shopReply(req openaitest.Request) openaitest.Reply {
	if len(req.Messages) == 0 {
		return openaitest.Reply{Status: http.StatusBadRequest}
	}
	last := req.Messages[len(req.Messages)-1]
	if last["role"] == "tool" {
		return openaitest.Reply{Content: finalAnswer}
	}
	if strings.Contains(messageText(last), "order") {
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "list_orders", Arguments: `{"status":"any","user_id":"bob"}`}}}
	}
	return openaitest.Reply{Content: greeting}
}

// messageText is a wire message's content: a string or text parts.
func messageText(m map[string]any) string {
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok {
				s, _ := pm["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}

// backend is the shop's API: it records the user id of every orders lookup.
type backend struct {
	URL   string
	mu    sync.Mutex
	users []string
}

func newBackend(t testing.TB) *backend {
	b := &backend{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}/orders", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.users = append(b.users, r.PathValue("id"))
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"orders":[{"number":"A1","status":"delivering"}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// Users returns the user ids the backend was asked about, in order.
func (b *backend) Users() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.users)
}

// lockedBuffer is an io.Writer the server's logger and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type envOptions struct {
	limits serve.Limits
	cors   serve.CORSConfig
	// latency delays every model answer; set before the fake serves anything.
	latency     time.Duration
	resumeGrace time.Duration
	reply       func(openaitest.Request) openaitest.Reply
	store       string // "" is "memory:"
	// editSpec changes testdata/support.yaml before the server loads it.
	editSpec func(string) string
	// model is the server's model override: "" is the OpenAI-compatible fake's,
	// "-" none (the spec's own model).
	model string
	// env adds variables to the server's environment.
	env map[string]string
	// ui, dev and insecure are Options.UI, Options.Dev and Options.InsecureNoAuth.
	ui, dev, insecure bool
	// spec is the spec under testdata/ to serve instead of support.yaml; files
	// are more of testdata/'s files copied beside it (knowledge sources).
	spec  string
	files []string
}

// env is a running server and its fakes.
type env struct {
	t       testing.TB
	srv     *serve.Server
	URL     string
	model   *openaitest.Server
	backend *backend
	spec    string // the spec file the server loaded (in a temporary directory)
	source  string // the spec under testdata/ it was written from
	logs    *lockedBuffer
	client  *http.Client
}

// newEnv starts a server for testdata/support.yaml. Limits left at zero are
// generous, so only the tests of limits meet them.
func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.reply == nil {
		o.reply = shopReply
	}
	if o.limits.RatePerSecond == 0 {
		o.limits.RatePerSecond, o.limits.Burst = 10000, 10000
	}
	if o.limits.MaxConcurrentPerUser == 0 {
		o.limits.MaxConcurrentPerUser = 64
	}
	if o.store == "" {
		o.store = "memory:"
	}
	e := &env{t: t, backend: newBackend(t), logs: &lockedBuffer{}}
	e.model = openaitest.New(t, o.reply)
	e.model.Latency = o.latency
	e.model.Requests() // its lock orders the write of Latency before the handler's read
	e.source = cmp.Or(o.spec, "support.yaml")
	e.spec = filepath.Join(t.TempDir(), e.source)
	for _, f := range o.files {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(filepath.Dir(e.spec), f)), 0o755)
		if err := os.WriteFile(filepath.Join(filepath.Dir(e.spec), f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if o.editSpec == nil {
		o.editSpec = func(s string) string { return s }
	}
	e.writeSpec(o.editSpec)

	vars := map[string]string{"LLM_BASE_URL": e.model.URL, "LLM_API_KEY": "sk-fake", "TEST_JWT_SECRET": jwtSecret}
	maps.Copy(vars, o.env)
	switch o.model {
	case "":
		o.model = "openai:fake"
	case "-":
		o.model = ""
	}
	cfg := serve.Config{
		Addr: "127.0.0.1:0",
		Auth: serve.AuthConfig{
			Tokens: []serve.TokenConfig{
				{SHA256: sha256Hex(aliceToken), User: "alice", Attributes: map[string]string{"tier": "gold", "secret_attr": "x"}},
				{SHA256: sha256Hex(bobToken), User: "bob"},
				{SHA256: sha256Hex(carolToken), User: "carol"},
			},
			JWT: &serve.JWTConfig{HS256SecretEnv: "TEST_JWT_SECRET", Issuer: jwtIssuer, Audience: jwtAudience},
		},
		Limits: o.limits,
		CORS:   o.cors,
	}
	srv, err := serve.New(t.Context(), serve.Options{
		Config:         cfg,
		Specs:          []string{e.spec},
		Store:          o.store,
		Model:          o.model,
		Logger:         slog.New(slog.NewJSONHandler(e.logs, nil)),
		LookupEnv:      func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		ResumeGrace:    o.resumeGrace,
		UI:             o.ui,
		Dev:            o.dev,
		InsecureNoAuth: o.insecure,
	})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	e.srv = srv
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	hs := httptest.NewUnstartedServer(nil)
	hs.Config = srv.HTTPServer() // the server's own timeouts, on a real listener
	hs.Start()
	t.Cleanup(hs.Close) // first: it waits for the handlers
	e.URL = hs.URL
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

// writeSpec writes the testdata spec (support.yaml unless envOptions.spec), changed by edit, as the server's spec.
func (e *env) writeSpec(edit func(string) string) {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", e.source))
	if err != nil {
		e.t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "http://backend.invalid", e.backend.URL)
	if err := os.WriteFile(e.spec, []byte(edit(text)), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// response is an answer read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("status %d: the body is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return v
}

// errorCode is the code of a run API error ({"error":{"code":…}}), checking the shape.
func (r response) errorCode(t testing.TB) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("status %d: Content-Type %q, want application/json", r.Status, ct)
	}
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("status %d: no error object in %s", r.Status, r.Body)
	}
	code, _ := e["code"].(string)
	if msg, _ := e["message"].(string); code == "" || msg == "" {
		t.Errorf("status %d: an error wants a code and a message: %s", r.Status, r.Body)
	}
	return code
}

// openAIErrorCode checks OpenAI's error shape and returns its code.
func (r response) openAIErrorCode(t testing.TB) string {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("status %d: no error object in %s", r.Status, r.Body)
	}
	for _, key := range []string{"message", "type", "param", "code"} {
		if _, ok := e[key]; !ok {
			t.Errorf("status %d: OpenAI's error shape has %q: %s", r.Status, key, r.Body)
		}
	}
	code, _ := e["code"].(string)
	return code
}

// request sends a request as token ("" for none) with a JSON body (a string is
// sent as is) and extra headers (name, value pairs).
func (e *env) request(ctx context.Context, method, path, token string, body any, headers ...string) (*http.Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return e.client.Do(req)
}

// do sends a request and reads the answer whole.
func (e *env) do(method, path, token string, body any, headers ...string) response {
	e.t.Helper()
	return e.doT(e.t, method, path, token, body, headers...)
}

// doT is do failing t: a fuzz target's, not the env's.
func (e *env) doT(t testing.TB, method, path, token string, body any, headers ...string) response {
	t.Helper()
	resp, err := e.request(context.Background(), method, path, token, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// runResult is the JSON answer of a run.
type runResult struct {
	ID           string `json:"id"`
	Conversation string `json:"conversation"`
	Result       struct {
		Answer     string `json:"answer"`
		Stop       string `json:"stop"`
		ToolRounds int    `json:"tool_rounds"`
		Turns      int    `json:"turns"`
	} `json:"result"`
	// Error is a streamed run's reason it could not run.
	Error *struct {
		Status        int
		Code, Message string
	} `json:"error"`
}

// run makes a non-streamed run that must succeed.
func (e *env) run(token, input, conversation string) runResult {
	e.t.Helper()
	r := e.do("POST", "/v1/agents/support/runs", token, map[string]any{"input": input, "conversation": conversation})
	if r.Status != http.StatusOK {
		e.t.Fatalf("run %q: status %d: %s", input, r.Status, r.Body)
	}
	var res runResult
	if err := json.Unmarshal(r.Body, &res); err != nil {
		e.t.Fatal(err)
	}
	return res
}

// conversations is the caller's conversation list.
func (e *env) conversations(token string) []string {
	e.t.Helper()
	r := e.do("GET", "/v1/conversations", token, nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET /v1/conversations: %d %s", r.Status, r.Body)
	}
	var v struct{ Conversations []string }
	if err := json.Unmarshal(r.Body, &v); err != nil {
		e.t.Fatal(err)
	}
	return v.Conversations
}

type fact struct{ Key, Value, Source string }

// facts is the caller's memory.
func (e *env) facts(token string) (user string, facts []fact) {
	e.t.Helper()
	r := e.do("GET", "/v1/me/memory", token, nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET /v1/me/memory: %d %s", r.Status, r.Body)
	}
	var v struct {
		User  string
		Facts []fact
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		e.t.Fatal(err)
	}
	return v.User, v.Facts
}

// metrics scrapes /metrics and sums the samples of name whose labels hold every
// one of labels (`agent="support"`).
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	r := e.do("GET", "/metrics", "", nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d", r.Status)
	}
	var sum float64
	for _, line := range strings.Split(string(r.Body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series := line[:i]
		if !allContained(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			e.t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func allContained(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// eventually polls cond until it holds or the deadline passes: a long one, so a
// loaded CI machine that takes seconds to schedule a request does not fail a test
// (a test that holds passes at once).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// signJWT signs claims for the server's JWT config; mod changes the defaults.
func signJWT(t testing.TB, secret string, mod func(jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"iss": jwtIssuer, "aud": jwtAudience, "sub": "dave",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	if mod != nil {
		mod(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sseEvent is one server-sent event.
type sseEvent struct{ ID, Event, Data string }

// sseReader reads server-sent events one at a time.
type sseReader struct{ r *bufio.Reader }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{bufio.NewReader(r)} }

// next returns the next event (comments skipped), io.EOF at the end.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	fields := 0
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && fields > 0 {
				return ev, nil
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if fields > 0 {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"): // a comment: heartbeat
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			fields++
			switch k {
			case "id":
				ev.ID = v
			case "event":
				ev.Event = v
			case "data":
				if ev.Data != "" {
					ev.Data += "\n"
				}
				ev.Data += v
			}
		}
	}
}

// all reads every event to the end of the stream.
func (s *sseReader) all(t testing.TB) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := s.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		out = append(out, ev)
	}
}

// checkRunStream checks a run's events: each has an id, the ids count up by one
// from first, and the last is the result, which it returns.
func checkRunStream(t testing.TB, events []sseEvent, first int) runResult {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("the stream has no events")
	}
	for i, ev := range events {
		if ev.ID != strconv.Itoa(first+i) {
			t.Fatalf("event %d (%s) has id %q, want %d", i, ev.Event, ev.ID, first+i)
		}
		if ev.Event == "result" && i != len(events)-1 {
			t.Fatalf("a result event before the end, at %d of %d", i, len(events))
		}
	}
	last := events[len(events)-1]
	if last.Event != "result" {
		t.Fatalf("the last event is %q, want result", last.Event)
	}
	var res runResult
	if err := json.Unmarshal([]byte(last.Data), &res); err != nil {
		t.Fatalf("result event: %v: %s", err, last.Data)
	}
	return res
}

func eventKinds(events []sseEvent) []string {
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Event)
	}
	return kinds
}

// startStream starts a streamed run and returns its response, its body open.
func (e *env) startStream(ctx context.Context, token string, body map[string]any) *http.Response {
	e.t.Helper()
	body["stream"] = true
	resp, err := e.request(ctx, "POST", "/v1/agents/support/runs", token, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("streamed run: %d %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("streamed run: Content-Type %q", ct)
	}
	return resp
}

// --- the run API ---

func TestRunNonStreamed(t *testing.T) {
	e := newEnv(t, envOptions{})
	res := e.run(aliceToken, ordersInput, "c1")
	if res.Result.Answer != finalAnswer || res.Result.Stop != "completed" || res.Result.ToolRounds != 1 || res.Conversation != "c1" {
		t.Errorf("result = %+v, want the final answer after one tool round in c1", res)
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("the backend saw users %q, want [alice]", got)
	}

	r := e.do("GET", "/v1/runs/"+res.ID, aliceToken, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET run: %d %s", r.Status, r.Body)
	}
	v := r.json(t)
	if v["status"] != "finished" || v["agent"] != "support" || v["conversation"] != "c1" {
		t.Errorf("GET run = %s", r.Body)
	}
	if n, _ := v["events"].(float64); n < 5 {
		t.Errorf("GET run: %v events, want the run's events counted", v["events"])
	}
	if got, _ := v["result"].(map[string]any)["answer"].(string); got != finalAnswer {
		t.Errorf("GET run: answer %q", got)
	}

	conv := e.do("GET", "/v1/conversations/c1", aliceToken, nil)
	if conv.Status != http.StatusOK {
		t.Fatalf("GET conversation: %d %s", conv.Status, conv.Body)
	}
	var c struct {
		Turns    int
		Messages []struct{ Role, Content string }
	}
	json.Unmarshal(conv.Body, &c)
	if c.Turns != 1 || len(c.Messages) < 2 || c.Messages[0].Content != ordersInput || c.Messages[len(c.Messages)-1].Content != finalAnswer {
		t.Errorf("conversation c1 = %s", conv.Body)
	}
}

func TestRunStreamed(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp := e.startStream(context.Background(), aliceToken, map[string]any{"input": ordersInput, "conversation": "s1"})
	runID := resp.Header.Get("X-Agentrun-Run")
	events := newSSEReader(resp.Body).all(t)
	resp.Body.Close()
	res := checkRunStream(t, events, 1)
	if res.ID != runID || res.Result.Answer != finalAnswer || res.Result.Stop != "completed" {
		t.Errorf("result event = %+v (run %s)", res, runID)
	}
	kinds := eventKinds(events)
	for _, want := range []string{"model_request", "model_response", "tool_call", "tool_result", "bind_discarded", "stop"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no %s event in %q", want, kinds)
		}
	}

	// A finished run replays from the start, and from after any event.
	replay := func(lastEventID string) []sseEvent {
		t.Helper()
		r, err := e.request(context.Background(), "GET", "/v1/runs/"+runID+"/events", aliceToken, nil, "Last-Event-ID", lastEventID)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET events: %d", r.StatusCode)
		}
		return newSSEReader(r.Body).all(t)
	}
	if got := replay(""); !slices.Equal(got, events) {
		t.Errorf("the replay differs from the stream:\n got %v\nwant %v", eventKinds(got), kinds)
	}
	if got := replay("3"); !slices.Equal(got, events[3:]) {
		t.Errorf("Last-Event-ID 3: got ids from %v, want the events after 3", got[0].ID)
	}
	r := e.do("GET", "/v1/runs/"+runID+"/events", aliceToken, nil, "Last-Event-ID", "x")
	if r.Status != http.StatusBadRequest {
		t.Errorf("Last-Event-ID x: %d, want 400", r.Status)
	}
}

// A client that loses its stream and reconnects with Last-Event-ID gets every
// event after the last it read, once, and the result.
func TestRunStreamResumesInFlight(t *testing.T) {
	e := newEnv(t, envOptions{latency: 150 * time.Millisecond, resumeGrace: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.startStream(ctx, aliceToken, map[string]any{"input": ordersInput, "conversation": "r1"})
	runID := resp.Header.Get("X-Agentrun-Run")
	rd := newSSEReader(resp.Body)
	var seen []sseEvent
	for len(seen) < 2 {
		ev, err := rd.next()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ev)
	}
	cancel() // the connection drops mid-run
	resp.Body.Close()

	last := seen[len(seen)-1].ID
	r, err := e.request(context.Background(), "GET", "/v1/runs/"+runID+"/events", aliceToken, nil, "Last-Event-ID", last)
	if err != nil {
		t.Fatal(err)
	}
	rest := newSSEReader(r.Body).all(t)
	r.Body.Close()
	n, _ := strconv.Atoi(last)
	res := checkRunStream(t, rest, n+1)
	if res.Result.Stop != "completed" || res.Result.Answer != finalAnswer {
		t.Errorf("the resumed run ended %+v, want completed: a reconnect within the grace keeps it going", res.Result)
	}
	if e.model.Canceled() != 0 {
		t.Errorf("%d model requests canceled", e.model.Canceled())
	}

	// seen + rest is the whole run: nothing missing, nothing twice.
	r, err = e.request(context.Background(), "GET", "/v1/runs/"+runID+"/events", aliceToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := newSSEReader(r.Body).all(t)
	r.Body.Close()
	if got := append(slices.Clone(seen), rest...); !slices.Equal(got, full) {
		t.Errorf("read before and after the reconnect:\n%v\nthe whole run:\n%v", eventKinds(got), eventKinds(full))
	}
}

// A streamed run nobody reads any more is canceled after the resume grace: the
// model request is aborted and nothing of the run is stored.
func TestRunStreamReaderLeavesCancels(t *testing.T) {
	e := newEnv(t, envOptions{latency: 400 * time.Millisecond, resumeGrace: 30 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := e.startStream(ctx, aliceToken, map[string]any{"input": ordersInput, "conversation": "gone"})
	runID := resp.Header.Get("X-Agentrun-Run")
	// Leave during the second model call: the tool has run, its fact is pending.
	eventually(t, "the second model request is sent", func() bool { return len(e.model.Requests()) == 2 })
	cancel()
	resp.Body.Close()

	eventually(t, "the fake model sees the request canceled", func() bool { return e.model.Canceled() > 0 })
	checkCanceledRun(t, e, runID, "gone")
}

// checkCanceledRun checks a canceled run left nothing in the store.
func checkCanceledRun(t *testing.T, e *env, runID, conversation string) {
	t.Helper()
	if runID != "" {
		var v map[string]any
		eventually(t, "the run ends", func() bool {
			v = e.do("GET", "/v1/runs/"+runID, aliceToken, nil).json(t)
			return v["status"] != "running"
		})
		if res, _ := v["result"].(map[string]any); res == nil || res["stop"] != "canceled" {
			t.Errorf("the run = %v, want stop canceled", v)
		}
	}
	eventually(t, "the canceled run is counted", func() bool {
		return e.metric("agentrun_runs_total", `stop="canceled"`) == 1
	})
	if got := e.conversations(aliceToken); len(got) != 0 {
		t.Errorf("conversations %q stored by a canceled run", got)
	}
	if r := e.do("GET", "/v1/conversations/"+conversation, aliceToken, nil); r.Status != http.StatusNotFound {
		t.Errorf("GET the canceled run's conversation: %d %s", r.Status, r.Body)
	}
	if _, facts := e.facts(aliceToken); len(facts) != 0 {
		t.Errorf("facts %v stored by a canceled run", facts)
	}
}

// A client of a non-streamed run that leaves cancels it the same way.
func TestRunClientLeavesCancels(t *testing.T) {
	e := newEnv(t, envOptions{latency: 400 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := e.request(ctx, "POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": ordersInput, "conversation": "left"})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	eventually(t, "the second model request is sent", func() bool { return len(e.model.Requests()) == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("the client's request ended with %v", err)
	}
	eventually(t, "the fake model sees the request canceled", func() bool { return e.model.Canceled() > 0 })
	checkCanceledRun(t, e, "", "left")
}

func TestRunCancel(t *testing.T) {
	e := newEnv(t, envOptions{latency: 2 * time.Second})
	resp := e.startStream(context.Background(), aliceToken, map[string]any{"input": "hi", "conversation": "x"})
	defer resp.Body.Close()
	runID := resp.Header.Get("X-Agentrun-Run")
	eventually(t, "the model request is sent", func() bool { return len(e.model.Requests()) == 1 })
	start := time.Now()
	r := e.do("POST", "/v1/runs/"+runID+"/cancel", aliceToken, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	res := checkRunStream(t, newSSEReader(resp.Body).all(t), 1)
	if res.Result.Stop != "canceled" {
		t.Errorf("a canceled run stopped %q", res.Result.Stop)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the run ended %v after its cancel: the model request was not aborted", d)
	}
	eventually(t, "the fake model sees the request canceled", func() bool { return e.model.Canceled() > 0 })
	if got := e.conversations(aliceToken); len(got) != 0 {
		t.Errorf("a canceled run stored conversations %q", got)
	}
}

func TestConversations(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, c := range []string{"a", "b", "c", "a"} {
		e.run(aliceToken, "hi", c)
	}
	if got, want := e.conversations(aliceToken), []string{"a", "c", "b"}; !slices.Equal(got, want) {
		t.Errorf("conversations = %q, want newest first %q", got, want)
	}
	if r := e.do("GET", "/v1/conversations/a", aliceToken, nil); r.Status != http.StatusOK || r.json(t)["turns"] != 2.0 {
		t.Errorf("GET a: %d %s, want 2 turns", r.Status, r.Body)
	}
	if r := e.do("DELETE", "/v1/conversations/c", aliceToken, nil); r.Status != http.StatusNoContent {
		t.Errorf("DELETE c: %d %s", r.Status, r.Body)
	}
	if r := e.do("DELETE", "/v1/conversations/c", aliceToken, nil); r.Status != http.StatusNotFound {
		t.Errorf("DELETE c again: %d, want 404", r.Status)
	}
	if r := e.do("GET", "/v1/conversations/c", aliceToken, nil); r.Status != http.StatusNotFound {
		t.Errorf("GET deleted c: %d, want 404", r.Status)
	}
	if got, want := e.conversations(aliceToken), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("conversations after the delete = %q, want %q", got, want)
	}
	if got := e.conversations(bobToken); len(got) != 0 {
		t.Errorf("bob's conversations = %q, want none", got)
	}
}

func TestAgents(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do("GET", "/v1/agents", aliceToken, nil)
	var v struct {
		Agents []struct {
			Name, Description string
			Intents           []any
		}
	}
	if err := json.Unmarshal(r.Body, &v); err != nil || r.Status != http.StatusOK {
		t.Fatalf("GET /v1/agents: %d %s", r.Status, r.Body)
	}
	if len(v.Agents) != 1 || v.Agents[0].Name != "support" || v.Agents[0].Description == "" || v.Agents[0].Intents == nil {
		t.Errorf("agents = %s", r.Body)
	}
}

// --- operations ---

func TestHealthAndMetrics(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{RatePerSecond: 0.001, Burst: 2}})
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.do("GET", path, "", nil); r.Status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	e.run(aliceToken, ordersInput, "m1")
	e.run(aliceToken, "hi", "m1")
	if r := e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi"}); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the third run: %d, want 429", r.Status)
	}
	if got := e.metric("agentrun_runs_total", `agent="support"`, `stop="completed"`); got != 2 {
		t.Errorf("agentrun_runs_total completed = %v, want 2", got)
	}
	if got := e.metric("agentrun_rate_limited_total", `reason="rate"`); got != 1 {
		t.Errorf("agentrun_rate_limited_total rate = %v, want 1", got)
	}
	if got := e.metric("agentrun_tool_calls_total", `tool="list_orders"`); got != 1 {
		t.Errorf("agentrun_tool_calls_total list_orders = %v, want 1", got)
	}
	if got := e.metric("agentrun_runs_in_flight"); got != 0 {
		t.Errorf("agentrun_runs_in_flight = %v, want 0", got)
	}
	if got := e.metric("agentrun_http_requests_total", `route="POST /v1/agents/{name}/runs"`, `code="4xx"`); got != 1 {
		t.Errorf("agentrun_http_requests_total for the 429 = %v, want 1", got)
	}
}

// The access log names routes and users, never what users wrote or their tokens.
func TestAccessLog(t *testing.T) {
	e := newEnv(t, envOptions{})
	const secretInput = "my order zebra-7731 please"
	e.run(aliceToken, secretInput, "log-conversation-id")
	e.do("GET", "/v1/conversations", "wrong-token-zz9", nil)
	e.do("GET", "/v1/agents", signJWT(t, "not-the-secret-but-long-enough-000000", nil), nil)
	e.do("GET", "/v1/nothing-here", aliceToken, nil)

	logs := e.logs.String()
	type entry struct {
		Msg, Method, Route, User, Via string
		Status                        int
	}
	var entries []entry
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var en entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		entries = append(entries, en)
	}
	find := func(route string, status int) *entry {
		for i := range entries {
			if entries[i].Msg == "request" && entries[i].Route == route && entries[i].Status == status {
				return &entries[i]
			}
		}
		t.Errorf("no access log entry for %s %d in\n%s", route, status, logs)
		return &entry{}
	}
	if en := find("POST /v1/agents/{name}/runs", 200); en.User != "alice" || en.Method != "POST" {
		t.Errorf("the run's entry = %+v, want user alice", en)
	}
	if en := find("GET /v1/conversations", 401); en.User != "" {
		t.Errorf("an unauthenticated request logged user %q", en.User)
	}
	find("/", 404)
	for _, secret := range []string{secretInput, "zebra-7731", finalAnswer, aliceToken, "wrong-token-zz9", "not-the-secret", jwtSecret, "log-conversation-id", "/v1/agents/support/runs"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
}

// --- reload ---

func TestReload(t *testing.T) {
	e := newEnv(t, envOptions{latency: 100 * time.Millisecond})
	description := func() string {
		var v struct {
			Agents []struct{ Name, Description string }
		}
		json.Unmarshal(e.do("GET", "/v1/agents", aliceToken, nil).Body, &v)
		if len(v.Agents) != 1 {
			t.Fatalf("agents = %+v", v.Agents)
		}
		return v.Agents[0].Description
	}
	old := description()

	// A broken spec: the old agent stays, the diagnostics come back.
	e.writeSpec(func(s string) string { return strings.Replace(s, "instructions:", "instructionz:", 1) })
	err := e.srv.Reload(context.Background())
	var diags spec.Diagnostics
	if !errors.As(err, &diags) || !diags.HasErrors() || !strings.Contains(err.Error(), "instructionz") {
		t.Fatalf("Reload of a broken spec = %v, want its diagnostics", err)
	}
	if got := description(); got != old {
		t.Errorf("after a failed reload the description is %q, want the old %q", got, old)
	}
	if res := e.run(aliceToken, "hi", ""); res.Result.Answer != greeting {
		t.Errorf("after a failed reload: %+v", res.Result)
	}

	// A valid change: a run in flight finishes on the old agent, new runs use the new.
	inFlight := e.startStream(context.Background(), aliceToken, map[string]any{"input": "hi"})
	defer inFlight.Body.Close()
	e.writeSpec(func(s string) string {
		s = strings.Replace(s, "description: Answers questions about the user's orders.", "description: Reloaded.", 1)
		return strings.Replace(s, "instructions: Only talk", "instructions: RELOADED-MARKER. Only talk", 1)
	})
	if err := e.srv.Reload(context.Background()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if res := checkRunStream(t, newSSEReader(inFlight.Body).all(t), 1); res.Result.Stop != "completed" || res.Result.Answer != greeting {
		t.Errorf("the run in flight during the reload ended %+v", res.Result)
	}
	if got := description(); got != "Reloaded." {
		t.Errorf("after the reload the description is %q", got)
	}
	before := len(e.model.Requests())
	e.run(aliceToken, "hi", "")
	reqs := e.model.Requests()[before:]
	if len(reqs) != 1 || !strings.Contains(messageText(reqs[0].Messages[0]), "RELOADED-MARKER") {
		t.Errorf("a run after the reload did not use the new instructions: %v", reqs)
	}
}

// A client that read the result and reconnects with its id (an EventSource does,
// when the server closes the stream) gets no duplicate: not the result again under
// a new id, which would make it reconnect forever.
func TestRunEventsAfterTheResult(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp := e.startStream(context.Background(), aliceToken, map[string]any{"input": "hi"})
	events := newSSEReader(resp.Body).all(t)
	resp.Body.Close()
	checkRunStream(t, events, 1)
	runID, resultID := resp.Header.Get("X-Agentrun-Run"), events[len(events)-1].ID
	r := e.do("GET", "/v1/runs/"+runID+"/events", aliceToken, nil, "Last-Event-ID", resultID)
	for _, ev := range newSSEReader(bytes.NewReader(r.Body)).all(t) {
		if ev.Event == "result" && ev.ID != resultID {
			t.Errorf("after Last-Event-ID %s (the result's id) the result comes again as id %s", resultID, ev.ID)
		}
	}
}
