package runtime

// Resuming a paused run: claiming it, then giving each call of the response it
// paused in its result, as people decided.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
)

// claimGrace is how long past its max_run_time an execution that resumes a run may
// take to save it, before another may take the run over.
const claimGrace = time.Minute

// resumeState is what earlier executions of a run leave to this one, which
// resumes it after a pause (Agent.Resume) or goes on from a checkpoint
// (Agent.Continue); zero for a new run.
type resumeState struct {
	id      string // the paused run this execution resumes ("" for a new run)
	version int    // the version of its record once claimed
	// decided are the call ids earlier pauses of the run waited on: a call of
	// the same id must name its args_hash to be decided (Approval.HashRequired).
	decided []string
	// turnsBefore are the model calls earlier executions of the run made: this
	// one checkpoints only once it made one of its own.
	turnsBefore int
}

// ResumeRequest resumes a paused run.
type ResumeRequest struct {
	RunID string
	// Decider is who resumes it: the run's user or an approver.
	Decider  Decider
	Observer Observer
	OnDelta  func(text string)
	// Host runs the execution; nil is this process (see Request.Host).
	Host Host
}

// Resume goes on with a paused run as a new execution, once every call it waits
// on is decided or its approvals expired (then approval.on_timeout decides the
// rest). The run is claimed first, so of two processes resuming it one runs it and
// the other gets ErrResuming: an approved call runs exactly once.
func (a *Agent) Resume(ctx context.Context, req ResumeRequest) (*Result, error) {
	if a.model == nil {
		return nil, errors.New("agent has no model")
	}
	db := a.PausedRuns()
	now := a.now(req.Host)
	var p store.PausedRun
	var st *pausedState
	abandoned := false
	for attempt := 0; ; attempt++ {
		var err error
		if p, st, err = loadPaused(ctx, db, req.RunID, req.Decider); err != nil {
			return nil, err
		}
		if p.Agent != a.spec.Name {
			return nil, fmt.Errorf("%w: %s, not %s", ErrOtherAgent, p.Agent, a.spec.Name)
		}
		if err := st.Placement.ResumableFrom(placementOf(req.Host)); err != nil {
			return nil, err
		}
		// An execution that claimed the run and neither finished nor paused it
		// within its max_run_time is gone (its process died): the run is taken over.
		abandoned = p.Status == store.PauseResuming && now.After(st.ClaimedUntil)
		if p.Status != store.PauseWaiting && !abandoned {
			return nil, ErrResuming
		}
		if undecided := st.undecided(); len(undecided) > 0 && now.Before(p.Expires) {
			return nil, fmt.Errorf("%w: %s (until %s)", ErrUndecided, strings.Join(undecided, ", "), p.Expires.UTC().Format(time.RFC3339))
		}
		st.ClaimedUntil = now.Add(a.settings.Guards.MaxRunTime + claimGrace).UTC()
		if p.State, err = json.Marshal(st); err != nil {
			return nil, err
		}
		p.Status = store.PauseResuming
		p.Version++
		err = db.UpdatePaused(ctx, p)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrPausedConflict) || attempt >= 8 {
			return nil, err
		}
	}
	ctx, cancel := hostOf(req.Host).RunContext(ctx, a.settings.Guards.MaxRunTime, errMaxRunTime)
	defer cancel()
	r := a.restore(ctx, &p, st, &req)
	r.finishPaused(st, now, abandoned)
	if r.state == StateThinking {
		r.loop()
		if r.result.Checkpoint != nil {
			return r.result, nil
		}
		r.learn()
	}
	return r.end(), nil
}

// finishPaused gives every call of the paused response its result — the kept one,
// the tool's for an approved call, a rejection for the others — and goes on
// thinking; or, when approvals expired and approval.on_timeout is stop, ends the run.
//
// A run taken over from an execution that died (abandoned) never runs its approved
// calls again: they may have run before the process stopped, so the model is told
// their outcome is unknown. At most once is the only promise a crash allows.
func (r *run) finishPaused(st *pausedState, now time.Time, abandoned bool) {
	onTimeout := r.agent.settings.Approval.OnTimeout
	calls := make([]call, len(st.Calls))
	var approved []int
	expired := false
	for i, pc := range st.Calls {
		c := &calls[i]
		c.tc, c.key, c.outcome, c.refusal, c.result = pc.ToolCall, r.callKey(i, pc.ToolCall.ID), pc.Outcome, pc.Refusal, pc.Result
		c.modelArgs, c.ran, c.discarded, c.duration = pc.ModelArgs, pc.Ran, pc.Discarded, pc.Duration
		if pc.Approval == nil {
			continue
		}
		d := pc.Approval.Decision
		if d == nil {
			expired = true
			d = &Decision{Approved: false, Expired: true, At: now.UTC()}
		}
		c.decision = d
		r.emit(Event{Kind: EventApprovalDecided, Tool: c.tc.Name, CallID: c.tc.ID, Passed: &d.Approved, Message: decidedBy(d, r.req.User.ID)})
		if d.Approved {
			approved = append(approved, i)
		}
	}
	if expired && onTimeout == spec.OnTimeoutStop {
		for i := range calls {
			if calls[i].decision != nil {
				calls[i].outcome, calls[i].result = OutcomeRejected, "Not run: the run ended before a decision."
			}
		}
		r.appendResults(calls)
		r.stop(StopApprovalTimeout, "nobody decided on "+strings.Join(st.undecided(), ", ")+" before the approvals expired")
		return
	}
	var runnable []int
	for _, i := range approved {
		c := &calls[i]
		if abandoned {
			c.outcome, c.result = OutcomeError, fmt.Sprintf("Error: the execution that was running the approved call %s stopped before it saved the result, so it is unknown whether %s ran. Check before calling it again.", c.tc.Name, c.tc.Name)
			continue
		}
		if r.prepare(c) {
			if hash := argsHash(c.tc.Name, c.modelArgs); hash != st.Calls[i].Approval.ArgsHash {
				r.refuse(c, RefusedSchema, "Error: the call's arguments changed after they were approved; it was not run.", "arguments changed after approval")
				continue
			}
			runnable = append(runnable, i)
		}
	}
	for i := range calls {
		c := &calls[i]
		if c.decision != nil && !c.decision.Approved {
			c.outcome, c.result = OutcomeRejected, rejectionText(c.tc.Name, c.decision, r.req.User.ID)
			r.emit(Event{Kind: EventToolRefused, Tool: c.tc.Name, CallID: c.tc.ID, Args: c.shownArgs(), Error: c.result})
		}
	}
	r.runParallel(r.ctx, calls, runnable)
	r.absorb(calls, runnable)
	for i := range calls {
		// A call that waited and did not run leaves the duplicate guard: the model
		// may retry it once the reason for the rejection is gone.
		if c := &calls[i]; c.decision != nil && !c.outcome.Ran() {
			delete(r.signatures, c.tc.Name+"\x00"+st.Calls[i].ModelArgs)
		}
	}
	r.appendResults(calls)
	if err := r.ctx.Err(); err != nil {
		r.stopForContext(err)
		return
	}
	r.transition(StateThinking, TriggerResults)
}
