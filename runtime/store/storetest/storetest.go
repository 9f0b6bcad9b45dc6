// Package storetest is the conformance suite of runtime.Store: every store — memory,
// sqlite, redis — runs the same tests.
package storetest

import (
	"context"
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
	t.Run("OutsideConversation", func(t *testing.T) { testOutside(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("Forget", func(t *testing.T) { testForget(t, open(t)) })
	t.Run("RandomHistories", func(t *testing.T) { testRandomHistories(t, open(t)) })
}

var ctx = context.Background()

func commit(t *testing.T, s runtime.Store, rec runtime.Record) {
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
			runtime.Message{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{{ID: id, Name: "lookup", Arguments: fmt.Sprintf(`{"id":%d}`, i)}}},
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
	c, _ := s.Conversation(ctx, "c1", 10)
	orders := slices.Sorted(slices.Values(c.Seen["orders"]))
	if !slices.Equal(orders, []string{"A1", "A2", "A3"}) || !slices.Equal(c.Seen["cards"], []string{"x"}) {
		t.Errorf("seen %v", c.Seen)
	}
	if c.Turns != 1 {
		t.Errorf("a record without messages added a turn: %d", c.Turns)
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

func testForget(t *testing.T, s runtime.Store) {
	for _, u := range []string{"u1", "u2"} {
		commit(t, s, runtime.Record{UserID: u, Conversation: u + "-a", Messages: turn(1, true), Seen: map[string][]string{"orders": {"A1"}},
			Facts: []runtime.FactChange{{Op: runtime.FactSet, Key: "k", Value: u}}})
		commit(t, s, runtime.Record{UserID: u, Conversation: u + "-b", Messages: turn(2, false)})
	}
	ids, err := s.Conversations(ctx, "u1")
	if err != nil || !slices.Equal(ids, []string{"u1-a", "u1-b"}) {
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
	if c, _ := s.Conversation(ctx, "u1-a", 10); len(c.Messages) != 0 || len(c.Seen) != 0 || c.Turns != 0 {
		t.Errorf("conversation left: %+v", c)
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
