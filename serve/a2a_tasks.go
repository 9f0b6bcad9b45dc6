package serve

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// The A2A tasks of this process, kept as runs are: by the process that runs
// them, for keepFinished after they end (a task waiting for approval until its
// run's approvals expire), at most maxRuns of them. A task is its user's and
// its agent's: for anyone else, or through another agent's endpoint, it is not
// found, exactly as one that does not exist.

// a2aTaskStore is the A2A SDK's task store (taskstore.Store). Its caller is the
// a2aCall of the request's context.
type a2aTaskStore struct {
	// stale is how long a task in flight (submitted, working) may go without a
	// change before it is taken for dead: longer than a run may run.
	stale time.Duration

	mu    sync.Mutex
	tasks map[a2a.TaskID]*a2aTask
	// started are the tasks by the message that started them (a2aMessageKey),
	// so a message sent again gets its task.
	started   map[userKey]a2a.TaskID
	lastSweep time.Time
}

type a2aTask struct {
	user, agent string
	contextID   string
	// data is the task as JSON: every read decodes a copy of its own, so no
	// caller shares the SDK's objects.
	data    []byte
	version taskstore.TaskVersion
	state   a2a.TaskState
	updated time.Time
	// keepUntil keeps a task that waits for approval while its run waits.
	keepUntil time.Time
	// key is the message that started the task: its key in started, and digest.
	key *runKey
}

var _ taskstore.Store = (*a2aTaskStore)(nil)

// a2aSweepEvery is how often a store that is not full drops its expired tasks.
const a2aSweepEvery = time.Minute

func newA2ATaskStore(runTimeout time.Duration) *a2aTaskStore {
	return &a2aTaskStore{stale: runTimeout + keepFinished, tasks: map[a2a.TaskID]*a2aTask{}, started: map[userKey]a2a.TaskID{}}
}

// caller is the user and agent a request to the store acts for; false without one.
func caller(ctx context.Context) (user, agent string, ok bool) {
	c := a2aCallFrom(ctx)
	if c == nil || c.p.User.ID == "" {
		return "", "", false
	}
	return c.p.User.ID, c.agent, true
}

// Create implements taskstore.Store.
func (s *a2aTaskStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	c := a2aCallFrom(ctx)
	if c == nil || c.p.User.ID == "" {
		return taskstore.TaskVersionMissing, a2a.ErrUnauthenticated
	}
	c.mu.Lock()
	key := c.key
	c.mu.Unlock()
	data, err := json.Marshal(task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.tasks[task.ID]; dup {
		return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
	}
	if len(s.tasks) >= maxRuns || now.Sub(s.lastSweep) > a2aSweepEvery {
		s.sweepLocked(now)
	}
	s.tasks[task.ID] = &a2aTask{user: c.p.User.ID, agent: c.agent, contextID: task.ContextID, data: data, version: 1,
		state: task.Status.State, updated: now, key: key}
	if key != nil {
		s.started[userKey{key.user, key.key}] = task.ID
	}
	return 1, nil
}

// Update implements taskstore.Store.
func (s *a2aTaskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	data, err := json.Marshal(req.Task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ownLocked(ctx, req.Task.ID)
	switch {
	case t == nil:
		return taskstore.TaskVersionMissing, a2a.ErrTaskNotFound
	case req.PrevVersion != taskstore.TaskVersionMissing && req.PrevVersion != t.version:
		return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
	}
	t.data, t.state, t.updated = data, req.Task.Status.State, time.Now()
	t.version++
	t.keepUntil = time.Time{}
	if expires, ok := req.Task.Metadata[a2aExpiresKey].(string); ok && t.state == a2a.TaskStateInputRequired {
		t.keepUntil, _ = time.Parse(time.RFC3339Nano, expires)
	}
	return t.version, nil
}

// Get implements taskstore.Store: another user's task, or another agent's, is
// not found.
func (s *a2aTaskStore) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	s.mu.Lock()
	t := s.ownLocked(ctx, id)
	var data []byte
	var version taskstore.TaskVersion
	if t != nil {
		data, version = t.data, t.version
	}
	s.mu.Unlock()
	if t == nil {
		return nil, a2a.ErrTaskNotFound
	}
	var task a2a.Task
	if err := json.Unmarshal(data, &task); err != nil {
		return nil, err
	}
	return &taskstore.StoredTask{Task: &task, Version: version}, nil
}

// List implements taskstore.Store. ListTasks is not offered: a client follows
// the tasks it started by their ids.
func (s *a2aTaskStore) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return nil, a2a.NewError(a2a.ErrUnsupportedOperation, "ListTasks is not supported: get each task by its id")
}

// ownLocked is the task if the caller may see it, else nil.
func (s *a2aTaskStore) ownLocked(ctx context.Context, id a2a.TaskID) *a2aTask {
	user, agent, ok := caller(ctx)
	t := s.tasks[id]
	if !ok || t == nil || t.user != user || t.agent != agent {
		return nil
	}
	return t
}

// owns reports whether the caller may see the task with the id.
func (s *a2aTaskStore) owns(ctx context.Context, id a2a.TaskID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownLocked(ctx, id) != nil
}

// byMessage is the task that user's message id started through agent: found,
// with its id; found with no id when the message was another (its digest
// differs).
func (s *a2aTaskStore) byMessage(user, agent, messageID string, digest [sha256.Size]byte) (id a2a.TaskID, found bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, found = s.started[userKey{user, a2aMessageKey(agent, messageID)}]
	if found && s.tasks[id].key.digest != digest {
		return "", true
	}
	return id, found
}

// deleteLocked drops a task and its message key.
func (s *a2aTaskStore) deleteLocked(id a2a.TaskID) {
	if t := s.tasks[id]; t != nil && t.key != nil && s.started[userKey{t.key.user, t.key.key}] == id {
		delete(s.started, userKey{t.key.user, t.key.key})
	}
	delete(s.tasks, id)
}

// hasContext reports whether user has a task in the context with the id, of
// any agent: a context, like a conversation, is the user's.
func (s *a2aTaskStore) hasContext(user, contextID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		if t.user == user && t.contextID == contextID {
			return true
		}
	}
	return false
}

// sweepLocked drops the tasks over keepFinished (and keepUntil) and those in
// flight that changed no more for longer than a run may take; while the store
// is full, the oldest that are over or wait for input, down to nine tenths of
// maxRuns.
func (s *a2aTaskStore) sweepLocked(now time.Time) {
	s.lastSweep = now
	type aged struct {
		id      a2a.TaskID
		waiting bool
		at      time.Time
	}
	var done []aged
	for id, t := range s.tasks {
		inFlight := t.state == a2a.TaskStateSubmitted || t.state == a2a.TaskStateWorking
		switch {
		case inFlight && now.Sub(t.updated) > s.stale:
			s.deleteLocked(id)
		case inFlight:
		case now.Sub(t.updated) > keepFinished && now.After(t.keepUntil):
			s.deleteLocked(id)
		default:
			done = append(done, aged{id, t.state == a2a.TaskStateInputRequired, t.updated})
		}
	}
	if len(s.tasks) < maxRuns {
		return
	}
	// Tasks over go first, then those waiting for input: their runs can still be
	// decided through the approval endpoints.
	slices.SortFunc(done, func(a, b aged) int {
		if a.waiting != b.waiting {
			if a.waiting {
				return 1
			}
			return -1
		}
		return a.at.Compare(b.at)
	})
	for _, d := range done {
		if len(s.tasks) < maxRuns*9/10 {
			break
		}
		s.deleteLocked(d.id)
	}
}
