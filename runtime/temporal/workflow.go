package temporal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names a worker registers and clients use.
const (
	// WorkflowRun is the workflow type of a run.
	WorkflowRun = "agentrun.Run"
	// QueryEvents returns a run's events from an index on.
	QueryEvents = "events"
	// QueryResult returns the run's result so far: a paused run's, while it
	// waits for approvals; nil before the run first ended or paused.
	QueryResult = "result"
	// SignalDecided wakes a run waiting for approvals: a decision was stored.
	SignalDecided = "decided"
	// DefaultTaskQueue is the task queue of workers and runs that name none.
	DefaultTaskQueue = "agentrun"
)

// RunInput starts a run as a workflow.
type RunInput struct {
	// Agent names a registered agent (its spec's name); Digest is the digest of
	// the spec the starter loaded (runtime.Agent.Digest): a worker whose agent of
	// that name has another refuses the run rather than run a different agent.
	Agent   string  `json:"agent"`
	Digest  string  `json:"digest"`
	Request Request `json:"request"`
	// Resume, when set, is the id of a paused run this execution goes on with (a
	// run that continued as new while it waited for approvals); Paused is its
	// result and Events the events it made so far, which this execution keeps
	// answering queries with.
	Resume   string          `json:"resume,omitempty"`
	Paused   *runtime.Result `json:"paused,omitempty"`
	Events   []runtime.Event `json:"events,omitempty"`
	Deadline time.Time       `json:"deadline,omitzero"` // when its approvals expire
	// ExtractFacts runs fact extraction once the run ended, as exec does after
	// printing an answer.
	ExtractFacts bool `json:"extract_facts,omitempty"`
	// Checkpoint, when set, is the run this execution goes on with: it
	// continued as new between two turns, its history having grown long.
	Checkpoint *runtime.Checkpoint `json:"checkpoint,omitempty"`
}

// Request is what of a runtime.Request crosses into a workflow: no observer, no
// streaming, no host — the workflow brings its own.
type Request struct {
	Input             string               `json:"input"`
	Parts             []model.Part         `json:"parts,omitempty"` // large ones reach the history by reference (Codec)
	User              tool.User            `json:"user"`
	Conversation      string               `json:"conversation,omitempty"`
	Intent            string               `json:"intent,omitempty"`
	History           []model.Message      `json:"history,omitempty"`
	Seen              map[string][]string  `json:"seen,omitempty"`
	TraceConversation string               `json:"trace_conversation,omitempty"`
	Ephemeral         bool                 `json:"ephemeral,omitempty"`
	Approvals         runtime.ApprovalMode `json:"approvals,omitempty"`
}

// NewRequest is the part of req that crosses into a workflow.
func NewRequest(req runtime.Request) Request {
	return Request{Input: req.Input, Parts: req.Parts, User: req.User, Conversation: req.Conversation, Intent: req.Intent, History: req.History,
		Seen: req.Seen, TraceConversation: req.TraceConversation, Ephemeral: req.Ephemeral, Approvals: req.Approvals}
}

// RunOutput is a finished workflow's result: the run's and all its events.
type RunOutput struct {
	Result *runtime.Result `json:"result"`
	Events []runtime.Event `json:"events"`
}

// Options tune the activities' timeouts and retries; zero values get defaults.
type Options struct {
	// ModelTimeout bounds one model call's attempt (10m); ModelAttempts is how
	// often a call whose worker was lost or timed out is tried in all (5). A
	// model's own error is not retried here: its client retried what it could.
	ModelTimeout  time.Duration
	ModelAttempts int
	// ToolAttempts is how often a call of an idempotent tool is tried in all (3);
	// a tool with idempotent: false is tried once.
	ToolAttempts int
	// StoreTimeout and StoreAttempts are those of store calls (30s, 3). A run's
	// commit carries a key, so the store applies it once however often it is
	// tried; the claim of a paused run is tried once.
	StoreTimeout  time.Duration
	StoreAttempts int
	// Heartbeat is how soon a model or tool call whose worker stopped
	// heartbeating is tried again elsewhere (10s).
	Heartbeat time.Duration
	// ContinueAfter is the history length, in events, past which a run
	// continues as new (2000): between two turns, or while it waits for
	// approvals. Temporal's own suggestion to continue is followed too.
	ContinueAfter int
	// Address is the cluster's address as the worker dialed it: a run paused on
	// the worker records it, so a resume elsewhere can say how to reach the run.
	Address string
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.ModelTimeout, 10*time.Minute)
	def(&o.StoreTimeout, 30*time.Second)
	def(&o.Heartbeat, 10*time.Second)
	defInt(&o.ModelAttempts, 5)
	defInt(&o.ToolAttempts, 3)
	defInt(&o.StoreAttempts, 3)
	defInt(&o.ContinueAfter, 2000)
	return o
}

// engine holds a worker's agents: the real ones its activities call and the
// workflow's copies that call the activities.
type engine struct {
	agents map[string]*runtime.Agent // the workflow's copies, by name
	o      Options
}

// eventLog keeps a run's events for the events query.
type eventLog struct {
	mu     sync.Mutex
	events []runtime.Event
}

func (l *eventLog) Observe(e runtime.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Sent = nil // the log is read in turns; nothing reads a request's messages from it
	l.events = append(l.events, e)
}

func (l *eventLog) from(i int) []runtime.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i < 0 || i >= len(l.events) {
		return nil
	}
	return append([]runtime.Event(nil), l.events[i:]...)
}

// errVersion marks a run its worker must not run.
const errVersion = "AgentVersion"

// run is the workflow: the agent's run on a workflow host, then, while it
// waits for approvals, a wait for the decided signal (or the approvals'
// expiry) and a resumption — the same Run and Resume an in-process caller uses.
func (e *engine) run(ctx workflow.Context, in RunInput) (*RunOutput, error) {
	agent := e.agents[in.Agent]
	if agent == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("this worker runs no agent %q", in.Agent), errVersion, nil)
	}
	if in.Digest != "" && in.Digest != agent.Digest() {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("this worker runs agent %s with digest %s, the run was started with %s: run workers and the starter on the same spec files",
			in.Agent, agent.Digest(), in.Digest), errVersion, nil)
	}
	log := &eventLog{events: in.Events}
	if err := workflow.SetQueryHandler(ctx, QueryEvents, func(from int) ([]runtime.Event, error) { return log.from(from), nil }); err != nil {
		return nil, err
	}
	var current *runtime.Result
	if err := workflow.SetQueryHandler(ctx, QueryResult, func() (*runtime.Result, error) { return current, nil }); err != nil {
		return nil, err
	}
	h := host{root: ctx, continueAfter: e.o.ContinueAfter, address: e.o.Address}
	base := withWorkflow(withCommits(context.Background()), ctx)
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	decided := workflow.GetSignalChannel(ctx, SignalDecided)
	var res *runtime.Result
	var err error
	rq := in.Request
	req := runtime.Request{Input: rq.Input, Parts: rq.Parts, User: rq.User, Conversation: rq.Conversation, Intent: rq.Intent,
		History: rq.History, Seen: rq.Seen, TraceConversation: rq.TraceConversation, Ephemeral: rq.Ephemeral, Approvals: rq.Approvals,
		RunID: id, Observer: log, Host: h}
	// continueAsNew carries the run into a new execution, with what it showed
	// so far: a checkpointed run, or a paused one (in the store) and when its
	// approvals expire.
	continueAsNew := func(cp *runtime.Checkpoint, paused *runtime.Result, deadline time.Time) error {
		next := in
		next.Checkpoint, next.Paused, next.Deadline, next.Events, next.Resume = cp, paused, deadline, log.from(0), ""
		if paused != nil {
			next.Resume = paused.RunID
		}
		return workflow.NewContinueAsNewError(ctx, WorkflowRun, next)
	}
	switch {
	case in.Checkpoint != nil:
		res, err = agent.Continue(base, runtime.ContinueRequest{Checkpoint: *in.Checkpoint, Observer: log, Host: h})
	case in.Resume == "":
		res, err = agent.Run(base, req)
	default:
		res = cmp.Or(in.Paused, &runtime.Result{Stop: runtime.StopAwaitingApproval, RunID: in.Resume})
	}
	if err == nil && res.Checkpoint != nil {
		return nil, continueAsNew(res.Checkpoint, nil, time.Time{})
	}
	// Approvals expire approval.timeout after the pause (a little later, so the
	// store's clock agrees that they did).
	expires := func() time.Time { return workflow.Now(ctx).Add(agent.Settings().Approval.Timeout + time.Second) }
	deadline := in.Deadline
	if deadline.IsZero() {
		deadline = expires()
	}
	for err == nil && res.Stop == runtime.StopAwaitingApproval {
		current = res
		// A signal that came meanwhile is handled here: continuing as new would drop it.
		if info := workflow.GetInfo(ctx); info.GetCurrentHistoryLength() > e.o.ContinueAfter && decided.Len() == 0 {
			return nil, continueAsNew(nil, res, deadline)
		}
		awaitDecisions(ctx, decided, deadline.Sub(workflow.Now(ctx)))
		current = nil // what a follower asks for next is the resumed run's
		var resumed *runtime.Result
		resumed, err = agent.Resume(base, runtime.ResumeRequest{RunID: res.RunID, Decider: runtime.Decider{ID: "temporal", Approver: true},
			Observer: log, Host: h})
		switch {
		case errors.Is(err, runtime.ErrUndecided):
			err = nil // a signal came before every call was decided: wait on
		case err == nil && resumed.Checkpoint != nil:
			return nil, continueAsNew(resumed.Checkpoint, nil, time.Time{})
		case err == nil:
			res, deadline = resumed, expires()
		}
	}
	if err != nil {
		return nil, err
	}
	if in.ExtractFacts && !rq.Ephemeral {
		// As exec does after the answer: the facts the user stated, for later runs.
		if err := agent.ExtractFacts(base, req, res); err != nil {
			log.Observe(runtime.Event{Time: workflow.Now(ctx), Kind: runtime.EventMemory, Run: id, Error: err.Error(), Message: "facts were not extracted"})
		}
	}
	return &RunOutput{Result: res, Events: log.from(0)}, nil
}

// awaitDecisions waits for a decided signal, or until the run's approvals
// expire (approval.on_timeout then decides what is left).
func awaitDecisions(ctx workflow.Context, decided workflow.ReceiveChannel, wait time.Duration) {
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(decided, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	if wait > 0 {
		sel.AddFuture(workflow.NewTimer(timerCtx, wait), func(workflow.Future) {})
	}
	sel.Select(ctx)
}
