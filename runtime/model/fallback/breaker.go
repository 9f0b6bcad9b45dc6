package fallback

import (
	"sync"
	"time"
)

// breaker keeps a failing model out of its chain for a while. Closed, it lets
// every call through and counts consecutive retryable failures; at threshold it
// opens until the cooldown has passed; then it is half-open and lets one trial
// call through at a time, whose success closes it and whose failure opens it for
// another cooldown.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu        sync.Mutex
	failures  int       // consecutive retryable failures
	openUntil time.Time // when failures >= threshold: the end of the cooldown
	trial     bool      // a half-open trial call is in flight
}

// allow reports whether a call may go to the model now; a half-open breaker lets
// one through and holds the others back until it ended.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.threshold == 0 || b.failures < b.threshold:
		return true
	case now.Before(b.openUntil), b.trial:
		return false
	}
	b.trial = true
	return true
}

// success closes the breaker: the model's service answered.
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.trial, b.openUntil = 0, false, time.Time{}
}

// failure counts a retryable failure and opens the breaker at the threshold.
func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	b.trial = false
	if b.threshold > 0 && b.failures >= b.threshold {
		b.openUntil = now.Add(b.cooldown)
	}
}

// release ends a call that says nothing of the model (the caller gave up): a
// trial's place is free again, and nothing is counted.
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
}
