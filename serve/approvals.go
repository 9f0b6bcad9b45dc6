package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
)

// Runs paused for approval. A run whose tool call needs a person's approval stops
// with awaiting_approval; its calls are decided with POST
// /v1/runs/{id}/approvals/{call_id} by the run's own user or an approver, and once
// none is left undecided the run resumes here, as a new execution under the same
// id. A sweeper resumes the runs whose approvals expired, applying on_timeout.

// sweeperDecider resumes runs whose approvals expired: nobody decided.
var sweeperDecider = runtime.Decider{ID: "agentrun", Approver: true}

// maxListedPaused is how many paused runs GET /v1/approvals lists at most.
const maxListedPaused = 100

// pausedView is a paused run as the approval endpoints show it: runtime.Paused
// without its spec file, a path of the server's.
type pausedView struct {
	RunID        string             `json:"run_id"`
	Agent        string             `json:"agent"`
	User         string             `json:"user"`
	Conversation string             `json:"conversation,omitempty"`
	Intent       string             `json:"intent,omitempty"`
	Input        string             `json:"input"`
	Status       store.PauseStatus  `json:"status"`
	Created      time.Time          `json:"created"`
	Expires      time.Time          `json:"expires"`
	Approvals    []runtime.Approval `json:"approvals"`
}

func viewPaused(p *runtime.Paused) pausedView {
	v := pausedView{RunID: p.RunID, Agent: p.Agent, User: p.User, Conversation: p.Conversation, Intent: p.Intent,
		Input: p.Input, Status: p.Status, Created: p.Created, Expires: p.Expires, Approvals: p.Approvals}
	if v.Approvals == nil {
		v.Approvals = []runtime.Approval{}
	}
	return v
}

// decisionView answers a decision: "resumed" when the run goes on, "waiting" when
// calls still wait for a decision.
type decisionView struct {
	pausedView
	Status string `json:"status"`
}

// decisionRequest is the body of POST /v1/runs/{id}/approvals/{call_id}.
type decisionRequest struct {
	Decision string `json:"decision"` // approve or reject
	Reason   string `json:"reason"`
	// ArgsHash, when given, must be the call's args_hash: a decision made on other
	// arguments is refused.
	ArgsHash string `json:"args_hash"`
}

func deciderOf(p Principal) runtime.Decider {
	return runtime.Decider{ID: p.User.ID, Approver: p.Approver()}
}

// pausedStore is the agents' store as a keeper of paused runs; nil if it is none.
func (s *Server) pausedStore() store.PausedRuns {
	p, _ := s.store.(store.PausedRuns)
	return p
}

// approvalError answers an error of the runtime's approval API.
func approvalError(w http.ResponseWriter, err error) {
	status, code, msg := approvalProblem(err)
	writeError(w, status, code, msg)
}

// approvalProblem is how an error of the runtime's approval API is told: the
// status, code and message of the approval endpoints, which A2A tells too.
func approvalProblem(err error) (status int, code, msg string) {
	var other *otherEngineError
	switch {
	case errors.Is(err, store.ErrRunNotFound), errors.Is(err, runtime.ErrNoPausedStore):
		return http.StatusNotFound, "run_not_found", "no such run waiting for approval"
	case errors.Is(err, runtime.ErrCallNotFound):
		return http.StatusNotFound, "call_not_found", "the run has no call waiting for approval with this id"
	case errors.Is(err, runtime.ErrAlreadyDecided):
		return http.StatusConflict, "already_decided", "the call was already decided"
	case errors.Is(err, runtime.ErrArgsChanged):
		return http.StatusConflict, "args_changed", "the call's arguments are not those the decision was made for (args_hash differs)"
	case errors.Is(err, runtime.ErrHashRequired):
		return http.StatusConflict, "args_hash_required", "the run had another call of this id before: send the call's args_hash with the decision"
	case errors.Is(err, runtime.ErrApprovalExpired):
		return http.StatusConflict, "approval_expired", "the run's approvals have expired: approval.on_timeout decides"
	case errors.Is(err, runtime.ErrResuming):
		return http.StatusConflict, "run_resuming", "the run is already being resumed"
	case errors.Is(err, store.ErrPausedConflict):
		return http.StatusConflict, "run_busy", "the run kept changing while the decision was recorded: try again"
	case errors.As(err, &other):
		return http.StatusConflict, "run_on_other_engine", other.Error()
	}
	return http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer"
}

// getApprovals answers GET /v1/runs/{id}/approvals: a paused run of the
// principal's, or of anyone's for an approver.
func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request, p Principal) {
	paused, err := runtime.LoadPaused(r.Context(), s.pausedStore(), r.PathValue("id"), deciderOf(p))
	if err != nil {
		approvalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewPaused(paused))
}

// listApprovals answers GET /v1/approvals: the principal's paused runs, newest
// first; for an approver every user's, soonest to expire first.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, p Principal) {
	q := store.PausedQuery{UserID: p.User.ID, Limit: maxListedPaused}
	if p.Approver() {
		q = store.PausedQuery{ExpiresBefore: time.Now().AddDate(100, 0, 0), Limit: maxListedPaused}
	}
	list, err := runtime.ListPaused(r.Context(), s.pausedStore(), q)
	if errors.Is(err, runtime.ErrNoPausedStore) {
		list, err = nil, nil
	}
	if err != nil {
		approvalError(w, err)
		return
	}
	out := make([]pausedView, 0, len(list))
	for _, pr := range list {
		out = append(out, viewPaused(pr))
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

// decide answers POST /v1/runs/{id}/approvals/{call_id}: it records the decision
// and, when no call is left undecided, resumes the run in the background.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, p Principal) {
	fail := func(status int, code, msg string) { writeError(w, status, code, msg) }
	var body decisionRequest
	if !decodeJSON(w, r, &body, fail) {
		return
	}
	var approve bool
	switch body.Decision {
	case "approve":
		approve = true
	case "reject":
	default:
		fail(http.StatusBadRequest, "invalid_decision", fmt.Sprintf("decision must be \"approve\" or \"reject\", not %q", body.Decision))
		return
	}
	out, err := s.decideCall(r.Context(), p, r.PathValue("id"),
		runtime.DecideRequest{CallID: r.PathValue("call_id"), Approve: approve, Reason: body.Reason, ArgsHash: body.ArgsHash})
	if err != nil {
		approvalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// decideCall records p's decision on a call of the paused run runID and, when
// no call is left undecided, resumes the run in the background. Every way of
// deciding (the approval endpoint, an A2A message) goes through it, so each is
// checked alike.
func (s *Server) decideCall(ctx context.Context, p Principal, runID string, d runtime.DecideRequest) (decisionView, error) {
	who := deciderOf(p)
	// The answer comes from the shared store alone, never from the runs this
	// process holds: every replica answers a decision alike, and a run that is not
	// paused (in flight, resumed, unknown, another user's) is not found on each.
	if err := s.decidesHere(ctx, runID, who); err != nil {
		return decisionView{}, err
	}
	paused, err := runtime.Decide(ctx, s.pausedStore(), runID, who, d, time.Now())
	if err != nil {
		return decisionView{}, err
	}
	decision := "reject"
	if d.Approve {
		decision = "approve"
	}
	s.metrics.ApprovalDecided(s.agentLabel(paused.Agent), decision, 1)
	s.log.Info("approval decided", "run", paused.RunID, "agent", paused.Agent, "call", d.CallID,
		"decision", decision, "by", p.User.ID, "undecided", len(paused.Undecided()))
	out := decisionView{pausedView: viewPaused(paused), Status: string(store.PauseWaiting)}
	if len(paused.Undecided()) == 0 {
		switch err := s.resume(ctx, paused, who); {
		case err == nil, errors.Is(err, runtime.ErrResuming):
			out.Status = "resumed"
		default:
			// The decisions are kept: the run resumes with them when its approvals
			// expire, here or on a replica that serves its agent.
			s.log.Warn("a decided run could not be resumed now", "run", paused.RunID, "agent", paused.Agent, "error", err.Error())
		}
	}
	return out, nil
}

// otherEngineError refuses a decision on a run that waits on another engine.
type otherEngineError struct{ waits, here runtime.Placement }

func (e *otherEngineError) Error() string {
	return fmt.Sprintf("the run waits on %s and this server runs on %s: decide through a server on the run's engine, or with `agentrun resume`", e.waits, e.here)
}

// decidesHere refuses a decision on a run that waits on another engine than
// this server's (a workflow while the server runs runs itself, or the
// reverse): the server could not resume it, and the run would wait on
// unaware. Any other run goes on to the decision, which reports the rest.
func (s *Server) decidesHere(ctx context.Context, runID string, who runtime.Decider) error {
	p, err := runtime.LoadPaused(ctx, s.pausedStore(), runID, who)
	if err != nil {
		return nil
	}
	here := s.placement()
	if err := p.Placement.ResumableFrom(here); err != nil {
		s.log.Warn("a decision on a run paused on another engine was refused", "run", p.RunID, "agent", p.Agent, "error", err.Error())
		return &otherEngineError{waits: p.Placement, here: here}
	}
	return nil
}

var (
	errNotServed = errors.New("this server does not serve the run's agent")
	errStopping  = errors.New("the server is shutting down")
)

// resume goes on with a paused run in the background, as a new execution of its
// agent registered under its id, so GET /v1/runs/{id} and its events show it. It
// returns once the execution is registered; ErrResuming when this process resumes
// the run already. ctx bounds only the wait for the execution that paused the run
// to be recorded.
func (s *Server) resume(ctx context.Context, p *runtime.Paused, who runtime.Decider) error {
	// The execution that paused the run stored it before it ended: let it record
	// its end first, so the events of this one follow its own.
	if old := s.runs.lookup(p.RunID); old != nil {
		old.mu.Lock()
		done := old.done
		old.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("the execution that paused the run has not ended")
		}
	}
	a, release := s.agent(p.Agent)
	if a == nil {
		return fmt.Errorf("%w: %s", errNotServed, p.Agent)
	}
	s.resumeMu.Lock()
	switch {
	case s.stopping:
		s.resumeMu.Unlock()
		release()
		return errStopping
	case s.resuming[p.RunID]:
		s.resumeMu.Unlock()
		release()
		return runtime.ErrResuming
	}
	s.resuming[p.RunID] = true
	s.running.Add(1) // before the shutdown's Wait: stopping is set under resumeMu first
	s.resumeMu.Unlock()
	forget := func() {
		s.resumeMu.Lock()
		delete(s.resuming, p.RunID)
		s.resumeMu.Unlock()
	}
	runCtx, cancel := context.WithTimeout(s.runsCtx, s.limits.RunTimeout)
	rec := s.runs.reopen(p.RunID, p.Agent, p.User, p.Conversation, p.Input, cancel)
	s.keepRequests(rec)
	slot := s.limiter.hold(p.User)
	observer := s.runObserver(rec, p.Agent)
	s.metrics.RunStarted(p.Agent)
	req := runtime.Request{Input: p.Input, User: tool.User{ID: p.User}, RunID: p.RunID}
	go s.execute(rec, p.Agent, req, func() { slot(); release() }, func() bool { return true }, cancel,
		func() (*runtime.Result, error) {
			// Forgotten before the record ends: a run that paused again can be resumed
			// as soon as its end is recorded (resume waits for that).
			defer forget()
			req := runtime.ResumeRequest{RunID: p.RunID, Decider: who, Observer: observer}
			if s.opts.Engine != nil {
				return s.opts.Engine.Resume(runCtx, a.Agent, req)
			}
			return a.Resume(runCtx, req)
		})
	return nil
}

// keepPaused keeps a run paused for approval in the registry until its approvals
// expire (and the usual while after), so its resumption continues its events.
func (s *Server) keepPaused(rec *runRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := runtime.LoadPaused(ctx, s.pausedStore(), rec.ID, sweeperDecider)
	if err != nil {
		return
	}
	rec.mu.Lock()
	rec.keepUntil = p.Expires
	rec.mu.Unlock()
}

// agentLabel is name if this server serves an agent of that name, else "other":
// a paused run's agent comes from the store, which other servers may share.
func (s *Server) agentLabel(name string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.agents[name] != nil {
		return name
	}
	return labelOther
}

// stopResumes begins the shutdown: no paused run is resumed any more, and the
// sweeper stops.
func (s *Server) stopResumes() {
	s.resumeMu.Lock()
	s.stopping = true
	s.resumeMu.Unlock()
	s.stopSweeper()
	<-s.sweeperDone
}

// sweeper resumes, every interval until ctx ends, the paused runs whose
// approvals expired: approval.on_timeout decides their undecided calls. Its first
// pass, and every fullSweepEvery-th, looks at every paused run: it also resumes
// those decided in full that no process resumed (the last decision came while a
// server was shutting down) and takes over those whose resuming execution died.
func (s *Server) sweeper(ctx context.Context, interval time.Duration) {
	defer close(s.sweeperDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for pass := 0; ; pass++ {
		s.sweep(ctx, time.Now(), pass%fullSweepEvery == 0)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fullSweepEvery is how many sweeps go by between two that list every paused run,
// not only the expired ones: those are rare, and a full list costs one read of each.
const fullSweepEvery = 10

// sweep resumes the expired paused runs of the agents this server serves — and,
// with all, those whose calls are all decided or whose resuming execution died —
// once each however many agents share a store. A run another process or goroutine
// resumes already (ErrResuming) is left to it.
func (s *Server) sweep(ctx context.Context, now time.Time, all bool) {
	s.mu.RLock()
	var stores []store.PausedRuns
	for _, a := range s.agents {
		if st := a.PausedRuns(); st != nil && !containsStore(stores, st) {
			stores = append(stores, st)
		}
	}
	s.mu.RUnlock()
	for _, st := range stores {
		q := store.PausedQuery{ExpiresBefore: now}
		if all {
			q.ExpiresBefore = now.AddDate(100, 0, 0)
		}
		expired, err := runtime.ListPaused(ctx, st, q)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("listing the expired paused runs failed", "error", err.Error())
			}
			continue
		}
		for _, p := range expired {
			if p.Placement.ResumableFrom(s.placement()) != nil {
				continue // its own engine resumes it (a workflow's timer), or a server there
			}
			abandoned := p.Status == store.PauseResuming && now.After(p.ClaimedUntil)
			if p.Status != store.PauseWaiting && !abandoned || now.Before(p.Expires) && len(p.Undecided()) > 0 {
				continue
			}
			switch err := s.resume(ctx, p, sweeperDecider); {
			case err == nil && now.Before(p.Expires):
				s.log.Info("resuming a run decided in full", "run", p.RunID, "agent", p.Agent)
			case err == nil:
				s.metrics.ApprovalDecided(p.Agent, "expired", len(p.Undecided()))
				s.log.Info("resuming a run whose approvals expired", "run", p.RunID, "agent", p.Agent, "undecided", len(p.Undecided()))
			case errors.Is(err, runtime.ErrResuming), errors.Is(err, errNotServed):
			case errors.Is(err, errStopping):
				return
			default:
				s.log.Warn("a run whose approvals expired could not be resumed", "run", p.RunID, "agent", p.Agent, "error", err.Error())
			}
		}
	}
}

// containsStore compares stores by identity; a store of a type that cannot be
// compared is taken as another one.
func containsStore(stores []store.PausedRuns, st store.PausedRuns) (found bool) {
	defer func() {
		if recover() != nil {
			found = false
		}
	}()
	for _, x := range stores {
		if x == st {
			return true
		}
	}
	return false
}
