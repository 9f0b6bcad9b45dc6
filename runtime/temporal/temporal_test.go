package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

// deskSpec files tickets: lookup reads, create_ticket writes (an http POST that
// carries the call's idempotency key).
const deskSpec = `version: 1
name: desk
model:
  name: gpt-test
  base_url: ${LLM_BASE_URL:-}
  api_key_env: LLM_API_KEY
instructions: You look orders up and file tickets.
tools:
  - name: lookup
    description: Look an order up.
    parameters:
      type: object
      properties: {order: {type: string}}
      required: [order]
    http:
      method: GET
      url: ${BACKEND}/orders/{{ args.order }}
  - name: create_ticket
    description: File a ticket about an order.
    parameters:
      type: object
      properties: {order: {type: string}, text: {type: string}}
      required: [order, text]
    http:
      method: POST
      url: ${BACKEND}/tickets
      body: {order: "{{ args.order }}", text: "{{ args.text }}"}
guards:
  max_turns: 8
`

// backend is the desk's service. A ticket is filed once per idempotency key: a
// retried call gets the first call's answer.
type backend struct {
	mu       sync.Mutex
	lookups  int
	filed    map[string]string // key → ticket
	requests int               // ticket requests, retries included
	// onTicket, when set, runs before a ticket request is answered.
	onTicket func()
	srv      *httptest.Server
}

func newBackend(t *testing.T) *backend {
	b := &backend{filed: map[string]string{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/orders/"):
			b.mu.Lock()
			b.lookups++
			b.mu.Unlock()
			fmt.Fprintf(w, `{"order":%q,"status":"delivered"}`, strings.TrimPrefix(r.URL.Path, "/orders/"))
		case r.URL.Path == "/tickets":
			key := r.Header.Get("Idempotency-Key")
			b.mu.Lock()
			b.requests++
			ticket, done := b.filed[key]
			if !done {
				ticket = fmt.Sprintf("T-%d", len(b.filed)+1)
				b.filed[key] = ticket
			}
			hook := b.onTicket
			b.onTicket = nil
			b.mu.Unlock()
			if hook != nil {
				hook()
			}
			fmt.Fprintf(w, `{"ticket":%q}`, ticket)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(b.srv.Close)
	t.Setenv("BACKEND", b.srv.URL)
	return b
}

// deskModel looks A1 up, files a ticket, looks A2 up and answers: four calls.
func deskModel(req openaitest.Request) openaitest.Reply {
	results := 0
	for _, m := range req.Messages {
		if m["role"] == "tool" {
			results++
		}
	}
	switch results {
	case 0:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"order":"A1"}`}}}
	case 1:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_2", Name: "create_ticket", Arguments: `{"order":"A1","text":"Arrived broken"}`}}}
	case 2:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_3", Name: "lookup", Arguments: `{"order":"A2"}`}}}
	}
	return openaitest.Reply{Content: "Filed a ticket for A1; A2 was delivered."}
}

func writeSpec(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "desk.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// build assembles the desk agent against the fake model, with store.
func build(t *testing.T, path string, model string, store runtime.Store) *agentrun.Agent {
	t.Helper()
	s, err := agentrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agentrun.Build(context.Background(), s, agentrun.Options{Model: model, SharedStore: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func newWorker(t *testing.T, c client.Client, queue string, a *runtime.Agent) worker.Worker {
	t.Helper()
	w := worker.New(c, queue, worker.Options{})
	if err := temporal.Register(w, []*runtime.Agent{a}, temporal.Options{Heartbeat: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}

type events struct {
	mu  sync.Mutex
	all []runtime.Event
}

func (e *events) Observe(ev runtime.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// The worker running a run stops while the run's third tool call is in flight
// — after the second of its four model calls; a new worker completes the run.
// Every model call ran once, and the ticket was filed once: the retried call
// carried the same idempotency key.
func TestWorkerLostMidRun(t *testing.T) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	model := openaitest.New(t, deskModel)
	t.Setenv("LLM_BASE_URL", model.URL)
	t.Setenv("LLM_API_KEY", "sk-test")
	back := newBackend(t)
	path := writeSpec(t, deskSpec)
	store := memory.New()
	const queue = "desk"

	w1 := newWorker(t, c, queue, build(t, path, "", store).Agent)
	stopped := make(chan struct{})
	back.mu.Lock()
	back.onTicket = func() {
		go func() { w1.Stop(); close(stopped) }()
		<-stopped // answer only once the worker is gone: nobody hears it
	}
	back.mu.Unlock()

	agent := build(t, path, "", store)
	run, err := temporal.Start(context.Background(), c, queue, agent.Agent, runtime.Request{Input: "A1 arrived broken; and A2?", User: runtime.User{ID: "u-1"}, Conversation: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("the first worker was never stopped")
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("the first worker made %d model calls, want 2", n)
	}
	w2 := newWorker(t, c, queue, build(t, path, "", store).Agent)
	defer w2.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen events
	res, err := temporal.Follow(ctx, c, run, &seen, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCompleted || res.Answer != "Filed a ticket for A1; A2 was delivered." {
		t.Fatalf("stop %s, answer %q (%s)", res.Stop, res.Answer, res.Detail)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4: each call once", n)
	}
	back.mu.Lock()
	defer back.mu.Unlock()
	if len(back.filed) != 1 || back.requests != 2 {
		t.Errorf("%d tickets filed from %d requests; want 1 from 2 (the retry with the same key)", len(back.filed), back.requests)
	}
	for key := range back.filed {
		if want := run.GetID() + "/call_2"; key != want {
			t.Errorf("idempotency key %q, want %q", key, want)
		}
	}
	if back.lookups != 2 {
		t.Errorf("%d lookups, want 2", back.lookups)
	}
	// The ticket's answer reached the model; the store has the exchange.
	if got := res.Steps[1].Result; !strings.Contains(got, `"T-1"`) {
		t.Errorf("create_ticket's result %q", got)
	}
	conv, err := store.Conversation(context.Background(), "c-1", 10)
	if err != nil || len(conv.Messages) != 8 {
		t.Errorf("stored %d messages (%v), want 8", len(conv.Messages), err)
	}
	stops := 0
	for _, e := range seen.all {
		if e.Kind == runtime.EventStop && e.Run == run.GetID() {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("the starter got %d events, %d of them the run's stop; want 1 stop", len(seen.all), stops)
	}

	// The history replays: the workflow is deterministic.
	replayHistory(t, c, run.GetID(), build(t, path, "", memory.New()).Agent)
}

func replayHistory(t *testing.T, c client.Client, id string, a *runtime.Agent) {
	t.Helper()
	hist, err := temporal.History(context.Background(), c, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := temporal.Replay(hist, a); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if dir := os.Getenv("AGENTRUN_SAVE_HISTORY"); dir != "" {
		data, _ := json.Marshal(hist)
		os.WriteFile(filepath.Join(dir, t.Name()+".json"), data, 0o644)
	}
}

// The same script gives the same steps, answer and stop reason in process and
// on Temporal.
func TestSameRunInProcessAndOnTemporal(t *testing.T) {
	back := newBackend(t)
	path := writeSpec(t, deskSpec)
	script := func() runtime.Model {
		return offline.NewScript("desk", []offline.ScriptTurn{
			{ToolCalls: []offline.ScriptToolCall{{ID: "c1", Name: "lookup", Arguments: map[string]any{"order": "A1"}},
				{ID: "c2", Name: "lookup", Arguments: map[string]any{"order": "A2"}}}},
			{ToolCalls: []offline.ScriptToolCall{{ID: "c3", Name: "create_ticket", Arguments: map[string]any{"order": "A1", "text": "broken"}},
				{ID: "c4", Name: "lookup", Arguments: `{"order": 7}`}, {ID: "c5", Name: "nope", Arguments: map[string]any{}}}},
			{ToolCalls: []offline.ScriptToolCall{{ID: "c6", Name: "lookup", Arguments: map[string]any{"order": "A1"}}}},
			{Text: "Done: T-1."},
		})
	}
	req := runtime.Request{Input: "file it", User: runtime.User{ID: "u-1"}}
	local := compileWith(t, path, script())
	want, err := local.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	back.mu.Lock()
	back.filed = map[string]string{} // the same tickets again
	back.mu.Unlock()

	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	w := newWorker(t, c, "parity", compileWith(t, path, script()))
	defer w.Stop()
	run, err := temporal.Start(context.Background(), c, "parity", local, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := temporal.Follow(context.Background(), c, run, nil, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stop != want.Stop || got.Answer != want.Answer || got.Detail != want.Detail || got.Turns != want.Turns || got.ToolRounds != want.ToolRounds {
		t.Errorf("on Temporal: %s %q %q turns %d rounds %d; in process: %s %q %q turns %d rounds %d",
			got.Stop, got.Answer, got.Detail, got.Turns, got.ToolRounds, want.Stop, want.Answer, want.Detail, want.Turns, want.ToolRounds)
	}
	if g, w := stepsOf(got), stepsOf(want); g != w {
		t.Errorf("steps differ:\non Temporal:\n%s\nin process:\n%s", g, w)
	}
	// The script's last call repeats the first: duplicate_calls stops the run.
	if len(want.Steps) != 5 || want.Stop != runtime.StopDuplicateCall {
		t.Errorf("in process: %d steps, stop %s; want 5, duplicate_call", len(want.Steps), want.Stop)
	}
}

func compileWith(t *testing.T, path string, m runtime.Model) *runtime.Agent {
	t.Helper()
	s, err := agentrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, diags := runtime.Compile(s, runtime.Options{Tools: agentrun.Registry(), Model: m, Version: "v1"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return a
}

// stepsOf is what must not differ between engines: everything but durations.
func stepsOf(r *runtime.Result) string {
	var b strings.Builder
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "%d %s %s %s %s %s %q\n", s.Turn, s.Tool, s.CallID, s.Arguments, s.Outcome, s.Refusal, s.Result)
	}
	return b.String()
}
