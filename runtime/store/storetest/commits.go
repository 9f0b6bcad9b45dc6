package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// keyedRecord is a run's commit to conversation c1 of u1 under key: turn i, an
// appended fact (which a second application would append again) and a seen entity.
func keyedRecord(key string, i int) store.Record {
	return store.Record{UserID: "u1", Conversation: "c1", Key: key, Messages: turn(i, true),
		Seen:  map[string][]string{"orders": {fmt.Sprintf("A%d", i)}},
		Facts: []store.FactChange{{Op: store.FactAppend, Key: "log", Value: fmt.Sprint(i), Source: "tool"}}}
}

// checkCommitted fails unless c1 holds the turns numbered want, in order, the log
// fact their entries and the seen orders their entities, oldest first.
func checkCommitted(t testing.TB, s store.Store, want ...int) {
	t.Helper()
	c, err := s.Conversation(ctx, "c1", 100)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []model.Message
	var log, orders []string
	for _, i := range want {
		msgs = append(msgs, turn(i, true)...)
		log = append(log, fmt.Sprint(i))
		orders = append(orders, fmt.Sprintf("A%d", i))
	}
	if c.Turns != len(want) || !reflect.DeepEqual(normalize(c.Messages), normalize(msgs)) {
		t.Errorf("%d turns, messages %+v; want the turns %v", c.Turns, c.Messages, want)
	}
	facts, err := s.Facts(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if got := splitLines(valueOf(facts, "log")); !reflect.DeepEqual(got, log) {
		t.Errorf("log fact %q, want %q", got, log)
	}
	if got := seenOf(t, s, "c1")["orders"]; !reflect.DeepEqual(got, orders) {
		t.Errorf("seen orders %q, want %q", got, orders)
	}
}

// testCommitKeyRetried: a commit retried under its key — after another run's, as a
// durable engine may retry one late — succeeds and writes nothing: not the turn
// again, not the appended fact, and its entity does not become the newest.
func testCommitKeyRetried(t *testing.T, s store.Store) {
	rec := keyedRecord("run-1/commit", 1)
	commit(t, s, rec)
	commit(t, s, keyedRecord("run-2/commit", 2))
	if err := s.Commit(ctx, rec); err != nil {
		t.Fatalf("the retried commit: %v", err)
	}
	checkCommitted(t, s, 1, 2)
	// A keyed commit outside any conversation is made once too.
	facts := store.Record{UserID: "u2", Key: "run-3/commit",
		Facts: []store.FactChange{{Op: store.FactAppend, Key: "notes", Value: "once", Source: "tool"}}}
	commit(t, s, facts)
	commit(t, s, facts)
	if got, err := s.Facts(ctx, "u2"); err != nil || valueOf(got, "notes") != "once" {
		t.Errorf("facts after a retried commit outside a conversation: %v, %v", got, err)
	}
}

// testCommitKeysDistinct: commits under different keys, or under none, are all made.
func testCommitKeysDistinct(t *testing.T, s store.Store) {
	commit(t, s, keyedRecord("a", 1))
	commit(t, s, keyedRecord("b", 2))
	checkCommitted(t, s, 1, 2)
	// Without a key a commit made twice is made twice, as it always was.
	commit(t, s, keyedRecord("", 3))
	commit(t, s, keyedRecord("", 4))
	commit(t, s, keyedRecord("", 4))
	c, err := s.Conversation(ctx, "c1", 100)
	if err != nil || c.Turns != 5 {
		t.Errorf("%d turns after five commits, three without a key: %v", c.Turns, err)
	}
}

// testCommitKeyOfFailedCommit: a commit that fails keeps no key, so the same key in
// a commit that can be made is made.
func testCommitKeyOfFailedCommit(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "alice", Conversation: "theirs", Messages: turn(0, false)})
	foreign := keyedRecord("k1", 1)
	foreign.Conversation = "theirs"
	if err := s.Commit(ctx, foreign); !errors.Is(err, store.ErrForeignConversation) {
		t.Fatalf("a keyed commit to another user's conversation: %v", err)
	}
	commit(t, s, keyedRecord("k1", 1))

	conflict := keyedRecord("k2", 2)
	conflict.Resumed, conflict.ResumedVersion = "no-such-run", 1
	if err := s.Commit(ctx, conflict); !errors.Is(err, store.ErrPausedConflict) {
		t.Fatalf("a keyed commit resuming no run: %v", err)
	}
	commit(t, s, keyedRecord("k2", 2))
	checkCommitted(t, s, 1, 2)
	if c, err := s.Conversation(ctx, "theirs", 10); err != nil || c.Turns != 1 {
		t.Errorf("the other user's conversation: %+v, %v", c, err)
	}
}

// testCommitKeyConcurrent: commits with one key at once all succeed, and one of them
// is made.
func testCommitKeyConcurrent(t *testing.T, s store.Store) {
	const n = 8
	rec := keyedRecord("run-1/commit", 1)
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			errs <- s.Commit(ctx, rec)
		})
	}
	time.Sleep(time.Millisecond) // let them all wait at the start
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent commit with the key: %v", err)
		}
	}
	checkCommitted(t, s, 1)
}
