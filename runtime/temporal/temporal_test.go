package temporal_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/runtime/tool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "record the histories under testdata/histories anew")

// deskSpec looks orders up and files tickets.
const deskSpec = "testdata/desk.yaml"

// build assembles the desk agent against the fake model, with store.
func build(t *testing.T, path string, model string, store store.Store) *agentrun.Agent {
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

func newWorker(t testing.TB, c client.Client, queue string, a *runtime.Agent, opts ...temporal.Options) worker.Worker {
	t.Helper()
	w := worker.New(c, queue, worker.Options{})
	o := temporal.Options{Heartbeat: time.Second}
	if len(opts) > 0 {
		o = opts[0]
	}
	if err := temporal.Register(w, []*runtime.Agent{a}, o); err != nil {
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
	model, back := desktest.Start(t)
	path := deskSpec
	store := memory.New()
	const queue = "desk"

	w1 := newWorker(t, c, queue, build(t, path, "", store).Agent)
	stopped := make(chan struct{})
	back.OnFirstTicket(func() {
		go func() { w1.Stop(); close(stopped) }()
		<-stopped // answer only once the worker is gone: nobody hears it
	})

	agent := build(t, path, "", store)
	run, err := temporal.Start(context.Background(), c, queue, agent.Agent, runtime.Request{Input: "A1 arrived broken; and A2?", User: tool.User{ID: "u-1"}, Conversation: "c-1"}, temporal.StartOptions{})
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
	res, err := temporal.Follow(ctx, c, run, temporal.FollowOptions{Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCompleted || res.Answer != desktest.Answer {
		t.Fatalf("stop %s, answer %q (%s)", res.Stop, res.Answer, res.Detail)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4: each call once", n)
	}
	lookups, filed, requests := back.Counts()
	if filed != 1 || requests != 2 {
		t.Errorf("%d tickets filed from %d requests; want 1 from 2 (the retry with the same key)", filed, requests)
	}
	if keys := back.Keys(); len(keys) != 1 || keys[0] != run.GetID()+"/2/0/call_2" {
		t.Errorf("idempotency keys %q, want %s/2/0/call_2 (turn 2, the response's first call)", keys, run.GetID())
	}
	if lookups != 2 {
		t.Errorf("%d lookups, want 2", lookups)
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

// The recorded histories replay on the current code: a change that makes a
// run decide otherwise than it did when recorded fails here. (go test -update
// records them anew.)
func TestReplayRecordedHistories(t *testing.T) {
	t.Setenv("BACKEND", "http://127.0.0.1:9") // a replay calls nothing
	t.Setenv("LLM_BASE_URL", "http://127.0.0.1:9")
	t.Setenv("LLM_API_KEY", "sk-test")
	files, _ := filepath.Glob("testdata/histories/*.json")
	if len(files) == 0 {
		t.Fatal("no recorded histories under testdata/histories")
	}
	agent := build(t, deskSpec, "", memory.New())
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := temporal.ReadHistory(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := temporal.Replay(hist, agent.Agent); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}

	// The replay can fail: the same agent with a lower max_turns stops where the
	// recorded run went on.
	s, err := agentrun.Load(deskSpec)
	if err != nil {
		t.Fatal(err)
	}
	s.Guards.MaxTurns = 1
	strict, diags := runtime.Compile(s, runtime.Options{Tools: agentrun.Registry(), Model: offline.Test{}, Store: memory.New(), Digest: agent.Digest()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	data, _ := os.ReadFile(files[0])
	hist, _ := temporal.ReadHistory(data)
	if err := temporal.Replay(hist, strict); err == nil {
		t.Errorf("%s replayed on an agent that decides otherwise", files[0])
	}
}

// A run whose call needs approval waits as a workflow; the decision, stored
// and signalled, resumes it on the worker, and the approved call runs once.
// The same when the waiting run continued as new first (a history past
// ContinueAfter events).
func TestApprovalOnTemporal(t *testing.T) {
	for _, continueAfter := range []int{0, 10} {
		t.Run(fmt.Sprintf("continue_after_%d", continueAfter), func(t *testing.T) { approvalOnTemporal(t, continueAfter) })
	}
}

func approvalOnTemporal(t *testing.T, continueAfter int) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	model, back := desktest.Start(t)
	st := memory.New()
	agent := build(t, "testdata/desk-approval.yaml", "", st)
	w := newWorker(t, c, "approvals", agent.Agent, temporal.Options{Heartbeat: time.Second, ContinueAfter: continueAfter})
	defer w.Stop()
	ctx := context.Background()
	run, err := temporal.Start(ctx, c, "approvals", agent.Agent, runtime.Request{Input: "A1 arrived broken", User: tool.User{ID: "u-1"}, Conversation: "c-9"}, temporal.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := run.GetRunID() // Get follows the runs a workflow continued as: it changes
	paused, err := temporal.Follow(ctx, c, run, temporal.FollowOptions{ReturnPaused: true})
	if err != nil {
		t.Fatal(err)
	}
	if paused.Stop != runtime.StopAwaitingApproval || len(paused.Pending) != 1 || paused.Pending[0].CallID != "call_2" {
		t.Fatalf("not paused on call_2: %s %+v", paused.Stop, paused.Pending)
	}
	if _, err := runtime.Decide(ctx, st, run.GetID(), runtime.Decider{ID: "boss", Approver: true},
		runtime.DecideRequest{CallID: "call_2", Approve: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	from, err := temporal.EventCount(ctx, c, run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	if err := temporal.Decided(ctx, c, run.GetID()); err != nil {
		t.Fatal(err)
	}
	var seen events
	res, err := temporal.Follow(ctx, c, run, temporal.FollowOptions{From: from, Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 3 || res.Steps[1].Decision == nil || !res.Steps[1].Decision.Approved {
		t.Fatalf("stop %s (%s), %d steps", res.Stop, res.Detail, len(res.Steps))
	}
	if _, filed, requests := back.Counts(); filed != 1 || requests != 1 {
		t.Errorf("%d tickets from %d requests, want 1 from 1", filed, requests)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}
	if len(seen.all) == 0 || seen.all[0].Kind == runtime.EventModelRequest && seen.all[0].Turn == 1 {
		t.Errorf("following from %d showed the run from its start again", from)
	}
	if _, err := st.PausedRun(ctx, run.GetID()); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("the paused record outlived the run: %v", err)
	}
	if continueAfter > 0 {
		desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), "")
		if err != nil {
			t.Fatal(err)
		}
		if desc.WorkflowExecutionInfo.Execution.RunId == first {
			t.Errorf("the waiting run did not continue as new: run %s, latest %s", first, desc.WorkflowExecutionInfo.Execution.RunId)
		}
	}
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
	if *update {
		data, err := temporal.MarshalHistory(hist)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "histories", t.Name()+".json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The same script gives the same steps, answer and stop reason in process and
// on Temporal.
func TestSameRunInProcessAndOnTemporal(t *testing.T) {
	back := desktest.NewBackend(t)
	path := deskSpec
	script := func() model.Model {
		return offline.NewScript("desk", []offline.ScriptTurn{
			{ToolCalls: []offline.ScriptToolCall{{ID: "c1", Name: "lookup", Arguments: map[string]any{"order": "A1"}},
				{ID: "c2", Name: "lookup", Arguments: map[string]any{"order": "A2"}}}},
			{ToolCalls: []offline.ScriptToolCall{{ID: "c3", Name: "create_ticket", Arguments: map[string]any{"order": "A1", "text": "broken"}},
				{ID: "c4", Name: "lookup", Arguments: `{"order": 7}`}, {ID: "c5", Name: "nope", Arguments: map[string]any{}}}},
			{ToolCalls: []offline.ScriptToolCall{{ID: "c6", Name: "lookup", Arguments: map[string]any{"order": "A1"}}}},
			{Text: "Done: T-1."},
		})
	}
	req := runtime.Request{Input: "file it", User: tool.User{ID: "u-1"}}
	local := compileWith(t, path, script())
	want, err := local.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	back.Reset() // the same tickets again

	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	w := newWorker(t, c, "parity", compileWith(t, path, script()))
	defer w.Stop()
	got, run := runOnTemporal(t, c, "parity", local, req)
	if got.Stop != want.Stop || got.Answer != want.Answer || got.Detail != want.Detail || got.Turns != want.Turns || got.ToolRounds != want.ToolRounds {
		t.Errorf("on Temporal: %s %q %q turns %d rounds %d; in process: %s %q %q turns %d rounds %d",
			got.Stop, got.Answer, got.Detail, got.Turns, got.ToolRounds, want.Stop, want.Answer, want.Detail, want.Turns, want.ToolRounds)
	}
	if g, w := stepsOf(got), stepsOf(want); g != w {
		t.Errorf("steps differ:\non Temporal:\n%s\nin process:\n%s", g, w)
	}
	// A worker refuses a run started on another spec under the agent's name.
	s, err := agentrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := runtime.Compile(s, runtime.Options{Tools: agentrun.Registry(), Digest: "0123456789abcdef"})
	run, err = temporal.Start(context.Background(), c, "parity", other, req, temporal.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := temporal.Follow(context.Background(), c, run, temporal.FollowOptions{}); err == nil || !strings.Contains(err.Error(), "started with 0123456789abcdef") {
		t.Errorf("a run of another spec: %v", err)
	}
	// The script's last call repeats the first: duplicate_calls stops the run.
	if len(want.Steps) != 5 || want.Stop != runtime.StopDuplicateCall {
		t.Errorf("in process: %d steps, stop %s; want 5, duplicate_call", len(want.Steps), want.Stop)
	}
}

func compileWith(t testing.TB, path string, m model.Model) *runtime.Agent {
	t.Helper()
	s, err := agentrun.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, diags := runtime.Compile(s, runtime.Options{Tools: agentrun.Registry(), Model: m, Digest: agentrun.SpecDigest(s)})
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

// A 300 KB tool output travels by reference: the history holds no payload near
// its size, the model gets all of it, and the run's result has it.
func TestLargePayloadsTravelByReference(t *testing.T) {
	desktest.NewBackend(t)
	store := memory.New()
	codec := &temporal.Codec{Blobs: store, Limit: 16 << 10}
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.NewClientWithOptions(client.Options{DataConverter: codec.DataConverter()})
	var got atomic.Int64
	m := offline.NewScript("desk", []offline.ScriptTurn{
		{ToolCalls: []offline.ScriptToolCall{{ID: "m1", Name: "manual", Arguments: map[string]any{}}}},
		{Text: "Within a day."},
	})
	sized := modelFunc(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		for _, m := range req.Messages {
			if m.Role == model.RoleTool {
				got.Store(int64(len(m.Content)))
			}
		}
		return m.Complete(ctx, req)
	})
	w := newWorker(t, c, "large", compileWith(t, deskSpec, sized))
	defer w.Stop()
	res, run := runOnTemporal(t, c, "large", compileWith(t, deskSpec, nil), runtime.Request{Input: "how fast?"})
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 1 || res.Steps[0].Result != desktest.Manual {
		t.Fatalf("stop %s (%s), %d steps", res.Stop, res.Detail, len(res.Steps))
	}
	if got.Load() != int64(len(desktest.Manual)) {
		t.Errorf("the model got a tool result of %d bytes, want %d", got.Load(), len(desktest.Manual))
	}
	hist, err := temporal.History(context.Background(), c, run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, e := range hist.Events {
		if n := proto.Size(e); n > 32<<10 {
			t.Errorf("history event %d (%s) holds %d bytes", e.EventId, e.EventType, n)
		}
		if data, _ := proto.Marshal(e); bytes.Contains(data, []byte("agentrun/blob")) {
			refs++
		}
	}
	if refs < 2 { // the tool's output, the model request holding it, the result
		t.Errorf("%d events hold payloads by reference, want at least 2", refs)
	}
}

type modelFunc func(ctx context.Context, req *model.Request) (*model.Response, error)

func (f modelFunc) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	return f(ctx, req)
}

// runOnTemporal starts the run as a workflow on the queue and waits for its
// result.
func runOnTemporal(t testing.TB, c client.Client, queue string, a *runtime.Agent, req runtime.Request) (*runtime.Result, client.WorkflowRun) {
	t.Helper()
	run, err := temporal.Start(context.Background(), c, queue, a, req, temporal.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := temporal.Follow(context.Background(), c, run, temporal.FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res, run
}
