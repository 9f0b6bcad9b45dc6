package temporal

import (
	"context"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"go.temporal.io/sdk/workflow"
)

// host is a runtime.Host inside a workflow: workflow time, timers that end a
// run's context, and coroutines for a run's parallel branches. The workflow
// context each branch must use travels in the context.Context the runtime
// passes down (withWorkflow).
type host struct {
	root workflow.Context
	// continueAfter is the history length past which a run checkpoints
	// between two turns, to go on in a new execution (Options.ContinueAfter).
	continueAfter int
	// address is the cluster's as the worker dialed it (Options.Address), for
	// the command that resumes a run paused here.
	address string
}

var (
	_ runtime.Continuer = host{}
	_ runtime.Placer    = host{}
)

// Placement says a run paused here waits as this workflow: only a resumption
// through Temporal (the decided signal) may go on with it.
func (h host) Placement() runtime.Placement {
	info := workflow.GetInfo(h.root)
	return runtime.Placement{Engine: runtime.EngineTemporal, Address: h.address, Namespace: info.Namespace, TaskQueue: info.TaskQueueName}
}

func (h host) Now() time.Time { return workflow.Now(h.root) }

func (h host) ContinueNow() bool {
	info := workflow.GetInfo(h.root)
	return info.GetCurrentHistoryLength() > h.continueAfter || info.GetContinueAsNewSuggested()
}

// RunContext ends the run's context when a workflow timer fires, and cancels
// the workflow context its activities run in, so a call in flight ends too.
func (h host) RunContext(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	parent := workflowOf(ctx)
	wctx, cancelActivities := workflow.WithCancel(parent)
	rc := &runContext{Context: withWorkflow(ctx, wctx), wctx: wctx}
	timerCtx, cancelTimer := workflow.WithCancel(parent)
	timer := workflow.NewTimer(timerCtx, d)
	workflow.Go(parent, func(c workflow.Context) {
		if timer.Get(c, nil) == nil { // fired, not canceled
			rc.end(context.DeadlineExceeded, cause)
			cancelActivities()
		}
	})
	return rc, func() {
		cancelTimer()
		cancelActivities()
	}
}

// CallContext leaves the call's timeout to its activity: it travels with the
// context to the stand-in that schedules it (callTimeout).
func (host) CallContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithValue(ctx, callTimeoutKey{}, d), func() {}
}

type callTimeoutKey struct{}

// callTimeout is the timeout CallContext gave the call under ctx; 0 for none.
func callTimeout(ctx context.Context) time.Duration {
	d, _ := ctx.Value(callTimeoutKey{}).(time.Duration)
	return d
}

func (host) Go(ctx context.Context, n, limit int, fn func(ctx context.Context, i int)) {
	if n == 1 {
		fn(ctx, 0)
		return
	}
	parent := workflowOf(ctx)
	sem := workflow.NewSemaphore(parent, int64(max(limit, 1)))
	wg := workflow.NewWaitGroup(parent)
	for i := range n {
		if err := sem.Acquire(parent, 1); err != nil {
			// The workflow is canceled: run the rest anyway, so each gets its error.
			fn(ctx, i)
			continue
		}
		wg.Add(1)
		workflow.Go(parent, func(c workflow.Context) {
			defer wg.Done()
			defer sem.Release(1)
			fn(withWorkflow(ctx, c), i)
		})
	}
	wg.Wait(parent)
}

type workflowKey struct{}

// withWorkflow carries the workflow context the code under ctx runs in.
func withWorkflow(ctx context.Context, w workflow.Context) context.Context {
	return context.WithValue(ctx, workflowKey{}, w)
}

// workflowOf is the workflow context the caller runs in; nil outside a workflow.
func workflowOf(ctx context.Context) workflow.Context {
	w, _ := ctx.Value(workflowKey{}).(workflow.Context)
	return w
}

// runContext is a run's context inside a workflow. It ends when the run's
// timer fires or the workflow is canceled, both at points the workflow's history
// fixes, so a replay sees it end exactly where the first execution did.
type runContext struct {
	context.Context
	wctx workflow.Context

	mu         sync.Mutex
	err, cause error
	done       chan struct{}
}

func (c *runContext) end(err, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err, c.cause = err, cause
		if c.done != nil {
			close(c.done)
		}
	}
}

// Err is the run's own end, else its caller's (a sub-run's context ends with
// the run that started it, and for the same reason), else the workflow's
// cancellation.
func (c *runContext) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.wctx.Err() != nil {
		return context.Canceled
	}
	return nil
}

func (c *runContext) Cause() error {
	c.mu.Lock()
	cause, err := c.cause, c.err
	c.mu.Unlock()
	switch {
	case cause != nil:
		return cause
	case err != nil:
		return err
	}
	if parent, ok := c.Context.Value(runContextKey{}).(*runContext); ok && parent.Err() != nil {
		return parent.Cause()
	}
	if err := c.Err(); err != nil {
		return err
	}
	return nil
}

type runContextKey struct{}

// Value finds the nearest run context for Cause, and the rest as any context.
func (c *runContext) Value(key any) any {
	if key == (runContextKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c *runContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}
