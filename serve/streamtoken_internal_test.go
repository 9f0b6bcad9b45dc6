package serve

import (
	"testing"
	"time"
)

// A stream token opens its run until it expires, and is bound to its run and
// to the process that issued it.
func TestStreamTokenExpires(t *testing.T) {
	tokens, now := newStreamTokens(), time.Now()
	token := tokens.issue("alice", "run_1", now.Add(streamTokenTTL))
	if user, ok := tokens.check(token, "run_1", now); !ok || user != "alice" {
		t.Errorf("a fresh token: %q %v", user, ok)
	}
	if _, ok := tokens.check(token, "run_1", now.Add(streamTokenTTL+time.Second)); ok {
		t.Error("an expired token opens the run")
	}
	if _, ok := tokens.check(token, "run_2", now); ok {
		t.Error("a token opens another run")
	}
	if _, ok := newStreamTokens().check(token, "run_1", now); ok {
		t.Error("another process's token opens the run")
	}
}
