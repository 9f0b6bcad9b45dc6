package serve_test

import (
	"bytes"
	"context"
	"encoding/base64"
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
	"github.com/agentrun/agentrun/internal/providerwire"
	"github.com/agentrun/agentrun/runtime"
)

// The AG-UI endpoint, driven by the official client: tools/node/agui-check.mjs
// runs an agent with @ag-ui/client's HttpAgent and checks every event it got
// against @ag-ui/core's schemas and the protocol's order.

// aguiRun is what agui-check.mjs reports of one run.
type aguiRun struct {
	RunID       string           `json:"runId"`
	Status      int              `json:"status"`
	AgentrunRun string           `json:"agentrunRun"`
	Problems    []string         `json:"problems"`
	Events      []map[string]any `json:"events"`
	Custom      []struct {
		Name  string         `json:"name"`
		Value map[string]any `json:"value"`
	} `json:"custom"`
	Finished *struct {
		Outcome    string           `json:"outcome"`
		Result     map[string]any   `json:"result"`
		Interrupts []map[string]any `json:"interrupts"`
	} `json:"finished"`
	Failure *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
		Status  int    `json:"status"`
	} `json:"failure"`
	Messages          []map[string]any `json:"messages"`
	State             map[string]any   `json:"state"`
	PendingInterrupts []map[string]any `json:"pendingInterrupts"`
}

// agui runs the agent's thread with HttpAgent, a run per entry of runs (see
// agui-check.mjs), and fails on any event the schemas or the order refuse, and
// on any warning of the client's.
func agui(t *testing.T, e *env, agent, token, thread string, runs ...map[string]any) []aguiRun {
	t.Helper()
	tools := nodetools.Dir(t)
	config, _ := json.Marshal(map[string]any{"url": e.URL + "/v1/agents/" + agent + "/agui", "token": token, "threadId": thread, "runs": runs})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "agui-check.mjs"), string(config))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agui-check: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Runs     []aguiRun `json:"runs"`
		Warnings []string  `json:"warnings"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, w := range got.Warnings {
		t.Errorf("the client warned: %s", w)
	}
	for i, r := range got.Runs {
		for _, p := range r.Problems {
			t.Errorf("run %d: %s", i+1, p)
		}
		if r.Failure == nil && len(r.Events) == 0 {
			t.Errorf("run %d: no events", i+1)
		}
	}
	return got.Runs
}

// ofType are the events of a type.
func (r aguiRun) ofType(typ string) []map[string]any {
	var out []map[string]any
	for _, ev := range r.Events {
		if ev["type"] == typ {
			out = append(out, ev)
		}
	}
	return out
}

// types are the events' types, in order.
func (r aguiRun) types() []string {
	var out []string
	for _, ev := range r.Events {
		out = append(out, ev["type"].(string))
	}
	return out
}

// texts are the text messages the run streamed, in order.
func (r aguiRun) texts() []string {
	var ids []string
	text := map[string]string{}
	for _, ev := range r.Events {
		id, _ := ev["messageId"].(string)
		switch ev["type"] {
		case "TEXT_MESSAGE_START":
			ids = append(ids, id)
		case "TEXT_MESSAGE_CONTENT":
			text[id] += ev["delta"].(string)
		}
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = text[id]
	}
	return out
}

// A run of an agent over AG-UI: the agent's own tool call with its arguments and
// result, what the model said before it as a message of its own, the answer as
// the last text message and the result, the server's run id in RUN_STARTED and
// the X-Agentrun-Run header. A second run on the thread continues the
// conversation the server keeps: the model sees the first turn once, whatever
// the client sends again.
func TestAGUIRunsAnAgent(t *testing.T) {
	e := newEnv(t, envOptions{reply: func(req openaitest.Request) openaitest.Reply {
		r := shopReply(req)
		if len(r.ToolCalls) > 0 {
			r.Content = "Let me look."
		}
		return r
	}})
	runs := agui(t, e, "support", aliceToken, "t-orders", map[string]any{"message": ordersInput}, map[string]any{"message": "hello"})
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	first := runs[0]
	if first.Failure != nil || first.Finished == nil || first.Finished.Outcome != "success" {
		t.Fatalf("the first run: failure %+v, finished %+v", first.Failure, first.Finished)
	}
	if first.Finished.Result["answer"] != finalAnswer || first.Finished.Result["stop"] != "completed" {
		t.Errorf("result %v", first.Finished.Result)
	}
	if got := first.texts(); !slices.Equal(got, []string{"Let me look.", finalAnswer}) {
		t.Errorf("text messages %q, want what the model said before the tool, then the answer", got)
	}
	started := first.Events[0]
	meta, _ := started["metadata"].(map[string]any)
	ours, _ := meta["agentrun"].(map[string]any)
	if ours["runId"] != first.AgentrunRun || !strings.HasPrefix(first.AgentrunRun, "run_") || started["protocolVersion"] != "1.0" {
		t.Errorf("RUN_STARTED %v, X-Agentrun-Run %q", started, first.AgentrunRun)
	}
	calls, args, results := first.ofType("TOOL_CALL_START"), first.ofType("TOOL_CALL_ARGS"), first.ofType("TOOL_CALL_RESULT")
	if len(calls) != 1 || len(args) != 1 || len(results) != 1 {
		t.Fatalf("tool call events: %q", first.types())
	}
	id := calls[0]["toolCallId"]
	if calls[0]["toolCallName"] != "list_orders" || args[0]["toolCallId"] != id || results[0]["toolCallId"] != id {
		t.Errorf("the tool call: %v %v %v", calls[0], args[0], results[0])
	}
	if starts := first.ofType("TEXT_MESSAGE_START"); calls[0]["parentMessageId"] != starts[0]["messageId"] {
		t.Errorf("the call's parent %v, want the message of its turn %v", calls[0]["parentMessageId"], starts[0]["messageId"])
	}
	// The arguments that ran, as the run API's events show them: the bound user id,
	// never the model's attempt at another.
	if a := args[0]["delta"].(string); !strings.Contains(a, `"status":"any"`) || strings.Contains(a, "bob") {
		t.Errorf("arguments %s", a)
	}
	if c := results[0]["content"].(string); !strings.Contains(c, "A1") {
		t.Errorf("the result %q", c)
	}
	order := first.types()
	if end := slices.Index(order, "TOOL_CALL_END"); end < 0 || slices.Index(order, "TOOL_CALL_RESULT") < end {
		t.Errorf("order %q", order)
	}
	// The client's thread: the model's message with its text and its call, the
	// tool's result, the answer.
	if m := first.Messages; len(m) != 4 || m[1]["role"] != "assistant" || m[1]["content"] != "Let me look." ||
		len(m[1]["toolCalls"].([]any)) != 1 || m[2]["role"] != "tool" || m[3]["content"] != finalAnswer {
		t.Errorf("the client's messages: %v", m)
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("the backend saw %q", got)
	}
	run := e.do("GET", "/v1/runs/"+first.AgentrunRun, aliceToken, nil).json(t)
	if run["conversation"] != "t-orders" {
		t.Errorf("GET the run: %v", run)
	}

	second := runs[1]
	if got := second.texts(); second.Finished == nil || !slices.Equal(got, []string{greeting}) || second.Finished.Result["answer"] != greeting {
		t.Errorf("the second run: texts %q, finished %+v", got, second.Finished)
	}
	if second.AgentrunRun == first.AgentrunRun {
		t.Error("both runs have one id")
	}
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	var asked, answered int
	for _, m := range last.Messages {
		asked += map[bool]int{true: 1}[m["role"] == "user" && messageText(m) == ordersInput]
		answered += map[bool]int{true: 1}[m["role"] == "assistant" && messageText(m) == finalAnswer]
	}
	if asked != 1 || answered != 1 {
		t.Errorf("the second run's model request has the first turn %d and %d times: %v", asked, answered, last.Messages)
	}
	if r := e.do("GET", "/v1/conversations/t-orders", aliceToken, nil).json(t); r["turns"] != float64(2) {
		t.Errorf("the conversation: %v", r)
	}
}

// An agent with a judge shows no draft: the draft the judge rejected is never
// sent, and the accepted answer comes once, as the run's last message.
func TestAGUIJudgedAgentSendsNoDraft(t *testing.T) {
	e := newEnv(t, envOptions{editSpec: withJudge, reply: func(req openaitest.Request) openaitest.Reply {
		if req.Judge {
			for _, m := range req.Messages {
				if strings.Contains(messageText(m), "DRAFT") {
					return openaitest.Reply{Content: `{"passed": false, "missing": "the order number"}`}
				}
			}
			return openaitest.Reply{Content: `{"passed": true, "missing": ""}`}
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case strings.Contains(messageText(last), runtime.JudgeFeedbackPrefix):
			return openaitest.Reply{Content: finalAnswer}
		case last["role"] == "tool":
			return openaitest.Reply{Content: "DRAFT: your order is somewhere."}
		}
		return shopReply(req)
	}})
	run := agui(t, e, "support", aliceToken, "t-judged", map[string]any{"message": ordersInput})[0]
	if run.Finished == nil || run.Finished.Result["answer"] != finalAnswer {
		t.Fatalf("finished %+v, failure %+v", run.Finished, run.Failure)
	}
	for _, ev := range run.Events {
		if data, _ := json.Marshal(ev); strings.Contains(string(data), "DRAFT") {
			t.Errorf("the stream shows the rejected draft: %s", data)
		}
	}
	order := run.types()
	if got := run.texts(); !slices.Equal(got, []string{finalAnswer}) {
		t.Errorf("text messages %q, want the accepted answer alone", got)
	}
	if want := []string{"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"}; !slices.Equal(order[len(order)-4:], want) {
		t.Errorf("order %q: the answer is not sent last", order)
	}
}

// A plan-mode agent's plan reaches the client as state snapshots, the last one
// with every step done.
func TestAGUIPlanIsState(t *testing.T) {
	plan := func(status string) openaitest.ToolCall {
		return openaitest.ToolCall{Name: "update_plan", Arguments: `{"steps":[{"step":"Look the orders up","status":"` + status + `"}]}`}
	}
	e := newEnv(t, envOptions{editSpec: func(s string) string { return s + "\nplan: true\n" }, reply: func(req openaitest.Request) openaitest.Reply {
		tools := 0
		for _, m := range req.Messages {
			tools += map[bool]int{true: 1}[m["role"] == "tool"]
		}
		switch tools {
		case 0:
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{plan("in_progress")}}
		case 1:
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "list_orders", Arguments: `{"status":"any"}`}}}
		case 2:
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{plan("done")}}
		}
		return openaitest.Reply{Content: finalAnswer}
	}})
	run := agui(t, e, "support", aliceToken, "t-plan", map[string]any{"message": ordersInput})[0]
	snaps := run.ofType("STATE_SNAPSHOT")
	if len(snaps) != 2 {
		t.Fatalf("%d state snapshots: %q", len(snaps), run.types())
	}
	want := map[string]any{"plan": []any{map[string]any{"step": "Look the orders up", "status": "done"}}}
	if got := snaps[1]["snapshot"]; !jsonEqual(got, want) || !jsonEqual(run.State, want) {
		t.Errorf("the last snapshot %v, the client's state %v, want %v", got, run.State, want)
	}
	if got := run.texts(); run.Finished == nil || !slices.Equal(got, []string{finalAnswer}) {
		t.Errorf("texts %q, finished %+v", got, run.Finished)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// A call that needs approval: the run ends with AG-UI's interrupt outcome for it
// (and an agentrun.approval_requested custom event naming the run and the call),
// having run nothing of it; the next run on the thread answers the interrupt —
// approved, the call runs once and its result answers the tool call the client
// has, under its id; cancelled, it never runs.
func TestAGUIApprovalIsAnInterrupt(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	for _, c := range []struct {
		name    string
		resume  any
		ran     int
		decided bool
	}{
		{"approved", map[string]any{"approved": true}, 1, true},
		{"cancelled", "cancelled", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.shop.count("POST /users/alice/orders/A2/cancel")
			runs := agui(t, e.env, "shop", aliceToken, "t-"+c.name, map[string]any{"message": oneApproval}, map[string]any{"resume": c.resume})
			paused, resumed := runs[0], runs[1]
			if paused.Finished == nil || paused.Finished.Outcome != "interrupt" || len(paused.Finished.Interrupts) != 1 {
				t.Fatalf("the first run: finished %+v, failure %+v", paused.Finished, paused.Failure)
			}
			in := paused.Finished.Interrupts[0]
			var cancelID any
			for _, ev := range paused.ofType("TOOL_CALL_START") {
				if ev["toolCallName"] == "cancel_order" {
					cancelID = ev["toolCallId"]
				}
			}
			if in["reason"] != "tool_call" || in["toolCallId"] != cancelID || cancelID == nil || in["message"] != "Cancel order A2?" || in["expiresAt"] == nil {
				t.Errorf("the interrupt %v (the cancel call's id %v)", in, cancelID)
			}
			if n := len(paused.ofType("TOOL_CALL_RESULT")); n != 2 {
				t.Errorf("%d results in the first run, want the two lookups'", n)
			}
			// The model's three calls are one assistant message's, as the model sent them.
			if m := paused.Messages; len(m) < 2 || m[1]["role"] != "assistant" || len(m[1]["toolCalls"].([]any)) != 3 {
				t.Errorf("the client's messages: %v", m)
			}
			if len(paused.Custom) != 1 || paused.Custom[0].Name != "agentrun.approval_requested" ||
				paused.Custom[0].Value["runId"] != paused.AgentrunRun || paused.Custom[0].Value["callId"] != "call_cancel" ||
				paused.Custom[0].Value["toolCallId"] != cancelID || strings.Contains(paused.Custom[0].Value["arguments"].(string), "mallory") {
				t.Errorf("custom events %+v", paused.Custom)
			}
			if len(paused.PendingInterrupts) != 1 {
				t.Errorf("the client holds %d pending interrupts", len(paused.PendingInterrupts))
			}

			if resumed.Finished == nil || resumed.Finished.Outcome != "success" || resumed.AgentrunRun != paused.AgentrunRun {
				t.Fatalf("the resumed run: finished %+v, failure %+v, run %q", resumed.Finished, resumed.Failure, resumed.AgentrunRun)
			}
			if len(resumed.ofType("TOOL_CALL_START")) != 0 {
				t.Errorf("the resumed run shows the call again: %q", resumed.types())
			}
			results := resumed.ofType("TOOL_CALL_RESULT")
			if len(results) != 1 || results[0]["toolCallId"] != cancelID {
				t.Errorf("the resumed run's results %v, want one for %v", results, cancelID)
			}
			if len(resumed.Custom) != 1 || resumed.Custom[0].Name != "agentrun.approval_decided" || resumed.Custom[0].Value["approved"] != c.decided {
				t.Errorf("custom events %+v", resumed.Custom)
			}
			if got := resumed.texts(); len(got) != 1 || got[0] != resumed.Finished.Result["answer"] {
				t.Errorf("texts %q, result %v", got, resumed.Finished.Result)
			}
			if ran := e.shop.count("POST /users/alice/orders/A2/cancel") - before; ran != c.ran {
				t.Errorf("the cancellation ran %d times, want %d", ran, c.ran)
			}
			if len(resumed.PendingInterrupts) != 0 {
				t.Errorf("the client still holds interrupts %v", resumed.PendingInterrupts)
			}
		})
	}
}

// aguiPost posts a RunAgentInput and returns the answer, read whole.
func aguiPost(e *env, agent, token string, body any, headers ...string) response {
	e.t.Helper()
	return e.do("POST", "/v1/agents/"+agent+"/agui", token, body, headers...)
}

// aguiEvents reads an AG-UI stream's events.
func aguiEvents(t *testing.T, r response) []map[string]any {
	t.Helper()
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	var out []map[string]any
	for _, ev := range newSSEReader(bytes.NewReader(r.Body)).all(t) {
		var v map[string]any
		jsonUnmarshal(t, ev.Data, &v)
		out = append(out, v)
	}
	return out
}

func userInput(thread, text string) map[string]any {
	return map[string]any{"threadId": thread, "runId": "r-1", "messages": []any{map[string]any{"id": "m-1", "role": "user", "content": text}}}
}

// An input the endpoint cannot run is refused before any stream, with the run
// API's error: its code and a message that says what is wrong.
func TestAGUIRefusesBadInput(t *testing.T) {
	e := newEnv(t, envOptions{})
	msgs := []any{map[string]any{"id": "m-1", "role": "user", "content": "hi"}}
	for _, c := range []struct {
		name   string
		token  string
		body   any
		status int
		code   string
		says   string
	}{
		{"no token", "", userInput("t-1", "hi"), http.StatusUnauthorized, "unauthorized", "credentials"},
		{"not JSON", aliceToken, "{", http.StatusBadRequest, "invalid_json", "not valid JSON"},
		{"no threadId", aliceToken, map[string]any{"runId": "r", "messages": msgs}, http.StatusBadRequest, "invalid_request", "threadId is required"},
		{"no runId", aliceToken, map[string]any{"threadId": "t", "messages": msgs}, http.StatusBadRequest, "invalid_request", "runId is required"},
		{"a threadId that is no conversation id", aliceToken, userInput("a/b", "hi"), http.StatusBadRequest, "invalid_conversation", "threadId"},
		{"no messages", aliceToken, map[string]any{"threadId": "t", "runId": "r", "messages": []any{}}, http.StatusBadRequest, "invalid_messages", "end with a user message"},
		{"an assistant message last", aliceToken, map[string]any{"threadId": "t", "runId": "r",
			"messages": append(msgs, map[string]any{"id": "m-2", "role": "assistant", "content": "hello"})}, http.StatusBadRequest, "invalid_messages", "end with a user message"},
		{"content neither a string nor parts", aliceToken, map[string]any{"threadId": "t", "runId": "r",
			"messages": []any{map[string]any{"id": "m", "role": "user", "content": 42}}}, http.StatusBadRequest, "invalid_messages", "content"},
		{"an empty input", aliceToken, userInput("t", " "), http.StatusBadRequest, "invalid_request", "input is empty"},
		{"a resume entry of no interrupt", aliceToken, map[string]any{"threadId": "t", "runId": "r", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": "x", "status": "resolved", "payload": map[string]any{"approved": true}}}}, http.StatusBadRequest, "invalid_decision", "not an interrupt"},
		{"a resolved entry without a decision", aliceToken, map[string]any{"threadId": "t", "runId": "r", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": "run_1/h/call", "status": "resolved"}}}, http.StatusBadRequest, "invalid_decision", "approved"},
		{"edited arguments", aliceToken, map[string]any{"threadId": "t", "runId": "r", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": "run_1/h/call", "status": "resolved", "payload": map[string]any{"approved": true, "editedArgs": map[string]any{}}}}},
			http.StatusBadRequest, "invalid_decision", "editedArgs"},
		{"an unknown agent", aliceToken, userInput("t", "hi"), http.StatusNotFound, "unknown_agent", "support"},
	} {
		t.Run(c.name, func(t *testing.T) {
			agent := "support"
			if c.code == "unknown_agent" {
				agent = "nope"
			}
			r := aguiPost(e, agent, c.token, c.body)
			if r.Status != c.status || r.errorCode(t) != c.code || !strings.Contains(string(r.Body), c.says) {
				t.Errorf("%d %s, want %d %s saying %q", r.Status, r.Body, c.status, c.code, c.says)
			}
		})
	}
	if r := e.do("POST", "/v1/agents/support/agui", aliceToken, nil, "Content-Type", "text/plain"); r.Status != http.StatusUnsupportedMediaType {
		t.Errorf("a body of another type: %d %s", r.Status, r.Body)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("refused inputs made %d model requests", n)
	}
}

// Threads are each user's own: bob naming alice's thread runs in a conversation
// of his own, which sees nothing of hers and leaves hers as it was; and alice's
// interrupt is not found for bob, nor in another of her threads.
func TestAGUIOtherUsersThread(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	events := aguiEvents(t, aguiPost(e.env, "shop", aliceToken, userInput("t-shared", oneApproval)))
	done := events[len(events)-1]
	outcome, _ := done["outcome"].(map[string]any)
	interrupts, _ := outcome["interrupts"].([]any)
	if len(interrupts) != 1 {
		t.Fatalf("alice's run ended with %v", done)
	}
	interrupt := interrupts[0].(map[string]any)["id"].(string)
	aliceConv := e.do("GET", "/v1/conversations/t-shared", aliceToken, nil)

	before := len(e.model.Requests())
	bobs := aguiEvents(t, aguiPost(e.env, "shop", bobToken, userInput("t-shared", "hello")))
	if last := bobs[len(bobs)-1]; last["type"] != "RUN_FINISHED" {
		t.Fatalf("bob's run ended with %v", last)
	}
	if first := e.model.Requests()[before]; len(first.Messages) != 2 { // the system prompt and bob's input
		t.Errorf("bob's run in t-shared sent %d messages: it saw a history", len(first.Messages))
	}
	if after := e.do("GET", "/v1/conversations/t-shared", aliceToken, nil); string(after.Body) != string(aliceConv.Body) {
		t.Errorf("alice's conversation changed:\nbefore %s\nafter  %s", aliceConv.Body, after.Body)
	}

	resume := func(thread string) map[string]any {
		return map[string]any{"threadId": thread, "runId": "r-2", "messages": []any{},
			"resume": []any{map[string]any{"interruptId": interrupt, "status": "resolved", "payload": map[string]any{"approved": true}}}}
	}
	for _, c := range []struct{ who, token, thread string }{{"bob", bobToken, "t-shared"}, {"alice in another thread", aliceToken, "t-other"}} {
		if r := aguiPost(e.env, "shop", c.token, resume(c.thread)); r.Status != http.StatusNotFound || r.errorCode(t) != "run_not_found" {
			t.Errorf("%s resuming alice's interrupt: %d %s", c.who, r.Status, r.Body)
		}
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Errorf("the cancellation ran %d times", n)
	}
	// Alice herself resumes it, and a second resume of the same interrupt decides nothing.
	if last := aguiEvents(t, aguiPost(e.env, "shop", aliceToken, resume("t-shared"))); last[len(last)-1]["type"] != "RUN_FINISHED" {
		t.Errorf("alice's resume ended with %v", last[len(last)-1])
	}
	if r := aguiPost(e.env, "shop", aliceToken, resume("t-shared")); r.Status != http.StatusNotFound && r.Status != http.StatusConflict {
		t.Errorf("resuming again: %d %s", r.Status, r.Body)
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 1 {
		t.Errorf("the cancellation ran %d times, want once", n)
	}
}

// A client that leaves cancels its run, which stores nothing; with an
// Idempotency-Key the run waits for a repeat of the request, which follows it
// to its end: one run, its tool called once.
func TestAGUIClientLeaving(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, envOptions{resumeGrace: 5 * time.Second, reply: func(req openaitest.Request) openaitest.Reply {
		if last := req.Messages[len(req.Messages)-1]; last["role"] == "tool" {
			<-release
		}
		return shopReply(req)
	}})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	leave := func(thread string, headers ...string) string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := e.request(ctx, "POST", "/v1/agents/support/agui", aliceToken, userInput(thread, ordersInput), headers...)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sse := newSSEReader(resp.Body)
		for { // up to the tool's result: the model is asked for the answer
			ev, err := sse.next()
			if err != nil {
				t.Fatalf("the stream ended: %v", err)
			}
			if strings.Contains(ev.Data, `"TOOL_CALL_RESULT"`) {
				return resp.Header.Get("X-Agentrun-Run")
			}
		}
	}
	stopOf := func(id string) string {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			v := e.do("GET", "/v1/runs/"+id, aliceToken, nil).json(t)
			if res, ok := v["result"].(map[string]any); ok && v["status"] == "finished" {
				return res["stop"].(string)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("run %s did not finish", id)
		return ""
	}

	id := leave("t-left")
	if stop := stopOf(id); stop != "canceled" {
		t.Errorf("the run of a client that left stopped %q", stop)
	}
	if r := e.do("GET", "/v1/conversations/t-left", aliceToken, nil); r.Status != http.StatusNotFound {
		t.Errorf("the canceled run stored its conversation: %d %s", r.Status, r.Body)
	}

	users := len(e.backend.Users())
	keyed := leave("t-keyed", "Idempotency-Key", "agui-key-1")
	done := make(chan response)
	go func() {
		done <- aguiPost(e, "support", aliceToken, userInput("t-keyed", ordersInput), "Idempotency-Key", "agui-key-1")
	}()
	time.Sleep(100 * time.Millisecond)
	close(release)
	repeat := <-done
	events := aguiEvents(t, repeat)
	if repeat.Header.Get("X-Agentrun-Run") != keyed {
		t.Errorf("the repeat followed run %q, want %q", repeat.Header.Get("X-Agentrun-Run"), keyed)
	}
	if last := events[len(events)-1]; last["type"] != "RUN_FINISHED" || last["result"].(map[string]any)["answer"] != finalAnswer {
		t.Errorf("the repeat ended with %v", last)
	}
	if n := len(e.backend.Users()) - users; n != 1 {
		t.Errorf("the tool ran %d times for one keyed request and its repeat", n)
	}
}

// A resume that answers some of a run's interrupts decides those calls and ends
// again with the interrupts still open; the run goes on once the last is
// answered.
func TestAGUIPartialResume(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	interrupts := func(events []map[string]any) []map[string]any {
		t.Helper()
		last := events[len(events)-1]
		outcome, _ := last["outcome"].(map[string]any)
		list, _ := outcome["interrupts"].([]any)
		var out []map[string]any
		for _, in := range list {
			out = append(out, in.(map[string]any))
		}
		if last["type"] != "RUN_FINISHED" || outcome["type"] != "interrupt" {
			t.Fatalf("the run ended with %v", last)
		}
		return out
	}
	resume := func(runID string, ins ...map[string]any) map[string]any {
		var entries []any
		for _, in := range ins {
			entries = append(entries, map[string]any{"interruptId": in["id"], "status": "resolved", "payload": map[string]any{"approved": true}})
		}
		return map[string]any{"threadId": "t-two", "runId": runID, "messages": []any{}, "resume": entries}
	}
	both := interrupts(aguiEvents(t, aguiPost(e.env, "shop", aliceToken, userInput("t-two", twoApprovals))))
	if len(both) != 2 {
		t.Fatalf("interrupts %v", both)
	}
	partial := aguiEvents(t, aguiPost(e.env, "shop", aliceToken, resume("r-2", both[0])))
	if first := partial[0]; first["type"] != "RUN_STARTED" || first["runId"] != "r-2" {
		t.Errorf("the partial resume began with %v", first)
	}
	if left := interrupts(partial); len(left) != 1 || left[0]["id"] != both[1]["id"] || left[0]["toolCallId"] != both[1]["toolCallId"] {
		t.Errorf("left open %v, want %v", left, both[1])
	}
	if a2, a3 := e.shop.count("POST /users/alice/orders/A2/cancel"), e.shop.count("POST /users/alice/orders/A3/cancel"); a2+a3 != 0 {
		t.Errorf("cancellations ran before every call was decided: %d %d", a2, a3)
	}
	done := aguiEvents(t, aguiPost(e.env, "shop", aliceToken, resume("r-3", both[1])))
	if last := done[len(done)-1]; last["type"] != "RUN_FINISHED" || last["runId"] != "r-3" || last["outcome"].(map[string]any)["type"] != "success" {
		t.Errorf("the last resume ended with %v", last)
	}
	if a2, a3 := e.shop.count("POST /users/alice/orders/A2/cancel"), e.shop.count("POST /users/alice/orders/A3/cancel"); a2 != 1 || a3 != 1 {
		t.Errorf("cancellations ran %d and %d times, want once each", a2, a3)
	}
}

// A user message's images and documents go to the model with its text; a part
// the agent's model cannot take (plain text on OpenAI), audio and a provider's
// file handle are left out; a file that is not what it says is refused.
func TestAGUIContentParts(t *testing.T) {
	e := newEnv(t, envOptions{})
	png := base64.StdEncoding.EncodeToString(providerwire.PNG)
	input := func(parts ...any) map[string]any {
		return map[string]any{"threadId": "t-parts", "runId": "r", "messages": []any{map[string]any{"id": "m", "role": "user", "content": parts}}}
	}
	text := map[string]any{"type": "text", "text": "what is this?"}
	source := func(typ, value, mime string) map[string]any {
		return map[string]any{"type": typ, "value": value, "mimeType": mime}
	}
	events := aguiEvents(t, aguiPost(e, "support", aliceToken, input(text,
		map[string]any{"type": "image", "source": source("data", png, "image/png")},
		map[string]any{"type": "document", "source": source("data", base64.StdEncoding.EncodeToString([]byte("notes")), "text/plain")},
		map[string]any{"type": "audio", "source": source("data", png, "audio/wav")},
		map[string]any{"type": "image", "source": source("file", "file-abc", "image/png")},
	)))
	if last := events[len(events)-1]; last["type"] != "RUN_FINISHED" {
		t.Fatalf("the run ended with %v", last)
	}
	reqs := e.model.Requests()
	user := reqs[0].Messages[len(reqs[0].Messages)-1]
	parts, _ := user["content"].([]any)
	if len(parts) != 2 || messageText(user) != "what is this?" || !strings.Contains(mustJSON(parts[1]), png) {
		t.Errorf("the model got %v, want the text and the image", user["content"])
	}
	r := aguiPost(e, "support", aliceToken, input(text, map[string]any{"type": "image", "source": source("data", "not base64!", "image/png")}))
	if r.Status != http.StatusBadRequest || r.errorCode(t) != "invalid_attachment" || !strings.Contains(string(r.Body), "content[1]") {
		t.Errorf("a broken image: %d %s", r.Status, r.Body)
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// A run that ends on a fault is a RUN_ERROR with the fault's code, never an
// answer; a run canceled through the run API finishes with the cancelled outcome.
func TestAGUIFaultsAndCancellation(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, envOptions{reply: func(req openaitest.Request) openaitest.Reply {
		switch last := req.Messages[len(req.Messages)-1]; {
		case messageText(last) == "break":
			return openaitest.Reply{Status: http.StatusInternalServerError}
		case last["role"] == "tool":
			<-release
		}
		return shopReply(req)
	}})
	t.Cleanup(func() { close(release) }) // before the fake model's Close, which waits for its handlers
	failed := agui(t, e, "support", aliceToken, "t-fault", map[string]any{"message": "break"})[0]
	if failed.Failure == nil || failed.Failure.Code != "model_error" || failed.Finished != nil {
		t.Errorf("a model that fails: failure %+v, finished %+v", failed.Failure, failed.Finished)
	}
	if last := failed.Events[len(failed.Events)-1]; last["type"] != "RUN_ERROR" || len(failed.texts()) != 0 {
		t.Errorf("the run ended with %v, texts %q", last, failed.texts())
	}

	resp, err := e.request(t.Context(), "POST", "/v1/agents/support/agui", aliceToken, userInput("t-cancel", ordersInput))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sse := newSSEReader(resp.Body)
	for {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		if strings.Contains(ev.Data, `"TOOL_CALL_RESULT"`) {
			break
		}
	}
	if r := e.do("POST", "/v1/runs/"+resp.Header.Get("X-Agentrun-Run")+"/cancel", aliceToken, nil); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	var last map[string]any
	for _, ev := range sse.all(t) {
		jsonUnmarshal(t, ev.Data, &last)
	}
	if outcome, _ := last["outcome"].(map[string]any); last["type"] != "RUN_FINISHED" || outcome["type"] != "cancelled" || last["result"] != nil {
		t.Errorf("a canceled run ended with %v", last)
	}
}
