package runtime

import (
	"context"
	"sync"
	"time"
)

// Host is where a run's time and concurrency come from. A run in this process
// uses the clock, contexts with deadlines and goroutines; a durable engine's
// workflow (package temporal) supplies its own deterministic versions, so one
// implementation of the state machine's decisions runs in both.
type Host interface {
	// Now is the run's clock.
	Now() time.Time
	// RunContext derives the context of a run that may last d: once d passed it
	// ends, and context.Cause reports cause.
	RunContext(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc)
	// CallContext derives the context of one call that may last d: a tool's, a
	// knowledge stage's.
	CallContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
	// Go calls fn(ctx, i) for every i below n, at most limit at once, and returns
	// once every call returned. Each call gets the context of its own branch: what
	// it runs must use that one.
	Go(ctx context.Context, n, limit int, fn func(ctx context.Context, i int))
}

// LocalHost runs a run in this process: the wall clock and goroutines.
type LocalHost struct{}

func (LocalHost) Now() time.Time { return time.Now() }

func (LocalHost) RunContext(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, cause)
}

func (LocalHost) CallContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func (LocalHost) Go(ctx context.Context, n, limit int, fn func(ctx context.Context, i int)) {
	if n == 1 {
		fn(ctx, 0)
		return
	}
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(ctx, i)
		})
	}
	wg.Wait()
}

// hostOf is the request's host, LocalHost when it names none.
func hostOf(h Host) Host {
	if h == nil {
		return LocalHost{}
	}
	return h
}

// Causer is a context that knows why it ended without being one of the context
// package's own (a workflow's run context): context.Cause cannot see into it.
type Causer interface {
	Cause() error
}

// CauseOf is why ctx ended: context.Cause, or a Causer's own cause.
func CauseOf(ctx context.Context) error {
	if c, ok := ctx.(Causer); ok {
		return c.Cause()
	}
	return context.Cause(ctx)
}

func (r *run) host() Host { return hostOf(r.req.Host) }

// now is the run's clock.
func (r *run) now() time.Time { return r.host().Now() }

func (r *run) since(t time.Time) time.Duration { return r.now().Sub(t) }
