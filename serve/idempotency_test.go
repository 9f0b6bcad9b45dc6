package serve_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentrun/agentrun/serve"
)

// A request with an Idempotency-Key runs once per user and key. The client that
// leaves does not cancel its run; a repeat follows it — while it runs and once it
// is over, streamed or not — and the tool runs once. The key used for another
// request is refused; another user's same key is another run.
func TestIdempotencyKeyRunsOnce(t *testing.T) {
	e := newEnv(t, envOptions{latency: 300 * time.Millisecond})
	body := map[string]any{"input": ordersInput, "conversation": "k1"}
	key := []string{serve.IdempotencyHeader, "order-question-1"}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := e.request(ctx, "POST", "/v1/agents/support/runs", aliceToken, body, key...)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	eventually(t, "the first model request is sent", func() bool { return len(e.model.Requests()) >= 1 })
	cancel() // the client gives up; with a key the run goes on
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first request ended with %v", err)
	}

	repeat := e.doT(t, "POST", "/v1/agents/support/runs", aliceToken, body, key...)
	if repeat.Status != http.StatusOK {
		t.Fatalf("repeat: %d %s", repeat.Status, repeat.Body)
	}
	first := repeat.json(t)
	if res, _ := first["result"].(map[string]any); res["answer"] != finalAnswer {
		t.Fatalf("the repeat answered %s", repeat.Body)
	}
	again := e.doT(t, "POST", "/v1/agents/support/runs", aliceToken, body, key...)
	if again.json(t)["id"] != first["id"] || again.Header.Get("X-Agentrun-Run") != first["id"] {
		t.Errorf("a repeat after the run ended started another: %v, then %v", first["id"], again.json(t)["id"])
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("the backend saw %v: the tool must run once", got)
	}

	other := e.doT(t, "POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hello", "conversation": "k1"}, key...)
	if other.Status != http.StatusUnprocessableEntity || other.errorCode(t) != "idempotency_key_reused" {
		t.Errorf("the key reused for another request: %d %s", other.Status, other.Body)
	}
	bob := e.doT(t, "POST", "/v1/agents/support/runs", bobToken, body, key...)
	if bob.Status != http.StatusOK || bob.json(t)["id"] == first["id"] {
		t.Errorf("bob's request with alice's key: %d %s", bob.Status, bob.Body)
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("the backend saw %v", got)
	}
	bad := e.doT(t, "POST", "/v1/agents/support/runs", aliceToken, body, serve.IdempotencyHeader, "with space")
	if bad.Status != http.StatusBadRequest || bad.errorCode(t) != "invalid_idempotency_key" {
		t.Errorf("a malformed key: %d %s", bad.Status, bad.Body)
	}
}

// A streamed request repeated with its key streams the same run from its first
// event; a chat completion repeated with its key is the same completion.
func TestIdempotencyKeyStreamsAndCompletions(t *testing.T) {
	e := newEnv(t, envOptions{})
	key := []string{serve.IdempotencyHeader, "stream-1"}
	body := map[string]any{"input": ordersInput, "stream": true}
	var runs []runResult
	for range 2 {
		resp, err := e.request(context.Background(), "POST", "/v1/agents/support/runs", aliceToken, body, key...)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, checkRunStream(t, newSSEReader(resp.Body).all(t), 1))
		resp.Body.Close()
	}
	if runs[0].ID == "" || runs[1].ID != runs[0].ID || runs[1].Result.Answer != finalAnswer {
		t.Errorf("streams of %q and %q", runs[0].ID, runs[1].ID)
	}

	chat := map[string]any{"model": "support", "messages": []map[string]any{{"role": "user", "content": ordersInput}}}
	ckey := []string{serve.IdempotencyHeader, "chat-1"}
	a := e.doT(t, "POST", "/v1/chat/completions", aliceToken, chat, ckey...).json(t)
	b := e.doT(t, "POST", "/v1/chat/completions", aliceToken, chat, ckey...).json(t)
	if a["id"] == nil || a["id"] != b["id"] || a["created"] != b["created"] {
		t.Errorf("completions %v and %v", a["id"], b["id"])
	}
	if got := e.backend.Users(); len(got) != 2 {
		t.Errorf("the backend saw %v: one lookup per key", got)
	}
}
