package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/runtime"
	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register registers the run workflow and its activities for the agents, by
// their names, with a worker. Every worker of a task queue must register the
// same agents at the same versions.
func Register(w worker.Registry, agents []*runtime.Agent, o Options) error {
	e, acts, err := newEngine(agents, o)
	if err != nil {
		return err
	}
	w.RegisterWorkflowWithOptions(e.run, workflow.RegisterOptions{Name: WorkflowRun})
	for name, fn := range map[string]any{
		ActivityModel: acts.Model, ActivityTool: acts.Tool,
		ActivityFacts: acts.Facts, ActivityConversation: acts.Conversation, ActivitySeen: acts.Seen, ActivitySeenEntities: acts.SeenEntities,
		ActivityCommit: acts.Commit, ActivityPausedRun: acts.PausedRun, ActivityUpdatePaused: acts.UpdatePaused, ActivityPausedRuns: acts.PausedRuns,
		ActivityCacheLookup: acts.CacheLookup, ActivityCacheLearn: acts.CacheLearn, ActivityRetrieve: acts.Retrieve,
	} {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	return nil
}

func newEngine(agents []*runtime.Agent, o Options) (*engine, *activities, error) {
	o = o.withDefaults()
	e := &engine{agents: map[string]*runtime.Agent{}, o: o}
	acts := &activities{agents: map[string]*runtime.Agent{}}
	for _, a := range agents {
		if acts.agents[a.Name()] != nil {
			return nil, nil, fmt.Errorf("two agents are named %s: a worker runs each name once", a.Name())
		}
		acts.agents[a.Name()] = a
		e.agents[a.Name()] = rewire(a.Name(), a, o)
	}
	return e, acts, nil
}

// StartOptions say what a run does besides the run itself.
type StartOptions struct {
	// ExtractFacts runs fact extraction once the run ended (exec does; serve
	// does not).
	ExtractFacts bool
}

// Start starts a run of the agent as a workflow on the task queue. The
// workflow's id is the run's: req.RunID, or a new one.
func Start(ctx context.Context, c client.Client, queue string, agent *runtime.Agent, req runtime.Request, o StartOptions) (client.WorkflowRun, error) {
	id := req.RunID
	if id == "" {
		id = runtime.NewRunID()
	}
	in := RunInput{Agent: agent.Name(), Digest: agent.Digest(), Request: NewRequest(req), ExtractFacts: o.ExtractFacts}
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, WorkflowRun, in)
}

// FollowOptions say how Follow follows a run.
type FollowOptions struct {
	// Observer gets the run's events as the workflow makes them; nil for none.
	Observer runtime.Observer
	// From skips the run's first events (those a caller saw before).
	From int
	// ReturnPaused returns the run's result as soon as it waits for approvals,
	// leaving the workflow waiting for the decided signal.
	ReturnPaused bool
}

// Follow passes the run's events to o.Observer as the workflow makes them and
// returns the run's result once it ends. It asks for the events (the events
// query) each time a workflow task of the run completes, which a long poll on
// the run's history tells it at once: no event waits for a timer, and a run
// waiting on a model or a person costs no calls (BenchmarkFollow measures it
// against polling).
func Follow(ctx context.Context, c client.Client, run client.WorkflowRun, o FollowOptions) (*runtime.Result, error) {
	type ended struct {
		out RunOutput
		err error
	}
	done := make(chan ended, 1)
	go func() {
		var out RunOutput
		err := run.Get(ctx, &out)
		done <- ended{out, err}
	}()
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	progressed := make(chan struct{}, 1)
	go watchHistory(watchCtx, c, run.GetID(), progressed)
	seen := o.From
	paused := false
	pass := func(events []runtime.Event) {
		for _, e := range events {
			if o.Observer != nil {
				o.Observer.Observe(e)
			}
			if e.Kind == runtime.EventStop && e.Depth == 0 && e.Stop == runtime.StopAwaitingApproval {
				paused = true
			}
		}
		seen += len(events)
	}
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return nil, r.err
			}
			if r.out.Result == nil {
				return nil, errors.New("the workflow returned no result")
			}
			if seen < len(r.out.Events) {
				pass(r.out.Events[seen:])
			}
			return r.out.Result, nil
		case <-progressed:
			v, err := c.QueryWorkflow(ctx, run.GetID(), "", QueryEvents, seen)
			if err != nil {
				continue // the run ended meanwhile (done has it), or no worker has it yet (the next task will)
			}
			var events []runtime.Event
			if v.Get(&events) == nil {
				pass(events)
			}
			if paused && o.ReturnPaused {
				if res, err := Current(ctx, c, run.GetID()); err == nil && res != nil {
					return res, nil
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// watchHistory signals progressed (without blocking: one pending signal is
// enough) whenever a workflow task of the run's current execution completes,
// following it across continue-as-new, until ctx ends or the run closes. A
// history it cannot read is asked for again a little later.
func watchHistory(ctx context.Context, c client.Client, id string, progressed chan<- struct{}) {
	signal := func() {
		select {
		case progressed <- struct{}{}:
		default:
		}
	}
	signal() // the events made before the watch began
	for ctx.Err() == nil {
		it := c.GetWorkflowHistory(ctx, id, "", true, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			switch ev.GetEventType() {
			case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				signal()
			case enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
				enums.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
				enums.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
				return // the result has the rest
			}
		}
		// The execution continued as new (its history ends there), or the read failed.
		select {
		case <-ctx.Done():
		case <-time.After(watchRetry):
		}
	}
}

// watchRetry is how soon a history that ended (continued as new) or could not
// be read is asked for again: a watch that keeps failing asks no more often
// than a follower that polled.
const watchRetry = 200 * time.Millisecond

// Current is the run's result so far (QueryResult): a paused run's while it
// waits; nil before it first ended or paused.
func Current(ctx context.Context, c client.Client, id string) (*runtime.Result, error) {
	v, err := c.QueryWorkflow(ctx, id, "", QueryResult)
	if err != nil {
		return nil, err
	}
	var res *runtime.Result
	err = v.Get(&res)
	return res, err
}

// EventCount is how many events the run made so far.
func EventCount(ctx context.Context, c client.Client, id string) (int, error) {
	v, err := c.QueryWorkflow(ctx, id, "", QueryEvents, 0)
	if err != nil {
		return 0, err
	}
	var events []runtime.Event
	err = v.Get(&events)
	return len(events), err
}

// Decided tells a run waiting for approvals that decisions were stored.
func Decided(ctx context.Context, c client.Client, id string) error {
	return c.SignalWorkflow(ctx, id, "", SignalDecided, nil)
}
