package runtime

// The operations on paused runs that people and their tools use, outside any
// run: list them, read one, decide on its calls. Resuming one is the agent's
// (Agent.Resume, resume.go).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentrun/agentrun/runtime/store"
)

// Paused is a paused run as lists and approval screens show it.
type Paused struct {
	RunID        string            `json:"run_id"`
	Agent        string            `json:"agent"`
	Spec         string            `json:"spec,omitempty"` // the agent's spec file, absolute
	User         string            `json:"user"`
	Conversation string            `json:"conversation,omitempty"`
	Intent       string            `json:"intent,omitempty"`
	Input        string            `json:"input"` // the user's message that started the run
	Status       store.PauseStatus `json:"status"`
	// ClaimedUntil is, for a run being resumed, when its execution is given up for
	// dead and another may take the run over (Agent.Resume does).
	ClaimedUntil time.Time  `json:"claimed_until,omitzero"`
	Created      time.Time  `json:"created"`
	Expires      time.Time  `json:"expires"`
	Approvals    []Approval `json:"approvals"`
	// Placement is where the run waits: only an execution there may resume it.
	Placement Placement `json:"placement,omitzero"`
}

// Undecided lists the ids of the calls nobody has decided on yet.
func (p *Paused) Undecided() []string {
	var out []string
	for _, a := range p.Approvals {
		if a.Decision == nil {
			out = append(out, a.CallID)
		}
	}
	return out
}

// Decider is who decides on a paused run's calls, or resumes it.
type Decider struct {
	ID string // recorded with the decision
	// Approver may decide on any user's runs; anyone else only on runs that act
	// for them (ID is the run's user).
	Approver bool
}

func (d Decider) may(p *store.PausedRun) bool { return d.Approver || d.ID != "" && d.ID == p.UserID }

// DecideRequest is one decision on a call.
type DecideRequest struct {
	CallID  string
	Approve bool
	Reason  string
	// ArgsHash, when set, must be the call's (Approval.ArgsHash): a decision made
	// on other arguments than those waiting is refused.
	ArgsHash string
}

// maxReasonRunes caps a decision's reason, which the model reads.
const maxReasonRunes = 1000

var (
	ErrCallNotFound    = errors.New("the run has no call waiting for approval with this id")
	ErrAlreadyDecided  = errors.New("the call was already decided")
	ErrArgsChanged     = errors.New("the call's arguments are not those the decision was made for")
	ErrHashRequired    = errors.New("the run had another call of this id: the decision must name the call's args_hash")
	ErrApprovalExpired = errors.New("the run's approvals have expired")
	ErrResuming        = errors.New("the run is already being resumed")
	ErrUndecided       = errors.New("calls still wait for a decision")
	ErrOtherAgent      = errors.New("the paused run belongs to another agent")
	ErrNoPausedStore   = errors.New("the agent's store cannot keep paused runs")
)

func (s *pausedState) undecided() []string {
	var out []string
	for _, c := range s.Calls {
		if c.Approval != nil && c.Approval.Decision == nil {
			out = append(out, c.ToolCall.ID)
		}
	}
	return out
}

func (s *pausedState) view(p *store.PausedRun) *Paused {
	v := &Paused{RunID: p.ID, Agent: p.Agent, Spec: s.SpecFile, User: p.UserID, Conversation: cmp.Or(s.TraceConversation, s.Conversation),
		Intent: s.Intent, Status: p.Status, ClaimedUntil: s.ClaimedUntil, Created: p.Created, Expires: p.Expires, Approvals: []Approval{},
		Placement: s.Placement}
	if len(s.Messages) > 0 {
		v.Input = s.Messages[0].Content
	}
	for _, c := range s.Calls {
		if c.Approval != nil {
			v.Approvals = append(v.Approvals, *c.Approval)
		}
	}
	return v
}

// loadPaused reads a paused run that who may see. A run of another user is not
// found, like one that does not exist.
func loadPaused(ctx context.Context, db store.PausedRuns, id string, who Decider) (store.PausedRun, *pausedState, error) {
	if db == nil {
		return store.PausedRun{}, nil, ErrNoPausedStore
	}
	p, err := db.PausedRun(ctx, id)
	if err != nil {
		return store.PausedRun{}, nil, err
	}
	if !who.may(&p) {
		return store.PausedRun{}, nil, store.ErrRunNotFound
	}
	st, err := decodePaused(p.State)
	if err != nil {
		return store.PausedRun{}, nil, fmt.Errorf("paused run %s: %w", id, err)
	}
	return p, st, nil
}

func decodePaused(b []byte) (*pausedState, error) {
	var st pausedState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("its state does not decode: %w", err)
	}
	if st.Format != pausedFormat {
		return nil, fmt.Errorf("its state has format %d; this agentrun reads format %d", st.Format, pausedFormat)
	}
	return &st, nil
}

// LoadPaused returns a paused run that who may see.
func LoadPaused(ctx context.Context, store store.PausedRuns, id string, who Decider) (*Paused, error) {
	p, st, err := loadPaused(ctx, store, id, who)
	if err != nil {
		return nil, err
	}
	return st.view(&p), nil
}

// ListPaused lists the paused runs q selects. A record whose state does not
// decode is left out rather than failing the list.
func ListPaused(ctx context.Context, store store.PausedRuns, q store.PausedQuery) ([]*Paused, error) {
	if store == nil {
		return nil, ErrNoPausedStore
	}
	recs, err := store.PausedRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]*Paused, 0, len(recs))
	for i := range recs {
		if st, err := decodePaused(recs[i].State); err == nil {
			out = append(out, st.view(&recs[i]))
		}
	}
	return out, nil
}

// Decide records a decision on one call of a paused run. Each call is decided once;
// a decision after the run's approvals expired, or on a run being resumed, is
// refused. It returns the run as it now stands: when Undecided is empty, Resume can
// go on with it.
func Decide(ctx context.Context, db store.PausedRuns, runID string, who Decider, d DecideRequest, now time.Time) (*Paused, error) {
	for attempt := 0; ; attempt++ {
		p, st, err := loadPaused(ctx, db, runID, who)
		if err != nil {
			return nil, err
		}
		if p.Status != store.PauseWaiting {
			return nil, ErrResuming
		}
		i := slices.IndexFunc(st.Calls, func(c pausedCall) bool { return c.Approval != nil && c.ToolCall.ID == d.CallID })
		if i < 0 {
			return nil, ErrCallNotFound
		}
		a := st.Calls[i].Approval
		switch {
		case a.Decision != nil:
			return nil, ErrAlreadyDecided
		case d.ArgsHash != "" && d.ArgsHash != a.ArgsHash:
			return nil, ErrArgsChanged
		case a.HashRequired && d.ArgsHash == "":
			return nil, ErrHashRequired
		case !now.Before(p.Expires):
			return nil, ErrApprovalExpired
		}
		a.Decision = &Decision{Approved: d.Approve, By: who.ID, Reason: clipText(d.Reason, maxReasonRunes), At: now.UTC()}
		if p.State, err = json.Marshal(st); err != nil {
			return nil, err
		}
		p.Version++
		switch err := db.UpdatePaused(ctx, p); {
		case err == nil:
			return st.view(&p), nil
		case errors.Is(err, store.ErrPausedConflict) && attempt < 8:
			continue // another decision came first: read it and decide again
		default:
			return nil, err
		}
	}
}
