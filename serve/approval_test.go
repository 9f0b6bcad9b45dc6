package serve_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
	"github.com/agentrun/agentrun/serve"
)

// The tests of runs paused for approval: testdata/approval.yaml, whose
// cancel_order waits for a person's decision while lookup runs at once.

const (
	// approverToken is a static token of the approver role.
	approverToken = "olga-approver-token-0123456789"
	// twoApprovals makes the fake model ask, in one response, for a lookup, two
	// cancellations (both needing approval) and another lookup.
	twoApprovals = "please cancel A2 and A3"
	// oneApproval asks for a lookup, one cancellation and another lookup.
	oneApproval    = "please cancel A2"
	approvedAnswer = "Done: see the tool results."
	// holdOn makes the fake model wait until the test releases it (approvalEnv.gate):
	// a run in flight that never pauses.
	holdOn = "hold on"
)

// approvalReply is the fake model of the approval tests.
func approvalReply(req openaitest.Request) openaitest.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last["role"] == "tool" {
		return openaitest.Reply{Content: approvedAnswer}
	}
	call := func(id, name, number string) openaitest.ToolCall {
		// user_id is bound: the model's value is discarded, never shown or used.
		return openaitest.ToolCall{ID: id, Name: name, Arguments: fmt.Sprintf(`{"number":%q,"user_id":"mallory"}`, number)}
	}
	switch text := messageText(last); {
	case strings.Contains(text, twoApprovals):
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{call("call_look_a2", "lookup", "A2"),
			call("call_cancel_a2", "cancel_order", "A2"), call("call_cancel_a3", "cancel_order", "A3"), call("call_look_a3", "lookup", "A3")}}
	case strings.Contains(text, oneApproval):
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{call("call_look", "lookup", "A2"),
			call("call_cancel", "cancel_order", "A2"), call("call_look_a1", "lookup", "A1")}}
	}
	return openaitest.Reply{Content: greeting}
}

// shopBackend counts the requests of every path: its side effects.
type shopBackend struct {
	URL  string
	mu   sync.Mutex
	hits map[string]int
}

func newShopBackend(t testing.TB) *shopBackend {
	b := &shopBackend{hits: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.hits[r.Method+" "+r.URL.Path]++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

func (b *shopBackend) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hits[key]
}

type approvalEnv struct {
	*env
	shop *shopBackend
	// gate holds the model's answer to holdOn until it is closed.
	gate chan struct{}
}

// newApprovalEnv serves testdata/approval.yaml (edited by edit) from store ("" for a
// process-local one), sweeping for expired approvals every sweep.
func newApprovalEnv(t *testing.T, sweep time.Duration, edit func(string) string, store string) *approvalEnv {
	t.Helper()
	return newApprovalEnvOn(t, sweep, edit, store, nil)
}

// newApprovalEnvOn is newApprovalEnv with the server's runs on engine (nil: in
// this process).
func newApprovalEnvOn(t *testing.T, sweep time.Duration, edit func(string) string, store string, engine serve.Engine) *approvalEnv {
	t.Helper()
	e := &approvalEnv{env: &env{t: t, backend: newBackend(t), logs: &lockedBuffer{}}, shop: newShopBackend(t), gate: make(chan struct{})}
	e.model = openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		if strings.Contains(messageText(req.Messages[len(req.Messages)-1]), holdOn) {
			<-e.gate
		}
		return approvalReply(req)
	})
	data, err := os.ReadFile("testdata/approval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "http://backend.invalid", e.shop.URL)
	if edit != nil {
		text = edit(text)
	}
	e.spec = filepath.Join(t.TempDir(), "approval.yaml")
	if err := os.WriteFile(e.spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"LLM_BASE_URL": e.model.URL, "LLM_API_KEY": "sk-fake", "TEST_JWT_SECRET": jwtSecret}
	srv, err := serve.New(t.Context(), serve.Options{
		Config: serve.Config{
			Addr: "127.0.0.1:0",
			Auth: serve.AuthConfig{
				Tokens: []serve.TokenConfig{
					{SHA256: sha256Hex(aliceToken), User: "alice"},
					{SHA256: sha256Hex(bobToken), User: "bob"},
					{SHA256: sha256Hex(approverToken), User: "olga", Roles: []string{serve.RoleApprover}},
				},
				JWT: &serve.JWTConfig{HS256SecretEnv: "TEST_JWT_SECRET", Issuer: jwtIssuer, Audience: jwtAudience},
			},
			Limits:    serve.Limits{RatePerSecond: 10000, Burst: 10000, MaxConcurrentPerUser: 64},
			Approvals: serve.ApprovalsConfig{SweepInterval: sweep},
		},
		Specs:     []string{e.spec},
		Store:     cmp.Or(store, "memory:"),
		Model:     "openai:fake",
		Logger:    slog.New(slog.NewJSONHandler(e.logs, nil)),
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Engine:    engine,
	})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	e.srv = srv
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	hs := httptest.NewUnstartedServer(nil)
	hs.Config = srv.HTTPServer() // the server's own timeouts, on a real listener
	hs.Start()
	t.Cleanup(hs.Close)
	e.URL = hs.URL
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr}
	return e
}

// pausedRun is what the tests read of a run's JSON result.
type pausedRun struct {
	ID     string `json:"id"`
	Result struct {
		Answer  string `json:"answer"`
		Stop    string `json:"stop"`
		RunID   string `json:"run_id"`
		Pending []struct {
			CallID   string `json:"call_id"`
			Tool     string `json:"tool"`
			ArgsHash string `json:"args_hash"`
		} `json:"pending"`
	} `json:"result"`
}

// approvals is GET /v1/runs/{id}/approvals's answer.
type approvals struct {
	RunID     string    `json:"run_id"`
	Agent     string    `json:"agent"`
	User      string    `json:"user"`
	Status    string    `json:"status"`
	Expires   time.Time `json:"expires"`
	Approvals []struct {
		CallID    string `json:"call_id"`
		Tool      string `json:"tool"`
		Arguments string `json:"arguments"`
		ArgsHash  string `json:"args_hash"`
		Message   string `json:"message"`
		Decision  *struct {
			Approved bool   `json:"approved"`
			By       string `json:"by"`
			Reason   string `json:"reason"`
		} `json:"decision"`
	} `json:"approvals"`
}

func (e *approvalEnv) startPaused(token, input string) pausedRun {
	e.t.Helper()
	r := e.do("POST", "/v1/agents/shop/runs", token, map[string]any{"input": input})
	if r.Status != http.StatusOK {
		e.t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	var p pausedRun
	if err := json.Unmarshal(r.Body, &p); err != nil {
		e.t.Fatal(err)
	}
	if p.Result.Stop != "awaiting_approval" || p.Result.RunID != p.ID || len(p.Result.Pending) == 0 {
		e.t.Fatalf("run = %s, want it awaiting approval under its own id", r.Body)
	}
	return p
}

func (e *approvalEnv) approvals(token, id string) approvals {
	e.t.Helper()
	r := e.do("GET", "/v1/runs/"+id+"/approvals", token, nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("GET approvals: %d %s", r.Status, r.Body)
	}
	if _, ok := r.json(e.t)["spec"]; ok {
		e.t.Errorf("GET approvals shows the spec file: %s", r.Body)
	}
	var a approvals
	if err := json.Unmarshal(r.Body, &a); err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *approvalEnv) decide(token, id, call string, body map[string]any) response {
	e.t.Helper()
	return e.do("POST", "/v1/runs/"+id+"/approvals/"+call, token, body)
}

// waitFinished polls GET /v1/runs/{id} until the run is finished with stop.
func (e *approvalEnv) waitFinished(token, id, stop string) map[string]any {
	e.t.Helper()
	var v map[string]any
	eventually(e.t, "run "+id+" finishes with "+stop, func() bool {
		r := e.do("GET", "/v1/runs/"+id, token, nil)
		if r.Status != http.StatusOK {
			return false
		}
		v = r.json(e.t)
		res, _ := v["result"].(map[string]any)
		return v["status"] == "finished" && res != nil && res["stop"] == stop
	})
	return v
}

// lastToolTurn is the last model request's tool calls (the assistant message's
// ids) and the tool messages after it.
func (e *approvalEnv) lastToolTurn() (calls []string, results []map[string]any) {
	e.t.Helper()
	reqs := e.model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	for i, m := range msgs {
		tcs, ok := m["tool_calls"].([]any)
		if m["role"] != "assistant" || !ok {
			continue
		}
		calls, results = nil, nil
		for _, tc := range tcs {
			calls = append(calls, tc.(map[string]any)["id"].(string))
		}
		for _, r := range msgs[i+1:] {
			if r["role"] != "tool" {
				break
			}
			results = append(results, r)
		}
	}
	return calls, results
}

// checkToolOrder checks the tool messages follow the calls, in order, with their ids.
func (e *approvalEnv) checkToolOrder(want []string) map[string]string {
	e.t.Helper()
	calls, results := e.lastToolTurn()
	if !slices.Equal(calls, want) {
		e.t.Fatalf("the model's tool calls %q, want %q", calls, want)
	}
	byID := map[string]string{}
	var ids []string
	for _, r := range results {
		id, _ := r["tool_call_id"].(string)
		ids = append(ids, id)
		byID[id] = messageText(r)
	}
	if !slices.Equal(ids, want) {
		e.t.Fatalf("the tool messages answer %q, want %q in call order", ids, want)
	}
	return byID
}

// The whole flow: a run pauses on two calls, its stream shows approval.requested,
// its owner sees and decides them — refused when another user tries, when the
// decision is given twice or for other arguments — and the run resumes under the
// same id, running the approved call exactly once and the others of its response
// never again.
func TestApprovalFlow(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")

	resp, err := e.request(context.Background(), "POST", "/v1/agents/shop/runs", aliceToken, map[string]any{"input": twoApprovals, "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	events := newSSEReader(resp.Body).all(t)
	resp.Body.Close()
	paused := checkRunStream(t, events, 1)
	id := paused.ID
	pauseResult := len(events) // the id of the pause's result event
	var requested []map[string]any
	for _, ev := range events {
		if ev.Event == "approval.requested" {
			var v map[string]any
			json.Unmarshal([]byte(ev.Data), &v)
			requested = append(requested, v)
		}
		if strings.HasPrefix(ev.Event, "approval.") && (strings.Contains(ev.Data, "mallory") || strings.Contains(ev.Data, "alice")) {
			t.Errorf("event %s shows a bound value: %s", ev.Event, ev.Data)
		}
	}
	if len(requested) != 2 || requested[0]["tool"] != "cancel_order" || requested[0]["call_id"] != "call_cancel_a2" ||
		requested[0]["message"] != "Cancel order A2?" || requested[1]["call_id"] != "call_cancel_a3" ||
		!strings.Contains(fmt.Sprint(requested[0]["args"]), "A2") {
		t.Fatalf("approval.requested events %v", requested)
	}
	if paused.Result.Stop != "awaiting_approval" {
		t.Fatalf("the pause's result %+v", paused.Result)
	}
	if e.shop.count("GET /users/alice/orders/A2") != 1 || e.shop.count("GET /users/alice/orders/A3") != 1 ||
		e.shop.count("POST /users/alice/orders/A2/cancel") != 0 {
		t.Fatalf("before any decision the backend saw %v", e.shop.hits)
	}
	v := e.do("GET", "/v1/runs/"+id, aliceToken, nil).json(t)
	if res, _ := v["result"].(map[string]any); v["status"] != "finished" || res["stop"] != "awaiting_approval" || len(res["pending"].([]any)) != 2 {
		t.Fatalf("GET run while paused = %v", v)
	}

	a := e.approvals(aliceToken, id)
	if a.RunID != id || a.Agent != "shop" || a.User != "alice" || a.Status != "waiting" || len(a.Approvals) != 2 ||
		a.Approvals[0].CallID != "call_cancel_a2" || a.Approvals[0].ArgsHash == "" || a.Approvals[0].Message != "Cancel order A2?" ||
		a.Approvals[0].Decision != nil || strings.Contains(a.Approvals[0].Arguments, "mallory") {
		t.Fatalf("GET approvals = %+v", a)
	}
	hashA2 := a.Approvals[0].ArgsHash

	// Another user neither sees nor decides: the run is not found.
	if r := e.do("GET", "/v1/runs/"+id+"/approvals", bobToken, nil); r.Status != http.StatusNotFound || r.errorCode(t) != "run_not_found" {
		t.Errorf("bob's GET approvals: %d %s", r.Status, r.Body)
	}
	if r := e.decide(bobToken, id, "call_cancel_a2", map[string]any{"decision": "approve"}); r.Status != http.StatusNotFound || r.errorCode(t) != "run_not_found" {
		t.Errorf("bob's decision: %d %s", r.Status, r.Body)
	}
	if got := e.approvals(aliceToken, id); got.Approvals[0].Decision != nil || got.Approvals[1].Decision != nil {
		t.Fatalf("another user's refused decision changed the run: %+v", got)
	}
	// Malformed decisions.
	if r := e.decide(aliceToken, id, "call_cancel_a2", map[string]any{"decision": "maybe"}); r.Status != http.StatusBadRequest || r.errorCode(t) != "invalid_decision" {
		t.Errorf("decision maybe: %d %s", r.Status, r.Body)
	}
	if r := e.decide(aliceToken, id, "call_nope", map[string]any{"decision": "approve"}); r.Status != http.StatusNotFound || r.errorCode(t) != "call_not_found" {
		t.Errorf("unknown call: %d %s", r.Status, r.Body)
	}
	if r := e.decide(aliceToken, id, "call_cancel_a2", map[string]any{"decision": "approve", "args_hash": strings.Repeat("0", 64)}); r.Status != http.StatusConflict || r.errorCode(t) != "args_changed" {
		t.Errorf("wrong args_hash: %d %s", r.Status, r.Body)
	}

	// The first decision leaves the run waiting; a second one for the same call is refused.
	r := e.decide(aliceToken, id, "call_cancel_a2", map[string]any{"decision": "approve", "args_hash": hashA2})
	if r.Status != http.StatusOK || r.json(t)["status"] != "waiting" {
		t.Fatalf("approve A2: %d %s", r.Status, r.Body)
	}
	if r := e.decide(aliceToken, id, "call_cancel_a2", map[string]any{"decision": "reject"}); r.Status != http.StatusConflict || r.errorCode(t) != "already_decided" {
		t.Errorf("second decision: %d %s", r.Status, r.Body)
	}
	if e.shop.count("POST /users/alice/orders/A2/cancel") != 0 {
		t.Fatal("an approved call ran while another still waits")
	}
	// The last decision resumes the run.
	r = e.decide(aliceToken, id, "call_cancel_a3", map[string]any{"decision": "reject", "reason": "A3 is a gift"})
	if r.Status != http.StatusOK || r.json(t)["status"] != "resumed" {
		t.Fatalf("reject A3: %d %s", r.Status, r.Body)
	}

	// The resumed execution goes on with the run's events, after the pause's result.
	resp, err = e.request(context.Background(), "GET", "/v1/runs/"+id+"/events", aliceToken, nil, "Last-Event-ID", strconv.Itoa(pauseResult))
	if err != nil {
		t.Fatal(err)
	}
	rest := newSSEReader(resp.Body).all(t)
	resp.Body.Close()
	final := checkRunStream(t, rest, pauseResult+1)
	if final.ID != id || final.Result.Stop != "completed" || final.Result.Answer != approvedAnswer {
		t.Fatalf("the resumed run's result %+v", final)
	}
	if kinds := eventKinds(rest); !slices.Contains(kinds, "approval.decided") {
		t.Errorf("the resumed run's events %q have no approval.decided", kinds)
	}
	e.waitFinished(aliceToken, id, "completed")

	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 1 {
		t.Errorf("the approved cancellation ran %d times, want 1", n)
	}
	if n := e.shop.count("POST /users/alice/orders/A3/cancel"); n != 0 {
		t.Errorf("the rejected cancellation ran %d times", n)
	}
	if a2, a3 := e.shop.count("GET /users/alice/orders/A2"), e.shop.count("GET /users/alice/orders/A3"); a2 != 1 || a3 != 1 {
		t.Errorf("the lookups of the paused response ran %d and %d times, want once each", a2, a3)
	}
	results := e.checkToolOrder([]string{"call_look_a2", "call_cancel_a2", "call_cancel_a3", "call_look_a3"})
	if got := results["call_cancel_a3"]; !strings.Contains(got, "Rejected") || !strings.Contains(got, "A3 is a gift") {
		t.Errorf("the model was told of the rejection as %q", got)
	}
	if got := results["call_cancel_a2"]; !strings.Contains(got, `"ok"`) {
		t.Errorf("the approved call's result %q", got)
	}

	// The run is over: no more decisions, and no paused run to show.
	if r := e.decide(aliceToken, id, "call_cancel_a2", map[string]any{"decision": "approve"}); r.Status != http.StatusNotFound || r.errorCode(t) != "run_not_found" {
		t.Errorf("a decision after the run resumed: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/v1/runs/"+id+"/approvals", aliceToken, nil); r.Status != http.StatusNotFound {
		t.Errorf("GET approvals after the run resumed: %d %s", r.Status, r.Body)
	}

	// The run's whole stream: the pause's result, then the resumed execution's events.
	resp, err = e.request(context.Background(), "GET", "/v1/runs/"+id+"/events", aliceToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := newSSEReader(resp.Body).all(t)
	resp.Body.Close()
	for i, ev := range all {
		if ev.ID != strconv.Itoa(i+1) {
			t.Fatalf("event %d has id %s", i, ev.ID)
		}
	}
	if len(all) != len(events)+len(rest) || all[pauseResult-1].Event != "result" || !strings.Contains(all[pauseResult-1].Data, "awaiting_approval") {
		t.Errorf("the whole stream has %d events (want %d), the pause's result at %d: %+v", len(all), len(events)+len(rest), pauseResult, all[pauseResult-1])
	}
	if got := e.metric("agentrun_approval_decisions_total", `decision="approve"`); got != 1 {
		t.Errorf("approve decisions counted %v", got)
	}
}

// An approver decides on any user's run — a static token's role or a JWT's roles
// claim; a principal without the role does not even see it.
func TestApprovalByApprover(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	p := e.startPaused(bobToken, oneApproval)
	jwtApprover := signJWT(t, jwtSecret, func(c jwt.MapClaims) { c["roles"] = []string{"approver"} })
	jwtOther := signJWT(t, jwtSecret, func(c jwt.MapClaims) { c["sub"] = "erin"; c["roles"] = "reader" })

	if a := e.approvals(approverToken, p.ID); a.User != "bob" || len(a.Approvals) != 1 {
		t.Fatalf("the approver's GET approvals = %+v", a)
	}
	for _, tok := range []string{jwtOther, aliceToken} {
		if r := e.decide(tok, p.ID, "call_cancel", map[string]any{"decision": "approve"}); r.Status != http.StatusNotFound {
			t.Errorf("a non-approver's decision: %d %s", r.Status, r.Body)
		}
	}
	r := e.decide(jwtApprover, p.ID, "call_cancel", map[string]any{"decision": "approve"})
	if r.Status != http.StatusOK || r.json(t)["status"] != "resumed" {
		t.Fatalf("the approver's decision: %d %s", r.Status, r.Body)
	}
	e.waitFinished(bobToken, p.ID, "completed")
	if n := e.shop.count("POST /users/bob/orders/A2/cancel"); n != 1 {
		t.Errorf("the approved call ran %d times for bob, want 1", n)
	}
	if got := e.checkToolOrder([]string{"call_look", "call_cancel", "call_look_a1"}); !strings.Contains(got["call_cancel"], `"ok"`) {
		t.Errorf("tool results %v", got)
	}
}

// Nobody decides: once the approvals expire the sweeper resumes the run with
// on_timeout reject, and the model is told nobody approved.
func TestApprovalExpirySweeper(t *testing.T) {
	e := newApprovalEnv(t, 50*time.Millisecond, func(s string) string {
		return strings.Replace(s, "approval: {timeout: 1h}", "approval: {timeout: 300ms, on_timeout: reject}", 1)
	}, "")
	p := e.startPaused(aliceToken, oneApproval)
	v := e.waitFinished(aliceToken, p.ID, "completed")
	if res := v["result"].(map[string]any); res["answer"] != approvedAnswer {
		t.Errorf("the resumed run's result %v", res)
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Errorf("an expired call ran %d times", n)
	}
	if n := e.shop.count("GET /users/alice/orders/A2"); n != 1 {
		t.Errorf("the lookup of the paused response ran %d times, want 1", n)
	}
	results := e.checkToolOrder([]string{"call_look", "call_cancel", "call_look_a1"})
	if got := results["call_cancel"]; !strings.Contains(got, "nobody approved it in time") {
		t.Errorf("the model was told %q", got)
	}
	if got := e.metric("agentrun_approval_decisions_total", `decision="expired"`); got != 1 {
		t.Errorf("expired decisions counted %v", got)
	}
}

// approvedInStore pauses a run of alice on a server with a SQLite store and
// approves its call in the store directly, as a server that stopped right after
// the decision would leave it; nothing resumed it.
func approvedInStore(t *testing.T) (store string, first *approvalEnv, p pausedRun, st *sqlite.Store) {
	t.Helper()
	store = "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	first = newApprovalEnv(t, time.Hour, nil, store)
	p = first.startPaused(aliceToken, oneApproval)
	st, err := sqlite.Open(strings.TrimPrefix(store, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := runtime.Decide(t.Context(), st, p.ID, runtime.Decider{ID: "alice"},
		runtime.DecideRequest{CallID: "call_cancel", Approve: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return store, first, p, st
}

// A run whose calls were all decided but that no server resumed (the last decision
// came as its server shut down) is resumed by the next server to start on the store.
func TestApprovalDecidedRunResumedAtStart(t *testing.T) {
	store, first, p, _ := approvedInStore(t)
	if n := first.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Fatalf("the call ran %d times before any server resumed the run", n)
	}
	second := newApprovalEnv(t, time.Hour, nil, store) // its spec points at a shop and a model of its own
	second.waitFinished(aliceToken, p.ID, "completed")
	if a, b := first.shop.count("POST /users/alice/orders/A2/cancel"), second.shop.count("POST /users/alice/orders/A2/cancel"); a+b != 1 || b != 1 {
		t.Errorf("the approved call ran %d times before the restart and %d after, want 0 and 1", a, b)
	}
}

// A run whose resuming execution died (its claim outlived the claimer's
// max_run_time) is taken over by a server's sweeper, and its approved call is not
// run again: the model is told its outcome is unknown.
func TestApprovalAbandonedRunTakenOver(t *testing.T) {
	db, first, p, st := approvedInStore(t)
	// What a process that claimed the run and died leaves behind.
	rec, err := st.PausedRun(t.Context(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	json.Unmarshal(rec.State, &state)
	state["claimed_until"] = time.Now().Add(-time.Second)
	rec.State, _ = json.Marshal(state)
	rec.Status, rec.Version = store.PauseResuming, rec.Version+1
	if err := st.UpdatePaused(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	second := newApprovalEnv(t, time.Hour, nil, db)
	second.waitFinished(aliceToken, p.ID, "completed")
	if a, b := first.shop.count("POST /users/alice/orders/A2/cancel"), second.shop.count("POST /users/alice/orders/A2/cancel"); a+b != 0 {
		t.Errorf("the approved call of a run taken over ran %d times", a+b)
	}
	if results := second.checkToolOrder([]string{"call_look", "call_cancel", "call_look_a1"}); !strings.Contains(results["call_cancel"], "unknown whether") {
		t.Errorf("the model was told %q", results["call_cancel"])
	}
}

// A decision after the approvals expired is refused, even before the sweeper
// comes by.
func TestApprovalDecisionAfterExpiry(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, func(s string) string {
		return strings.Replace(s, "approval: {timeout: 1h}", "approval: {timeout: 200ms}", 1)
	}, "")
	p := e.startPaused(aliceToken, oneApproval)
	a := e.approvals(aliceToken, p.ID)
	time.Sleep(time.Until(a.Expires) + 20*time.Millisecond)
	if r := e.decide(aliceToken, p.ID, "call_cancel", map[string]any{"decision": "approve"}); r.Status != http.StatusConflict || r.errorCode(t) != "approval_expired" {
		t.Errorf("a decision after expiry: %d %s", r.Status, r.Body)
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Errorf("an expired call ran %d times", n)
	}
}

// GET /v1/approvals lists the caller's paused runs; an approver's lists everyone's.
func TestApprovalList(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	pa := e.startPaused(aliceToken, oneApproval)
	pb := e.startPaused(bobToken, oneApproval)
	list := func(token string) []string {
		r := e.do("GET", "/v1/approvals", token, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/approvals: %d %s", r.Status, r.Body)
		}
		var v struct{ Runs []approvals }
		json.Unmarshal(r.Body, &v)
		var ids []string
		for _, run := range v.Runs {
			ids = append(ids, run.RunID)
		}
		slices.Sort(ids)
		return ids
	}
	if got := list(aliceToken); !slices.Equal(got, []string{pa.ID}) {
		t.Errorf("alice's list %q", got)
	}
	want := []string{pa.ID, pb.ID}
	slices.Sort(want)
	if got := list(approverToken); !slices.Equal(got, want) {
		t.Errorf("the approver's list %q, want %q", got, want)
	}
}

// The OpenAI-compatible endpoint cannot ask anyone: a call that needs approval is
// refused, the model is told why, and the tool never runs.
func TestApprovalRefusedOnOpenAIEndpoint(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	r := e.do("POST", "/v1/chat/completions", aliceToken, map[string]any{"model": "shop",
		"messages": []any{map[string]any{"role": "user", "content": oneApproval}}})
	if r.Status != http.StatusOK {
		t.Fatalf("chat completion: %d %s", r.Status, r.Body)
	}
	if v := r.json(t); v["agentrun"].(map[string]any)["stop"] != "completed" {
		t.Errorf("chat completion %s", r.Body)
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Fatalf("a call that needs approval ran %d times", n)
	}
	results := e.checkToolOrder([]string{"call_look", "call_cancel", "call_look_a1"})
	if got := results["call_cancel"]; !strings.Contains(got, "needs a person's approval") || !strings.Contains(got, "cannot be asked for on this channel") {
		t.Errorf("the model was told %q", got)
	}
	if e.shop.count("GET /users/alice/orders/A2") != 1 {
		t.Error("the lookup of the same response did not run")
	}
	if r := e.do("GET", "/v1/approvals", aliceToken, nil); !strings.Contains(string(r.Body), `"runs":[]`) {
		t.Errorf("a refused call left a paused run: %s", r.Body)
	}
}

// Decisions on two replicas sharing one store: whatever a replica holds in memory,
// a run that is not paused — in flight and never paused, unknown, another user's,
// or resumed and finished — is 404 run_not_found on both, and a decision that lost
// (the call was decided already) gets the same answer on both, from the store.
func TestApprovalDecisionsAgreeAcrossReplicas(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "state.db") }},
		{"postgres", func(t *testing.T) string { url, _ := pgtest.Schema(t); return url }},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := c.store(t)
			a := newApprovalEnv(t, time.Hour, nil, store)
			b := newApprovalEnv(t, time.Hour, nil, store)
			replicas := map[string]*approvalEnv{"A": a, "B": b}
			deciders := map[string]string{"the owner": aliceToken, "an approver": approverToken, "another user": bobToken}
			// answer decides call on every replica as every decider: all must be want.
			answer := func(what, id, call string, tokens map[string]string, want int, code string) {
				t.Helper()
				for rn, e := range replicas {
					for who, tok := range tokens {
						r := e.decide(tok, id, call, map[string]any{"decision": "approve"})
						if r.Status != want || r.errorCode(t) != code {
							t.Errorf("%s, %s deciding on replica %s: %d %s, want %d %s", what, who, rn, r.Status, r.Body, want, code)
						}
					}
				}
			}

			// A run in flight on A that never paused.
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp, err := a.request(ctx, "POST", "/v1/agents/shop/runs", aliceToken, map[string]any{"input": holdOn, "stream": true})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			inFlight := resp.Header.Get("X-Agentrun-Run")
			eventually(t, "the run asks the model", func() bool { return len(a.model.Requests()) == 1 })
			answer("a run in flight", inFlight, "call_cancel", deciders, http.StatusNotFound, "run_not_found")
			answer("an unknown run", "run_0123456789abcdef01234567", "call_cancel", deciders, http.StatusNotFound, "run_not_found")
			close(a.gate)
			if res := checkRunStream(t, newSSEReader(resp.Body).all(t), 1); res.Result.Stop != "completed" {
				t.Fatalf("the run in flight ended %+v", res.Result)
			}

			// A call decided on A is already decided on both.
			two := a.startPaused(aliceToken, twoApprovals)
			if r := a.decide(approverToken, two.ID, "call_cancel_a2", map[string]any{"decision": "approve"}); r.Status != http.StatusOK {
				t.Fatalf("the approver's decision: %d %s", r.Status, r.Body)
			}
			owners := map[string]string{"the owner": aliceToken, "an approver": approverToken}
			answer("a decided call", two.ID, "call_cancel_a2", owners, http.StatusConflict, "already_decided")
			answer("another user's run", two.ID, "call_cancel_a3", map[string]string{"another user": bobToken}, http.StatusNotFound, "run_not_found")

			// A run decided in full, resumed on A and finished, waits for nothing on both.
			one := a.startPaused(aliceToken, oneApproval)
			if r := a.decide(approverToken, one.ID, "call_cancel", map[string]any{"decision": "approve"}); r.Status != http.StatusOK || r.json(t)["status"] != "resumed" {
				t.Fatalf("the approver's decision: %d %s", r.Status, r.Body)
			}
			a.waitFinished(aliceToken, one.ID, "completed")
			answer("a resumed run", one.ID, "call_cancel", deciders, http.StatusNotFound, "run_not_found")
			if n := a.shop.count("POST /users/alice/orders/A2/cancel") + b.shop.count("POST /users/alice/orders/A2/cancel"); n != 1 {
				t.Errorf("the approved call ran %d times, want 1", n)
			}
		})
	}
}

// engineElsewhere is a durable engine this server would hand its runs to; the
// tests below check that it is never asked to resume a run it does not hold.
type engineElsewhere struct {
	at      runtime.Placement
	resumed atomic.Int32
}

func (e *engineElsewhere) Run(context.Context, *agentrun.Agent, runtime.Request) (*runtime.Result, error) {
	return nil, errors.New("no runs start in these tests")
}

func (e *engineElsewhere) Resume(context.Context, *agentrun.Agent, runtime.ResumeRequest) (*runtime.Result, error) {
	e.resumed.Add(1)
	return nil, errors.New("this engine holds no paused run")
}

func (e *engineElsewhere) Placement() runtime.Placement { return e.at }

var onTemporal = runtime.Placement{Engine: runtime.EngineTemporal, Address: "temporal.internal:7233", Namespace: "support", TaskQueue: "shop"}

// placeInStore rewrites a paused run's record as a worker of another engine
// would have written it.
func placeInStore(t *testing.T, st *sqlite.Store, id string, at runtime.Placement) {
	t.Helper()
	rec, err := st.PausedRun(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	json.Unmarshal(rec.State, &state)
	state["placement"] = at
	rec.State, _ = json.Marshal(state)
	rec.Version++
	if err := st.UpdatePaused(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
}

// A decision on a run that waits on another engine than the server's — a
// workflow on Temporal while the server runs its runs itself, or the reverse —
// is refused with a conflict that names where the run waits; nothing is
// stored, resumed or run.
func TestApprovalOnAnotherEngine(t *testing.T) {
	tests := []struct {
		name            string
		runOn, serverOn runtime.Placement
		wantIn          string
	}{
		{"a run on temporal, a server in process", onTemporal, runtime.Placement{}, "waits on Temporal (namespace support, task queue shop)"},
		{"a run in process, a server on temporal", runtime.Placement{}, onTemporal, "waits on the local engine"},
		{"another namespace", onTemporal, runtime.Placement{Engine: runtime.EngineTemporal, Namespace: "default"}, "namespace support"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
			first := newApprovalEnv(t, time.Hour, nil, store)
			p := first.startPaused(aliceToken, oneApproval)
			st, err := sqlite.Open(strings.TrimPrefix(store, "sqlite:"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			placeInStore(t, st, p.ID, tt.runOn)
			engine := &engineElsewhere{at: tt.serverOn}
			var e *approvalEnv
			if tt.serverOn.Engine == "" {
				e = newApprovalEnv(t, time.Hour, nil, store)
			} else {
				e = newApprovalEnvOn(t, time.Hour, nil, store, engine)
			}
			r := e.decide(aliceToken, p.ID, "call_cancel", map[string]any{"decision": "approve"})
			if r.Status != http.StatusConflict || r.errorCode(t) != "run_on_other_engine" || !strings.Contains(string(r.Body), tt.wantIn) {
				t.Fatalf("a decision on a run of another engine: %d %s", r.Status, r.Body)
			}
			if a := e.approvals(aliceToken, p.ID); a.Status != "waiting" || a.Approvals[0].Decision != nil {
				t.Errorf("after the refusal: %+v", a)
			}
			if n := e.shop.count("POST /users/alice/orders/A2/cancel") + first.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 || engine.resumed.Load() != 0 {
				t.Errorf("the call ran %d times, the engine resumed %d runs", n, engine.resumed.Load())
			}
		})
	}
}

// A server's sweeper leaves a run of another engine to it (a workflow resumes
// itself when its approvals expire): of two runs decided in the store, the
// server resumes its own and leaves the one paused on Temporal waiting.
func TestApprovalSweeperLeavesRunsOfAnotherEngine(t *testing.T) {
	store, first, elsewhere, st := approvedInStore(t)
	placeInStore(t, st, elsewhere.ID, onTemporal)
	own := first.startPaused(aliceToken, oneApproval) // expires after elsewhere: swept after it
	if _, err := runtime.Decide(t.Context(), st, own.ID, runtime.Decider{ID: "alice"},
		runtime.DecideRequest{CallID: "call_cancel", Approve: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	second := newApprovalEnv(t, time.Hour, nil, store)
	second.waitFinished(aliceToken, own.ID, "completed")
	if a := second.approvals(aliceToken, elsewhere.ID); a.Status != "waiting" {
		t.Errorf("the run on Temporal: %+v", a)
	}
	if logs := second.logs.String(); strings.Contains(logs, elsewhere.ID) {
		t.Errorf("the server tried to resume the run on Temporal:\n%s", logs)
	}
	if n := first.shop.count("POST /users/alice/orders/A2/cancel") + second.shop.count("POST /users/alice/orders/A2/cancel"); n != 1 {
		t.Errorf("cancel ran %d times, want once (the server's own run)", n)
	}
}
