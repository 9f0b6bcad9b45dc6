// Package storetest is the conformance suite of store.Store, store.PausedRuns and
// store.Blobs: every store — memory, sqlite, redis, postgres — runs the same tests.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// Open returns a new, empty store for one test; the test cleans it up.
type Open func(t *testing.T) store.Store

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

func commit(t testing.TB, s store.Store, rec store.Record) {
	t.Helper()
	if err := s.Commit(ctx, rec); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// turn is one stored exchange: a question, optionally a tool round, an answer.
func turn(i int, withTool bool) []model.Message {
	msgs := []model.Message{{Role: model.RoleUser, Content: fmt.Sprintf("question %d\n第%d个问题", i, i)}}
	if withTool {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			// Reasoning and a call's provider fields must survive: DeepSeek and Gemini
			// refuse a later request without them.
			model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: "lookup", Arguments: fmt.Sprintf(`{"id":%d}`, i),
				Extra: map[string]json.RawMessage{"extra_content": json.RawMessage(`{"google":{"thought_signature":"c2ln"}}`)}}},
				Reasoning: &model.Reasoning{Field: "reasoning_content", Text: fmt.Sprintf("look %d up first", i)}},
			model.Message{Role: model.RoleTool, ToolCallID: id, Content: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return append(msgs, model.Message{Role: model.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
}

// seenOf is every entity of the conversation, by kind.
func seenOf(t testing.TB, s store.Store, conv string) map[string][]string {
	t.Helper()
	m, err := s.SeenEntities(ctx, conv)
	if err != nil {
		t.Fatalf("seen entities of %s: %v", conv, err)
	}
	return m
}

func valueOf(facts []store.Fact, key string) string {
	for _, f := range facts {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

// normalize treats nil and empty slices alike.
func normalize(msgs []model.Message) []model.Message {
	out := make([]model.Message, len(msgs))
	for i, m := range msgs {
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = nil
		}
		out[i] = m
	}
	return out
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
