package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentrun/agentrun/runtime/store"
)

// Continuer is a Host that may ask a run to stop between two turns and go on
// as a new execution: a durable engine whose history of the run grew long
// (Temporal's continue-as-new).
type Continuer interface {
	Host
	// ContinueNow reports whether the run should checkpoint before its next turn.
	ContinueNow() bool
}

// Checkpoint is a run between two turns, as a new execution goes on with it
// (Agent.Continue): its messages, counters, plan, seen entities and what it
// will commit. Only the runtime reads State.
type Checkpoint struct {
	RunID string          `json:"run_id"`
	State json.RawMessage `json:"state"`
}

// checkpoint stops a top-level run before a turn when its host asks, once this
// execution made a model call of its own (so every execution makes progress),
// and keeps its state in the result: nothing ends or is committed.
func (r *run) checkpoint() bool {
	c, ok := r.req.Host.(Continuer)
	if !ok || r.parent != nil || r.result.Turns <= r.resume.turnsBefore || !c.ContinueNow() {
		return false
	}
	st := r.snapshot()
	st.Started, st.Resumed, st.PausedVersion = r.started, r.resume.id, r.resume.version
	state, err := json.Marshal(st)
	if err != nil {
		return false // go on here rather than lose the run
	}
	r.result.Checkpoint = &Checkpoint{RunID: r.id, State: state}
	return true
}

// ContinueRequest goes on with a checkpointed run.
type ContinueRequest struct {
	Checkpoint Checkpoint
	Observer   Observer
	Host       Host
}

// Continue goes on with a run from its checkpoint, in this execution, to its
// end (or its next checkpoint or pause): the same run, as if it had not
// stopped, its max_run_time counted from when it first started.
func (a *Agent) Continue(ctx context.Context, req ContinueRequest) (*Result, error) {
	if a.model == nil {
		return nil, fmt.Errorf("agent has no model")
	}
	var st pausedState
	if err := json.Unmarshal(req.Checkpoint.State, &st); err != nil {
		return nil, fmt.Errorf("the checkpoint of run %s: %w", req.Checkpoint.RunID, err)
	}
	h := hostOf(req.Host)
	ctx, cancel := h.RunContext(ctx, a.settings.Guards.MaxRunTime-h.Now().Sub(st.Started), errMaxRunTime)
	defer cancel()
	r := a.restore(ctx, &store.PausedRun{ID: req.Checkpoint.RunID, Version: st.PausedVersion}, &st, &ResumeRequest{Observer: req.Observer, Host: req.Host})
	r.state, r.started, r.resume.id = StateThinking, st.Started, st.Resumed
	r.loop()
	if r.result.Checkpoint != nil {
		return r.result, nil
	}
	r.learn()
	return r.end(), nil
}
