package serve_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentrun/agentrun/serve"
)

// Every authenticated endpoint refuses a request without valid credentials with a
// 401 in its API's error shape, and runs nothing.
func TestAuthenticationMatrix(t *testing.T) {
	e := newEnv(t, envOptions{})
	credentials := []struct {
		name, authorization string
	}{
		{"no token", ""},
		{"wrong token", "Bearer not-a-configured-token"},
		{"token without scheme", aliceToken},
		{"basic scheme", "Basic YWxpY2U6cGFzc3dvcmQ="},
		{"empty bearer", "Bearer "},
		{"expired JWT", "Bearer " + signJWT(t, jwtSecret, func(c jwt.MapClaims) {
			c["iat"] = time.Now().Add(-3 * time.Hour).Unix()
			c["exp"] = time.Now().Add(-2 * time.Hour).Unix()
		})},
		{"wrong audience", "Bearer " + signJWT(t, jwtSecret, func(c jwt.MapClaims) { c["aud"] = "another-service" })},
		{"wrong issuer", "Bearer " + signJWT(t, jwtSecret, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })},
		{"bad signature", "Bearer " + signJWT(t, "another-secret-that-is-long-enough-0000", nil)},
		{"alg none", "Bearer " + unsignedJWT(t)},
	}
	endpoints := []struct {
		method, path string
		body         any
		openAI       bool
	}{
		{"GET", "/v1/agents", nil, false},
		{"POST", "/v1/agents/support/runs", map[string]any{"input": ordersInput}, false},
		{"GET", "/v1/runs/run_123", nil, false},
		{"GET", "/v1/runs/run_123/events", nil, false},
		{"POST", "/v1/runs/run_123/cancel", nil, false},
		{"GET", "/v1/conversations", nil, false},
		{"GET", "/v1/conversations/c1", nil, false},
		{"DELETE", "/v1/conversations/c1", nil, false},
		{"GET", "/v1/me/memory", nil, false},
		{"DELETE", "/v1/me/memory", nil, false},
		{"GET", "/v1/models", nil, true},
		{"POST", "/v1/chat/completions", map[string]any{"model": "support", "messages": []any{map[string]any{"role": "user", "content": ordersInput}}}, true},
	}
	for _, c := range credentials {
		for _, ep := range endpoints {
			t.Run(c.name+"/"+ep.method+" "+ep.path, func(t *testing.T) {
				r := e.do(ep.method, ep.path, "", ep.body, "Authorization", c.authorization)
				if r.Status != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401: %s", r.Status, r.Body)
				}
				if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q", r.Header.Get("WWW-Authenticate"))
				}
				if ep.openAI {
					if code := r.openAIErrorCode(t); code == "" {
						t.Errorf("no code in %s", r.Body)
					}
				} else if code := r.errorCode(t); code != "unauthorized" {
					t.Errorf("code %q, want unauthorized", code)
				}
				if tok := strings.TrimPrefix(c.authorization, "Bearer "); len(tok) > 8 && strings.Contains(string(r.Body), tok) {
					t.Errorf("the answer repeats the credential: %s", r.Body)
				}
			})
		}
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("unauthenticated requests made %d model requests", n)
	}
	if users := e.backend.Users(); len(users) != 0 {
		t.Errorf("unauthenticated requests reached the backend for %q", users)
	}

	// The control: the same config accepts a valid JWT, as its subject.
	r := e.do("GET", "/v1/me/memory", signJWT(t, jwtSecret, nil), nil)
	if r.Status != http.StatusOK || r.json(t)["user"] != "dave" {
		t.Errorf("a valid JWT: %d %s, want 200 for dave", r.Status, r.Body)
	}
}

func unsignedJWT(t *testing.T) string {
	c := jwt.MapClaims{"iss": jwtIssuer, "aud": jwtAudience, "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The principal is the only source of identity: body fields, headers and query
// parameters naming another user change nothing, and the bound tool argument the
// model tries to set is discarded.
func TestIdentityComesOnlyFromThePrincipal(t *testing.T) {
	e := newEnv(t, envOptions{})
	spoof := []string{"X-User-Id", "bob", "X-Agentrun-User", "bob", "X-Forwarded-User", "bob", "X-Remote-User", "bob"}
	body := map[string]any{
		"input": ordersInput, "conversation": "mine",
		"user": "bob", "user_id": "bob", "userId": "bob", "principal": "bob",
		"context": map[string]any{"user": map[string]any{"id": "bob", "tier": "platinum"}},
	}
	r := e.do("POST", "/v1/agents/support/runs?user=bob&user_id=bob", aliceToken, body, spoof...)
	if r.Status != http.StatusOK {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	chat := map[string]any{"model": "support", "user": "bob", "user_id": "bob",
		"messages": []any{map[string]any{"role": "user", "content": ordersInput, "name": "bob"}}}
	if r := e.do("POST", "/v1/chat/completions?user=bob", aliceToken, chat, spoof...); r.Status != http.StatusOK {
		t.Fatalf("chat completion: %d %s", r.Status, r.Body)
	}
	// A JWT's subject is its principal the same way.
	body["conversation"] = "daves"
	if r := e.do("POST", "/v1/agents/support/runs", signJWT(t, jwtSecret, nil), body, spoof...); r.Status != http.StatusOK {
		t.Fatalf("run with a JWT: %d %s", r.Status, r.Body)
	}
	if got, want := e.backend.Users(), []string{"alice", "alice", "dave"}; !slices.Equal(got, want) {
		t.Errorf("the backend saw users %q, want %q", got, want)
	}
	if got := e.conversations(bobToken); len(got) != 0 {
		t.Errorf("bob has conversations %q that alice made", got)
	}
	if _, facts := e.facts(bobToken); len(facts) != 0 {
		t.Errorf("bob has facts %v that alice's runs wrote", facts)
	}
	if got := e.conversations(aliceToken); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("alice's conversations = %q, want [mine]", got)
	}
	// The principal's attributes reach the agent only where the spec declares them
	// (context.user: [tier]), and the body cannot set them.
	for _, req := range e.model.Requests() {
		for _, m := range req.Messages {
			if s := messageText(m); strings.Contains(s, "platinum") || strings.Contains(s, "secret_attr") {
				t.Errorf("the model saw a spoofed or undeclared attribute: %q", s)
			}
		}
	}
}

// Runs and conversations belong to their principal: another user's are not found,
// exactly like ones that do not exist, and trying leaves them untouched.
func TestOtherUsersRunsAndConversations(t *testing.T) {
	e := newEnv(t, envOptions{})
	bobs := e.run(bobToken, ordersInput, "bob-conv")
	bobConv := e.do("GET", "/v1/conversations/bob-conv", bobToken, nil)
	if bobConv.Status != http.StatusOK {
		t.Fatalf("bob's own conversation: %d", bobConv.Status)
	}
	for _, c := range []struct{ method, path, code string }{
		{"GET", "/v1/runs/" + bobs.ID, "run_not_found"},
		{"GET", "/v1/runs/" + bobs.ID + "/events", "run_not_found"},
		{"POST", "/v1/runs/" + bobs.ID + "/cancel", "run_not_found"},
		{"GET", "/v1/conversations/bob-conv", "conversation_not_found"},
		{"DELETE", "/v1/conversations/bob-conv", "conversation_not_found"},
	} {
		r := e.do(c.method, c.path, aliceToken, nil)
		if r.Status != http.StatusNotFound || r.errorCode(t) != c.code {
			t.Errorf("alice %s %s: %d %s, want 404 %s", c.method, c.path, r.Status, r.Body, c.code)
		}
		// Not found is not found: the answer for a made-up id is the same.
		made := strings.NewReplacer(bobs.ID, "run_doesnotexist", "bob-conv", "no-such-conv").Replace(c.path)
		if r2 := e.do(c.method, made, aliceToken, nil); r2.Status != r.Status || string(r2.Body) != string(r.Body) {
			t.Errorf("%s %s answers %d %s, but a made-up id %d %s", c.method, c.path, r.Status, r.Body, r2.Status, r2.Body)
		}
	}

	// Conversation ids are each user's own: alice naming "bob-conv" runs in a
	// conversation of her own, which sees nothing of bob's, so ids can be neither
	// probed nor taken.
	before := len(e.model.Requests())
	r := e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": ordersInput, "conversation": "bob-conv"})
	if r.Status != http.StatusOK {
		t.Errorf("alice running in her own bob-conv: %d %s", r.Status, r.Body)
	}
	first := e.model.Requests()[before]
	if n := len(first.Messages); n != 2 { // the system prompt and alice's input: no history
		t.Errorf("alice's first run in her bob-conv sent %d messages: it saw a history", n)
	}
	chat := map[string]any{"model": "support", "messages": []any{map[string]any{"role": "user", "content": ordersInput}}}
	r = e.do("POST", "/v1/chat/completions", aliceToken, chat, serve.ConversationHeader, "bob-conv")
	if r.Status != http.StatusOK {
		t.Errorf("alice's chat completion in her bob-conv: %d %s", r.Status, r.Body)
	}
	if got := e.backend.Users(); got[0] != "bob" || slices.Contains(got[1:], "bob") {
		t.Errorf("the backend saw %q: only bob's own run may look up bob", got)
	}
	if after := e.do("GET", "/v1/conversations/bob-conv", bobToken, nil); string(after.Body) != string(bobConv.Body) {
		t.Errorf("bob's conversation changed:\nbefore %s\nafter  %s", bobConv.Body, after.Body)
	}
	if got := e.conversations(aliceToken); !slices.Equal(got, []string{"bob-conv"}) {
		t.Errorf("alice lists %q, want her own bob-conv", got)
	}
	if mine := e.do("GET", "/v1/conversations/bob-conv", aliceToken, nil); mine.Status != http.StatusOK || string(mine.Body) == string(bobConv.Body) {
		t.Errorf("alice's bob-conv: %d %s", mine.Status, mine.Body)
	}
	if r := e.do("GET", "/v1/runs/"+bobs.ID, bobToken, nil); r.Status != http.StatusOK {
		t.Errorf("bob's own run: %d", r.Status)
	}
}

// /v1/me/memory is the caller's memory, and forgetting forgets only the caller.
func TestMemoryIsTheCallers(t *testing.T) {
	e := newEnv(t, envOptions{store: "sqlite:" + t.TempDir() + "/memory.db"})
	e.run(aliceToken, ordersInput, "")
	e.run(bobToken, ordersInput, "")
	for _, c := range []struct{ token, user string }{{aliceToken, "alice"}, {bobToken, "bob"}} {
		user, facts := e.facts(c.token)
		if user != c.user || len(facts) != 1 || facts[0].Key != "orders_of" || facts[0].Value != c.user {
			t.Errorf("%s's memory: %s %+v, want only orders_of=%s", c.user, user, facts, c.user)
		}
	}
	if r := e.do("GET", "/v1/me/memory?user=bob", aliceToken, nil, "X-User-Id", "bob"); !strings.Contains(string(r.Body), `"value":"alice"`) || strings.Contains(string(r.Body), "bob") {
		t.Errorf("alice asking for bob's memory by query and header: %s", r.Body)
	}
	if r := e.do("DELETE", "/v1/me/memory?user=bob", aliceToken, nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE /v1/me/memory: %d %s", r.Status, r.Body)
	}
	if _, facts := e.facts(aliceToken); len(facts) != 0 {
		t.Errorf("alice's facts after forgetting: %+v", facts)
	}
	if _, facts := e.facts(bobToken); len(facts) != 1 || facts[0].Value != "bob" {
		t.Errorf("bob's facts after alice forgot hers: %+v", facts)
	}
}

// The 11th run over a burst of 10 is refused with Retry-After; the limit is each
// principal's.
func TestRateLimit(t *testing.T) {
	// A token every 10 s: however slowly a loaded machine sends the 11 runs, the
	// bucket does not refill in between.
	e := newEnv(t, envOptions{limits: serve.Limits{RatePerSecond: 0.1, Burst: 10, MaxConcurrentPerUser: 20}})
	// All 11 at once, on connections opened beforehand.
	statuses := make([]response, 11)
	var wg sync.WaitGroup
	for range statuses {
		wg.Go(func() { e.do("GET", "/healthz", "", nil) })
	}
	wg.Wait()
	start := make(chan struct{})
	for i := range statuses {
		wg.Go(func() {
			<-start
			statuses[i] = e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi"})
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	var ok, limited []response
	for _, r := range statuses {
		switch r.Status {
		case http.StatusOK:
			ok = append(ok, r)
		case http.StatusTooManyRequests:
			limited = append(limited, r)
		default:
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	}
	if len(ok) != 10 || len(limited) != 1 {
		t.Fatalf("%d passed and %d were limited in %v, want 10 and 1", len(ok), len(limited), elapsed)
	}
	r := limited[0]
	if code := r.errorCode(t); code != "rate_limited" {
		t.Errorf("code %q", code)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After = %q, want whole seconds ≥ 1", r.Header.Get("Retry-After"))
	}
	// Bob has his own bucket, and reading is not limited.
	e.run(bobToken, "hi", "")
	if r := e.do("GET", "/v1/conversations", aliceToken, nil); r.Status != http.StatusOK {
		t.Errorf("alice listing conversations while limited: %d", r.Status)
	}
	if n := len(e.model.Requests()); n != 11 {
		t.Errorf("%d model requests, want 11 (10 of alice's runs and bob's)", n)
	}
	if got := e.metric("agentrun_rate_limited_total", `reason="rate"`); got != 1 {
		t.Errorf("agentrun_rate_limited_total rate = %v, want 1", got)
	}

	// The OpenAI endpoint shares the bucket and says so in its own shape.
	slow := newEnv(t, envOptions{limits: serve.Limits{RatePerSecond: 0.01, Burst: 1}})
	slow.run(aliceToken, "hi", "")
	chat := map[string]any{"model": "support", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	r = slow.do("POST", "/v1/chat/completions", aliceToken, chat)
	if r.Status != http.StatusTooManyRequests || r.openAIErrorCode(t) != "rate_limited" {
		t.Fatalf("a chat completion over the limit: %d %s, want 429", r.Status, r.Body)
	}
	if typ := r.json(t)["error"].(map[string]any)["type"]; typ != "rate_limit_exceeded" {
		t.Errorf("error type %v, want rate_limit_exceeded", typ)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 90 {
		t.Errorf("Retry-After = %q, want the seconds until a token (100)", r.Header.Get("Retry-After"))
	}
}

// The concurrency caps: per principal, then for the whole server.
func TestConcurrencyCaps(t *testing.T) {
	e := newEnv(t, envOptions{latency: 300 * time.Millisecond,
		limits: serve.Limits{RatePerSecond: 100, Burst: 100, MaxConcurrentPerUser: 1, MaxConcurrent: 2}})
	first := e.startStream(t.Context(), aliceToken, map[string]any{"input": "hi"})
	defer first.Body.Close()
	r := e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi"})
	if r.Status != http.StatusTooManyRequests || r.errorCode(t) != "too_many_runs" || r.Header.Get("Retry-After") == "" {
		t.Errorf("alice's second run at once: %d %s, want 429 too_many_runs with Retry-After", r.Status, r.Body)
	}
	second := e.startStream(t.Context(), bobToken, map[string]any{"input": "hi"})
	defer second.Body.Close()
	r = e.do("POST", "/v1/agents/support/runs", carolToken, map[string]any{"input": "hi"})
	if r.Status != http.StatusTooManyRequests || r.errorCode(t) != "too_many_runs" {
		t.Errorf("carol's run with the server full: %d %s, want 429", r.Status, r.Body)
	}
	for _, s := range []*http.Response{first, second} {
		if res := checkRunStream(t, newSSEReader(s.Body).all(t), 1); res.Result.Answer != greeting {
			t.Errorf("a run under the caps ended %+v", res.Result)
		}
	}
	if got := e.metric("agentrun_rate_limited_total", `reason="concurrency"`); got != 1 {
		t.Errorf("rate limited for concurrency = %v, want 1", got)
	}
	if got := e.metric("agentrun_rate_limited_total", `reason="total"`); got != 1 {
		t.Errorf("rate limited for the total = %v, want 1", got)
	}
	// The slots come back when the runs end.
	eventually(t, "alice may run again", func() bool {
		return e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi"}).Status == http.StatusOK
	})
}
