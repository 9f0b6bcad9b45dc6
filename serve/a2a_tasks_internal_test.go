package serve

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/tool"
)

func a2aCtx(user, agent string) context.Context {
	return context.WithValue(context.Background(), a2aCallKey{}, &a2aCall{p: Principal{User: tool.User{ID: user}}, agent: agent})
}

// A task is its user's and its agent's: anyone else, or another agent's
// endpoint, neither reads nor changes it.
func TestA2ATaskStoreIsPerUserAndAgent(t *testing.T) {
	s := newA2ATaskStore(time.Minute)
	alice := a2aCtx("alice", "shop")
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if _, err := s.Create(alice, task); err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []context.Context{a2aCtx("bob", "shop"), a2aCtx("alice", "other"), context.Background()} {
		if _, err := s.Get(ctx, "t1"); err != a2a.ErrTaskNotFound {
			t.Errorf("Get by %v: %v", a2aCallFrom(ctx), err)
		}
		if _, err := s.Update(ctx, &taskstore.UpdateRequest{Task: task}); err != a2a.ErrTaskNotFound {
			t.Errorf("Update by %v: %v", a2aCallFrom(ctx), err)
		}
	}
	got, err := s.Get(alice, "t1")
	if err != nil || got.Task.ContextID != "c1" || got.Version != 1 {
		t.Fatalf("alice's Get: %v %v", got, err)
	}
	got.Task.ContextID = "changed" // a copy of its own
	if again, _ := s.Get(alice, "t1"); again.Task.ContextID != "c1" {
		t.Error("a read shares the stored task")
	}
	if !s.hasContext("alice", "c1") || s.hasContext("bob", "c1") {
		t.Error("the context is alice's alone")
	}
}

// Tasks are kept as runs are: an ended task keepFinished, one waiting for
// approval until its approvals expire, one in flight while it may still run;
// a full store drops its oldest ended tasks first, then the waiting ones.
func TestA2ATaskStoreIsBounded(t *testing.T) {
	s := newA2ATaskStore(time.Minute)
	ctx := a2aCtx("alice", "shop")
	now := time.Now()
	put := func(id string, state a2a.TaskState, age time.Duration, meta map[string]any) {
		task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
		if _, err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		task.Status.State, task.Metadata = state, meta
		if _, err := s.Update(ctx, &taskstore.UpdateRequest{Task: task}); err != nil {
			t.Fatal(err)
		}
		s.tasks[a2a.TaskID(id)].updated = now.Add(-age)
	}
	expires := map[string]any{a2aExpiresKey: now.Add(time.Hour).Format(time.RFC3339Nano)}
	put("done-old", a2a.TaskStateCompleted, keepFinished+time.Second, nil)
	put("done-new", a2a.TaskStateCompleted, time.Second, nil)
	put("waiting", a2a.TaskStateInputRequired, keepFinished+time.Second, expires)
	put("waiting-expired", a2a.TaskStateInputRequired, keepFinished+time.Second, nil)
	put("working", a2a.TaskStateWorking, keepFinished, nil)
	put("working-dead", a2a.TaskStateWorking, keepFinished+2*time.Minute, nil)
	s.mu.Lock()
	s.sweepLocked(now)
	s.mu.Unlock()
	for id, kept := range map[string]bool{"done-old": false, "done-new": true, "waiting": true, "waiting-expired": false, "working": true, "working-dead": false} {
		if _, ok := s.tasks[a2a.TaskID(id)]; ok != kept {
			t.Errorf("%s kept: %v, want %v", id, ok, kept)
		}
	}

	s = newA2ATaskStore(time.Minute)
	for i := range maxRuns {
		state := a2a.TaskStateCompleted
		if i%2 == 0 {
			state = a2a.TaskStateInputRequired
		}
		put(fmt.Sprint(i), state, time.Duration(maxRuns-i)*time.Millisecond, expires)
	}
	put("one more", a2a.TaskStateWorking, 0, nil)
	if n := len(s.tasks); n != maxRuns*9/10 {
		t.Fatalf("%d tasks kept, want %d", n, maxRuns*9/10)
	}
	waiting := 0
	for _, task := range s.tasks {
		if task.state == a2a.TaskStateInputRequired {
			waiting++
		}
	}
	if waiting != maxRuns/2 {
		t.Errorf("%d tasks waiting for approval kept, want all %d: ended ones go first", waiting, maxRuns/2)
	}
	if s.tasks["1"] != nil || s.tasks[a2a.TaskID(fmt.Sprint(maxRuns-1))] == nil || s.tasks["one more"] == nil {
		t.Error("the oldest ended tasks go first, never the new one")
	}
}

// A decision is on the calls the task showed: when the run has gone on to other
// calls since, an "approve" meant for the shown one is refused, and a decision
// without a hash takes the hash of the arguments shown.
func TestA2ADecisionsAreOnWhatWasShown(t *testing.T) {
	paused := &runtime.Paused{Approvals: []runtime.Approval{{CallID: "call_2", ArgsHash: "h2"}}}
	approve := &a2a.Message{Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("approve")}}
	if _, err := a2aDecisions(approve, paused, map[string]string{"call_1": "h1"}); err == nil {
		t.Error("an approve shown for call_1 decided call_2")
	}
	got, err := a2aDecisions(approve, paused, map[string]string{"call_2": "h2-as-shown"})
	if err != nil || len(got) != 1 || got[0].CallID != "call_2" || got[0].ArgsHash != "h2-as-shown" {
		t.Errorf("decisions = %+v, %v; want call_2 with the hash shown", got, err)
	}
}
