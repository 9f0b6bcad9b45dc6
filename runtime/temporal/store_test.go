package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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
	"go.temporal.io/server/temporaltest"
)

// flakyStore is a memory store whose next commit is written and then reported
// lost (its reply never came), and whose paused-run reads can be held.
type flakyStore struct {
	*memory.Store
	mu         sync.Mutex
	loseCommit bool
	hold       chan struct{} // when set, the next PausedRun read waits on it…
	read       chan struct{} // …after saying it read
}

func (s *flakyStore) Commit(ctx context.Context, rec store.Record) error {
	err := s.Store.Commit(ctx, rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loseCommit && err == nil {
		s.loseCommit = false
		return errors.New("connection reset after the write")
	}
	return err
}

func (s *flakyStore) PausedRun(ctx context.Context, id string) (store.PausedRun, error) {
	p, err := s.Store.PausedRun(ctx, id)
	s.mu.Lock()
	hold, read := s.hold, s.read
	s.hold, s.read = nil, nil
	s.mu.Unlock()
	if hold != nil {
		close(read)
		<-hold
	}
	return p, err
}

// A run's commit is made once: one whose reply was lost is tried again, and the
// store, knowing its key, applies it once — no second copy of the exchange, no
// memory error.
func TestCommitIsMadeOnce(t *testing.T) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	desktest.Start(t)
	store := &flakyStore{Store: memory.New(), loseCommit: true}
	agent := build(t, deskSpec, "", store)
	w := newWorker(t, c, "commits", agent.Agent)
	defer w.Stop()
	res, _ := runOnTemporal(t, c, "commits", agent.Agent, runtime.Request{Input: "A1?", User: tool.User{ID: "u-1"}, Conversation: "c-1"})
	store.mu.Lock()
	lost := !store.loseCommit
	store.mu.Unlock()
	if res.Stop != runtime.StopCompleted || res.MemoryError != "" || !lost {
		t.Errorf("stop %s, memory error %q, a commit lost: %v; want completed, no error, the lost commit tried again", res.Stop, res.MemoryError, lost)
	}
	conv, _ := store.Conversation(context.Background(), "c-1", 10)
	if conv.Turns != 1 || len(conv.Messages) != 8 {
		t.Errorf("stored %d turns, %d messages; want the exchange once (1, 8)", conv.Turns, len(conv.Messages))
	}
}

// A decision stored while the run reads its paused record (woken by an
// earlier signal, finding calls undecided) is not lost, though the waiting
// run's history is long enough to continue as new.
func TestDecisionDuringAResumeIsNotLost(t *testing.T) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	desktest.Start(t)
	store := &flakyStore{Store: memory.New()}
	agent := build(t, "testdata/desk-approval.yaml", "", store)
	w := newWorker(t, c, "signals", agent.Agent, temporal.Options{Heartbeat: time.Second, ContinueAfter: 10})
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, "signals", agent.Agent, runtime.Request{Input: "A1 arrived broken", User: tool.User{ID: "u-1"}}, temporal.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := temporal.Follow(ctx, c, run, temporal.FollowOptions{ReturnPaused: true}); err != nil {
		t.Fatal(err)
	}
	hold, read := make(chan struct{}), make(chan struct{})
	store.mu.Lock()
	store.hold, store.read = hold, read
	store.mu.Unlock()
	if err := temporal.Decided(ctx, c, run.GetID()); err != nil { // nothing decided yet
		t.Fatal(err)
	}
	<-read // the run read its record: still undecided
	if _, err := runtime.Decide(ctx, store, run.GetID(), runtime.Decider{ID: "boss", Approver: true},
		runtime.DecideRequest{CallID: "call_2", Approve: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := temporal.Decided(ctx, c, run.GetID()); err != nil {
		t.Fatal(err)
	}
	close(hold)
	res, err := temporal.Follow(ctx, c, run, temporal.FollowOptions{})
	if err != nil {
		t.Fatalf("the decided run did not end: %v", err)
	}
	if res.Stop != runtime.StopCompleted {
		t.Errorf("stop %s (%s)", res.Stop, res.Detail)
	}
}

// When the caller's max_run_time ends a sub-run's model call, both runs stop
// as timeout, on Temporal as in process.
func TestSubRunTimesOutWithItsCaller(t *testing.T) {
	desktest.NewBackend(t)
	model := func() model.Model {
		return modelFunc(func(ctx context.Context, req *model.Request) (*model.Response, error) {
			if strings.Contains(req.Messages[0].Content, "pass questions on") {
				return &model.Response{Message: model.Message{Role: model.RoleAssistant,
					ToolCalls: []model.ToolCall{{ID: "d1", Name: "desk", Arguments: `{"task":"look A1 up"}`}}}, FinishReason: model.FinishToolCalls}, nil
			}
			<-ctx.Done() // the desk's model never answers in time
			return nil, ctx.Err()
		})
	}
	req := runtime.Request{Input: "A1?", User: tool.User{ID: "u-1"}}
	want, err := compileWith(t, "testdata/desk-delegate.yaml", model()).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want.Stop != runtime.StopTimeout || len(want.Steps) != 1 || want.Steps[0].Agent == nil || want.Steps[0].Agent.Stop != runtime.StopTimeout {
		t.Fatalf("in process: stop %s, steps %+v", want.Stop, want.Steps)
	}

	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	w := newWorker(t, c, "front", compileWith(t, "testdata/desk-delegate.yaml", model()))
	defer w.Stop()
	got, _ := runOnTemporal(t, c, "front", compileWith(t, "testdata/desk-delegate.yaml", nil), req)
	if got.Stop != want.Stop || got.Detail != want.Detail || len(got.Steps) != 1 || got.Steps[0].Agent == nil ||
		got.Steps[0].Agent.Stop != want.Steps[0].Agent.Stop || got.Steps[0].Result != want.Steps[0].Result {
		t.Errorf("on Temporal: %s %q %+v\nin process: %s %q %+v", got.Stop, got.Detail, got.Steps, want.Stop, want.Detail, want.Steps)
	}
}

// A run whose history grows past ContinueAfter checkpoints between two turns
// and goes on as a new execution, so no history holds all of it; it ends as
// the same run does in one process, each model call and ticket made once.
func TestLongRunContinuesAsNew(t *testing.T) {
	model, back := desktest.Start(t)
	req := runtime.Request{Input: "A1 arrived broken; and A2?", User: tool.User{ID: "u-1"}, Conversation: "c-1"}
	want, err := build(t, deskSpec, "", memory.New()).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	back.Reset()
	before := len(model.Requests())

	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	store := memory.New()
	agent := build(t, deskSpec, "", store)
	w := newWorker(t, c, "long", agent.Agent, temporal.Options{Heartbeat: time.Second, ContinueAfter: 15})
	defer w.Stop()
	run, err := temporal.Start(context.Background(), c, "long", agent.Agent, req, temporal.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := run.GetRunID()
	var seen events
	got, err := temporal.Follow(context.Background(), c, run, temporal.FollowOptions{Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	if got.Stop != want.Stop || got.Answer != want.Answer || got.Turns != want.Turns || stepsOf(got) != stepsOf(want) {
		t.Errorf("continued: %s %q turns %d\n%s\nin process: %s %q turns %d\n%s", got.Stop, got.Answer, got.Turns, stepsOf(got), want.Stop, want.Answer, want.Turns, stepsOf(want))
	}
	if n := len(model.Requests()) - before; n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}
	if _, filed, requests := back.Counts(); filed != 1 || requests != 1 {
		t.Errorf("%d tickets from %d requests, want 1 from 1", filed, requests)
	}
	conv, _ := store.Conversation(context.Background(), "c-1", 10)
	if conv.Turns != 1 || len(conv.Messages) != len(want.Messages) {
		t.Errorf("stored %d turns, %d messages; want 1, %d", conv.Turns, len(conv.Messages), len(want.Messages))
	}
	desc, err := c.DescribeWorkflowExecution(context.Background(), run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if desc.WorkflowExecutionInfo.Execution.RunId == first {
		t.Error("the run never continued as new")
	}
	// The follower saw every event once, across the executions.
	kinds := map[runtime.EventKind]int{}
	for _, e := range seen.all {
		kinds[e.Kind]++
	}
	if kinds[runtime.EventStop] != 1 || kinds[runtime.EventModelRequest] != 4 || kinds[runtime.EventToolCall] != 3 {
		t.Errorf("the follower saw %d stops, %d model requests, %d tool calls; want 1, 4, 3", kinds[runtime.EventStop], kinds[runtime.EventModelRequest], kinds[runtime.EventToolCall])
	}
}

// The knowledge stages run on Temporal as in process: an FAQ entry answers at
// once from the cache, and a question it does not cover is answered with the
// retrieved passages — the same outcome, passages and answer.
func TestKnowledgeOnTemporal(t *testing.T) {
	const shop = "../../examples/agents/shop-support.yaml"
	agent := func() *agentrun.Agent {
		s, err := agentrun.Load(shop)
		if err != nil {
			t.Fatal(err)
		}
		a, err := agentrun.Build(context.Background(), s, agentrun.Options{Model: "test", SharedStore: memory.New(), Index: filepath.Join(t.TempDir(), "knowledge.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	local, remote := agent(), agent()
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	w := newWorker(t, c, "shop", remote.Agent)
	defer w.Stop()
	for _, q := range []struct {
		input string
		cache runtime.CacheOutcome
	}{{"配送费多少钱？", runtime.CacheHitOutcome}, {"Can I get a new coupon if mine expired?", runtime.CacheMissOutcome}} {
		req := runtime.Request{Input: q.input, User: tool.User{ID: "u-1"}}
		want, err := local.Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := runOnTemporal(t, c, "shop", local.Agent, req)
		if want.Cache != q.cache || q.cache == runtime.CacheMissOutcome && len(want.Retrieved) == 0 {
			t.Fatalf("%s: in process the cache says %s (want %s), %d passages", q.input, want.Cache, q.cache, len(want.Retrieved))
		}
		if got.Cache != want.Cache || got.Answer != want.Answer || got.Stop != want.Stop || sources(got) != sources(want) {
			t.Errorf("%s: on Temporal %s %s %q [%s]; in process %s %s %q [%s]", q.input, got.Stop, got.Cache, got.Answer, sources(got),
				want.Stop, want.Cache, want.Answer, sources(want))
		}
	}
}

func sources(r *runtime.Result) string {
	var out []string
	for _, p := range r.Retrieved {
		out = append(out, fmt.Sprintf("%s:%d", p.Source, p.StartLine))
	}
	return strings.Join(out, " ")
}

// A spec workflow — parallel branches, for_each, a model step — gives the
// same steps and answer on Temporal as in process.
func TestSpecWorkflowOnTemporal(t *testing.T) {
	desktest.NewBackend(t)
	const digest = "testdata/desk-digest.yaml"
	summary := func() model.Model {
		return offline.NewScript("digest", []offline.ScriptTurn{{Text: "Five orders, all delivered."}})
	}
	req := runtime.Request{Input: "my orders?", User: tool.User{ID: "u-1"}}
	want, err := compileWith(t, digest, summary()).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want.Stop != runtime.StopCompleted || len(want.Steps) != 5 {
		t.Fatalf("in process: %s (%s), %d steps", want.Stop, want.Detail, len(want.Steps))
	}
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.GetDefaultClient()
	w := newWorker(t, c, "digest", compileWith(t, digest, summary()))
	defer w.Stop()
	got, run := runOnTemporal(t, c, "digest", compileWith(t, digest, nil), req)
	if got.Stop != want.Stop || got.Answer != want.Answer || stepsOf(got) != stepsOf(want) {
		t.Errorf("on Temporal: %s %q\n%s\nin process: %s %q\n%s", got.Stop, got.Answer, stepsOf(got), want.Stop, want.Answer, stepsOf(want))
	}
	hist, err := temporal.History(context.Background(), c, run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	if err := temporal.Replay(hist, compileWith(t, digest, summary())); err != nil {
		t.Errorf("replay: %v", err)
	}
}
