// Package storetest is the conformance suite of runtime.Store, runtime.PausedRuns and
// runtime.Blobs: every store — memory, sqlite, redis, postgres — runs the same tests.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
)

// Open returns a new, empty store for one test; the test cleans it up.
type Open func(t *testing.T) runtime.Store

// Run runs the whole suite.
func Run(t *testing.T, open Open) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, open(t)) })
	t.Run("Facts", func(t *testing.T) { testFacts(t, open(t)) })
	t.Run("History", func(t *testing.T) { testHistory(t, open(t)) })
	t.Run("Window", func(t *testing.T) { testWindow(t, open(t)) })
	t.Run("Seen", func(t *testing.T) { testSeen(t, open(t)) })
	t.Run("SeenMerge", func(t *testing.T) { testSeenMerge(t, open(t)) })
	t.Run("SeenCap", func(t *testing.T) { testSeenCap(t, open(t)) })
	t.Run("SeenConcurrent", func(t *testing.T) { testSeenConcurrent(t, open(t)) })
	t.Run("SeenLookup", func(t *testing.T) { testSeenLookup(t, open(t)) })
	t.Run("SeenEntities", func(t *testing.T) { testSeenEntities(t, open(t)) })
	t.Run("OutsideConversation", func(t *testing.T) { testOutside(t, open(t)) })
	t.Run("ForeignConversation", func(t *testing.T) { testForeign(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("ConversationsNewestFirst", func(t *testing.T) { testConversationsOrder(t, open(t)) })
	t.Run("DeleteConversation", func(t *testing.T) { testDeleteConversation(t, open(t)) })
	t.Run("Forget", func(t *testing.T) { testForget(t, open(t)) })
	t.Run("RandomHistories", func(t *testing.T) { testRandomHistories(t, open(t)) })
	t.Run("PausedRoundTrip", func(t *testing.T) { testPausedRoundTrip(t, open(t)) })
	t.Run("PausedReplace", func(t *testing.T) { testPausedReplace(t, open(t)) })
	t.Run("PausedWithConversation", func(t *testing.T) { testPausedWithConversation(t, open(t)) })
	t.Run("PausedForeignConversation", func(t *testing.T) { testPausedForeign(t, open(t)) })
	t.Run("PausedResumed", func(t *testing.T) { testPausedResumed(t, open(t)) })
	t.Run("PausedConflict", func(t *testing.T) { testPausedConflict(t, open(t)) })
	t.Run("PausedCommitRace", func(t *testing.T) { testPausedCommitRace(t, open(t)) })
	t.Run("PausedUpdate", func(t *testing.T) { testPausedUpdate(t, open(t)) })
	t.Run("PausedUpdateRace", func(t *testing.T) { testPausedUpdateRace(t, open(t)) })
	t.Run("PausedList", func(t *testing.T) { testPausedList(t, open(t)) })
	t.Run("PausedForget", func(t *testing.T) { testPausedForget(t, open(t)) })
	t.Run("BlobsRoundTrip", func(t *testing.T) { testBlobsRoundTrip(t, open(t)) })
	t.Run("BlobsExpiry", func(t *testing.T) { testBlobsExpiry(t, open(t)) })
	t.Run("BlobsConcurrent", func(t *testing.T) { testBlobsConcurrent(t, open(t)) })
	t.Run("CommitKeyRetried", func(t *testing.T) { testCommitKeyRetried(t, open(t)) })
	t.Run("CommitKeysDistinct", func(t *testing.T) { testCommitKeysDistinct(t, open(t)) })
	t.Run("CommitKeyOfFailedCommit", func(t *testing.T) { testCommitKeyOfFailedCommit(t, open(t)) })
	t.Run("CommitKeyConcurrent", func(t *testing.T) { testCommitKeyConcurrent(t, open(t)) })
}

var ctx = context.Background()

// testForeign: a commit to a conversation another user started writes nothing — not
// the turn, not the entities, not the facts — and says why.
func testForeign(t *testing.T, s runtime.Store) {
	commit(t, s, runtime.Record{UserID: "alice", Conversation: "c1", Messages: turn(1, false), Seen: map[string][]string{"orders": {"A1"}}})
	err := s.Commit(ctx, runtime.Record{UserID: "mallory", Conversation: "c1", Messages: turn(2, false),
		Seen:  map[string][]string{"orders": {"M9"}},
		Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	if !errors.Is(err, runtime.ErrForeignConversation) {
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

func commit(t testing.TB, s runtime.Store, rec runtime.Record) {
	t.Helper()
	if err := s.Commit(ctx, rec); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// turn is one stored exchange: a question, optionally a tool round, an answer.
func turn(i int, withTool bool) []runtime.Message {
	msgs := []runtime.Message{{Role: runtime.RoleUser, Content: fmt.Sprintf("question %d\n第%d个问题", i, i)}}
	if withTool {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			// Reasoning and a call's provider fields must survive: DeepSeek and Gemini
			// refuse a later request without them.
			runtime.Message{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{{ID: id, Name: "lookup", Arguments: fmt.Sprintf(`{"id":%d}`, i),
				Extra: map[string]json.RawMessage{"extra_content": json.RawMessage(`{"google":{"thought_signature":"c2ln"}}`)}}},
				Reasoning: &runtime.Reasoning{Field: "reasoning_content", Text: fmt.Sprintf("look %d up first", i)}},
			runtime.Message{Role: runtime.RoleTool, ToolCallID: id, Content: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return append(msgs, runtime.Message{Role: runtime.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
}

func testEmpty(t *testing.T, s runtime.Store) {
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

// seenOf is every entity of the conversation, by kind.
func seenOf(t testing.TB, s runtime.Store, conv string) map[string][]string {
	t.Helper()
	m, err := s.SeenEntities(ctx, conv)
	if err != nil {
		t.Fatalf("seen entities of %s: %v", conv, err)
	}
	return m
}

func testFacts(t *testing.T, s runtime.Store) {
	before := time.Now().Add(-time.Second)
	commit(t, s, runtime.Record{UserID: "u1", Facts: []runtime.FactChange{
		{Op: runtime.FactSet, Key: "tier", Value: "gold", Source: "tool"},
		{Op: runtime.FactSet, Key: "address", Value: "上海市浦东新区 1 号", Source: "tool"},
		{Op: runtime.FactAppend, Key: "notes", Value: "cancelled A1", Source: "tool"},
		{Op: runtime.FactSet, Key: "long", Value: "0123456789", Source: "llm", MaxChars: 4},
	}})
	commit(t, s, runtime.Record{UserID: "u1", Facts: []runtime.FactChange{
		{Op: runtime.FactAppend, Key: "notes", Value: "refunded B2", Source: "tool", MaxChars: 30},
		{Op: runtime.FactSet, Key: "tier", Value: "platinum", Source: "llm"},
		{Op: runtime.FactDelete, Key: "address"},
		{Op: runtime.FactDelete, Key: "never-set"},
	}})
	commit(t, s, runtime.Record{UserID: "u2", Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "tier", Value: "basic", Source: "user"}}})
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
	commit(t, s, runtime.Record{UserID: "u1", Facts: []runtime.FactChange{{Op: runtime.FactAppend, Key: "notes", Value: "more", MaxChars: 10}}})
	facts, _ = s.Facts(ctx, "u1")
	if v := valueOf(facts, "notes"); v != "unded B2\nmore"[len("unded B2\nmore")-10:] {
		t.Errorf("appended beyond max_chars keeps the newest text: %q", v)
	}
	other, _ := s.Facts(ctx, "u2")
	if len(other) != 1 || other[0].Value != "basic" {
		t.Errorf("u2 facts %v", other)
	}
}

func valueOf(facts []runtime.Fact, key string) string {
	for _, f := range facts {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

func testHistory(t *testing.T, s runtime.Store) {
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true)})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(2, false)})
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

// normalize treats nil and empty slices alike.
func normalize(msgs []runtime.Message) []runtime.Message {
	out := make([]runtime.Message, len(msgs))
	for i, m := range msgs {
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = nil
		}
		out[i] = m
	}
	return out
}

func testWindow(t *testing.T, s runtime.Store) {
	for i := 1; i <= 5; i++ {
		commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, i%2 == 0)})
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

func testSeen(t *testing.T, s runtime.Store) {
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, false), Seen: map[string][]string{"orders": {"A1", "A2"}}})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A2", "A3"}, "cards": {"x"}}})
	seen := seenOf(t, s, "c1")
	orders := slices.Sorted(slices.Values(seen["orders"]))
	if !slices.Equal(orders, []string{"A1", "A2", "A3"}) || !slices.Equal(seen["cards"], []string{"x"}) {
		t.Errorf("seen %v", seen)
	}
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Errorf("a record without messages added a turn: %d", c.Turns)
	}
}

// A record carries only what its run revealed; the store merges it into what the
// conversation has: each kind oldest first, an entity revealed again the newest.
func testSeenMerge(t *testing.T, s runtime.Store) {
	commits := []map[string][]string{
		{"orders": {"A1", "A2", "A3"}, "cards": {"x"}},
		{"orders": {"A4"}},
		{"orders": {"A2", "A5", "A5"}, "tickets": {"T1"}}, // A2 renewed; A5 twice in one record
		{"orders": nil, "cards": {}},                      // nothing revealed
		{"cards": {"y", "x"}},
	}
	for _, seen := range commits {
		commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Seen: seen})
	}
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "other", Seen: map[string][]string{"orders": {"Z9"}}})
	seen := seenOf(t, s, "c1")
	want := map[string][]string{"orders": {"A1", "A3", "A4", "A2", "A5"}, "cards": {"y", "x"}, "tickets": {"T1"}}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("seen\n got %v\nwant %v", seen, want)
	}
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 0 {
		t.Errorf("records without messages made %d turns", c.Turns)
	}
	// What SeenEntities returns is the caller's: changing it changes nothing stored.
	seen["orders"][0] = "changed"
	if again := seenOf(t, s, "c1"); again["orders"][0] != "A1" {
		t.Errorf("the store shares its slices: %v", again["orders"])
	}
	if o := seenOf(t, s, "other"); !reflect.DeepEqual(o, map[string][]string{"orders": {"Z9"}}) {
		t.Errorf("another conversation: %v", o)
	}
}

// Beyond MaxSeen the store drops the oldest entities of the kind that outgrew it,
// and only of that kind and conversation; an entity revealed again is new again.
func testSeenCap(t *testing.T, s runtime.Store) {
	rec := func(conv string, seen map[string][]string) runtime.Record {
		return runtime.Record{UserID: "u1", Conversation: conv, Seen: seen, MaxSeen: 3}
	}
	commit(t, s, rec("c1", map[string][]string{"orders": {"A1", "A2"}, "cards": {"x", "y", "z"}}))
	commit(t, s, rec("c2", map[string][]string{"orders": {"A1", "A2", "A3"}}))
	commit(t, s, rec("c1", map[string][]string{"orders": {"A3"}}))
	commit(t, s, rec("c1", map[string][]string{"orders": {"A1", "A4"}})) // A1 renewed: A2 is the oldest
	commit(t, s, rec("c1", map[string][]string{"orders": {"A5", "A6", "A7", "A8"}}))
	want := map[string][]string{"orders": {"A6", "A7", "A8"}, "cards": {"x", "y", "z"}}
	if c1 := seenOf(t, s, "c1"); !reflect.DeepEqual(c1, want) {
		t.Errorf("c1 after the cap\n got %v\nwant %v", c1, want)
	}
	steps := []struct {
		seen map[string][]string
		want []string
	}{
		{map[string][]string{"orders": {"A6"}}, []string{"A7", "A8", "A6"}},
		{map[string][]string{"orders": {"A9"}}, []string{"A8", "A6", "A9"}},
	}
	for _, st := range steps {
		commit(t, s, rec("c1", st.seen))
		if c := seenOf(t, s, "c1"); !slices.Equal(c["orders"], st.want) {
			t.Errorf("after %v: orders %v, want %v", st.seen, c["orders"], st.want)
		}
	}
	if c2 := seenOf(t, s, "c2"); !slices.Equal(c2["orders"], []string{"A1", "A2", "A3"}) {
		t.Errorf("another conversation lost entities: %v", c2)
	}
	// Without a cap nothing is dropped; a later cap applies when the kind grows again.
	for i := range 5 {
		commit(t, s, runtime.Record{UserID: "u1", Conversation: "c3", Seen: map[string][]string{"orders": {fmt.Sprint("B", i)}}})
	}
	if c3 := seenOf(t, s, "c3"); len(c3["orders"]) != 5 {
		t.Errorf("MaxSeen 0 dropped entities: %v", c3)
	}
	commit(t, s, rec("c3", map[string][]string{"orders": {"B5"}}))
	if c3 := seenOf(t, s, "c3"); !slices.Equal(c3["orders"], []string{"B3", "B4", "B5"}) {
		t.Errorf("a cap after uncapped commits: %v", c3)
	}
}

// Runs committing entities to one conversation at once lose none of them.
func testSeenConcurrent(t *testing.T, s runtime.Store) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			// Each run reveals its own entities and two every run reveals.
			errs <- s.Commit(ctx, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, false), MaxSeen: 1000,
				Seen: map[string][]string{"orders": {fmt.Sprint("A", i), "shared-1", fmt.Sprint("B", i), "shared-2"}}})
		})
		wg.Go(func() { // and another conversation, with its own cap
			errs <- s.Commit(ctx, runtime.Record{UserID: "u1", Conversation: "c2", MaxSeen: 5,
				Seen: map[string][]string{"orders": {fmt.Sprint("C", i)}}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Conversation(ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(seenOf(t, s, "c1")["orders"]))
	want := []string{"shared-1", "shared-2"}
	for i := range n {
		want = append(want, fmt.Sprint("A", i), fmt.Sprint("B", i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%d entities kept of %d: %v", len(got), len(want), got)
	}
	if c.Turns != n {
		t.Errorf("%d turns", c.Turns)
	}
	if c2 := seenOf(t, s, "c2"); len(c2["orders"]) != 5 {
		t.Errorf("concurrent commits under a cap of 5 kept %v", c2["orders"])
	}
}

// Seen answers for one entity — of this conversation and kind only, as kept under
// MaxSeen — whatever characters the ids hold.
func testSeenLookup(t *testing.T, s runtime.Store) {
	odd := "c:1%3A" // ':' and '%' in ids must not collide with a store's key syntax
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", MaxSeen: 3,
		Seen: map[string][]string{"orders": {"A1", "A2", "A3"}, "cards": {"x"}}})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c2", Seen: map[string][]string{"orders": {"Z9"}}})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: odd, Seen: map[string][]string{"orders": {"订单 1", "a:b", "100%"}}})
	check := func(step, conv, kind, id string, want bool) {
		t.Helper()
		found, err := s.Seen(ctx, conv, kind, id)
		if err != nil || found != want {
			t.Errorf("%s: Seen(%q, %q, %q) = %v, %v; want %v", step, conv, kind, id, found, err, want)
		}
	}
	for _, c := range []struct {
		conv, kind, id string
		want           bool
	}{
		{"c1", "orders", "A1", true},
		{"c1", "orders", "A3", true},
		{"c1", "cards", "x", true},
		{"c1", "orders", "A4", false},   // never revealed
		{"c1", "orders", "a1", false},   // ids are compared exactly
		{"c1", "orders", "Z9", false},   // another conversation's
		{"c1", "cards", "A1", false},    // another kind's
		{"c1", "tickets", "A1", false},  // a kind never collected
		{"c1:orders", "A1", "x", false}, // keys that could run into each other
		{"c3", "orders", "A1", false},   // no such conversation
		{odd, "orders", "订单 1", true},
		{odd, "orders", "a:b", true},
		{odd, "orders", "100%", true},
		{odd, "orders", "a", false},
		{"c1%3A", "orders", "a:b", false},
	} {
		check("initially", c.conv, c.kind, c.id, c.want)
	}
	// A2 renewed, then two new ones under a cap of 3: A1 and A3, the oldest, go.
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", MaxSeen: 3, Seen: map[string][]string{"orders": {"A2", "A4", "A5"}}})
	check("after the cap", "c1", "orders", "A1", false)
	check("after the cap", "c1", "orders", "A3", false)
	for _, id := range []string{"A2", "A4", "A5"} {
		check("after the cap", "c1", "orders", id, true)
	}
	check("after the cap", "c1", "cards", "x", true)
	// A lookup agrees with the list, entity by entity.
	for kind, ids := range seenOf(t, s, "c1") {
		for _, id := range ids {
			check("listed", "c1", kind, id, true)
		}
	}
}

// SeenEntities returns the kinds asked for, or all; a kind without entities is absent.
func testSeenEntities(t *testing.T, s runtime.Store) {
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A1", "A2"}, "cards": {"x"}, "tickets": {"T1"}}})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A1"}}})
	for _, c := range []struct {
		kinds []string
		want  map[string][]string
	}{
		{nil, map[string][]string{"orders": {"A2", "A1"}, "cards": {"x"}, "tickets": {"T1"}}},
		{[]string{"orders"}, map[string][]string{"orders": {"A2", "A1"}}},
		{[]string{"cards", "tickets"}, map[string][]string{"cards": {"x"}, "tickets": {"T1"}}},
		{[]string{"orders", "never"}, map[string][]string{"orders": {"A2", "A1"}}},
		{[]string{"never"}, map[string][]string{}},
	} {
		got, err := s.SeenEntities(ctx, "c1", c.kinds...)
		if err != nil || !reflect.DeepEqual(got, c.want) && (len(got) != 0 || len(c.want) != 0) {
			t.Errorf("SeenEntities(c1, %q) = %v, %v; want %v", c.kinds, got, err, c.want)
		}
	}
}

func testOutside(t *testing.T, s runtime.Store) {
	commit(t, s, runtime.Record{UserID: "u1", Messages: turn(1, false), Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "v"}}})
	if ids, _ := s.Conversations(ctx, "u1"); len(ids) != 0 {
		t.Errorf("a run outside a conversation created %v", ids)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 1 {
		t.Errorf("facts %v", facts)
	}
}

// Runs committing to one conversation at once lose nothing and never interleave.
func testConcurrent(t *testing.T, s runtime.Store) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- s.Commit(ctx, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, true),
				Facts: []runtime.FactChange{{Op: runtime.FactAppend, Key: "log", Value: fmt.Sprint(i), Source: "tool"}}})
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

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// later lets the clock move on between two commits: stores may order conversations
// by the time of their last commit, and some clocks advance by the millisecond.
func later() { time.Sleep(2 * time.Millisecond) }

// Conversations lists the user's conversations newest first: by their last commit,
// whatever it wrote — a turn, or only entities — and not moved by another user's
// refused commit.
func testConversationsOrder(t *testing.T, s runtime.Store) {
	want := func(ids ...string) {
		t.Helper()
		got, err := s.Conversations(ctx, "u1")
		if err != nil || !slices.Equal(got, ids) {
			t.Errorf("Conversations(u1) = %q, %v; want %q", got, err, ids)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		commit(t, s, runtime.Record{UserID: "u1", Conversation: id, Messages: turn(1, false)})
		later()
	}
	commit(t, s, runtime.Record{UserID: "u2", Conversation: "d", Messages: turn(1, false)})
	later()
	want("c", "b", "a")
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "a", Messages: turn(2, true)})
	later()
	want("a", "c", "b")
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "b", Seen: map[string][]string{"orders": {"A1"}}})
	later()
	want("b", "a", "c")
	if err := s.Commit(ctx, runtime.Record{UserID: "u2", Conversation: "c", Messages: turn(3, false)}); !errors.Is(err, runtime.ErrForeignConversation) {
		t.Fatalf("commit by another user: %v", err)
	}
	want("b", "a", "c")
}

// DeleteConversation deletes the owner's conversation — its turns and entities, not
// the user's facts nor other conversations — and answers ErrConversationNotFound,
// deleting nothing, for another user's conversation as for one that does not exist.
func testDeleteConversation(t *testing.T, s runtime.Store) {
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true),
		Seen:  map[string][]string{"orders": {"A1", "A2"}, "cards": {"x"}},
		Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(2, false)})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c2", Messages: turn(1, false), Seen: map[string][]string{"orders": {"B1"}}})
	commit(t, s, runtime.Record{UserID: "u2", Conversation: "c3", Messages: turn(1, false), Seen: map[string][]string{"orders": {"A1"}}})

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
		if err := s.DeleteConversation(ctx, tt.user, tt.id); !errors.Is(err, runtime.ErrConversationNotFound) {
			t.Errorf("DeleteConversation(%q, %q) = %v, want ErrConversationNotFound", tt.user, tt.id, err)
		}
	}
	intact("c1", "u1", 2, c1Seen)
	intact("c3", "u2", 1, map[string][]string{"orders": {"A1"}})

	if err := s.DeleteConversation(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Conversation(ctx, "c1", 10); err != nil || !reflect.DeepEqual(c, runtime.Conversation{}) {
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
	if err := s.DeleteConversation(ctx, "u1", "c1"); !errors.Is(err, runtime.ErrConversationNotFound) {
		t.Errorf("deleting it again: %v", err)
	}

	// The id is free again, and nothing of the deleted conversation comes back with it.
	commit(t, s, runtime.Record{UserID: "u2", Conversation: "c1", Messages: turn(5, false), Seen: map[string][]string{"orders": {"Z9"}}})
	intact("c1", "u2", 1, map[string][]string{"orders": {"Z9"}})
}

func testForget(t *testing.T, s runtime.Store) {
	for _, u := range []string{"u1", "u2"} {
		commit(t, s, runtime.Record{UserID: u, Conversation: u + "-a", Messages: turn(1, true), Seen: map[string][]string{"orders": {"A1"}},
			Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: u}}})
		commit(t, s, runtime.Record{UserID: u, Conversation: u + "-b", Messages: turn(2, false)})
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
func testRandomHistories(t *testing.T, s runtime.Store) {
	rng := rand.New(rand.NewPCG(1, 2))
	for conv := range 5 {
		id := fmt.Sprintf("r%d", conv)
		turns := 1 + rng.IntN(8)
		var all []runtime.Message
		for i := range turns {
			msgs := []runtime.Message{{Role: runtime.RoleUser, Content: fmt.Sprint("q", i)}}
			for r := range rng.IntN(3) {
				var calls []runtime.ToolCall
				for c := range 1 + rng.IntN(3) {
					calls = append(calls, runtime.ToolCall{ID: fmt.Sprintf("c%d_%d_%d", i, r, c), Name: "t", Arguments: "{}"})
				}
				msgs = append(msgs, runtime.Message{Role: runtime.RoleAssistant, ToolCalls: calls})
				for _, c := range calls {
					msgs = append(msgs, runtime.Message{Role: runtime.RoleTool, ToolCallID: c.ID, Content: "r"})
				}
			}
			msgs = append(msgs, runtime.Message{Role: runtime.RoleAssistant, Content: fmt.Sprint("a", i)})
			commit(t, s, runtime.Record{UserID: "u", Conversation: id, Messages: msgs})
			all = append(all, msgs...)
		}
		for window := 0; window <= turns+1; window++ {
			c, err := s.Conversation(ctx, id, window)
			if err != nil {
				t.Fatal(err)
			}
			want := runtime.LastTurns(all, window)
			if !reflect.DeepEqual(normalize(c.Messages), normalize(want)) {
				t.Fatalf("conversation %s, window %d: got %d messages, want %d", id, window, len(c.Messages), len(want))
			}
			checkPaired(t, c.Messages)
		}
	}
}

func checkPaired(t *testing.T, msgs []runtime.Message) {
	t.Helper()
	if len(msgs) > 0 && msgs[0].Role != runtime.RoleUser {
		t.Fatalf("history starts with %s", msgs[0].Role)
	}
	open := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case runtime.RoleAssistant:
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case runtime.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("orphan tool message %s", m.ToolCallID)
			}
		}
	}
}

// Bench measures one run's use of a store — load the last 10 turns of a
// conversation, look up two entities (one of the oldest, revealed before the turns,
// and one never revealed), then commit a 4-message turn with a fact change and an
// entity revealed again — in a conversation of 50 to 250 turns that has revealed 0,
// 10k or 100k entities (seen=N); and, apart, loading every entity of the kind, what a
// rule using seen(kind) other than by `in` costs once per run (list/seen=N). The data
// stays that size whatever b.N: the fact is set, not appended, the entity is one of a
// handful, and every 200 runs the conversation is forgotten and seeded again, off the
// clock. open is called once per benchmark.
func Bench(b *testing.B, open func(b *testing.B) runtime.Store) {
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("seen=%d", n), func(b *testing.B) { benchLoadSave(b, open(b), n, false) })
	}
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("list/seen=%d", n), func(b *testing.B) { benchLoadSave(b, open(b), n, true) })
	}
}

func benchLoadSave(b *testing.B, s runtime.Store, n int, list bool) {
	const (
		seedTurns = 50
		handful   = 20  // entities the benchmark's runs reveal again and again
		epoch     = 200 // runs between two resets
	)
	record := func(i int) runtime.Record {
		return runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, true), MaxSeen: n + handful,
			Seen:  map[string][]string{"orders": {fmt.Sprint("B", i%handful)}},
			Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "last_order", Value: fmt.Sprint("B", i%handful), Source: "tool"}}}
	}
	seed := func() {
		if err := s.Forget(ctx, "u1"); err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("A%06d", i)
		}
		commit(b, s, runtime.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": ids}})
		for i := range seedTurns {
			commit(b, s, record(i))
		}
	}
	seed()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if list {
			seen, err := s.SeenEntities(ctx, "c1", "orders")
			if err != nil || len(seen["orders"]) != n+handful {
				b.Fatalf("%d entities, %v", len(seen["orders"]), err)
			}
			continue
		}
		if i > 0 && i%epoch == 0 {
			b.StopTimer()
			seed()
			b.StartTimer()
		}
		c, err := s.Conversation(ctx, "c1", 10)
		if err != nil || len(c.Messages) != 40 {
			b.Fatalf("%d messages, %v", len(c.Messages), err)
		}
		old := "B0"
		if n > 0 {
			old = "A000000"
		}
		if found, err := s.Seen(ctx, "c1", "orders", old); !found || err != nil {
			b.Fatalf("seen %s: %v, %v", old, found, err)
		}
		if found, err := s.Seen(ctx, "c1", "orders", "X1"); found || err != nil {
			b.Fatalf("seen X1: %v, %v", found, err)
		}
		if err := s.Commit(ctx, record(seedTurns+i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// pausedRuns is the store as a keeper of paused runs: every store is one.
func pausedRuns(t testing.TB, s runtime.Store) runtime.PausedRuns {
	t.Helper()
	p, ok := s.(runtime.PausedRuns)
	if !ok {
		t.Fatalf("%T does not implement runtime.PausedRuns", s)
	}
	return p
}

// pauseBase is the paused runs' clock: nanoseconds in it, so a store that kept times
// less precisely would show.
var pauseBase = time.Date(2030, 1, 2, 3, 4, 5, 123_456_789, time.UTC)

// pausedRun is a waiting run created at base+created that expires at base+expires.
func pausedRun(id, user string, created, expires time.Duration) runtime.PausedRun {
	return runtime.PausedRun{ID: id, UserID: user, Agent: "shop", Status: runtime.PauseWaiting, Version: 1,
		Created: pauseBase.Add(created), Expires: pauseBase.Add(expires),
		State: fmt.Appendf(nil, `{"run":%q,"note":"等待审批\u2028"}`, id)}
}

// samePaused compares two records field by field: times by the instant, not the
// location, and the state byte for byte.
func samePaused(a, b runtime.PausedRun) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Agent == b.Agent && a.Status == b.Status && a.Version == b.Version &&
		a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires) && bytes.Equal(a.State, b.State)
}

// checkPaused fails unless the store holds want under its id.
func checkPaused(t testing.TB, p runtime.PausedRuns, want runtime.PausedRun) {
	t.Helper()
	got, err := p.PausedRun(ctx, want.ID)
	if err != nil || !samePaused(got, want) {
		t.Errorf("PausedRun(%q) = %+v, %v\nwant %+v", want.ID, got, err, want)
	}
}

// checkNoPaused fails unless the store has no run of the id.
func checkNoPaused(t testing.TB, p runtime.PausedRuns, id string) {
	t.Helper()
	if got, err := p.PausedRun(ctx, id); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Errorf("PausedRun(%q) = %+v, %v; want ErrRunNotFound", id, got, err)
	}
}

// pausedIDs lists the ids of the runs q selects, checking each against the store's
// own record: a list returns whole records, state included.
func pausedIDs(t testing.TB, p runtime.PausedRuns, q runtime.PausedQuery) []string {
	t.Helper()
	runs, err := p.PausedRuns(ctx, q)
	if err != nil {
		t.Fatalf("PausedRuns(%+v): %v", q, err)
	}
	ids := []string{}
	for _, r := range runs {
		if one, err := p.PausedRun(ctx, r.ID); err != nil || !samePaused(r, one) {
			t.Errorf("PausedRuns(%+v) lists %+v; PausedRun has %+v, %v", q, r, one, err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// A paused run committed on its own — no conversation, no messages, no facts — comes
// back field for field, whatever the location of its times; an unknown id is
// ErrRunNotFound.
func testPausedRoundTrip(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	checkNoPaused(t, p, "run_1")
	want := pausedRun("run_1", "u1", 0, time.Hour)
	want.Created = want.Created.In(time.FixedZone("UTC+8", 8*3600))
	want.State = []byte("{\"b\":\"\\u0000\xff\",\"a\":[1, 2 ]}") // not canonical JSON, nor valid UTF-8: kept as is
	rec := want
	rec.State = slices.Clone(want.State)
	commit(t, s, runtime.Record{UserID: "u1", Pause: &rec})
	rec.State[0] = 'X' // the store keeps its own copy
	checkPaused(t, p, want)
	got, _ := p.PausedRun(ctx, "run_1")
	got.State[0] = 'Y'
	checkPaused(t, p, want)
	checkNoPaused(t, p, "run_2")
	checkNoPaused(t, p, "run_")
	// Zero times and no state come back as such.
	bare := runtime.PausedRun{ID: "run:%3A", UserID: "u:1%", Version: 1}
	commit(t, s, runtime.Record{UserID: "u:1%", Pause: &bare})
	checkPaused(t, p, bare)
	if got, _ := p.PausedRun(ctx, bare.ID); !got.Created.IsZero() || !got.Expires.IsZero() || len(got.State) != 0 {
		t.Errorf("a bare run reads back as %+v", got)
	}
	if ids, _ := s.Conversations(ctx, "u1"); len(ids) != 0 {
		t.Errorf("a pause outside a conversation created %v", ids)
	}
}

// A run that resumed and pauses again replaces its claimed record (at the version
// before its own) with exactly the one given, even one of another user; the old
// user's list loses it.
func testPausedReplace(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	first := pausedRun("r1", "u1", 0, time.Hour)
	commit(t, s, runtime.Record{UserID: "u1", Pause: &first})
	claimed := first
	claimed.Version, claimed.Status = 2, runtime.PauseResuming
	if err := p.UpdatePaused(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	second := runtime.PausedRun{ID: "r1", UserID: "u2", Agent: "other", Status: runtime.PauseWaiting, Version: 3,
		Created: pauseBase.Add(time.Minute), Expires: pauseBase.Add(time.Second), State: []byte(`{}`)}
	commit(t, s, runtime.Record{UserID: "u2", Pause: &second})
	checkPaused(t, p, second)
	if ids := pausedIDs(t, p, runtime.PausedQuery{UserID: "u1"}); len(ids) != 0 {
		t.Errorf("the old user still lists %q", ids)
	}
	if ids := pausedIDs(t, p, runtime.PausedQuery{UserID: "u2"}); !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("the new user lists %q", ids)
	}
	if ids := pausedIDs(t, p, runtime.PausedQuery{ExpiresBefore: pauseBase.Add(time.Hour)}); !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("expiring before the old expiry: %q", ids)
	}
}

// A pause is written with the rest of its run's record: turn, entities and facts.
func testPausedWithConversation(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	run := pausedRun("r1", "u1", 0, time.Hour)
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true), Pause: &run,
		Seen:  map[string][]string{"orders": {"A1"}},
		Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	checkPaused(t, p, run)
	if c, err := s.Conversation(ctx, "c1", 10); err != nil || c.Turns != 1 || c.User != "u1" || len(c.Messages) != 4 {
		t.Errorf("conversation %+v, %v", c, err)
	}
	if found, err := s.Seen(ctx, "c1", "orders", "A1"); !found || err != nil {
		t.Errorf("seen A1: %v, %v", found, err)
	}
	if facts, _ := s.Facts(ctx, "u1"); valueOf(facts, "k") != "v" {
		t.Errorf("facts %v", facts)
	}
}

// A commit to another user's conversation writes no pause and ends no paused run.
func testPausedForeign(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	commit(t, s, runtime.Record{UserID: "alice", Conversation: "c1", Messages: turn(1, false)})
	waiting := pausedRun("m0", "mallory", 0, time.Hour)
	commit(t, s, runtime.Record{UserID: "mallory", Pause: &waiting})
	run := pausedRun("m1", "mallory", 0, time.Hour)
	err := s.Commit(ctx, runtime.Record{UserID: "mallory", Conversation: "c1", Messages: turn(2, false), Pause: &run})
	if !errors.Is(err, runtime.ErrForeignConversation) {
		t.Fatalf("commit by another user: %v", err)
	}
	checkNoPaused(t, p, "m1")
	err = s.Commit(ctx, runtime.Record{UserID: "mallory", Conversation: "c1", Resumed: "m0", ResumedVersion: 1})
	if !errors.Is(err, runtime.ErrForeignConversation) {
		t.Fatalf("resuming commit by another user: %v", err)
	}
	checkPaused(t, p, waiting)
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
}

// Resumed deletes the paused run, at the version given, in the commit that writes the
// resumed execution's turn; a run resumed under its id may pause again in the same
// commit, with a record written as new whatever its version.
func testPausedResumed(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	r1, r2 := pausedRun("r1", "u1", 0, time.Hour), pausedRun("r2", "u1", time.Second, time.Hour)
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, false), Pause: &r1})
	commit(t, s, runtime.Record{UserID: "u1", Pause: &r2})
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(2, true), Resumed: "r1", ResumedVersion: 1,
		Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "v"}}})
	checkNoPaused(t, p, "r1")
	checkPaused(t, p, r2)
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 2 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
	if ids := pausedIDs(t, p, runtime.PausedQuery{UserID: "u1"}); !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("u1 lists %q", ids)
	}
	if ids := pausedIDs(t, p, runtime.PausedQuery{ExpiresBefore: pauseBase.Add(2 * time.Hour)}); !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("expiring: %q", ids)
	}

	again := pausedRun("r2", "u1", time.Minute, 2*time.Hour)
	again.Version = 3
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Resumed: "r2", ResumedVersion: 1, Pause: &again})
	checkPaused(t, p, again)
	if ids := pausedIDs(t, p, runtime.PausedQuery{UserID: "u1"}); !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("u1 lists %q", ids)
	}
}

// snapshot is what a commit could have written: a conversation, a user's facts and
// conversations, and some paused runs.
type snapshot struct {
	conversation runtime.Conversation
	seen         map[string][]string
	facts        []runtime.Fact
	convs        []string
	paused       map[string]*runtime.PausedRun // nil for a run not stored
}

func takeSnapshot(t testing.TB, s runtime.Store, user, conversation string, paused ...string) snapshot {
	t.Helper()
	var snap snapshot
	var err error
	if snap.conversation, err = s.Conversation(ctx, conversation, 1000); err != nil {
		t.Fatal(err)
	}
	if snap.seen, err = s.SeenEntities(ctx, conversation); err != nil {
		t.Fatal(err)
	}
	if snap.facts, err = s.Facts(ctx, user); err != nil {
		t.Fatal(err)
	}
	if snap.convs, err = s.Conversations(ctx, user); err != nil {
		t.Fatal(err)
	}
	snap.paused = map[string]*runtime.PausedRun{}
	for _, id := range paused {
		switch r, err := pausedRuns(t, s).PausedRun(ctx, id); {
		case err == nil:
			snap.paused[id] = &r
		case errors.Is(err, runtime.ErrRunNotFound):
			snap.paused[id] = nil
		default:
			t.Fatal(err)
		}
	}
	return snap
}

func (a snapshot) equal(b snapshot) bool {
	if !reflect.DeepEqual(a.conversation, b.conversation) || !reflect.DeepEqual(a.seen, b.seen) ||
		!slices.Equal(a.convs, b.convs) || len(a.facts) != len(b.facts) || len(a.paused) != len(b.paused) {
		return false
	}
	for i := range a.facts {
		if x, y := a.facts[i], b.facts[i]; x.Key != y.Key || x.Value != y.Value || x.Source != y.Source || !x.Updated.Equal(y.Updated) {
			return false
		}
	}
	for id, x := range a.paused {
		y, ok := b.paused[id]
		if !ok || (x == nil) != (y == nil) || x != nil && !samePaused(*x, *y) {
			return false
		}
	}
	return true
}

// commitConflict fails unless committing rec fails with ErrPausedConflict and writes
// nothing: not its turn, entities or facts, nor any paused run.
func commitConflict(t testing.TB, s runtime.Store, what string, rec runtime.Record) {
	t.Helper()
	ids := []string{}
	if rec.Resumed != "" {
		ids = append(ids, rec.Resumed)
	}
	if rec.Pause != nil {
		ids = append(ids, rec.Pause.ID)
	}
	before := takeSnapshot(t, s, rec.UserID, rec.Conversation, ids...)
	if err := s.Commit(ctx, rec); !errors.Is(err, runtime.ErrPausedConflict) {
		t.Errorf("%s: commit = %v, want ErrPausedConflict", what, err)
	}
	if after := takeSnapshot(t, s, rec.UserID, rec.Conversation, ids...); !before.equal(after) {
		t.Errorf("%s: the failed commit wrote\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// A commit ends or writes a paused run only over the version it expects; otherwise
// it fails whole with ErrPausedConflict, so a slow execution whose claim was taken
// over cannot delete or overwrite the record of the one that took it.
func testPausedConflict(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	run, other := pausedRun("r1", "u1", 0, time.Hour), pausedRun("r2", "u1", time.Second, time.Hour)
	commit(t, s, runtime.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, false), Pause: &run,
		Seen:  map[string][]string{"orders": {"A1"}},
		Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	commit(t, s, runtime.Record{UserID: "u1", Pause: &other})
	// Execution A claims the run (version 2); B takes the claim over (version 3).
	claimA, claimB := run, run
	claimA.Version, claimA.Status, claimA.State = 2, runtime.PauseResuming, []byte(`{"claim":"A"}`)
	claimB.Version, claimB.Status, claimB.State = 3, runtime.PauseResuming, []byte(`{"claim":"B"}`)
	for _, c := range []runtime.PausedRun{claimA, claimB} {
		if err := p.UpdatePaused(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// What A's late commit would write with it: a turn, entities, facts.
	late := func(rec runtime.Record) runtime.Record {
		rec.UserID, rec.Conversation, rec.Messages = "u1", "c1", turn(2, true)
		rec.Seen = map[string][]string{"orders": {"B2"}, "cards": {"x"}}
		rec.Facts = []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: "w"}, {Op: runtime.FactSet, Key: "k2", Value: "new"}}
		return rec
	}
	repause := func(id string, version int) *runtime.PausedRun {
		r := pausedRun(id, "u1", time.Minute, 2*time.Hour)
		r.Version, r.State = version, []byte(`{"late":true}`)
		return &r
	}
	commitConflict(t, s, "Resumed at a stale version", late(runtime.Record{Resumed: "r1", ResumedVersion: 2}))
	commitConflict(t, s, "Resumed at a later version", late(runtime.Record{Resumed: "r1", ResumedVersion: 4}))
	commitConflict(t, s, "Resumed of a missing run", late(runtime.Record{Resumed: "never", ResumedVersion: 1}))
	commitConflict(t, s, "Pause over a taken-over claim", late(runtime.Record{Pause: repause("r1", 3)}))
	commitConflict(t, s, "Pause at a later version", late(runtime.Record{Pause: repause("r1", 5)}))
	commitConflict(t, s, "Pause at the stored version", late(runtime.Record{Pause: repause("r1", 3)}))
	commitConflict(t, s, "a new Pause over a stored run", late(runtime.Record{Pause: repause("r2", 1)}))
	commitConflict(t, s, "a new Pause over a claimed run", late(runtime.Record{Pause: repause("r1", 1)}))
	commitConflict(t, s, "a Pause of a missing run at version 2", late(runtime.Record{Pause: repause("new", 2)}))
	commitConflict(t, s, "a stale Resumed with a good Pause", late(runtime.Record{Resumed: "r1", ResumedVersion: 2, Pause: repause("new", 1)}))
	commitConflict(t, s, "a good Resumed with a bad Pause", late(runtime.Record{Resumed: "r1", ResumedVersion: 3, Pause: repause("r2", 1)}))
	commitConflict(t, s, "a stale Resumed pausing again under its id", late(runtime.Record{Resumed: "r1", ResumedVersion: 2, Pause: repause("r1", 1)}))
	checkPaused(t, p, claimB)
	checkPaused(t, p, other)
	checkNoPaused(t, p, "new")
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 1 || valueOf(facts, "k") != "v" {
		t.Errorf("facts %v", facts)
	}
	if ids := pausedIDs(t, p, runtime.PausedQuery{UserID: "u1"}); !slices.Equal(ids, []string{"r2", "r1"}) {
		t.Errorf("u1 lists %q", ids)
	}

	// B pauses again over its claim, then resumes and ends the run.
	again := repause("r1", 4)
	commit(t, s, late(runtime.Record{Pause: again}))
	checkPaused(t, p, *again)
	commitConflict(t, s, "Resumed at the claim's version after a re-pause", runtime.Record{UserID: "u1", Resumed: "r1", ResumedVersion: 3})
	commit(t, s, runtime.Record{UserID: "u1", Resumed: "r1", ResumedVersion: 4})
	checkNoPaused(t, p, "r1")
	commitConflict(t, s, "Resumed of a run already ended", runtime.Record{UserID: "u1", Conversation: "c1", Resumed: "r1", ResumedVersion: 4})
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 2 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
	if facts, _ := s.Facts(ctx, "u1"); valueOf(facts, "k") != "w" || valueOf(facts, "k2") != "new" {
		t.Errorf("facts %v", facts)
	}
}

// Of commits ending or re-pausing a run from the same version at once exactly one
// succeeds, turn and all; the others fail with ErrPausedConflict and write nothing.
func testPausedCommitRace(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	const n = 8
	for round := range 4 {
		id := fmt.Sprint("r", round)
		run := pausedRun(id, "u1", 0, time.Hour)
		commit(t, s, runtime.Record{UserID: "u1", Pause: &run})
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				rec := runtime.Record{UserID: "u1", Conversation: fmt.Sprintf("c%d-%d", round, i), Messages: turn(i, false),
					Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: fmt.Sprintf("k%d-%d", round, i), Value: "v"}}}
				if round%2 == 0 {
					rec.Resumed, rec.ResumedVersion = id, 1
				} else {
					mine := run
					mine.Version, mine.State = 2, fmt.Appendf(nil, `{"winner":%d}`, i)
					rec.Pause = &mine
				}
				<-start
				errs[i] = s.Commit(ctx, rec)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: committers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, runtime.ErrPausedConflict):
				t.Errorf("round %d: committer %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no committer won: %v", round, errs)
		}
		if round%2 == 0 {
			checkNoPaused(t, p, id)
		} else {
			want := run
			want.Version, want.State = 2, fmt.Appendf(nil, `{"winner":%d}`, winner)
			checkPaused(t, p, want)
		}
		facts, _ := s.Facts(ctx, "u1")
		for i := range n {
			c, _ := s.Conversation(ctx, fmt.Sprintf("c%d-%d", round, i), 10)
			wrote := c.Turns != 0 || valueOf(facts, fmt.Sprintf("k%d-%d", round, i)) != ""
			if wrote != (i == winner) {
				t.Errorf("round %d: committer %d (winner %d) wrote %v: turns %d", round, i, winner, wrote, c.Turns)
			}
		}
	}
}

// UpdatePaused replaces the run only over the version before its own.
func testPausedUpdate(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	run := pausedRun("r1", "u1", 0, time.Hour)
	if err := p.UpdatePaused(ctx, run); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Errorf("updating a run never paused: %v", err)
	}
	checkNoPaused(t, p, "r1")
	commit(t, s, runtime.Record{UserID: "u1", Pause: &run})
	next := run
	next.Version, next.Status, next.State = 2, runtime.PauseResuming, []byte(`{"decided":true}`)
	next.Expires = pauseBase.Add(time.Minute)
	if err := p.UpdatePaused(ctx, next); err != nil {
		t.Fatal(err)
	}
	checkPaused(t, p, next)
	for _, v := range []int{1, 2, 4, 0} {
		stale := next
		stale.Version, stale.State = v, []byte(`{"stale":true}`)
		if err := p.UpdatePaused(ctx, stale); !errors.Is(err, runtime.ErrPausedConflict) {
			t.Errorf("update to version %d over version 2: %v", v, err)
		}
	}
	checkPaused(t, p, next)
	if ids := pausedIDs(t, p, runtime.PausedQuery{ExpiresBefore: pauseBase.Add(2 * time.Minute)}); !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("the new expiry is not listed: %q", ids)
	}
	commit(t, s, runtime.Record{UserID: "u1", Resumed: "r1", ResumedVersion: 2})
	next.Version = 3
	if err := p.UpdatePaused(ctx, next); !errors.Is(err, runtime.ErrRunNotFound) {
		t.Errorf("updating a resumed run: %v", err)
	}
	checkNoPaused(t, p, "r1")
}

// Of processes updating a run from the same version at once exactly one succeeds; the
// others learn that they lost.
func testPausedUpdateRace(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	const n = 8
	for round := range 3 {
		run := pausedRun(fmt.Sprint("r", round), "u1", 0, time.Hour)
		commit(t, s, runtime.Record{UserID: "u1", Pause: &run})
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				mine := run
				mine.Version, mine.State = 2, fmt.Appendf(nil, `{"winner":%d}`, i)
				<-start
				errs[i] = p.UpdatePaused(ctx, mine)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: updaters %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, runtime.ErrPausedConflict):
				t.Errorf("round %d: updater %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no updater won: %v", round, errs)
		}
		want := run
		want.Version, want.State = 2, fmt.Appendf(nil, `{"winner":%d}`, winner)
		checkPaused(t, p, want)
	}
}

// A user's runs come newest first, runs about to expire soonest first, ties by id —
// to the nanosecond, whatever precision a store's index keeps, and at whole seconds,
// whose RFC 3339 text is shorter.
func testPausedList(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	second := -time.Duration(pauseBase.Nanosecond()) // from pauseBase to its whole second
	runs := []runtime.PausedRun{
		pausedRun("w1", "u4", second, second+10*time.Hour),
		pausedRun("w2", "u4", second+500*time.Millisecond, second+10*time.Hour+time.Millisecond),
		pausedRun("r1", "u1", 0, 10*time.Minute),
		pausedRun("r2", "u1", time.Nanosecond, 5*time.Minute),
		pausedRun("r3", "u1", time.Nanosecond, 5*time.Minute+time.Nanosecond),
		pausedRun("r4", "u2", time.Hour, time.Minute),
		pausedRun("r5", "u1", -time.Hour, 2*time.Minute),
		pausedRun("r6", "u3", 0, 5*time.Minute-time.Nanosecond),
	}
	for i := range runs {
		commit(t, s, runtime.Record{UserID: runs[i].UserID, Pause: &runs[i]})
	}
	before := func(d time.Duration) time.Time { return pauseBase.Add(d) }
	for _, c := range []struct {
		q    runtime.PausedQuery
		want []string
	}{
		{runtime.PausedQuery{UserID: "u1"}, []string{"r2", "r3", "r1", "r5"}},
		{runtime.PausedQuery{UserID: "u1", Limit: 1}, []string{"r2"}},
		{runtime.PausedQuery{UserID: "u1", Limit: 3}, []string{"r2", "r3", "r1"}},
		{runtime.PausedQuery{UserID: "u1", Limit: 10}, []string{"r2", "r3", "r1", "r5"}},
		{runtime.PausedQuery{UserID: "u2"}, []string{"r4"}},
		{runtime.PausedQuery{UserID: "nobody"}, []string{}},
		{runtime.PausedQuery{ExpiresBefore: before(5*time.Minute + time.Nanosecond)}, []string{"r4", "r5", "r6", "r2"}},
		{runtime.PausedQuery{ExpiresBefore: before(5*time.Minute + time.Nanosecond), Limit: 3}, []string{"r4", "r5", "r6"}},
		{runtime.PausedQuery{ExpiresBefore: before(5 * time.Minute)}, []string{"r4", "r5", "r6"}},
		{runtime.PausedQuery{ExpiresBefore: before(time.Minute)}, []string{}},
		{runtime.PausedQuery{ExpiresBefore: before(time.Hour), Limit: 2}, []string{"r4", "r5"}},
		{runtime.PausedQuery{ExpiresBefore: before(time.Hour)}, []string{"r4", "r5", "r6", "r2", "r3", "r1"}},
		{runtime.PausedQuery{UserID: "u1", ExpiresBefore: before(5*time.Minute + time.Nanosecond)}, []string{"r2", "r5"}},
		{runtime.PausedQuery{UserID: "u1", ExpiresBefore: before(time.Hour), Limit: 1}, []string{"r2"}},
		{runtime.PausedQuery{UserID: "u2", ExpiresBefore: before(time.Minute)}, []string{}},
		{runtime.PausedQuery{UserID: "u4"}, []string{"w2", "w1"}},
		{runtime.PausedQuery{ExpiresBefore: before(second + 10*time.Hour + time.Millisecond)}, []string{"r4", "r5", "r6", "r2", "r3", "r1", "w1"}},
		{runtime.PausedQuery{}, []string{"r4", "r5", "r6", "r2", "r3", "r1", "w1", "w2"}},
	} {
		if got := pausedIDs(t, p, c.q); !slices.Equal(got, c.want) {
			t.Errorf("PausedRuns(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
}

// Forget deletes the user's paused runs; DeleteConversation leaves them.
func testPausedForget(t *testing.T, s runtime.Store) {
	p := pausedRuns(t, s)
	runs := []runtime.PausedRun{pausedRun("r1", "u1", 0, time.Hour), pausedRun("r2", "u1", time.Second, time.Hour),
		pausedRun("r3", "u2", 0, time.Hour)}
	for i := range runs {
		commit(t, s, runtime.Record{UserID: runs[i].UserID, Conversation: runs[i].UserID + "-c", Messages: turn(i, false), Pause: &runs[i]})
	}
	if err := s.DeleteConversation(ctx, "u1", "u1-c"); err != nil {
		t.Fatal(err)
	}
	checkPaused(t, p, runs[0])
	checkPaused(t, p, runs[1])
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	checkNoPaused(t, p, "r1")
	checkNoPaused(t, p, "r2")
	checkPaused(t, p, runs[2])
	if ids := pausedIDs(t, p, runtime.PausedQuery{UserID: "u1"}); len(ids) != 0 {
		t.Errorf("u1 still lists %q", ids)
	}
	if ids := pausedIDs(t, p, runtime.PausedQuery{ExpiresBefore: pauseBase.Add(2 * time.Hour)}); !slices.Equal(ids, []string{"r3"}) {
		t.Errorf("expiring: %q", ids)
	}
	if c, _ := s.Conversation(ctx, "u2-c", 10); c.Turns != 1 {
		t.Errorf("another user's conversation went too: %+v", c)
	}
}
