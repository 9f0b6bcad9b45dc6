package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A url server whose requests carry the user — headers that render the user or the
// conversation, or forward_auth — gets a session per distinct set of rendered
// headers: each is initialized and used with the same headers, since servers bind a
// session to whoever opened it (the official SDK's server answers another user's
// request on it with 403 "session user mismatch"). The sessions are bounded in number and closed
// when idle.

// Defaults of Options.MaxSessions and Options.IdleTimeout.
const (
	DefaultMaxSessions = 256 // serve's default cap on concurrent runs
	DefaultIdleTimeout = 5 * time.Minute
)

// sessions are one server's sessions, by their headers.
type sessions struct {
	max  int
	idle time.Duration
	dial func(ctx context.Context, headers map[string]string) (*sdk.ClientSession, error)

	mu     sync.Mutex
	byKey  map[string]*pooled
	clock  uint64 // counts releases, to find the least recently used session
	closed bool
	dials  sync.WaitGroup
}

// pooled is one session, or one being opened.
type pooled struct {
	key     string
	ready   chan struct{} // closed once session or err is set
	session *sdk.ClientSession
	err     error
	calls   int         // calls holding it
	used    uint64      // the pool's clock when it was last released
	timer   *time.Timer // closes it once idle for the idle timeout
}

func newSessions(max int, idle time.Duration, dial func(context.Context, map[string]string) (*sdk.ClientSession, error)) *sessions {
	return &sessions{max: max, idle: idle, dial: dial, byKey: map[string]*pooled{}}
}

// sessionKey names a set of headers without holding their values.
func sessionKey(headers map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, headers[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// acquire returns the session for headers, opening one when there is none; the
// caller releases it after its call. A new session past the limit takes the
// place of the least recently used idle one, which is closed.
func (p *sessions) acquire(ctx context.Context, headers map[string]string) (*pooled, error) {
	key := sessionKey(headers)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("its sessions are closed")
	}
	e := p.byKey[key]
	var evicted *pooled
	if e == nil {
		if len(p.byKey) >= p.max {
			if evicted = p.leastRecentlyUsed(); evicted == nil {
				p.mu.Unlock()
				return nil, fmt.Errorf("all %d of its sessions (one per user) are in use", p.max)
			}
			if evicted.timer != nil {
				evicted.timer.Stop()
			}
			delete(p.byKey, evicted.key)
		}
		e = &pooled{key: key, ready: make(chan struct{})}
		p.byKey[key] = e
		p.dials.Add(1)
		// Opened apart from the call, so that a caller giving up does not fail the
		// others waiting for the same session; the connect timeout bounds it.
		go p.open(context.WithoutCancel(ctx), e, headers)
	}
	e.calls++
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	p.mu.Unlock()
	if evicted != nil {
		evicted.session.Close()
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		p.release(e, false)
		return nil, ctx.Err()
	}
	if e.err != nil {
		p.release(e, false)
		return nil, e.err
	}
	return e, nil
}

// leastRecentlyUsed is the idle open session released longest ago, or nil.
func (p *sessions) leastRecentlyUsed() *pooled {
	var lru *pooled
	for _, e := range p.byKey {
		if e.calls == 0 && e.session != nil && (lru == nil || e.used < lru.used) {
			lru = e
		}
	}
	return lru
}

func (p *sessions) open(ctx context.Context, e *pooled, headers map[string]string) {
	defer p.dials.Done()
	session, err := p.dial(ctx, headers)
	p.mu.Lock()
	switch {
	case err != nil:
		delete(p.byKey, e.key)
		e.err = err
	case p.closed:
		err = errors.New("its sessions are closed")
		e.err = err
	default:
		e.session = session
		if e.calls == 0 { // every caller gave up waiting
			p.idleLocked(e)
		}
	}
	close(e.ready)
	p.mu.Unlock()
	if err != nil && session != nil {
		session.Close()
	}
}

// release ends a call's hold on e. A broken session (its call failed other than
// with the server's answer) is closed once no call holds it, and the user's next
// call opens a new one; an idle one is closed after the idle timeout.
func (p *sessions) release(e *pooled, broken bool) {
	p.mu.Lock()
	e.calls--
	current := p.byKey[e.key] == e
	if broken && current {
		delete(p.byKey, e.key)
		current = false
	}
	closeNow := !current && e.calls == 0 && e.session != nil && !p.closed
	if current && e.calls == 0 && e.session != nil {
		p.idleLocked(e)
	}
	p.mu.Unlock()
	if closeNow {
		e.session.Close()
	}
}

// idleLocked marks e, which no call holds, as used now and closes it after the
// idle timeout unless a call takes it again first.
func (p *sessions) idleLocked(e *pooled) {
	p.clock++
	e.used = p.clock
	used := e.used
	e.timer = time.AfterFunc(p.idle, func() { p.expire(e, used) })
}

// expire closes e if it has not been used since it was released at used.
func (p *sessions) expire(e *pooled, used uint64) {
	p.mu.Lock()
	idle := p.byKey[e.key] == e && e.calls == 0 && e.used == used
	if idle {
		delete(p.byKey, e.key)
	}
	p.mu.Unlock()
	if idle {
		e.session.Close()
	}
}

// close ends every session, waiting for those being opened.
func (p *sessions) close() {
	p.mu.Lock()
	p.closed = true
	open := slices.Collect(maps.Values(p.byKey))
	clear(p.byKey)
	for _, e := range open {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	p.mu.Unlock()
	p.dials.Wait()
	for _, e := range open {
		if e.session != nil {
			e.session.Close()
		}
	}
}
