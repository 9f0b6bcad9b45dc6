package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/serve"
)

// The agents as MCP tools on /mcp, driven by the MCP TypeScript SDK's client
// (tools/node/mcp-client.mjs) over streamable HTTP.

// mcpOutcome is what mcp-client.mjs prints.
type mcpOutcome struct {
	Server    map[string]any
	SessionID string
	Tools     []struct {
		Name, Description         string
		InputSchema, OutputSchema map[string]any
	}
	Calls []struct {
		Progress []struct {
			Progress float64
			Message  string
		}
		Result *struct {
			Content []struct {
				Type, Text string
			}
			StructuredContent map[string]any
			IsError           bool
			Meta              map[string]any `json:"_meta"`
		}
		Error *struct {
			Code    any
			Message string
		}
	}
	Elicitations []map[string]any
	Error        string
}

// text is the text of a call's result.
func (o mcpOutcome) text(i int) string {
	var b strings.Builder
	for _, c := range o.Calls[i].Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// mcpClient runs mcp-client.mjs with plan and returns what it saw.
func mcpClient(t *testing.T, plan map[string]any) mcpOutcome {
	t.Helper()
	tools := nodetools.Dir(t)
	data, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "mcp-client.mjs"), string(data))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got mcpOutcome
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, stderr.String())
	}
	if got.Error != "" {
		t.Fatalf("mcp-client: %s\n%s", got.Error, stderr.String())
	}
	return got
}

func (e *env) mcpPlan(token string, steps ...map[string]any) map[string]any {
	return map[string]any{"transport": "http", "url": e.URL + "/mcp", "token": token, "steps": steps}
}

func list() map[string]any { return map[string]any{"op": "list"} }

func call(name string, args map[string]any) map[string]any {
	return map[string]any{"op": "call", "name": name, "arguments": args, "progress": true}
}

// The official client lists the agent as a tool and calls it: the answer is the
// run's, the progress notifications tell of the model's tool call and of the
// tool running, and the agent's http tool got the authenticated user's id —
// alice's, never the one the model put in its arguments.
func TestMCPServesAgentsAsTools(t *testing.T) {
	e := newEnv(t, envOptions{})
	got := mcpClient(t, e.mcpPlan(aliceToken, list(), call("support", map[string]any{"question": ordersInput, "conversation": "c-mcp"})))
	if len(got.Tools) != 1 || got.Tools[0].Name != "support" || got.Tools[0].Description != "Answers questions about the user's orders." {
		t.Fatalf("tools %+v", got.Tools)
	}
	schema := got.Tools[0].InputSchema
	if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "question" || schema["additionalProperties"] != false {
		t.Errorf("input schema %v", schema)
	}
	if props, _ := schema["properties"].(map[string]any); props["conversation"] == nil || props["question"] == nil {
		t.Errorf("input schema %v", schema)
	}
	if got.Tools[0].OutputSchema != nil {
		t.Errorf("an agent without an output schema declares %v", got.Tools[0].OutputSchema)
	}
	c := got.Calls[0]
	if c.Error != nil || c.Result == nil || c.Result.IsError || got.text(0) != finalAnswer {
		t.Fatalf("call %+v", c)
	}
	if run, _ := c.Result.Meta["agentrun/run"].(string); !strings.HasPrefix(run, "run_") || c.Result.Meta["agentrun/stop"] != "completed" {
		t.Errorf("_meta %v", c.Result.Meta)
	}
	var msgs []string
	for i, p := range c.Progress {
		msgs = append(msgs, p.Message)
		if p.Progress != float64(i+1) {
			t.Errorf("progress %d is %v: it must increase", i, p.Progress)
		}
	}
	if !slices.Contains(msgs, "the model asked for a tool call") || !slices.Contains(msgs, "calling list_orders") || !slices.Contains(msgs, "the model answered") {
		t.Errorf("progress %q", msgs)
	}
	if users := e.backend.Users(); !slices.Equal(users, []string{"alice"}) {
		t.Errorf("the backend was asked about %v, want [alice]", users)
	}
	// The conversation is alice's own, as on the run API.
	if convs := e.conversations(aliceToken); !slices.Equal(convs, []string{"c-mcp"}) {
		t.Errorf("alice's conversations %v", convs)
	}
	if convs := e.conversations(bobToken); len(convs) != 0 {
		t.Errorf("bob's conversations %v", convs)
	}
}

// An agent with an output schema declares it as the tool's outputSchema and
// answers with structured content as well as its JSON text; the official client
// checks the one against the other.
func TestMCPStructuredOutput(t *testing.T) {
	e := newEnv(t, envOptions{reply: outputReply, editSpec: func(s string) string { return s + outputSchema }})
	got := mcpClient(t, e.mcpPlan(bobToken, list(), call("support", map[string]any{"question": ordersInput})))
	out := got.Tools[0].OutputSchema
	if out["type"] != "object" || out["properties"] == nil {
		t.Fatalf("output schema %v", out)
	}
	c := got.Calls[0]
	if c.Error != nil || c.Result == nil || c.Result.IsError {
		t.Fatalf("call %+v", c)
	}
	if sc := c.Result.StructuredContent; sc["orders"] != 2.0 || sc["note"] != "both shipped" {
		t.Errorf("structured content %v", sc)
	}
	if got.text(0) != `{"note":"both shipped","orders":2}` {
		t.Errorf("text %q", got.text(0))
	}
}

// A run that ends on a fault is a tool result with isError, never the spec's
// fallback message as if it were the answer; arguments the tool does not take —
// a user id above all — are an error result too, and run nothing.
func TestMCPErrorsAreToolErrors(t *testing.T) {
	e := newEnv(t, envOptions{reply: func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Status: http.StatusBadRequest}
	}})
	got := mcpClient(t, e.mcpPlan(aliceToken, list(),
		call("support", map[string]any{"question": "hello"}),
		call("support", map[string]any{"question": "hello", "user_id": "bob"}),
		call("support", map[string]any{"question": 42}),
		call("support", map[string]any{"question": "hello", "conversation": "not/valid"}),
		call("nope", map[string]any{"question": "hello"}),
	))
	want := []string{"the agent's model failed", `unknown field "user_id"`, "the arguments must be", "a conversation id is 1 to 128 characters"}
	for i, w := range want {
		c := got.Calls[i]
		if c.Result == nil || !c.Result.IsError || !strings.Contains(got.text(i), w) {
			t.Errorf("call %d: %+v, want an error result with %q", i, c, w)
		}
	}
	if got.Calls[0].Result.Meta["agentrun/error"] != "model_error" {
		t.Errorf("_meta %v", got.Calls[0].Result.Meta)
	}
	if c := got.Calls[4]; c.Error == nil || !strings.Contains(c.Error.Message, "nope") {
		t.Errorf("an unknown tool: %+v, want a protocol error", c)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("the model got %d requests; only the first call may run", n)
	}
}

// The client's cancellation (notifications/cancelled, sent when its call is
// aborted) cancels the run: it stops with canceled while its model is asked.
func TestMCPCancellationCancelsTheRun(t *testing.T) {
	e := newEnv(t, envOptions{latency: 500 * time.Millisecond})
	step := call("support", map[string]any{"question": ordersInput})
	step["cancelAfterProgress"] = 1
	got := mcpClient(t, e.mcpPlan(aliceToken, step))
	if c := got.Calls[0]; c.Error == nil || c.Result != nil {
		t.Fatalf("a canceled call: %+v", c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.logs.String(), `"stop":"canceled"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no run stopped with canceled:\n%s", e.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mcpPost sends one JSON-RPC message to /mcp as token, in session id ("" for
// none).
func (e *env) mcpPost(token, session string, msg map[string]any) response {
	e.t.Helper()
	return e.do("POST", "/mcp", token, msg, "Accept", "application/json, text/event-stream", "Mcp-Session-Id", session)
}

var initialize = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
	"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}}

// /mcp wants credentials, and a session is its opener's: another user's
// session id is not found — for messages, its stream and its end — exactly as
// an unknown one, while its owner goes on using it.
func TestMCPSessionsBelongToTheirUser(t *testing.T) {
	e := newEnv(t, envOptions{})
	if r := e.mcpPost("", "", initialize); r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d %s", r.Status, r.Body)
	}
	r := e.mcpPost(aliceToken, "", initialize)
	id := r.Header.Get("Mcp-Session-Id")
	if r.Status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := e.mcpPost(aliceToken, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); r.Status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	listTools := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
	unknown := e.mcpPost(bobToken, "no-such-session", listTools)
	for _, r := range []response{
		e.mcpPost(bobToken, id, listTools),
		e.mcpPost(bobToken, id, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
			"params": map[string]any{"name": "support", "arguments": map[string]any{"question": ordersInput}}}),
		e.do("GET", "/mcp", bobToken, nil, "Accept", "text/event-stream", "Mcp-Session-Id", id),
		e.do("DELETE", "/mcp", bobToken, nil, "Mcp-Session-Id", id),
	} {
		if r.Status != http.StatusNotFound || !bytes.Equal(r.Body, unknown.Body) {
			t.Errorf("bob with alice's session: %d %s, want %d %s", r.Status, r.Body, unknown.Status, unknown.Body)
		}
	}
	if users := e.backend.Users(); len(users) != 0 {
		t.Errorf("bob's call ran: the backend was asked about %v", users)
	}
	if r := e.mcpPost(aliceToken, id, listTools); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"support"`) {
		t.Errorf("alice's own session: %d %s", r.Status, r.Body)
	}
	if r := e.do("DELETE", "/mcp", aliceToken, nil, "Mcp-Session-Id", id); r.Status != http.StatusNoContent {
		t.Errorf("alice ends her session: %d %s", r.Status, r.Body)
	}
	if r := e.mcpPost(aliceToken, id, listTools); r.Status != http.StatusNotFound {
		t.Errorf("an ended session: %d %s", r.Status, r.Body)
	}
}

// A tool call is a run: it takes one of the user's run slots, and a call beyond
// them is an error result that says so.
func TestMCPCallsTakeRunSlots(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{MaxConcurrentPerUser: 1}, latency: 300 * time.Millisecond})
	id := e.openMCPSession(aliceToken)
	ask := func(n int) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": n, "method": "tools/call",
			"params": map[string]any{"name": "support", "arguments": map[string]any{"question": "hello"}}}
	}
	first := make(chan response)
	go func() { first <- e.mcpPost(aliceToken, id, ask(10)) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.model.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	second := e.mcpPost(aliceToken, id, ask(11))
	if !strings.Contains(string(second.Body), `"isError":true`) || !strings.Contains(string(second.Body), "too many runs in flight") {
		t.Errorf("a call beyond the user's slots: %d %s", second.Status, second.Body)
	}
	if r := <-first; !strings.Contains(string(r.Body), greeting) {
		t.Errorf("the first call: %d %s", r.Status, r.Body)
	}
}

// A call that needs approval is asked about with MCP elicitation, when the
// client offers it: the user's answer is their decision, and the run goes on
// within the tool call — the approved cancellation runs once, a declined one
// never. A client without elicitation cannot be asked: the call is refused.
func TestMCPApprovalsByElicitation(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	cancelA2 := "POST /users/alice/orders/A2/cancel"
	ask := func(elicit map[string]any) mcpOutcome {
		plan := e.mcpPlan(aliceToken, list(), call("shop", map[string]any{"question": oneApproval}))
		if elicit != nil {
			plan["elicit"] = elicit
		}
		return mcpClient(t, plan)
	}

	refused := ask(nil)
	if c := refused.Calls[0]; c.Result == nil || c.Result.IsError || refused.text(0) != approvedAnswer || len(refused.Elicitations) != 0 {
		t.Fatalf("without elicitation: %+v", c)
	}
	if msgs := progressMessages(refused, 0); !slices.Contains(msgs, "cancel_order was refused") {
		t.Errorf("progress %q", msgs)
	}
	if n := e.shop.count(cancelA2); n != 0 {
		t.Fatalf("a call nobody approved ran %d times", n)
	}

	declined := ask(map[string]any{"action": "decline"})
	if c := declined.Calls[0]; c.Result == nil || c.Result.IsError || declined.text(0) != approvedAnswer {
		t.Fatalf("declined: %+v", c)
	}
	if len(declined.Elicitations) != 1 || !strings.Contains(declined.Elicitations[0]["message"].(string), "Cancel order A2?") {
		t.Errorf("elicitations %v", declined.Elicitations)
	}
	if n := e.shop.count(cancelA2); n != 0 {
		t.Fatalf("a declined call ran %d times", n)
	}
	run, _ := declined.Calls[0].Result.Meta["agentrun/run"].(string)
	if r := e.do("GET", "/v1/runs/"+run, aliceToken, nil); !strings.Contains(string(r.Body), `"stop":"completed"`) {
		t.Errorf("the declined run: %d %s", r.Status, r.Body)
	}

	approved := ask(map[string]any{"action": "accept", "content": map[string]any{"approve": true}})
	if c := approved.Calls[0]; c.Result == nil || c.Result.IsError || approved.text(0) != approvedAnswer || len(approved.Elicitations) != 1 {
		t.Fatalf("approved: %+v, elicitations %v", c, approved.Elicitations)
	}
	if n := e.shop.count(cancelA2); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
	if msgs := progressMessages(approved, 0); !slices.Contains(msgs, "calling cancel_order") {
		t.Errorf("progress %q", msgs)
	}
}

func progressMessages(o mcpOutcome, i int) []string {
	var msgs []string
	for _, p := range o.Calls[i].Progress {
		msgs = append(msgs, p.Message)
	}
	return msgs
}

// openMCPSession initializes a session as token and returns its id.
func (e *env) openMCPSession(token string) string {
	e.t.Helper()
	r := e.mcpPost(token, "", initialize)
	id := r.Header.Get("Mcp-Session-Id")
	if r.Status != http.StatusOK || id == "" {
		e.t.Fatalf("initialize: %d %s", r.Status, r.Body)
	}
	if r := e.mcpPost(token, id, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); r.Status != http.StatusAccepted {
		e.t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	return id
}

// After a reload (SIGHUP), an open session lists the agents as they are now,
// and a body over max_body_bytes is refused with 413.
func TestMCPToolsFollowAReload(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{MaxBodyBytes: 4096}})
	id := e.openMCPSession(aliceToken)
	listTools := map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
	if r := e.mcpPost(aliceToken, id, listTools); !strings.Contains(string(r.Body), "Answers questions about the user's orders.") {
		t.Fatalf("tools/list: %d %s", r.Status, r.Body)
	}
	e.writeSpec(func(s string) string {
		return strings.Replace(s, "description: Answers questions about the user's orders.", "description: Knows every order.", 1)
	})
	if err := e.srv.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := e.mcpPost(aliceToken, id, listTools); !strings.Contains(string(r.Body), "Knows every order.") {
		t.Errorf("tools/list after the reload: %d %s", r.Status, r.Body)
	}
	big := map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
		"params": map[string]any{"name": "support", "arguments": map[string]any{"question": strings.Repeat("x", 5000)}}}
	if r := e.mcpPost(aliceToken, id, big); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over max_body_bytes: %d %s", r.Status, r.Body)
	}
}
