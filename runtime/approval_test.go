package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const approvalSpec = `
version: 1
name: shop
instructions: Help.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect:
      orders: map(result.orders, .number)
      large: map(filter(result.orders, .amount > 100), .number)
  - name: detail
    parameters: {type: object, properties: {number: {type: string}}, required: [number]}
    http: {url: "https://example.com/d"}
  - name: cancel
    parameters: {type: object, properties: {number: {type: string}}, required: [number]}
    bind: {user_id: user.id}
    http: {url: "https://example.com/c", method: POST}
    accept: args.number in seen("orders")
    approval:
      when: args.number in seen("large")
      message: "Cancel order {{ args.number }}?"
approval: {timeout: 1h}
memory:
  facts:
    from_tools:
      - {on: cancel, append: {notes: '"cancelled " + args.number'}}
guards: {max_turns: 6, fallback: FALLBACK}
`

// clock is a test's time, moved on by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type approvalFixture struct {
	store store.Store
	model *recorder
	tools map[string]*funcTool
	clock *clock
	agent *runtime.Agent
}

func (f *approvalFixture) paused() store.PausedRuns { return f.agent.PausedRuns() }

// newApprovalFixture: the model lists the orders, then asks for a detail and the
// cancellation of order A2 (amount 268, above the threshold) in one response, then
// answers with the text given.
func newApprovalFixture(t *testing.T, store store.Store, extra ...offline.ScriptTurn) *approvalFixture {
	t.Helper()
	f := &approvalFixture{store: store, clock: &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}}
	f.tools = map[string]*funcTool{
		"list_orders": {fn: func(context.Context, tool.Input) (string, error) {
			return `{"orders":[{"number":"A1","amount":20},{"number":"A2","amount":268}]}`, nil
		}},
		"detail": echo(),
		"cancel": echo(),
	}
	turns := append([]offline.ScriptTurn{
		calls(tc("list_orders", map[string]any{})),
		{ToolCalls: []offline.ScriptToolCall{{ID: "call_d", Name: "detail", Arguments: map[string]any{"number": "A2"}},
			{ID: "call_c", Name: "cancel", Arguments: map[string]any{"number": "A2"}}}},
	}, extra...)
	f.model = script(turns...)
	f.agent = f.compile(t)
	return f
}

func (f *approvalFixture) compile(t *testing.T) *runtime.Agent {
	return compileWith(t, approvalSpec, nil, runtime.Options{Model: f.model, Store: f.store, Now: f.clock.Now}, f.tools)
}

func (f *approvalFixture) start(t *testing.T, req runtime.Request) *runtime.Result {
	t.Helper()
	req.Input = "cancel my big order"
	if req.User.ID == "" {
		req.User = tool.User{ID: "u-1"}
	}
	req.Conversation = "c-1"
	res, err := f.agent.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var owner = runtime.Decider{ID: "u-1"}

func decide(t *testing.T, f *approvalFixture, runID string, d runtime.DecideRequest) *runtime.Paused {
	t.Helper()
	p, err := runtime.Decide(context.Background(), f.paused(), runID, owner, d, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func roles(msgs []model.Message) string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role)
		if m.ToolCallID != "" {
			s += "(" + m.ToolCallID + ")"
		}
		for _, c := range m.ToolCalls {
			s += "[" + c.ID + "]"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// A call that needs approval waits while the others of its response run; the
// approved call runs once on resume, and the exchange is stored whole, in order.
func TestApprovalPauseApproveResume(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("Order A2 is cancelled."))
	var requested []runtime.Event
	res := f.start(t, runtime.Request{Observer: runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventApprovalRequested {
			requested = append(requested, e)
		}
	})})
	if res.Stop != runtime.StopAwaitingApproval || res.Answer != "" || res.RunID == "" {
		t.Fatalf("stop %s, answer %q, run %q", res.Stop, res.Answer, res.RunID)
	}
	if len(res.Pending) != 1 || res.Pending[0].CallID != "call_c" || res.Pending[0].Message != "Cancel order A2?" ||
		res.Pending[0].Arguments != `{"number":"A2"}` || len(res.Pending[0].ArgsHash) != 64 {
		t.Fatalf("pending %+v", res.Pending)
	}
	if len(requested) != 1 || strings.Contains(requested[0].Args, "u-1") {
		t.Fatalf("approval events %+v: one, without the bound user id", requested)
	}
	if got := [3]int32{f.tools["list_orders"].calls.Load(), f.tools["detail"].calls.Load(), f.tools["cancel"].calls.Load()}; got != [3]int32{1, 1, 0} {
		t.Fatalf("calls before the decision: %v", got)
	}
	conv, _ := f.store.Conversation(context.Background(), "c-1", 10)
	if len(conv.Messages) != 0 {
		t.Fatalf("a paused run is not a completed exchange, yet history has %s", roles(conv.Messages))
	}
	facts, _ := f.store.Facts(context.Background(), "u-1")
	if len(facts) != 0 {
		t.Fatalf("facts before the run ends: %v", facts)
	}

	// Another process: a new agent on the same store.
	f.agent = f.compile(t)
	p := decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true, ArgsHash: res.Pending[0].ArgsHash})
	if len(p.Undecided()) != 0 || !p.Approvals[0].Decision.Approved || p.Approvals[0].Decision.By != "u-1" {
		t.Fatalf("after the decision: %+v", p)
	}
	out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil {
		t.Fatal(err)
	}
	if out.Stop != runtime.StopCompleted || out.Answer != "Order A2 is cancelled." || out.Turns != 3 {
		t.Fatalf("resumed: stop %s answer %q turns %d", out.Stop, out.Answer, out.Turns)
	}
	if p := out.Prior; p == nil || p.Steps != 1 || p.Usage != res.Usage || out.Usage.TotalTokens <= res.Usage.TotalTokens {
		t.Fatalf("prior %+v, usage at the pause %+v, now %+v", out.Prior, res.Usage, out.Usage)
	}
	if got := [3]int32{f.tools["list_orders"].calls.Load(), f.tools["detail"].calls.Load(), f.tools["cancel"].calls.Load()}; got != [3]int32{1, 1, 1} {
		t.Fatalf("calls after the decision: %v (each exactly once)", got)
	}
	want := "user assistant[call_1_1] tool(call_1_1) assistant[call_d][call_c] tool(call_d) tool(call_c) assistant"
	if got := roles(out.Messages); got != want {
		t.Fatalf("exchange:\n got %s\nwant %s", got, want)
	}
	conv, _ = f.store.Conversation(context.Background(), "c-1", 10)
	if got := roles(conv.Messages); got != want {
		t.Fatalf("stored history:\n got %s\nwant %s", got, want)
	}
	if d := out.Steps[2].Decision; out.Steps[2].Tool != "cancel" || d == nil || !d.Approved {
		t.Fatalf("steps %+v", out.Steps)
	}
	facts, _ = f.store.Facts(context.Background(), "u-1")
	if valueOf(facts, "notes") != "cancelled A2" {
		t.Fatalf("facts %v", facts)
	}
	// The model's last request had both results, in call order.
	last := f.model.requests[len(f.model.requests)-1].Messages
	if got := roles(last[len(last)-3:]); got != "assistant[call_d][call_c] tool(call_d) tool(call_c)" {
		t.Fatalf("the model saw %s", got)
	}

	// The run is over: neither a decision nor a resume finds it, and nothing runs again.
	if _, err := runtime.Decide(context.Background(), f.paused(), res.RunID, owner, runtime.DecideRequest{CallID: "call_c", Approve: true}, f.clock.Now()); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("a second decision: %v", err)
	}
	if _, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("a second resume: %v", err)
	}
	if n := f.tools["cancel"].calls.Load(); n != 1 {
		t.Fatalf("cancel ran %d times", n)
	}
}

// A rejection reaches the model with who and why (the user as "the user", never
// their id); the tool never runs.
func TestApprovalReject(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("I did not cancel it."))
	res := f.start(t, runtime.Request{})
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Reason: "the courier is already on the way"})
	out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil {
		t.Fatal(err)
	}
	if out.Stop != runtime.StopCompleted || f.tools["cancel"].calls.Load() != 0 {
		t.Fatalf("stop %s, cancel ran %d times", out.Stop, f.tools["cancel"].calls.Load())
	}
	step := out.Steps[len(out.Steps)-1]
	if step.Outcome != runtime.OutcomeRejected || step.Decision == nil || step.Decision.Approved {
		t.Fatalf("step %+v", step)
	}
	last := f.model.requests[len(f.model.requests)-1].Messages
	text := last[len(last)-1].Content
	if !strings.Contains(text, "the user rejected it") || !strings.Contains(text, "the courier is already on the way") || strings.Contains(text, "u-1") {
		t.Fatalf("the model was told %q", text)
	}
	facts, _ := f.store.Facts(context.Background(), "u-1")
	if valueOf(facts, "notes") != "" {
		t.Fatalf("a rejected call wrote facts: %v", facts)
	}
}

// Decisions are keyed by call id, made once, on the arguments shown, by the run's
// user or an approver, and only before the approvals expire.
func TestApprovalDecisionRules(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("done"))
	res := f.start(t, runtime.Request{})
	ctx, now := context.Background(), f.clock.Now()
	for _, c := range []struct {
		name string
		who  runtime.Decider
		d    runtime.DecideRequest
		want error
	}{
		{"another user", runtime.Decider{ID: "u-2"}, runtime.DecideRequest{CallID: "call_c", Approve: true}, store.ErrRunNotFound},
		{"nobody", runtime.Decider{}, runtime.DecideRequest{CallID: "call_c", Approve: true}, store.ErrRunNotFound},
		{"a call that does not wait", owner, runtime.DecideRequest{CallID: "call_d", Approve: true}, runtime.ErrCallNotFound},
		{"other arguments", owner, runtime.DecideRequest{CallID: "call_c", Approve: true, ArgsHash: strings.Repeat("0", 64)}, runtime.ErrArgsChanged},
		{"an approver", runtime.Decider{ID: "ops", Approver: true}, runtime.DecideRequest{CallID: "call_c", Approve: true}, nil},
		{"twice", owner, runtime.DecideRequest{CallID: "call_c"}, runtime.ErrAlreadyDecided},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := runtime.Decide(ctx, f.paused(), res.RunID, c.who, c.d, now)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if _, err := f.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: runtime.Decider{ID: "u-2"}}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("another user resumed: %v", err)
	}
	out, err := f.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil || out.Stop != runtime.StopCompleted {
		t.Fatalf("resume: %v %+v", err, out)
	}
	last := f.model.requests[len(f.model.requests)-1].Messages
	if text := last[len(last)-1].Content; !strings.Contains(text, "{") || strings.Contains(text, "Rejected") {
		t.Fatalf("approved by an approver, the model saw %q", text)
	}
}

// Expired approvals follow on_timeout without a decision: reject goes on with the
// model told; stop ends the run. Nothing waits for a decision that never comes.
func TestApprovalExpiry(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("Nobody approved it, so it stays."))
	res := f.start(t, runtime.Request{})
	ctx := context.Background()
	if _, err := f.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: owner}); !errors.Is(err, runtime.ErrUndecided) {
		t.Fatalf("resume before a decision: %v", err)
	}
	f.clock.add(time.Hour)
	if _, err := runtime.Decide(ctx, f.paused(), res.RunID, owner, runtime.DecideRequest{CallID: "call_c", Approve: true}, f.clock.Now()); !errors.Is(err, runtime.ErrApprovalExpired) {
		t.Fatalf("decision after expiry: %v", err)
	}
	expired, err := runtime.ListPaused(ctx, f.paused(), store.PausedQuery{ExpiresBefore: f.clock.Now().Add(time.Second)})
	if err != nil || len(expired) != 1 || expired[0].RunID != res.RunID {
		t.Fatalf("expired runs: %v %+v", err, expired)
	}
	out, err := f.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: runtime.Decider{ID: "agentrun", Approver: true}})
	if err != nil {
		t.Fatal(err)
	}
	step := out.Steps[len(out.Steps)-1]
	if out.Stop != runtime.StopCompleted || step.Outcome != runtime.OutcomeRejected || !step.Decision.Expired || f.tools["cancel"].calls.Load() != 0 {
		t.Fatalf("stop %s, step %+v, cancel ran %d", out.Stop, step, f.tools["cancel"].calls.Load())
	}

	g := newApprovalFixture(t, memory.New())
	g.agent = compileWith(t, strings.Replace(approvalSpec, "approval: {timeout: 1h}", "approval: {timeout: 1h, on_timeout: stop}", 1), nil,
		runtime.Options{Model: g.model, Store: g.store, Now: g.clock.Now}, g.tools)
	res = g.start(t, runtime.Request{})
	g.clock.add(2 * time.Hour)
	out, err = g.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil {
		t.Fatal(err)
	}
	if out.Stop != runtime.StopApprovalTimeout || out.Answer != "FALLBACK" || g.tools["cancel"].calls.Load() != 0 {
		t.Fatalf("on_timeout stop: %s %q", out.Stop, out.Answer)
	}
	if _, err := g.paused().PausedRun(ctx, res.RunID); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("the stopped run is still paused: %v", err)
	}
}

// Of many executions resuming one run at once, one runs it: the approved call runs
// exactly once.
func TestApprovalConcurrentResume(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("done"))
	res := f.start(t, runtime.Request{})
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true})
	var ok, resuming atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, runtime.ErrResuming), errors.Is(err, store.ErrRunNotFound):
				resuming.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || resuming.Load() != 7 || f.tools["cancel"].calls.Load() != 1 {
		t.Fatalf("%d resumed, %d refused, cancel ran %d times", ok.Load(), resuming.Load(), f.tools["cancel"].calls.Load())
	}
}

// A caller that cannot ask anyone gets the call refused with a reason the model can
// act on; a call whose rule says no approval runs at once.
func TestApprovalRefusedOrNotNeeded(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("It needs approval elsewhere."))
	res := f.start(t, runtime.Request{Approvals: runtime.ApprovalsRefuse})
	step := res.Steps[len(res.Steps)-1]
	if res.Stop != runtime.StopCompleted || step.Refusal != runtime.RefusedNoApproval || f.tools["cancel"].calls.Load() != 0 ||
		!strings.Contains(step.Result, "needs a person's approval") {
		t.Fatalf("stop %s, step %+v", res.Stop, step)
	}

	g := newApprovalFixture(t, nil, say("It needs approval elsewhere."))
	res = g.start(t, runtime.Request{})
	if step := res.Steps[len(res.Steps)-1]; step.Refusal != runtime.RefusedNoApproval || !strings.Contains(step.Result, "no store") {
		t.Fatalf("without a store: %+v", step)
	}

	h := newApprovalFixture(t, memory.New())
	h.model = script(calls(tc("list_orders", map[string]any{})), calls(tc("cancel", map[string]any{"number": "A1"})), say("A1 is cancelled."))
	h.agent = h.compile(t)
	res = h.start(t, runtime.Request{})
	if res.Stop != runtime.StopCompleted || h.tools["cancel"].calls.Load() != 1 {
		t.Fatalf("a small order waited: %s", res.Stop)
	}
}

// A paused run outlives its process: the store is closed and opened again, a new
// agent resumes it.
func TestApprovalSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := newApprovalFixture(t, st, say("Order A2 is cancelled."))
	res := f.start(t, runtime.Request{})
	st.Close()

	if f.store, err = sqlite.Open(path); err != nil {
		t.Fatal(err)
	}
	defer f.store.Close()
	f.agent = f.compile(t)
	list, err := runtime.ListPaused(context.Background(), f.paused(), store.PausedQuery{UserID: "u-1"})
	if err != nil || len(list) != 1 || list[0].Input != "cancel my big order" || !slices.Equal(list[0].Undecided(), []string{"call_c"}) {
		t.Fatalf("listed %v %+v", err, list)
	}
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true})
	out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil || out.Stop != runtime.StopCompleted || f.tools["cancel"].calls.Load() != 1 {
		t.Fatalf("%v %+v", err, out)
	}
	conv, _ := f.store.Conversation(context.Background(), "c-1", 10)
	if got := roles(conv.Messages); !strings.HasSuffix(got, "tool(call_d) tool(call_c) assistant") {
		t.Fatalf("stored %s", got)
	}
}

// An execution that claimed a run and died is taken over once its max_run_time has
// passed, and its approved call is not run again: the model is told the outcome is
// unknown.
func TestApprovalAbandonedResume(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("I am not sure it was cancelled; please check."))
	res := f.start(t, runtime.Request{})
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true})
	ctx := context.Background()
	// What a process that claimed the run and then died leaves behind.
	p, err := f.paused().PausedRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(p.State, &state); err != nil {
		t.Fatal(err)
	}
	state["claimed_until"] = f.clock.Now().Add(spec.DefaultMaxRunTime + time.Minute)
	p.State, _ = json.Marshal(state)
	p.Status, p.Version = store.PauseResuming, p.Version+1
	if err := f.paused().UpdatePaused(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: owner}); !errors.Is(err, runtime.ErrResuming) {
		t.Fatalf("resuming a run another execution holds: %v", err)
	}
	f.clock.add(spec.DefaultMaxRunTime + 2*time.Minute)
	out, err := f.agent.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil {
		t.Fatal(err)
	}
	step := out.Steps[len(out.Steps)-1]
	if out.Stop != runtime.StopCompleted || f.tools["cancel"].calls.Load() != 0 || step.Outcome != runtime.OutcomeError ||
		!strings.Contains(step.Result, "unknown whether cancel ran") {
		t.Fatalf("stop %s, cancel ran %d, step %+v", out.Stop, f.tools["cancel"].calls.Load(), step)
	}
}

// A rejected call leaves the duplicate guard: once the reason is dealt with the
// model may ask again, and the run pauses again under its id. The model's server
// reuses the call's id, so a decision must name the new call's hash: a late one
// meant for the first call must not approve the second.
func TestApprovalRetryAfterRejection(t *testing.T) {
	f := newApprovalFixture(t, memory.New(),
		offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{{ID: "call_c", Name: "cancel", Arguments: map[string]any{"number": "A2"}}}},
		say("Order A2 is cancelled."))
	res := f.start(t, runtime.Request{})
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Reason: "ask the customer first, then try again."})
	again, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil {
		t.Fatal(err)
	}
	if again.Stop != runtime.StopAwaitingApproval || again.RunID != res.RunID || len(again.Pending) != 1 ||
		again.Pending[0].CallID != "call_c" || !again.Pending[0].HashRequired {
		t.Fatalf("the retry: stop %s (%s), run %s, pending %+v", again.Stop, again.Detail, again.RunID, again.Pending)
	}
	if _, err := runtime.Decide(context.Background(), f.paused(), res.RunID, owner, runtime.DecideRequest{CallID: "call_c", Approve: true}, f.clock.Now()); !errors.Is(err, runtime.ErrHashRequired) {
		t.Fatalf("a decision on a reused call id without its hash: %v", err)
	}
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true, ArgsHash: again.Pending[0].ArgsHash})
	out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil || out.Stop != runtime.StopCompleted || f.tools["cancel"].calls.Load() != 1 {
		t.Fatalf("%v: stop %s, cancel ran %d times", err, out.Stop, f.tools["cancel"].calls.Load())
	}
	if _, err := f.paused().PausedRun(context.Background(), res.RunID); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("the finished run is still stored: %v", err)
	}
}

// A run outside any conversation stores no messages when it resumes and ends; the
// memory event says what the commit did: end the paused run.
func TestApprovalOutsideAConversation(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("Order A2 is cancelled."))
	res, err := f.agent.Run(context.Background(), runtime.Request{Input: "cancel my big order", User: tool.User{ID: "u-1"}})
	if err != nil || res.Stop != runtime.StopAwaitingApproval {
		t.Fatalf("%v %+v", err, res)
	}
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true})
	var saved []string
	out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner,
		Observer: runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventMemory {
				saved = append(saved, e.Message)
			}
		})})
	if err != nil || out.Stop != runtime.StopCompleted {
		t.Fatalf("%v %+v", err, out)
	}
	if len(saved) != 1 || saved[0] != "saved 1 fact change, the end of paused run "+res.RunID {
		t.Fatalf("memory events %q", saved)
	}
}

// placedHost is a host on a durable engine: this process's clock and
// goroutines, and a placement a run it pauses records.
type placedHost struct {
	runtime.LocalHost
	at runtime.Placement
}

func (h placedHost) Placement() runtime.Placement { return h.at }

// A paused run records where it runs, and only an execution on the same
// engine (and namespace) may resume it: a resumption elsewhere is refused
// before it claims the run or runs a call, and the run stays waiting for its
// own engine.
func TestApprovalResumedOnlyOnItsEngine(t *testing.T) {
	onTemporal := runtime.Placement{Engine: runtime.EngineTemporal, Address: "temporal.internal:7233", Namespace: "support", TaskQueue: "desk"}
	tests := []struct {
		name        string
		pausedOn    runtime.Placement
		resumedOn   runtime.Placement
		wantRefused bool
	}{
		{"paused on temporal, resumed here", onTemporal, runtime.Placement{}, true},
		{"paused here, resumed on temporal", runtime.Placement{}, onTemporal, true},
		{"another namespace", onTemporal, runtime.Placement{Engine: runtime.EngineTemporal, Namespace: "default"}, true},
		{"same namespace through another address and queue", onTemporal, runtime.Placement{Engine: runtime.EngineTemporal, Address: "10.0.0.1:7233", Namespace: "support"}, false},
		{"here and here", runtime.Placement{}, runtime.Placement{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			f := newApprovalFixture(t, st, say("Order A2 is cancelled."))
			res := f.start(t, runtime.Request{Host: placedHost{at: tt.pausedOn}})
			p := decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true})
			if p.Placement != tt.pausedOn {
				t.Fatalf("the paused run says it is on %+v, want %+v", p.Placement, tt.pausedOn)
			}
			out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner, Host: placedHost{at: tt.resumedOn}})
			if !tt.wantRefused {
				if err != nil || out.Stop != runtime.StopCompleted {
					t.Fatalf("%v %+v", err, out)
				}
				return
			}
			if !errors.Is(err, runtime.ErrOtherEngine) {
				t.Fatalf("resumed on %+v: %v, want ErrOtherEngine", tt.resumedOn, err)
			}
			if n := f.tools["cancel"].calls.Load(); n != 0 {
				t.Fatalf("cancel ran %d times", n)
			}
			if p, err := runtime.LoadPaused(context.Background(), f.paused(), res.RunID, owner); err != nil || p.Status != store.PauseWaiting {
				t.Fatalf("after the refusal: %v %+v", err, p)
			}
			if out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner, Host: placedHost{at: tt.pausedOn}}); err != nil || out.Stop != runtime.StopCompleted {
				t.Fatalf("resumed on its own engine: %v %+v", err, out)
			}
		})
	}
}
