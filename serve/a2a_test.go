package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/internal/providerwire"
	"github.com/agentrun/agentrun/serve"
)

// The A2A endpoints, driven by the official JavaScript client (@a2a-js/sdk,
// tools/node/a2a-check.mjs) and, for what a client must not get, by plain
// JSON-RPC requests.

// a2aSeen is what tools/node/a2a-check.mjs prints.
type a2aSeen struct {
	Error string `json:"error"`
	Card  struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Streaming   bool   `json:"streaming"`
		Skills      []struct {
			ID, Name, Description string
		} `json:"skills"`
		Interfaces []struct {
			URL, Binding, Version string
		} `json:"interfaces"`
		SecuritySchemes []string `json:"securitySchemes"`
		InputModes      []string `json:"inputModes"`
		OutputModes     []string `json:"outputModes"`
	} `json:"card"`
	First, Got, Second, Paused, Canceled, Sent *a2aTaskSeen
	Events                                     []a2aEventSeen  `json:"events"`
	Again                                      json.RawMessage `json:"again"`
	Protocol                                   string          `json:"protocol"`
}

type a2aTaskSeen struct {
	ID         string `json:"id"`
	ContextID  string `json:"contextId"`
	State      string `json:"state"`
	StatusText string `json:"statusText"`
	StatusData []map[string]any
	Artifacts  []struct {
		ID, Text string
		Data     []any
	} `json:"artifacts"`
	RunID   string `json:"runId"`
	Stop    string `json:"stop"`
	History int    `json:"history"`
}

// answer is the text of the task's answer artifact.
func (t *a2aTaskSeen) answer() string {
	for _, a := range t.Artifacts {
		if a.ID == "answer" {
			return a.Text
		}
	}
	return ""
}

type a2aEventSeen struct {
	Kind      string         `json:"kind"`
	TaskID    string         `json:"taskId"`
	ID        string         `json:"id"`
	State     string         `json:"state"`
	Text      string         `json:"text"`
	Append    bool           `json:"append"`
	LastChunk bool           `json:"lastChunk"`
	Progress  map[string]any `json:"progress"`
}

// a2aCheck runs a scenario of a2a-check.mjs against the agent's card.
func a2aCheck(t *testing.T, baseURL, agent, scenario, token string, questions ...string) a2aSeen {
	t.Helper()
	tools := nodetools.Dir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{filepath.Join(tools, "a2a-check.mjs"), scenario, baseURL + "/a2a/" + agent + "/.well-known/agent-card.json", token}, questions...)
	cmd := exec.CommandContext(ctx, "node", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("a2a-check %s: %v\n%s\n%s", scenario, err, out, stderr.String())
	}
	var seen a2aSeen
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("a2a-check %s: %v: %s", scenario, err, out)
	}
	if seen.Error != "" {
		t.Fatalf("a2a-check %s: the client failed: %s\n%s", scenario, seen.Error, stderr.String())
	}
	return seen
}

// The official client resolves an agent's public card, sends a message and
// gets a completed task with the answer, gets the task again, and a second
// message in the task's context is a second turn of one conversation.
func TestA2AConversation(t *testing.T) {
	e := newEnv(t, envOptions{})
	seen := a2aCheck(t, e.URL, "support", "conversation", aliceToken, "hello there", "and again")
	c := seen.Card
	if c.Name != "support" || c.Description != "Answers questions about the user's orders." || !c.Streaming {
		t.Errorf("card = %+v", c)
	}
	if len(c.Skills) != 1 || c.Skills[0].ID != "support" || c.Skills[0].Description != c.Description {
		t.Errorf("an agent without intents has one skill, itself: %+v", c.Skills)
	}
	if len(c.Interfaces) != 2 || c.Interfaces[0].URL != e.URL+"/a2a/support" || c.Interfaces[0].Binding != "JSONRPC" ||
		c.Interfaces[0].Version != "1.0" || c.Interfaces[1].URL != e.URL+"/a2a/support/v0.3" || c.Interfaces[1].Version != "0.3" {
		t.Errorf("interfaces = %+v", c.Interfaces)
	}
	if len(c.SecuritySchemes) != 1 || c.SecuritySchemes[0] != "bearer" {
		t.Errorf("security schemes = %v, want bearer", c.SecuritySchemes)
	}
	first := seen.First
	if first.State != "completed" || first.answer() != greeting || first.RunID == "" || first.ContextID == "" || first.Stop != "completed" {
		t.Fatalf("first task = %+v", first)
	}
	if got := seen.Got; got.ID != first.ID || got.State != "completed" || got.answer() != greeting {
		t.Errorf("tasks/get = %+v, want the first task", got)
	}
	second := seen.Second
	if second.State != "completed" || second.ContextID != first.ContextID || second.ID == first.ID {
		t.Fatalf("second task = %+v", second)
	}
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	var said []string
	for _, m := range last.Messages {
		said = append(said, messageText(m))
	}
	if joined := strings.Join(said, "|"); !strings.Contains(joined, "hello there") || !strings.Contains(joined, greeting) ||
		!strings.Contains(joined, "and again") {
		t.Errorf("the second turn's model request does not hold the first turn: %v", said)
	}
	// The run behind the task is the caller's run, under the run API too.
	if r := e.do("GET", "/v1/runs/"+first.RunID, aliceToken, nil); r.Status != http.StatusOK {
		t.Errorf("GET the task's run: %d %s", r.Status, r.Body)
	}
	if r := e.do("GET", "/v1/conversations/"+first.ContextID, aliceToken, nil); r.Status != http.StatusOK {
		t.Errorf("the context is the caller's conversation: %d %s", r.Status, r.Body)
	}
}

// A streamed message gets the task, working, the answer's text as it streams,
// the tool's progress, the whole answer and a final completed status, in order.
// What the model says before it calls a tool streams as a paragraph of its own,
// and the whole answer replaces it; with a judge, which may still reject a
// draft, no text streams before the answer.
func TestA2AStream(t *testing.T) {
	beforeTool := func(req openaitest.Request) openaitest.Reply {
		r := shopReply(req)
		if len(r.ToolCalls) > 0 {
			r.Content = "Let me look."
		}
		return r
	}
	for _, c := range []struct {
		name     string
		o        envOptions
		streamed string
	}{
		{"plain", envOptions{}, finalAnswer},
		{"text before a tool", envOptions{reply: beforeTool}, "Let me look.\n\n" + finalAnswer},
		{"judged", envOptions{editSpec: withJudge, reply: judgedShopReply}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.o)
			seen := a2aCheck(t, e.URL, "support", "stream", aliceToken, ordersInput)
			var kinds []string
			for _, ev := range seen.Events {
				kinds = append(kinds, ev.Kind+":"+ev.State)
			}
			evs := seen.Events
			if len(evs) < 5 || evs[0].Kind != "task" || evs[0].State != "submitted" || evs[1].Kind != "status" || evs[1].State != "working" {
				t.Fatalf("events = %v", kinds)
			}
			final := evs[len(evs)-1]
			if final.Kind != "status" || final.State != "completed" {
				t.Fatalf("the stream does not end with a completed status: %v", kinds)
			}
			answer := evs[len(evs)-2]
			if answer.Kind != "artifact" || answer.ID != "answer" || answer.Text != finalAnswer || answer.Append || !answer.LastChunk {
				t.Errorf("the last artifact event = %+v, want the whole answer", answer)
			}
			var streamed string
			var tools []string
			for _, ev := range evs[2 : len(evs)-2] {
				switch {
				case ev.Kind == "artifact":
					if ev.Append != (streamed != "") {
						t.Errorf("chunk %+v: only the first starts the artifact", ev)
					}
					streamed += ev.Text
				case ev.Kind == "status" && ev.Progress != nil:
					tools = append(tools, ev.Progress["event"].(string)+" "+ev.Progress["tool"].(string))
				}
			}
			if streamed != c.streamed {
				t.Errorf("streamed text = %q, want %q", streamed, c.streamed)
			}
			if strings.Join(tools, ",") != "tool_call list_orders,tool_result list_orders" {
				t.Errorf("tool progress = %v", tools)
			}
		})
	}
}

// a2aRPC posts one JSON-RPC request to an A2A endpoint as token and returns
// the status and the decoded answer (the last data line of a stream).
func (e *env) a2aRPC(path, token, method string, params any) (int, map[string]any) {
	e.t.Helper()
	body := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
	r := e.do("POST", path, token, body)
	data := r.Body
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = []byte(d)
			}
		}
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		e.t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	return r.Status, v
}

// tasks/cancel of a task whose run is waiting on a slow model cancels the run:
// its model request is aborted, the stream ends canceled, and tasks/get says so.
func TestA2ACancel(t *testing.T) {
	e := newEnv(t, envOptions{latency: 30 * time.Second})
	seen := a2aCheck(t, e.URL, "support", "cancel", aliceToken, "hello")
	if seen.Canceled == nil || seen.Canceled.State != "canceled" {
		t.Fatalf("tasks/cancel answered %+v", seen.Canceled)
	}
	if last := seen.Events[len(seen.Events)-1]; last.Kind != "status" || last.State != "canceled" {
		t.Errorf("the stream ends with %+v, want a canceled status", last)
	}
	if seen.Got.State != "canceled" {
		t.Errorf("tasks/get = %+v", seen.Got)
	}
	eventually(t, "the model request is aborted", func() bool { return e.model.Canceled() == 1 })
	eventually(t, "the run stops canceled", func() bool {
		r := e.do("GET", "/v1/runs/"+seen.Got.RunID, aliceToken, nil)
		var v runResult
		json.Unmarshal(r.Body, &v)
		return v.Result.Stop == "canceled"
	})
}

// A run that waits for approval is an input-required task whose message lists
// the call; the client answers "approve" to the task, the call runs once and
// the task completes. The task, completed, takes no more decisions.
func TestA2AApproval(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	seen := a2aCheck(t, e.URL, "shop", "approval", aliceToken, oneApproval)
	p := seen.Paused
	if p.State != "input-required" || !strings.Contains(p.StatusText, "cancel_order (call_id call_cancel)") ||
		!strings.Contains(p.StatusText, "Cancel order A2?") || len(p.StatusData) != 1 {
		t.Fatalf("paused task = %+v", p)
	}
	approvals, _ := p.StatusData[0]["approvals"].([]any)
	if len(approvals) != 1 {
		t.Fatalf("the status data lists %v", p.StatusData)
	}
	call := approvals[0].(map[string]any)
	if call["call_id"] != "call_cancel" || call["tool"] != "cancel_order" || call["arguments"] != `{"number":"A2"}` || call["args_hash"] == "" {
		t.Errorf("the pending call = %v, want it as the approval API shows it", call)
	}
	if p.StatusData[0]["run_id"] != p.RunID {
		t.Errorf("run_id %v, want %s", p.StatusData[0]["run_id"], p.RunID)
	}
	var states []string
	for _, ev := range seen.Events {
		if ev.Kind == "status" && ev.Progress == nil || ev.Kind == "task" {
			states = append(states, ev.State)
		}
	}
	if strings.Join(states, ",") != "working,completed" {
		t.Errorf("the decision's stream: %v", states)
	}
	if seen.Got.State != "completed" || seen.Got.answer() != approvedAnswer {
		t.Errorf("the task after the decision = %+v", seen.Got)
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 1 {
		t.Errorf("the approved call ran %d times, want once", n)
	}
	if !strings.Contains(string(seen.Again), "takes no more messages") {
		t.Errorf("a decision on the completed task: %s", seen.Again)
	}
}

// An A2A 0.3 client (the official client's compatibility layer, as older
// clients speak) sends and streams through the card's 0.3 interface.
func TestA2AProtocol03(t *testing.T) {
	e := newEnv(t, envOptions{})
	seen := a2aCheck(t, e.URL, "support", "v03", aliceToken, "hello")
	if seen.Protocol != "0.3" {
		t.Errorf("the client speaks %q", seen.Protocol)
	}
	if seen.Sent.State != "completed" || seen.Sent.answer() != greeting || seen.Got.ID != seen.Sent.ID {
		t.Errorf("message/send: %+v; tasks/get: %+v", seen.Sent, seen.Got)
	}
	if last := seen.Events[len(seen.Events)-1]; last.Kind != "status" || last.State != "completed" {
		t.Errorf("message/stream ends with %+v", last)
	}
}

// rpcError is a JSON-RPC answer's error: its code, message and agentrun's
// code from its details; nil for a result.
type rpcError struct {
	Code    int
	Message string
	Agent   string // the run API's code (agentrun_code), if any
}

func rpcErrorOf(t *testing.T, v map[string]any) *rpcError {
	t.Helper()
	e, ok := v["error"].(map[string]any)
	if !ok {
		return nil
	}
	out := &rpcError{Code: int(e["code"].(float64)), Message: e["message"].(string)}
	details, _ := e["data"].([]any)
	for _, d := range details {
		if meta, ok := d.(map[string]any)["metadata"].(map[string]any); ok {
			out.Agent, _ = meta["agentrun_code"].(string)
		}
	}
	return out
}

// a2aMessage is SendMessage's params: a user message of text parts (or of the
// parts given as maps), with extra message fields (taskId, contextId).
func a2aMessage(id string, parts []any, fields ...string) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": parts}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i]] = fields[i+1]
	}
	return map[string]any{"message": m}
}

func textParts(texts ...string) []any {
	var out []any
	for _, s := range texts {
		out = append(out, map[string]any{"text": s})
	}
	return out
}

// a2aTask is a SendMessage result's task.
func a2aTask(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	task, ok := v["result"].(map[string]any)["task"].(map[string]any)
	if !ok {
		t.Fatalf("no task in %v", v)
	}
	return task
}

func taskState(task map[string]any) string {
	s, _ := task["status"].(map[string]any)["state"].(string)
	return s
}

// Without a token, or with a wrong one, each A2A endpoint answers 401 with a
// JSON-RPC error; the card is public, and the same for everyone.
func TestA2AAuthentication(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, path := range []string{"/a2a/support", "/a2a/support/v0.3"} {
		for _, token := range []string{"", "not-a-token"} {
			r := e.do("POST", path, token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": map[string]any{"id": "x"}})
			if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s with token %q: %d %v", path, token, r.Status, r.Header)
				continue
			}
			if got := rpcErrorOf(t, r.json(t)); got == nil || got.Code != -31401 {
				t.Errorf("%s with token %q: %s, want a JSON-RPC error", path, token, r.Body)
			}
		}
	}
	public := e.do("GET", "/a2a/support/.well-known/agent-card.json", "", nil)
	if public.Status != http.StatusOK {
		t.Fatalf("the card without a token: %d %s", public.Status, public.Body)
	}
	for _, token := range []string{aliceToken, bobToken} {
		if r := e.do("GET", "/a2a/support/.well-known/agent-card.json", token, nil); !bytes.Equal(r.Body, public.Body) {
			t.Errorf("the card differs for a user: %s", r.Body)
		}
	}
	for _, user := range []string{"alice", "bob", "carol", "gold"} {
		if bytes.Contains(public.Body, []byte(user)) {
			t.Errorf("the public card names %q: %s", user, public.Body)
		}
	}
	if r := e.do("GET", "/a2a/nope/.well-known/agent-card.json", "", nil); r.Status != http.StatusNotFound || bytes.Contains(r.Body, []byte("support")) {
		t.Errorf("an unknown agent's card: %d %s, want 404 naming no agent", r.Status, r.Body)
	}
}

// An agent's intents are its card's skills.
func TestA2ACardSkills(t *testing.T) {
	e := newEnv(t, envOptions{editSpec: func(s string) string {
		return s + "intents:\n  orders:\n    description: Where the user's orders are.\n    keywords: [order]\n" +
			"  chat:\n    description: Anything else.\n    keywords: [hello]\n"
	}})
	r := e.do("GET", "/a2a/support/.well-known/agent-card.json", "", nil)
	var card struct {
		Skills []struct{ ID, Name, Description string }
	}
	if err := json.Unmarshal(r.Body, &card); err != nil {
		t.Fatal(err)
	}
	if len(card.Skills) != 2 || card.Skills[0].ID != "orders" || card.Skills[0].Description != "Where the user's orders are." ||
		card.Skills[1].ID != "chat" || card.Skills[1].Name != "chat" {
		t.Errorf("skills = %+v", card.Skills)
	}
}

// Without authentication (--insecure-no-auth, a loopback address only) the
// card asks for no credentials, and the one user "local" talks to the agent.
func TestA2AInsecureCard(t *testing.T) {
	model := openaitest.New(t, shopReply)
	srv, err := serve.New(t.Context(), serve.Options{Config: serve.Config{Addr: "127.0.0.1:0"}, Specs: []string{"testdata/support.yaml"},
		InsecureNoAuth: true, Model: "openai:fake", Store: "memory:", Logger: slog.New(slog.DiscardHandler),
		LookupEnv: func(k string) (string, bool) {
			v, ok := map[string]string{"LLM_BASE_URL": model.URL, "LLM_API_KEY": "sk-fake"}[k]
			return v, ok
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e := &env{t: t, URL: hs.URL, client: hs.Client()}
	r := e.do("GET", "/a2a/support/.well-known/agent-card.json", "", nil)
	if r.Status != http.StatusOK || bytes.Contains(r.Body, []byte("securitySchemes")) || bytes.Contains(r.Body, []byte("bearer")) {
		t.Errorf("the insecure server's card: %d %s", r.Status, r.Body)
	}
	_, v := e.a2aRPC("/a2a/support", "", "SendMessage", a2aMessage("m1", textParts("hello")))
	if task := a2aTask(t, v); taskState(task) != "TASK_STATE_COMPLETED" {
		t.Errorf("task = %v", task)
	}
}

// Another user's task and context are not found, exactly as ones that do not
// exist, whether the task is over or in flight: tasks/get, tasks/cancel, a
// message to it, a subscription to it, a message in its context.
func TestA2AOtherUsersTasksAreNotFound(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	t.Cleanup(func() { close(e.gate) }) // before the server's cleanup
	_, v := e.a2aRPC("/a2a/shop", aliceToken, "SendMessage", a2aMessage("m1", textParts("hello")))
	done := a2aTask(t, v)
	_, v = e.a2aRPC("/a2a/shop", aliceToken, "SendMessage",
		map[string]any{"message": a2aMessage("m2", textParts(holdOn))["message"], "configuration": map[string]any{"returnImmediately": true}})
	inFlight := a2aTask(t, v)
	if taskState(done) != "TASK_STATE_COMPLETED" || taskState(inFlight) == "TASK_STATE_COMPLETED" {
		t.Fatalf("alice's tasks: %v, %v", done, inFlight)
	}
	// alice's run API conversation is hers alone too.
	e.do("POST", "/v1/agents/shop/runs", aliceToken, map[string]any{"input": "hello", "conversation": "c-42"})

	const unknown = "01a23c2b-0000-7000-8000-000000000000"
	asks := []struct {
		method string
		params func(id string) any
	}{
		{"GetTask", func(id string) any { return map[string]any{"id": id} }},
		{"CancelTask", func(id string) any { return map[string]any{"id": id} }},
		{"SubscribeToTask", func(id string) any { return map[string]any{"id": id} }},
		{"SendMessage", func(id string) any { return a2aMessage("b-"+id, textParts("approve"), "taskId", id) }},
		{"SendStreamingMessage", func(id string) any { return a2aMessage("bs-"+id, textParts("approve"), "taskId", id) }},
	}
	for _, task := range []map[string]any{done, inFlight} {
		for _, a := range asks {
			_, theirs := e.a2aRPC("/a2a/shop", bobToken, a.method, a.params(task["id"].(string)))
			_, none := e.a2aRPC("/a2a/shop", bobToken, a.method, a.params(unknown))
			got, want := rpcErrorOf(t, theirs), rpcErrorOf(t, none)
			if got == nil || want == nil || *got != *want || got.Code != -32001 {
				t.Errorf("bob's %s of alice's task: %+v; of none: %+v", a.method, got, want)
			}
		}
	}
	for _, contextID := range []string{done["contextId"].(string), "c-42"} {
		_, theirs := e.a2aRPC("/a2a/shop", bobToken, "SendMessage", a2aMessage("c-"+contextID, textParts("hello"), "contextId", contextID))
		_, none := e.a2aRPC("/a2a/shop", bobToken, "SendMessage", a2aMessage("n-"+contextID, textParts("hello"), "contextId", "made-up"))
		got, want := rpcErrorOf(t, theirs), rpcErrorOf(t, none)
		if got == nil || want == nil || *got != *want || got.Code != -32001 {
			t.Errorf("bob's message in alice's context %s: %+v; in none: %+v", contextID, got, want)
		}
		_, mine := e.a2aRPC("/a2a/shop", aliceToken, "SendMessage", a2aMessage("a-"+contextID, textParts("hello"), "contextId", contextID))
		if task := a2aTask(t, mine); taskState(task) != "TASK_STATE_COMPLETED" || task["contextId"] != contextID {
			t.Errorf("alice's message in her context %s: %v", contextID, task)
		}
	}
	if _, v := e.a2aRPC("/a2a/shop", aliceToken, "GetTask", map[string]any{"id": done["id"]}); rpcErrorOf(t, v) != nil {
		t.Errorf("alice's own task: %v", v)
	}
}

// A message sent again with its messageId gets the task it started, and runs
// nothing more; the same id for another message is refused.
func TestA2AMessageIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, v := e.a2aRPC("/a2a/support", aliceToken, "SendMessage", a2aMessage("m-1", textParts(ordersInput)))
	first := a2aTask(t, v)
	calls := len(e.model.Requests())
	_, v = e.a2aRPC("/a2a/support", aliceToken, "SendMessage", a2aMessage("m-1", textParts(ordersInput)))
	if again := a2aTask(t, v); again["id"] != first["id"] || taskState(again) != "TASK_STATE_COMPLETED" {
		t.Errorf("the message sent again got %v, want task %v", again, first["id"])
	}
	if n := len(e.model.Requests()); n != calls || len(e.backend.Users()) != 1 {
		t.Errorf("the repeat ran again: %d model calls (want %d), backend asked %v", n, calls, e.backend.Users())
	}
	_, v = e.a2aRPC("/a2a/support", aliceToken, "SendMessage", a2aMessage("m-1", textParts("something else")))
	if got := rpcErrorOf(t, v); got == nil || got.Code != -32602 || !strings.Contains(got.Message, "messageId") {
		t.Errorf("another message under the id: %v", v)
	}
	// bob's m-1 is his own.
	_, v = e.a2aRPC("/a2a/support", bobToken, "SendMessage", a2aMessage("m-1", textParts("hello")))
	if task := a2aTask(t, v); task["id"] == first["id"] {
		t.Errorf("bob's message got alice's task")
	}
}

// Bad input and the limits are JSON-RPC errors with the run API's code in
// their details, and start nothing.
func TestA2AErrors(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{RatePerSecond: 0.001, Burst: 2, MaxInputChars: 20}})
	cases := []struct {
		name   string
		params any
		code   int
		agent  string
	}{
		{"empty input", a2aMessage("e1", textParts("  ")), -32602, "invalid_request"},
		{"input too long", a2aMessage("e2", textParts(strings.Repeat("x", 21))), -32602, "input_too_long"},
		{"a data part", a2aMessage("e3", []any{map[string]any{"data": map[string]any{"a": 1}}}), -32005, ""},
		{"a file of another type", a2aMessage("e4", []any{map[string]any{"raw": "SUQzAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "mediaType": "audio/mpeg", "filename": "a.mp3"}}), -32005, "unsupported_attachment"},
		{"a bad context id", a2aMessage("e5", textParts("hello"), "contextId", "has space"), -32001, ""},
	}
	for _, c := range cases {
		_, v := e.a2aRPC("/a2a/support", aliceToken, "SendMessage", c.params)
		if got := rpcErrorOf(t, v); got == nil || got.Code != c.code || got.Agent != c.agent {
			t.Errorf("%s: %v, want code %d (%s)", c.name, v, c.code, c.agent)
		}
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("refused messages called the model %d times", n)
	}
	// The bucket's two runs: one was taken by the empty input, which prepare
	// refused after admission, as the run API counts it.
	e.a2aRPC("/a2a/support", aliceToken, "SendMessage", a2aMessage("r1", textParts("hello")))
	_, v := e.a2aRPC("/a2a/support", aliceToken, "SendMessage", a2aMessage("r2", textParts("hello")))
	if got := rpcErrorOf(t, v); got == nil || got.Code != -32000 || got.Agent != "rate_limited" {
		t.Errorf("over the rate: %v", v)
	}
	if _, v := e.a2aRPC("/a2a/nope", aliceToken, "SendMessage", a2aMessage("u1", textParts("hello"))); rpcErrorOf(t, v) == nil {
		t.Errorf("an unknown agent: %v", v)
	}
}

// Two calls wait: a bare "approve" is refused (which one?), a decision on other
// arguments (args_hash) is refused as the approval endpoint refuses it, and a
// data part per call decides each: the approved call runs once, the rejected
// one never, and the task completes.
func TestA2ADecisions(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	_, v := e.a2aRPC("/a2a/shop", aliceToken, "SendMessage", a2aMessage("m1", textParts(twoApprovals)))
	task := a2aTask(t, v)
	id, ctxID := task["id"].(string), task["contextId"].(string)
	if taskState(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("task = %v", task)
	}
	runID := task["metadata"].(map[string]any)["agentrun_run_id"].(string)
	pending := e.approvals(aliceToken, runID)
	hash := map[string]string{}
	for _, a := range pending.Approvals {
		hash[a.CallID] = a.ArgsHash
	}
	decide := func(msgID string, parts []any) map[string]any {
		_, v := e.a2aRPC("/a2a/shop", aliceToken, "SendMessage", a2aMessage(msgID, parts, "taskId", id, "contextId", ctxID))
		return v
	}
	if got := rpcErrorOf(t, decide("d1", textParts("approve"))); got == nil || !strings.Contains(got.Message, "2 calls wait") {
		t.Errorf("a bare approve with two calls waiting: %+v", got)
	}
	wrong := []any{map[string]any{"data": map[string]any{"decision": "approve", "call_id": "call_cancel_a2", "args_hash": hash["call_cancel_a3"]}}}
	if got := rpcErrorOf(t, decide("d2", wrong)); got == nil || got.Agent != "args_changed" {
		t.Errorf("a decision on other arguments: %+v", got)
	}
	if _, v := e.a2aRPC("/a2a/shop", bobToken, "SendMessage", a2aMessage("b1", textParts("approve"), "taskId", id)); rpcErrorOf(t, v).Code != -32001 {
		t.Errorf("bob's decision on alice's task: %v", v)
	}
	// A message the SDK would refuse decides nothing: no role, a null part, or
	// metadata past its bound.
	approveA2 := []any{map[string]any{"data": map[string]any{"decision": "approve", "call_id": "call_cancel_a2"}}}
	noRole := a2aMessage("d4", approveA2, "taskId", id, "contextId", ctxID)
	delete(noRole["message"].(map[string]any), "role")
	nullPart := a2aMessage("d5", []any{nil}, "taskId", id, "contextId", ctxID)
	padded := a2aMessage("d6", approveA2, "taskId", id, "contextId", ctxID)
	padded["message"].(map[string]any)["metadata"] = map[string]any{"pad": strings.Repeat("x", 20<<10)}
	for name, m := range map[string]map[string]any{"no role": noRole, "a null part": nullPart, "padded metadata": padded} {
		if _, v := e.a2aRPC("/a2a/shop", aliceToken, "SendMessage", m); rpcErrorOf(t, v) == nil {
			t.Errorf("a decision with %s was taken: %v", name, v)
		}
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Fatalf("a refused message approved cancel A2 (%d runs)", n)
	}
	v = decide("d3", []any{
		map[string]any{"data": map[string]any{"decision": "approve", "call_id": "call_cancel_a2", "args_hash": hash["call_cancel_a2"]}},
		map[string]any{"data": map[string]any{"decision": "reject", "call_id": "call_cancel_a3", "reason": "A3 is a gift"}},
	})
	if done := a2aTask(t, v); taskState(done) != "TASK_STATE_COMPLETED" {
		t.Fatalf("after the decisions: %v", v)
	}
	if a2, a3 := e.shop.count("POST /users/alice/orders/A2/cancel"), e.shop.count("POST /users/alice/orders/A3/cancel"); a2 != 1 || a3 != 0 {
		t.Errorf("cancel A2 ran %d times, A3 %d; want 1 and 0", a2, a3)
	}
	reqs := e.model.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(fmt.Sprint(last.Messages), "A3 is a gift") {
		t.Errorf("the model was not told the rejection's reason: %v", last.Messages)
	}
}

// A file part reaches the model as an attachment of the run; the task's history
// keeps what it was, not its bytes.
func TestA2AFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	png := base64.StdEncoding.EncodeToString(providerwire.PNG)
	_, v := e.a2aRPC("/a2a/support", aliceToken, "SendMessage", a2aMessage("f1", []any{
		map[string]any{"text": "what is this?"}, map[string]any{"raw": png, "mediaType": "image/png", "filename": "cat.png"}}))
	task := a2aTask(t, v)
	if taskState(task) != "TASK_STATE_COMPLETED" {
		t.Fatalf("task = %v", v)
	}
	reqs := e.model.Requests()
	if sent := fmt.Sprint(reqs[len(reqs)-1].Messages); !strings.Contains(sent, png) {
		t.Errorf("the model did not get the image: %s", sent)
	}
	if kept, _ := json.Marshal(task["history"]); bytes.Contains(kept, []byte(png)) || !bytes.Contains(kept, []byte("cat.png")) {
		t.Errorf("the task's history: %s", kept)
	}
}
