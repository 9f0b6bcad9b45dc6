package serve

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
)

// Runs are kept in memory by the process that runs them: their events (for
// streams and Last-Event-ID resumption) and, once finished, their result.
const (
	// maxRunEvents is how many of its last events a run keeps at least (and
	// fewer than twice as many): a reader that falls further behind resumes from
	// the oldest kept, so no reader makes the server buffer without bound.
	maxRunEvents = 2048
	// keepFinished is how long a finished run can still be read and resumed.
	keepFinished = 10 * time.Minute
	// maxRuns bounds the runs kept; the oldest finished ones go first.
	maxRuns = 10000
)

// runStatus says where a run is.
type runStatus string

const (
	runRunning  runStatus = "running"
	runFinished runStatus = "finished"
	runFailed   runStatus = "failed" // the run could not start (a misuse or a foreign conversation)
)

// runRecord is one run: its owner, its events and its outcome.
type runRecord struct {
	ID           string
	Agent        string
	User         string
	Conversation string
	Created      time.Time
	input        string // the first characters of its input (preview)

	cancel context.CancelFunc
	key    *runKey // the Idempotency-Key it was started with, if any

	mu         sync.Mutex
	events     []runtime.Event // the last maxRunEvents; JSON only when a stream reads them
	firstSeq   int             // the sequence number of events[0]; the first event is 1
	status     runStatus
	result     *runtime.Result
	err        error
	finished   time.Time
	changed    chan struct{} // closed and replaced whenever something is added
	readers    int
	orphanable bool          // a streamed run: canceled when nobody reads it any more
	orphaned   *time.Timer   // cancels a streamed run nobody reads any more
	done       chan struct{} // closed when the run has finished
	// keepUntil keeps a finished run paused for approval in the registry until its
	// approvals expire, so its resumption goes on with its events.
	keepUntil time.Time
	// pendingText is streamed text not yet kept as an event, since pendingSince.
	pendingText  string
	pendingSince time.Time
	// results are the result events of the run's earlier executions (a run paused
	// for approval, then resumed), by sequence number: each kept in events as an
	// event of kind "result", so sequence numbers go on increasing.
	results map[int][]byte
	// keepRequests: the run keeps its model requests' messages (requests, by
	// sequence number; requestBytes of them, counted in the server's keptBytes
	// too), see keepsRequests.
	keepRequests bool
	requests     map[int]keptRequest
	requestBytes int
	keptBytes    *atomic.Int64
}

// resultKind is the SSE event name of a run's result, and the kind of the
// placeholder events that stand for an earlier execution's result.
const resultKind runtime.EventKind = "result"

func newRunRecord(id, agent, user, conversation string, cancel context.CancelFunc) *runRecord {
	return &runRecord{ID: id, Agent: agent, User: user, Conversation: conversation, Created: time.Now(),
		cancel: cancel, firstSeq: 1, status: runRunning, changed: make(chan struct{}), done: make(chan struct{})}
}

// Observe keeps an event. It never blocks on a reader.
func (r *runRecord) Observe(e runtime.Event) {
	var sent []byte
	if e.Sent != nil {
		if r.keepRequests {
			sent = sentJSON(e.Sent)
		}
		e.Sent = nil // the events kept must not hold every request's messages
	}
	r.mu.Lock()
	r.flushTextLocked()
	if sent != nil {
		r.keepRequestLocked(r.firstSeq+len(r.events), e, sent)
	}
	r.observeLocked(e)
	r.mu.Unlock()
}

// A streamed answer's text is kept as text events of a few tokens each: one per
// token would crowd a run's other events out of the maxRunEvents it keeps.
const (
	textChunk = 64                    // bytes of text that make an event at once
	textEvery = 50 * time.Millisecond // how long text waits for more, at most, while more comes
)

// text keeps a piece of the model's streamed text (Request.OnDelta).
func (r *runRecord) text(delta string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pendingText == "" {
		r.pendingSince = time.Now()
	}
	r.pendingText += delta
	if len(r.pendingText) >= textChunk || time.Since(r.pendingSince) >= textEvery {
		r.flushTextLocked()
	}
}

// flushTextLocked keeps the text that waits as one event, before any other.
func (r *runRecord) flushTextLocked() {
	if r.pendingText != "" {
		text := r.pendingText
		r.pendingText = ""
		r.observeLocked(runtime.Event{Time: time.Now(), Kind: runtime.EventText, Text: text})
	}
}

func (r *runRecord) observeLocked(e runtime.Event) {
	r.events = append(r.events, e)
	if len(r.events) >= 2*maxRunEvents { // dropped in halves, so each event is copied once
		drop := len(r.events) - maxRunEvents
		r.events = append(r.events[:0:0], r.events[drop:]...)
		r.firstSeq += drop
		for seq := range r.results {
			if seq < r.firstSeq {
				delete(r.results, seq)
			}
		}
		r.forgetRequestsLocked(r.firstSeq)
	}
	r.notifyLocked()
}

func (r *runRecord) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// finish records the run's outcome.
func (r *runRecord) finish(res *runtime.Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushTextLocked()
	r.result, r.err, r.finished = res, err, time.Now()
	if res != nil && res.Stop == runtime.StopBlocked {
		r.input = "" // a filter refused it: it is not shown again
	}
	r.status = runFinished
	if err != nil {
		r.status = runFailed
	}
	if r.orphaned != nil {
		r.orphaned.Stop()
	}
	r.notifyLocked()
	close(r.done)
}

// resultEventLocked is the data of the run's result event.
func (r *runRecord) resultEventLocked() []byte {
	out := map[string]any{"id": r.ID, "conversation": r.Conversation, "result": r.result}
	if r.status == runFailed {
		status, code, msg := runFailure(runView{err: r.err})
		out["error"] = map[string]any{"status": status, "code": code, "message": msg}
	}
	data, _ := json.Marshal(out)
	return data
}

// restart makes a finished run (paused for approval) run again, as a new
// execution that resumes it: its earlier result stays among its events, under the
// sequence number its result event had, and its events go on after it. A run
// still running is not restarted (false).
func (r *runRecord) restart(cancel context.CancelFunc) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == runRunning { // another execution has it: not to be shared
		return false
	}
	seq := r.firstSeq + len(r.events)
	if r.results == nil {
		r.results = map[int][]byte{}
	}
	r.results[seq] = r.resultEventLocked()
	r.events = append(r.events, runtime.Event{Time: r.finished, Kind: resultKind})
	r.status, r.result, r.err, r.finished = runRunning, nil, nil, time.Time{}
	r.cancel, r.orphanable, r.keepUntil = cancel, false, time.Time{}
	r.done = make(chan struct{})
	r.notifyLocked()
	return true
}

// stop cancels the run's current execution.
func (r *runRecord) stop() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	cancel()
}

// earlierResult is the data of an earlier execution's result event, kept at seq.
func (r *runRecord) earlierResult(seq int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[seq]
}

// since returns the events after sequence number after (the first kept, when
// after is older), the sequence number of the last one, and whether the run is
// over, with the channel that tells of more.
func (r *runRecord) since(after int) (events []runtime.Event, last int, done bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := max(after+1, r.firstSeq)
	last = r.firstSeq + len(r.events) - 1
	if start <= last {
		events = slices.Clone(r.events[start-r.firstSeq:])
	}
	return events, max(last, after), r.status != runRunning, r.changed
}

// snapshot is the run as GET /v1/runs/{id} shows it.
func (r *runRecord) snapshot() runView {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := runView{ID: r.ID, Agent: r.Agent, Conversation: r.Conversation, Status: r.status, Created: r.Created, Result: r.result,
		Events: r.firstSeq + len(r.events) - 1, err: r.err}
	if r.status != runRunning {
		v.resultEvent = r.resultEventLocked()
	}
	if r.err != nil {
		v.Error = "the run could not start"
		if errors.Is(r.err, store.ErrForeignConversation) {
			v.Error = "no such conversation"
		}
	}
	return v
}

type runView struct {
	ID           string          `json:"id"`
	Agent        string          `json:"agent"`
	Conversation string          `json:"conversation,omitempty"`
	Status       runStatus       `json:"status"`
	Created      time.Time       `json:"created"`
	Events       int             `json:"events"` // the sequence number of the last event
	Result       *runtime.Result `json:"result,omitempty"`
	Error        string          `json:"error,omitempty"` // for the client: never the server's error text

	err         error
	resultEvent []byte // the data of the result event, once the run is over
}

// reading counts a stream's reader in or out. When the last reader of a run in
// flight leaves, the run is canceled unless another resumes within grace.
func (r *runRecord) reading(delta int, grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readers += delta
	if r.orphaned != nil {
		r.orphaned.Stop()
		r.orphaned = nil
	}
	if r.readers == 0 && r.status == runRunning && r.orphanable {
		r.orphaned = time.AfterFunc(grace, r.cancel)
	}
}

// runRegistry holds the runs of this process.
type runRegistry struct {
	mu   sync.Mutex
	runs map[string]*runRecord
	keys map[userKey]*runRecord // the runs started with an Idempotency-Key
}

func newRunRegistry() *runRegistry {
	return &runRegistry{runs: map[string]*runRecord{}, keys: map[userKey]*runRecord{}}
}

func (g *runRegistry) add(r *runRecord) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addLocked(r)
}

func (g *runRegistry) addLocked(r *runRecord) {
	if len(g.runs) >= maxRuns {
		g.sweepLocked(time.Now())
	}
	g.runs[r.ID] = r
	if r.key != nil {
		g.keys[userKey{r.key.user, r.key.key}] = r
	}
}

// addKeyed adds r, started with its key, unless a run was started with the key
// first: then that run (conflict: for another request), and r is not added.
func (g *runRegistry) addKeyed(r *runRecord) (first *runRecord, conflict bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if first, conflict := g.keyedLocked(r.key); first != nil {
		return first, conflict
	}
	g.addLocked(r)
	return r, false
}

// deleteLocked drops a run and its key.
func (g *runRegistry) deleteLocked(id string) {
	r := g.runs[id]
	if r == nil {
		return
	}
	if r.key != nil && g.keys[userKey{r.key.user, r.key.key}] == r {
		delete(g.keys, userKey{r.key.user, r.key.key})
	}
	delete(g.runs, id)
	r.mu.Lock()
	r.forgetRequestsLocked(math.MaxInt)
	r.mu.Unlock()
}

// reopen registers the execution that resumes a paused run: the run's record, run
// again, when this process has it (the same user's and agent's), else a new one.
func (g *runRegistry) reopen(id, agent, user, conversation, input string, cancel context.CancelFunc) *runRecord {
	g.mu.Lock()
	r := g.runs[id]
	g.mu.Unlock()
	if r != nil && r.User == user && r.Agent == agent && r.restart(cancel) {
		return r
	}
	r = newRunRecord(id, agent, user, conversation, cancel)
	r.input = preview(input)
	g.add(r)
	return r
}

// lookup returns the run with the id, whoever owns it.
func (g *runRegistry) lookup(id string) *runRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[id]
}

// get returns the run if user owns it: another user's run is not found, like one
// that does not exist.
func (g *runRegistry) get(id, user string) *runRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[id]
	if r == nil || r.User != user {
		return nil
	}
	return r
}

// sweepLocked drops finished runs older than keepFinished and, while there are
// too many, the oldest finished ones down to nine tenths of maxRuns: a full
// registry is swept once per maxRuns/10 runs, not on every run.
func (g *runRegistry) sweepLocked(now time.Time) {
	type finished struct {
		id string
		at time.Time
	}
	var done []finished
	for id, r := range g.runs {
		r.mu.Lock()
		fin, over, keep := r.finished, r.status != runRunning, r.keepUntil
		r.mu.Unlock()
		switch {
		case over && now.Sub(fin) > keepFinished && now.After(keep):
			g.deleteLocked(id)
		case over:
			done = append(done, finished{id, fin})
		}
	}
	if len(g.runs) < maxRuns {
		return
	}
	slices.SortFunc(done, func(a, b finished) int { return a.at.Compare(b.at) })
	for _, f := range done {
		if len(g.runs) < maxRuns*9/10 {
			break
		}
		g.deleteLocked(f.id)
	}
}

// janitor sweeps the registry every minute until ctx ends.
func (g *runRegistry) janitor(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			g.mu.Lock()
			g.sweepLocked(now)
			g.mu.Unlock()
		}
	}
}
