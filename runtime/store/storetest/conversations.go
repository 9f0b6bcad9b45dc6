package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// testForeign: a commit to a conversation another user started writes nothing — not
// the turn, not the entities, not the facts — and says why.
func testForeign(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "alice", Conversation: "c1", Messages: turn(1, false), Seen: map[string][]string{"orders": {"A1"}}})
	err := s.Commit(ctx, store.Record{UserID: "mallory", Conversation: "c1", Messages: turn(2, false),
		Seen:  map[string][]string{"orders": {"M9"}},
		Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	if !errors.Is(err, store.ErrForeignConversation) {
		t.Fatalf("commit by another user: %v", err)
	}
	c, err := s.Conversation(ctx, "c1", 10)
	if err != nil || c.User != "alice" || c.Turns != 1 {
		t.Errorf("conversation %+v, %v", c, err)
	}
	if seen, err := s.Seen(ctx, "c1", "orders", "M9"); err != nil || seen {
		t.Errorf("the other user's entity was merged: %v %v", seen, err)
	}
	if facts, err := s.Facts(ctx, "mallory"); err != nil || len(facts) != 0 {
		t.Errorf("facts of the refused commit: %v %v", facts, err)
	}
}

func testEmpty(t *testing.T, s store.Store) {
	facts, err := s.Facts(ctx, "nobody")
	if err != nil || len(facts) != 0 {
		t.Errorf("facts %v, %v", facts, err)
	}
	c, err := s.Conversation(ctx, "none", 10)
	if err != nil || len(c.Messages) != 0 || c.Turns != 0 {
		t.Errorf("conversation %+v, %v", c, err)
	}
	if found, err := s.Seen(ctx, "none", "orders", "A1"); found || err != nil {
		t.Errorf("seen in no conversation: %v, %v", found, err)
	}
	for _, kinds := range [][]string{nil, {"orders"}} {
		if m, err := s.SeenEntities(ctx, "none", kinds...); len(m) != 0 || err != nil {
			t.Errorf("seen entities %v of no conversation: %v, %v", kinds, m, err)
		}
	}
}

func testFacts(t *testing.T, s store.Store) {
	before := time.Now().Add(-time.Second)
	commit(t, s, store.Record{UserID: "u1", Facts: []store.FactChange{
		{Op: store.FactSet, Key: "tier", Value: "gold", Source: "tool"},
		{Op: store.FactSet, Key: "address", Value: "上海市浦东新区 1 号", Source: "tool"},
		{Op: store.FactAppend, Key: "notes", Value: "cancelled A1", Source: "tool"},
		{Op: store.FactSet, Key: "long", Value: "0123456789", Source: "llm", MaxChars: 4},
	}})
	commit(t, s, store.Record{UserID: "u1", Facts: []store.FactChange{
		{Op: store.FactAppend, Key: "notes", Value: "refunded B2", Source: "tool", MaxChars: 30},
		{Op: store.FactSet, Key: "tier", Value: "platinum", Source: "llm"},
		{Op: store.FactDelete, Key: "address"},
		{Op: store.FactDelete, Key: "never-set"},
	}})
	commit(t, s, store.Record{UserID: "u2", Facts: []store.FactChange{{Op: store.FactSet, Key: "tier", Value: "basic", Source: "user"}}})
	facts, err := s.Facts(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range facts {
		got = append(got, f.Key+"="+f.Value+" ("+f.Source+")")
		if f.Updated.Before(before) || f.Updated.After(time.Now().Add(time.Second)) {
			t.Errorf("fact %s updated at %v", f.Key, f.Updated)
		}
	}
	want := []string{"long=0123 (llm)", "notes=cancelled A1\nrefunded B2 (tool)", "tier=platinum (llm)"}
	if !slices.Equal(got, want) {
		t.Errorf("facts %q, want %q (sorted by key)", got, want)
	}
	commit(t, s, store.Record{UserID: "u1", Facts: []store.FactChange{{Op: store.FactAppend, Key: "notes", Value: "more", MaxChars: 10}}})
	facts, _ = s.Facts(ctx, "u1")
	if v := valueOf(facts, "notes"); v != "unded B2\nmore"[len("unded B2\nmore")-10:] {
		t.Errorf("appended beyond max_chars keeps the newest text: %q", v)
	}
	other, _ := s.Facts(ctx, "u2")
	if len(other) != 1 || other[0].Value != "basic" {
		t.Errorf("u2 facts %v", other)
	}
}

func testHistory(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true)})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(2, false)})
	c, err := s.Conversation(ctx, "c1", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := append(turn(1, true), turn(2, false)...)
	if !reflect.DeepEqual(normalize(c.Messages), normalize(want)) {
		t.Errorf("messages\n got %+v\nwant %+v", c.Messages, want)
	}
	if c.Turns != 2 || c.User != "u1" {
		t.Errorf("turns %d, user %q", c.Turns, c.User)
	}
}

func testWindow(t *testing.T, s store.Store) {
	for i := 1; i <= 5; i++ {
		commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, i%2 == 0)})
	}
	c, err := s.Conversation(ctx, "c1", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := append(turn(4, true), turn(5, false)...)
	if !reflect.DeepEqual(normalize(c.Messages), normalize(want)) {
		t.Errorf("last 2 turns\n got %+v\nwant %+v", c.Messages, want)
	}
	if c.Turns != 5 {
		t.Errorf("turns %d", c.Turns)
	}
	if c, _ := s.Conversation(ctx, "c1", 0); len(c.Messages) != 0 {
		t.Errorf("a window of 0 turns returned %d messages", len(c.Messages))
	}
}

func testOutside(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "u1", Messages: turn(1, false), Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v"}}})
	if ids, _ := s.Conversations(ctx, "u1"); len(ids) != 0 {
		t.Errorf("a run outside a conversation created %v", ids)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 1 {
		t.Errorf("facts %v", facts)
	}
}

// Runs committing to one conversation at once lose nothing and never interleave.
func testConcurrent(t *testing.T, s store.Store) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- s.Commit(ctx, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, true),
				Facts: []store.FactChange{{Op: store.FactAppend, Key: "log", Value: fmt.Sprint(i), Source: "tool"}}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Conversation(ctx, "c1", n)
	if err != nil {
		t.Fatal(err)
	}
	if c.Turns != n || len(c.Messages) != 4*n {
		t.Fatalf("%d turns, %d messages", c.Turns, len(c.Messages))
	}
	seen := map[string]bool{}
	for i := 0; i < len(c.Messages); i += 4 {
		q, call, res, ans := c.Messages[i], c.Messages[i+1], c.Messages[i+2], c.Messages[i+3]
		var k int
		fmt.Sscanf(q.Content, "question %d", &k)
		if call.ToolCalls[0].ID != fmt.Sprintf("call_%d", k) || res.ToolCallID != call.ToolCalls[0].ID || ans.Content != fmt.Sprintf("answer %d", k) {
			t.Fatalf("turn %d interleaved: %+v", k, c.Messages[i:i+4])
		}
		seen[q.Content] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct turns", len(seen))
	}
	facts, _ := s.Facts(ctx, "u1")
	if got := len(splitLines(valueOf(facts, "log"))); got != n {
		t.Errorf("concurrent appends kept %d of %d entries", got, n)
	}
}

// later lets the clock move on between two commits: stores may order conversations
// by the time of their last commit, and some clocks advance by the millisecond.
func later() { time.Sleep(2 * time.Millisecond) }

// Conversations lists the user's conversations newest first: by their last commit,
// whatever it wrote — a turn, or only entities — and not moved by another user's
// refused commit.
func testConversationsOrder(t *testing.T, s store.Store) {
	want := func(ids ...string) {
		t.Helper()
		got, err := s.Conversations(ctx, "u1")
		if err != nil || !slices.Equal(got, ids) {
			t.Errorf("Conversations(u1) = %q, %v; want %q", got, err, ids)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		commit(t, s, store.Record{UserID: "u1", Conversation: id, Messages: turn(1, false)})
		later()
	}
	commit(t, s, store.Record{UserID: "u2", Conversation: "d", Messages: turn(1, false)})
	later()
	want("c", "b", "a")
	commit(t, s, store.Record{UserID: "u1", Conversation: "a", Messages: turn(2, true)})
	later()
	want("a", "c", "b")
	commit(t, s, store.Record{UserID: "u1", Conversation: "b", Seen: map[string][]string{"orders": {"A1"}}})
	later()
	want("b", "a", "c")
	if err := s.Commit(ctx, store.Record{UserID: "u2", Conversation: "c", Messages: turn(3, false)}); !errors.Is(err, store.ErrForeignConversation) {
		t.Fatalf("commit by another user: %v", err)
	}
	want("b", "a", "c")
}

// DeleteConversation deletes the owner's conversation — its turns and entities, not
// the user's facts nor other conversations — and answers ErrConversationNotFound,
// deleting nothing, for another user's conversation as for one that does not exist.
func testDeleteConversation(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true),
		Seen:  map[string][]string{"orders": {"A1", "A2"}, "cards": {"x"}},
		Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(2, false)})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c2", Messages: turn(1, false), Seen: map[string][]string{"orders": {"B1"}}})
	commit(t, s, store.Record{UserID: "u2", Conversation: "c3", Messages: turn(1, false), Seen: map[string][]string{"orders": {"A1"}}})

	intact := func(id, user string, turns int, seen map[string][]string) {
		t.Helper()
		c, err := s.Conversation(ctx, id, 10)
		if err != nil || c.User != user || c.Turns != turns || len(c.Messages) == 0 {
			t.Errorf("conversation %s: %+v, %v", id, c, err)
		}
		if got := seenOf(t, s, id); !reflect.DeepEqual(got, seen) {
			t.Errorf("seen entities of %s: %v, want %v", id, got, seen)
		}
	}
	c1Seen := map[string][]string{"orders": {"A1", "A2"}, "cards": {"x"}}
	for _, tt := range []struct{ user, id string }{{"u2", "c1"}, {"u1", "c3"}, {"u1", "nope"}, {"", "c1"}} {
		if err := s.DeleteConversation(ctx, tt.user, tt.id); !errors.Is(err, store.ErrConversationNotFound) {
			t.Errorf("DeleteConversation(%q, %q) = %v, want ErrConversationNotFound", tt.user, tt.id, err)
		}
	}
	intact("c1", "u1", 2, c1Seen)
	intact("c3", "u2", 1, map[string][]string{"orders": {"A1"}})

	if err := s.DeleteConversation(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Conversation(ctx, "c1", 10); err != nil || !reflect.DeepEqual(c, store.Conversation{}) {
		t.Errorf("deleted conversation: %+v, %v", c, err)
	}
	if seen := seenOf(t, s, "c1"); len(seen) != 0 {
		t.Errorf("seen entities left: %v", seen)
	}
	if found, err := s.Seen(ctx, "c1", "orders", "A1"); found || err != nil {
		t.Errorf("an entity of the deleted conversation is still seen: %v, %v", found, err)
	}
	if ids, err := s.Conversations(ctx, "u1"); err != nil || !slices.Equal(ids, []string{"c2"}) {
		t.Errorf("Conversations(u1) = %q, %v", ids, err)
	}
	if facts, _ := s.Facts(ctx, "u1"); valueOf(facts, "k") != "v" {
		t.Errorf("the user's facts went too: %v", facts)
	}
	intact("c2", "u1", 1, map[string][]string{"orders": {"B1"}})
	intact("c3", "u2", 1, map[string][]string{"orders": {"A1"}})
	if err := s.DeleteConversation(ctx, "u1", "c1"); !errors.Is(err, store.ErrConversationNotFound) {
		t.Errorf("deleting it again: %v", err)
	}

	// The id is free again, and nothing of the deleted conversation comes back with it.
	commit(t, s, store.Record{UserID: "u2", Conversation: "c1", Messages: turn(5, false), Seen: map[string][]string{"orders": {"Z9"}}})
	intact("c1", "u2", 1, map[string][]string{"orders": {"Z9"}})
}

func testForget(t *testing.T, s store.Store) {
	for _, u := range []string{"u1", "u2"} {
		commit(t, s, store.Record{UserID: u, Conversation: u + "-a", Messages: turn(1, true), Seen: map[string][]string{"orders": {"A1"}},
			Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: u}}})
		commit(t, s, store.Record{UserID: u, Conversation: u + "-b", Messages: turn(2, false)})
	}
	ids, err := s.Conversations(ctx, "u1")
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(ids)), []string{"u1-a", "u1-b"}) {
		t.Fatalf("conversations %v, %v", ids, err)
	}
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 0 {
		t.Errorf("facts left: %v", facts)
	}
	if ids, _ := s.Conversations(ctx, "u1"); len(ids) != 0 {
		t.Errorf("conversations left: %v", ids)
	}
	if c, _ := s.Conversation(ctx, "u1-a", 10); len(c.Messages) != 0 || c.Turns != 0 {
		t.Errorf("conversation left: %+v", c)
	}
	if seen := seenOf(t, s, "u1-a"); len(seen) != 0 {
		t.Errorf("seen entities left: %v", seen)
	}
	if found, err := s.Seen(ctx, "u1-a", "orders", "A1"); found || err != nil {
		t.Errorf("a forgotten entity is still seen: %v, %v", found, err)
	}
	if found, err := s.Seen(ctx, "u2-a", "orders", "A1"); !found || err != nil {
		t.Errorf("another user's entity went too: %v, %v", found, err)
	}
	if facts, _ := s.Facts(ctx, "u2"); len(facts) != 1 {
		t.Errorf("another user's facts went too: %v", facts)
	}
	if c, _ := s.Conversation(ctx, "u2-a", 10); c.Turns != 1 {
		t.Errorf("another user's conversation went too: %+v", c)
	}
}

// Random histories: whatever the window, what comes back starts with a user message
// and holds no tool message without the assistant call before it.
func testRandomHistories(t *testing.T, s store.Store) {
	rng := rand.New(rand.NewPCG(1, 2))
	for conv := range 5 {
		id := fmt.Sprintf("r%d", conv)
		turns := 1 + rng.IntN(8)
		var all []model.Message
		for i := range turns {
			msgs := []model.Message{{Role: model.RoleUser, Content: fmt.Sprint("q", i)}}
			for r := range rng.IntN(3) {
				var calls []model.ToolCall
				for c := range 1 + rng.IntN(3) {
					calls = append(calls, model.ToolCall{ID: fmt.Sprintf("c%d_%d_%d", i, r, c), Name: "t", Arguments: "{}"})
				}
				msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: calls})
				for _, c := range calls {
					msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Content: "r"})
				}
			}
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: fmt.Sprint("a", i)})
			commit(t, s, store.Record{UserID: "u", Conversation: id, Messages: msgs})
			all = append(all, msgs...)
		}
		for window := 0; window <= turns+1; window++ {
			c, err := s.Conversation(ctx, id, window)
			if err != nil {
				t.Fatal(err)
			}
			want := model.LastTurns(all, window)
			if !reflect.DeepEqual(normalize(c.Messages), normalize(want)) {
				t.Fatalf("conversation %s, window %d: got %d messages, want %d", id, window, len(c.Messages), len(want))
			}
			checkPaired(t, c.Messages)
		}
	}
}

func checkPaired(t *testing.T, msgs []model.Message) {
	t.Helper()
	if len(msgs) > 0 && msgs[0].Role != model.RoleUser {
		t.Fatalf("history starts with %s", msgs[0].Role)
	}
	open := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case model.RoleAssistant:
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case model.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("orphan tool message %s", m.ToolCallID)
			}
		}
	}
}
