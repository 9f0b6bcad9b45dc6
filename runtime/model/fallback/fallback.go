package fallback

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
)

// Defaults of the circuit breaker.
const (
	DefaultThreshold = 3                // consecutive retryable failures that open a model's breaker
	DefaultCooldown  = 30 * time.Second // how long an open breaker keeps its model out
)

// Entry is one model of a chain with the provider and name it was configured by,
// which Response.Answered reports.
type Entry struct {
	Provider string
	Name     string
	Model    model.Model
}

// Options tune the circuit breakers; the zero value is the defaults.
type Options struct {
	Threshold int              // 0 means DefaultThreshold
	Cooldown  time.Duration    // 0 means DefaultCooldown
	Now       func() time.Time // the breakers' clock; nil means time.Now (tests pass their own)
}

// Chain tries its models in order (see the package doc). It is safe for
// concurrent use: the breakers are its only state.
type Chain struct {
	entries []*link
	now     func() time.Time
}

// link is an entry with its breaker.
type link struct {
	Entry
	breaker *breaker
}

var (
	_ model.Model     = (*Chain)(nil)
	_ model.PartTaker = (*Chain)(nil)
)

// New is a chain of the entries, the first one tried first.
func New(entries []Entry, opts Options) (*Chain, error) {
	if len(entries) == 0 {
		return nil, errors.New("fallback: a chain needs at least one model")
	}
	threshold, cooldown := cmp.Or(opts.Threshold, DefaultThreshold), cmp.Or(opts.Cooldown, DefaultCooldown)
	if threshold < 0 || cooldown < 0 {
		return nil, fmt.Errorf("fallback: threshold %d and cooldown %s must not be negative", threshold, cooldown)
	}
	c := &Chain{now: opts.Now}
	if c.now == nil {
		c.now = time.Now
	}
	for i, e := range entries {
		if e.Model == nil {
			return nil, fmt.Errorf("fallback: model %d (%s) is nil", i+1, e.Name)
		}
		c.entries = append(c.entries, &link{Entry: e, breaker: &breaker{threshold: threshold, cooldown: cooldown}})
	}
	return c, nil
}

// Entries are the chain's models in order.
func (c *Chain) Entries() []Entry {
	out := make([]Entry, len(c.entries))
	for i, l := range c.entries {
		out[i] = l.Entry
	}
	return out
}

// Complete asks the first model whose breaker lets it, and the next one after each
// retryable failure; see the package doc for when it stops.
func (c *Chain) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	var failed, faults []string
	var last *link
	var lastErr error
	for _, l := range c.entries {
		if !l.breaker.allow(c.now()) {
			failed = append(failed, l.Name)
			faults = append(faults, l.Name+": skipped, its circuit breaker is open")
			continue
		}
		resp, err, next := c.try(ctx, l, req)
		if !next {
			return answer(l, resp, err, failed, faults)
		}
		last, lastErr = l, err
		failed = append(failed, l.Name)
		faults = append(faults, l.Name+": "+err.Error())
	}
	if last == nil { // every breaker is open: try the first rather than fail untried
		l := c.entries[0]
		resp, err, _ := c.try(ctx, l, req)
		return answer(l, resp, err, nil, nil)
	}
	var me *model.Error
	errors.As(lastErr, &me) // try goes on only after a *model.Error
	return nil, &model.Error{Status: me.Status, Usage: me.Usage,
		Err: fmt.Errorf("every model of the fallback chain failed: %s", strings.Join(faults, "; "))}
}

// try calls one model. next reports that the chain may go on to the next one: the
// call failed with a retryable fault, the context is live, and no streamed text
// reached the caller.
func (c *Chain) try(ctx context.Context, l *link, req *model.Request) (resp *model.Response, err error, next bool) {
	call := *req
	var delivered atomic.Bool
	if req.OnDelta != nil {
		call.OnDelta = func(text string) {
			if text != "" {
				delivered.Store(true)
			}
			req.OnDelta(text)
		}
	}
	resp, err = l.Model.Complete(ctx, &call)
	if err == nil {
		l.breaker.success()
		return resp, nil, false
	}
	if ctx.Err() != nil { // the caller gave up: that is no fault of the model
		l.breaker.release()
		return nil, err, false
	}
	var me *model.Error
	if !errors.As(err, &me) || !me.Retryable() {
		// The service answered (a refusal of the request): it is up.
		l.breaker.success()
		return nil, err, false
	}
	l.breaker.failure(c.now())
	if delivered.Load() {
		return nil, &model.Error{Status: me.Status, Usage: me.Usage,
			Err: fmt.Errorf("%w (no fallback: part of the answer was already streamed)", me.Err)}, false
	}
	return nil, err, true
}

// answer is what the chain returns for the last model it called: its response,
// saying which model answered and which failed before it, or its error, naming the
// faults of the models before it.
func answer(l *link, resp *model.Response, err error, failed, faults []string) (*model.Response, error) {
	if err != nil {
		if len(faults) == 0 {
			return nil, err
		}
		var me *model.Error
		if !errors.As(err, &me) {
			return nil, err
		}
		return nil, &model.Error{Status: me.Status, Usage: me.Usage, Refused: me.Refused,
			Err: fmt.Errorf("%s: %w (after %s)", l.Name, me.Err, strings.Join(faults, "; "))}
	}
	out := *resp
	out.Answered = &model.Answered{Provider: l.Provider, Name: l.Name, FallbackFrom: failed}
	return &out, nil
}

// TakesPart takes a part only when every model of the chain takes it: a part the
// fallback could not send would be refused only once the first model failed.
func (c *Chain) TakesPart(p model.Part) error {
	for _, l := range c.entries {
		pt, ok := l.Model.(model.PartTaker)
		if !ok {
			return fmt.Errorf("the fallback model %s takes no %s parts", l.Name, p.Kind)
		}
		if err := pt.TakesPart(p); err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
	}
	return nil
}
