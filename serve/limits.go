package serve

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of Limits a config leaves out.
const (
	DefaultRatePerSecond        = 5
	DefaultBurst                = 10
	DefaultMaxConcurrentPerUser = 4
	DefaultMaxConcurrent        = 256
	DefaultMaxBodyBytes         = 1 << 20
	DefaultMaxInputChars        = 32000
	DefaultRunTimeout           = 10 * time.Minute
	DefaultReadTimeout          = 30 * time.Second
)

// withDefaults fills what l leaves at zero.
func (l Limits) withDefaults() Limits {
	if l.RatePerSecond == 0 {
		l.RatePerSecond = DefaultRatePerSecond
	}
	if l.Burst == 0 {
		l.Burst = max(DefaultBurst, int(math.Ceil(l.RatePerSecond)))
	}
	if l.MaxConcurrentPerUser == 0 {
		l.MaxConcurrentPerUser = DefaultMaxConcurrentPerUser
	}
	if l.MaxConcurrent == 0 {
		l.MaxConcurrent = DefaultMaxConcurrent
	}
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxAttachmentBytes == 0 {
		l.MaxAttachmentBytes = DefaultMaxAttachmentBytes
	}
	if l.MaxInputChars == 0 {
		l.MaxInputChars = DefaultMaxInputChars
	}
	if l.RunTimeout == 0 {
		l.RunTimeout = DefaultRunTimeout
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	return l
}

// limiter enforces the per-principal rate and the concurrency caps.
type limiter struct {
	limits Limits

	mu      sync.Mutex
	buckets map[string]*bucket
	running map[string]int
	total   int
}

type bucket struct {
	*rate.Limiter
	used time.Time
}

// idleBucket is how long a principal's bucket is kept unused: by then it is full
// again, so forgetting it changes nothing.
const idleBucket = 10 * time.Minute

func newLimiter(l Limits) *limiter {
	return &limiter{limits: l, buckets: map[string]*bucket{}, running: map[string]int{}}
}

// allow takes a token from user's bucket; when there is none it says how long
// until there is.
func (l *limiter) allow(user string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[user]
	if b == nil {
		if len(l.buckets) > 10000 {
			l.sweep(now)
		}
		b = &bucket{Limiter: rate.NewLimiter(rate.Limit(l.limits.RatePerSecond), l.limits.Burst)}
		l.buckets[user] = b
	}
	b.used = now
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (l *limiter) sweep(now time.Time) {
	for u, b := range l.buckets {
		if now.Sub(b.used) > idleBucket {
			delete(l.buckets, u)
		}
	}
}

// hold takes a run slot for user even when the caps are full: the resumption of a
// paused run, which a decision already asked for, counts against new runs but is
// never refused.
func (l *limiter) hold(user string) (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[user]++
	l.total++
	return l.releaser(user)
}

// acquire takes a run slot for user: false with the cap that is full ("concurrency"
// for the user's, "total" for the server's). release gives it back.
func (l *limiter) acquire(user string) (release func(), full string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.running[user] >= l.limits.MaxConcurrentPerUser:
		return nil, "concurrency"
	case l.total >= l.limits.MaxConcurrent:
		return nil, "total"
	}
	l.running[user]++
	l.total++
	return l.releaser(user), ""
}

// releaser gives back a slot of user's, once however often it is called.
func (l *limiter) releaser(user string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.running[user]--; l.running[user] == 0 {
				delete(l.running, user)
			}
			l.total--
		})
	}
}
