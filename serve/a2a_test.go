package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
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
	Events                                   []a2aEventSeen `json:"events"`
	Again                                    json.RawMessage `json:"again"`
	Protocol                                 string          `json:"protocol"`
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
func TestA2AStream(t *testing.T) {
	e := newEnv(t, envOptions{})
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
	if streamed != finalAnswer {
		t.Errorf("streamed text = %q, want the answer %q", streamed, finalAnswer)
	}
	if strings.Join(tools, ",") != "tool_call list_orders,tool_result list_orders" {
		t.Errorf("tool progress = %v", tools)
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
