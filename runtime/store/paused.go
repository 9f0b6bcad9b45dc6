package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// PausedRun is a run waiting for people to decide on some of its tool calls, as a
// store keeps it: a few fields to find and guard it by, and the run's state, which
// only the runtime reads.
type PausedRun struct {
	ID     string // the run's id
	UserID string // whom the run acts for
	Agent  string // the agent's name: a store may hold the runs of many agents
	Status PauseStatus
	// Version counts the record's changes: UpdatePaused writes a record only over
	// the version before it, so two processes never both claim a run.
	Version int
	Created time.Time
	// Expires is when the calls still undecided get approval.on_timeout.
	Expires time.Time
	State   []byte // the run's state, JSON
}

// PauseStatus is where a paused run is.
type PauseStatus string

const (
	PauseWaiting  PauseStatus = "waiting"  // for decisions
	PauseResuming PauseStatus = "resuming" // claimed by an execution that resumes it
)

// PausedRuns keeps paused runs until they resume. The memory stores implement it;
// a run writes its paused record with Record.Pause in the commit that ends its
// execution, and deletes it with Record.Resumed in the commit that ends the
// execution that resumed it, so the pause and the run's other writes are one
// transaction each time. Both writes are guarded by the record's version, like
// UpdatePaused: an execution whose claim another took over writes nothing.
type PausedRuns interface {
	// PausedRun returns the paused run with the id; ErrRunNotFound if there is none.
	PausedRun(ctx context.Context, id string) (PausedRun, error)
	// UpdatePaused replaces the stored run p.ID if the stored Version is
	// p.Version-1 (compare and swap): ErrRunNotFound if there is none,
	// ErrPausedConflict if another change came first.
	UpdatePaused(ctx context.Context, p PausedRun) error
	// PausedRuns lists paused runs: a user's when q.UserID is set, newest first by
	// Created; or, when q.ExpiresBefore is set, every run (of any user) that
	// expires before it, soonest first. At most q.Limit (0: all).
	PausedRuns(ctx context.Context, q PausedQuery) ([]PausedRun, error)
}

// PausedQuery selects paused runs.
type PausedQuery struct {
	UserID        string
	ExpiresBefore time.Time
	Limit         int
}

// Select keeps the runs q selects, in PausedRuns' order and within its limit: for
// a store that reads candidates and filters them itself.
func (q PausedQuery) Select(runs []PausedRun) []PausedRun {
	out := slices.DeleteFunc(runs, func(p PausedRun) bool {
		return q.UserID != "" && p.UserID != q.UserID || !q.ExpiresBefore.IsZero() && !p.Expires.Before(q.ExpiresBefore)
	})
	slices.SortFunc(out, func(a, b PausedRun) int {
		c := a.Expires.Compare(b.Expires)
		if q.UserID != "" {
			c = b.Created.Compare(a.Created)
		}
		return cmp.Or(c, strings.Compare(a.ID, b.ID))
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out
}

var (
	// ErrRunNotFound is a paused run that does not exist (or that the caller may
	// not see: the two are not told apart).
	ErrRunNotFound = errors.New("no such paused run")
	// ErrPausedConflict is an UpdatePaused that lost a race with another change.
	ErrPausedConflict = errors.New("the paused run was changed by someone else")
)
