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

// The Responses API, through the official clients: the openai npm client and the
// OpenAI Agents SDK for JavaScript (tools/node/openai-responses.mjs).

// nodeResponses runs openai-responses.mjs against the env's server as token,
// with the fields of spec, and returns what it printed.
func (e *env) nodeResponses(t *testing.T, token string, spec map[string]any) map[string]any {
	t.Helper()
	tools := nodetools.Dir(t)
	spec["baseURL"], spec["apiKey"] = e.URL+"/v1", token
	arg, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "openai-responses.mjs"), string(arg))
	cmd.Env = append(cmd.Environ(), "OPENAI_AGENTS_DISABLE_TRACING=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai-responses %s: %v\n%s\n%s", spec["mode"], err, out, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return got
}

// jsonPath walks v by keys and indexes, for reading what a client printed.
func jsonPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// checkResponse checks a Response object as OpenAI's clients read it: its
// fields, one assistant message holding text, and no trace of the agent's tools.
func checkResponse(t *testing.T, resp any, status, text string) {
	t.Helper()
	m, _ := resp.(map[string]any)
	for _, f := range []string{"id", "object", "created_at", "status", "error", "incomplete_details", "instructions",
		"metadata", "model", "output", "parallel_tool_calls", "temperature", "tool_choice", "tools", "top_p", "usage",
		"previous_response_id", "store", "text", "truncation"} {
		if _, ok := m[f]; !ok {
			t.Errorf("the response has no %q: %v", f, m)
		}
	}
	id, _ := m["id"].(string)
	if !strings.HasPrefix(id, "resp_") || m["object"] != "response" || m["status"] != status || m["model"] != "support" {
		t.Errorf("response %v %v %v %v, want a resp_ id, object response, status %s, model support", id, m["object"], m["status"], m["model"], status)
	}
	out, _ := m["output"].([]any)
	if len(out) != 1 {
		t.Fatalf("output %v, want one message", m["output"])
	}
	msg := out[0].(map[string]any)
	if msg["type"] != "message" || msg["role"] != "assistant" || !strings.HasPrefix(msg["id"].(string), "msg_") {
		t.Errorf("output[0] = %v", msg)
	}
	if got := jsonPath(msg, "content", 0, "text"); got != text || jsonPath(msg, "content", 0, "type") != "output_text" {
		t.Errorf("the message's text is %q, want %q", got, text)
	}
	if data, _ := json.Marshal(resp); strings.Contains(string(data), "list_orders") || strings.Contains(string(data), "function_call") {
		t.Errorf("the response shows the agent's tool calls: %s", data)
	}
}

// A plain responses.create: the agent's answer after its tool ran, as the
// client's output_text, with the usage of both model calls.
func TestResponsesCreate(t *testing.T) {
	e := newEnv(t, envOptions{})
	got := e.nodeResponses(t, aliceToken, map[string]any{"mode": "create", "model": "support", "input": ordersInput})
	if got["outputText"] != finalAnswer {
		t.Fatalf("the client got %v", got)
	}
	resp := got["response"]
	checkResponse(t, resp, "completed", finalAnswer)
	if u := jsonPath(resp, "usage"); jsonPath(u, "total_tokens") != 50.0 || jsonPath(u, "input_tokens_details", "cached_tokens") == nil ||
		jsonPath(u, "output_tokens_details", "reasoning_tokens") == nil {
		t.Errorf("usage %v, want both model calls' 50 tokens and the details", u)
	}
	if run, _ := got["run"].(string); run == "" || jsonPath(resp, "agentrun", "run") != run {
		t.Errorf("run header %v, agentrun %v", got["run"], jsonPath(resp, "agentrun"))
	}
	if jsonPath(resp, "store") != true || jsonPath(resp, "previous_response_id") != nil || jsonPath(resp, "error") != nil {
		t.Errorf("response %v", resp)
	}
	checkToolRan(t, e)
}

// streamTypes are the types of a stream's events, in order; it checks their
// sequence numbers count from 0 and every text delta is of the one message.
func streamTypes(t *testing.T, events []any) []string {
	t.Helper()
	var types []string
	for i, ev := range events {
		types = append(types, jsonPath(ev, "type").(string))
		if jsonPath(ev, "sequence_number") != float64(i) {
			t.Errorf("event %d (%s) has sequence_number %v", i, types[i], jsonPath(ev, "sequence_number"))
		}
		if types[i] == "response.output_text.delta" && (jsonPath(ev, "output_index") != 0.0 || jsonPath(ev, "content_index") != 0.0) {
			t.Errorf("a delta of another item: %v", ev)
		}
	}
	return types
}

// responseEvents is the sequence a streamed response sends: n deltas between
// the message's beginning and its end, then terminal.
func responseEvents(n int, terminal string) []string {
	out := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	for range n {
		out = append(out, "response.output_text.delta")
	}
	return append(out, "response.output_text.done", "response.content_part.done", "response.output_item.done", terminal)
}

// A streamed response sends OpenAI's events in order — created, in_progress,
// the message and its part added, the text as deltas, done, completed — whose
// deltas add up to the answer; the client's stream helper assembles the same
// response; and the response retrieved afterwards is the completed one.
func TestResponsesStreaming(t *testing.T) {
	e := newEnv(t, envOptions{})
	got := e.nodeResponses(t, aliceToken, map[string]any{"mode": "stream", "model": "support", "input": ordersInput})
	events, _ := got["events"].([]any)
	types := streamTypes(t, events)
	deltas := strings.Count(strings.Join(types, " "), "output_text.delta")
	if !slices.Equal(types, responseEvents(deltas, "response.completed")) || deltas == 0 {
		t.Fatalf("events %q", types)
	}
	if got["deltas"] != finalAnswer {
		t.Errorf("the deltas add up to %q, want %q", got["deltas"], finalAnswer)
	}
	created, completed := events[0], events[len(events)-1]
	if jsonPath(created, "response", "status") != "in_progress" || jsonPath(created, "response", "output") == nil {
		t.Errorf("created %v", created)
	}
	id := jsonPath(created, "response", "id")
	if jsonPath(completed, "response", "id") != id || jsonPath(events[2], "item", "id") != jsonPath(completed, "response", "output", 0, "id") {
		t.Errorf("ids differ: created %v, completed %v", created, completed)
	}
	checkResponse(t, jsonPath(completed, "response"), "completed", finalAnswer)
	done := events[len(events)-4]
	if jsonPath(done, "text") != finalAnswer || jsonPath(events[len(events)-2], "item", "status") != "completed" {
		t.Errorf("done %v, item %v", done, events[len(events)-2])
	}
	checkToolRan(t, e)

	helped := e.nodeResponses(t, aliceToken, map[string]any{"mode": "helper", "model": "support", "input": "hello"})
	if helped["outputText"] != greeting || helped["deltas"] != greeting {
		t.Errorf("the stream helper got %v", helped)
	}
	kept := e.nodeResponses(t, aliceToken, map[string]any{"mode": "retrieve", "id": id})
	if kept["outputText"] != finalAnswer || jsonPath(kept, "response", "id") != id {
		t.Errorf("retrieved %v", kept)
	}
	checkResponse(t, kept["response"], "completed", finalAnswer)
}

// What the model says before calling a tool streams as a paragraph of its own,
// as on chat completions: the deltas, the done text, the completed response
// and the one retrieved later all hold it. For an agent with a judge nothing
// streams before the accepted answer, which comes in chunks.
func TestResponsesStreamingParagraphs(t *testing.T) {
	const before = "Let me look that up."
	e := newEnv(t, envOptions{reply: func(req openaitest.Request) openaitest.Reply {
		r := shopReply(req)
		if len(r.ToolCalls) > 0 {
			r.Content = before
		}
		return r
	}})
	want := before + "\n\n" + finalAnswer
	got := e.nodeResponses(t, aliceToken, map[string]any{"mode": "stream", "model": "support", "input": ordersInput})
	events, _ := got["events"].([]any)
	last := events[len(events)-1]
	if got["deltas"] != want || jsonPath(last, "type") != "response.completed" {
		t.Fatalf("deltas %q, last event %v", got["deltas"], last)
	}
	checkResponse(t, jsonPath(last, "response"), "completed", want)
	kept := e.nodeResponses(t, aliceToken, map[string]any{"mode": "retrieve", "id": jsonPath(last, "response", "id")})
	checkResponse(t, kept["response"], "completed", want)

	long := strings.Repeat("多字节 text, ", 40)
	judged := newEnv(t, envOptions{editSpec: withJudge, reply: func(req openaitest.Request) openaitest.Reply {
		if req.Judge {
			return openaitest.Reply{Content: `{"passed": true, "missing": ""}`}
		}
		return openaitest.Reply{Content: long}
	}})
	got = judged.nodeResponses(t, aliceToken, map[string]any{"mode": "stream", "model": "support", "input": "hi"})
	events, _ = got["events"].([]any)
	types := streamTypes(t, events)
	deltas := strings.Count(strings.Join(types, " "), "output_text.delta")
	if got["deltas"] != long || deltas < 2 || !slices.Equal(types, responseEvents(deltas, "response.completed")) {
		t.Errorf("%d deltas of %q: %q", deltas, got["deltas"], types)
	}
}

// lastModelText is the text of every message of the model's last request.
func (e *env) lastModelText() string {
	reqs := e.model.Requests()
	var b strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		b.WriteString(messageText(m) + "\n")
	}
	return b.String()
}

// postResponse sends a Responses request as token and reads the answer whole.
func (e *env) postResponse(t *testing.T, token string, body map[string]any, headers ...string) response {
	t.Helper()
	return e.doT(t, "POST", "/v1/responses", token, body, headers...)
}

// previous_response_id continues the conversation of the response it names: the
// second turn's model request holds the first turn, and the chain is one of the
// caller's conversations. Another user's response id, an unknown one and one
// that was not stored are not found — the same answer, revealing nothing — and
// neither is another user's response by GET.
func TestResponsesConversation(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.nodeResponses(t, aliceToken, map[string]any{"mode": "create", "model": "support", "input": ordersInput})
	id, _ := jsonPath(first, "response", "id").(string)
	if first["outputText"] != finalAnswer || id == "" {
		t.Fatalf("first turn: %v", first)
	}
	second := e.nodeResponses(t, aliceToken, map[string]any{"mode": "create", "model": "support", "input": "thanks", "previous": id})
	if second["outputText"] != greeting || jsonPath(second, "response", "previous_response_id") != id {
		t.Fatalf("second turn: %v", second)
	}
	text := e.lastModelText()
	if !strings.Contains(text, ordersInput) || !strings.Contains(text, finalAnswer) || !strings.Contains(text, "thanks") {
		t.Errorf("the second turn's model request lacks the first turn:\n%s", text)
	}
	convs := e.conversations(aliceToken)
	if len(convs) != 1 || !strings.HasSuffix(id, "_"+convs[0]) || !strings.HasSuffix(jsonPath(second, "response", "id").(string), "_"+convs[0]) {
		t.Errorf("conversations %q for responses %s and %v", convs, id, jsonPath(second, "response", "id"))
	}
	if r := e.do("GET", "/v1/conversations/"+convs[0], aliceToken, nil); r.json(t)["turns"] != 2.0 {
		t.Errorf("the chain's conversation: %s", r.Body)
	}
	before := len(e.model.Requests())

	unstored := e.postResponse(t, aliceToken, map[string]any{"model": "support", "input": "hello", "store": false})
	ephemeral, _ := unstored.json(t)["id"].(string)
	if unstored.Status != http.StatusOK || unstored.json(t)["store"] != false || strings.Count(ephemeral, "_") != 1 {
		t.Fatalf("store false: %d %s", unstored.Status, unstored.Body)
	}
	if got := e.conversations(aliceToken); len(got) != 1 {
		t.Errorf("a response with store false stored a conversation: %q", got)
	}
	for name, c := range map[string]struct{ token, previous string }{
		"another user's response": {bobToken, id},
		"an unknown response":     {aliceToken, "resp_0123456789abcdef01234567_conv_0123456789abcdef01234567"},
		"a malformed id":          {aliceToken, "resp_nope"},
		"a response not stored":   {aliceToken, ephemeral},
	} {
		r := e.postResponse(t, c.token, map[string]any{"model": "support", "input": "what did I ask?", "previous_response_id": c.previous})
		if r.Status != http.StatusNotFound || r.openAIErrorCode(t) != "previous_response_not_found" || jsonPath(r.json(t), "error", "param") != "previous_response_id" {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	// With store false, a continuation reads the conversation and writes nothing.
	peek := e.postResponse(t, aliceToken, map[string]any{"model": "support", "input": "what did I ask?", "previous_response_id": id, "store": false})
	if peek.Status != http.StatusOK || !strings.Contains(e.lastModelText(), ordersInput) {
		t.Errorf("store false after previous_response_id: %d %s\n%s", peek.Status, peek.Body, e.lastModelText())
	}
	if r := e.do("GET", "/v1/conversations/"+convs[0], aliceToken, nil); r.json(t)["turns"] != 2.0 {
		t.Errorf("a continuation with store false wrote to the conversation: %s", r.Body)
	}
	if n := len(e.model.Requests()) - before; n != 2 {
		t.Errorf("%d model requests; only the unstored responses' should have run", n)
	}
	if got := e.conversations(bobToken); len(got) != 0 {
		t.Errorf("bob's request with alice's response id left conversations %q", got)
	}
	for name, c := range map[string]struct{ token, id string }{
		"another user's": {bobToken, id}, "not stored": {aliceToken, ephemeral},
		"unknown": {aliceToken, "resp_0123456789abcdef01234567_conv_x"}, "malformed": {aliceToken, "nope"},
	} {
		if r := e.do("GET", "/v1/responses/"+c.id, c.token, nil); r.Status != http.StatusNotFound || r.openAIErrorCode(t) != "response_not_found" {
			t.Errorf("GET of a response %s: %d %s", name, r.Status, r.Body)
		}
	}
	if r := e.do("GET", "/v1/responses/"+id, aliceToken, nil); r.Status != http.StatusOK || r.json(t)["id"] != id {
		t.Errorf("alice's GET of her response: %d %s", r.Status, r.Body)
	}
}

// Without previous_response_id the input's earlier messages are the history, as
// chat completions takes a client's: a stored response begins its conversation
// with them, so its continuation sees them too; one with store false stores
// nothing. The client's system messages and tool items are not the agent's.
func TestResponsesClientHistory(t *testing.T) {
	e := newEnv(t, envOptions{})
	input := []any{
		map[string]any{"role": "system", "content": "CLIENT-SYSTEM"},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "My name is Zed."}}},
		map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "Hi Zed!", "annotations": []any{}}}},
		map[string]any{"type": "function_call", "call_id": "c1", "name": "client_tool", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "CLIENT-TOOL-OUTPUT"},
		map[string]any{"role": "user", "content": ordersInput},
	}
	inOrder := func(what string, text string) {
		t.Helper()
		zed, hi, q := strings.Index(text, "My name is Zed."), strings.Index(text, "Hi Zed!"), strings.Index(text, ordersInput)
		if zed < 0 || hi < zed || q < hi {
			t.Errorf("%s: the model request does not hold the client's history in order:\n%s", what, text)
		}
		if strings.Contains(text, "CLIENT-SYSTEM") || strings.Contains(text, "CLIENT-TOOL-OUTPUT") {
			t.Errorf("%s: the client's system message or tool output reached the model:\n%s", what, text)
		}
	}

	r := e.postResponse(t, bobToken, map[string]any{"model": "support", "input": input, "store": false})
	if r.Status != http.StatusOK || jsonPath(r.json(t), "output", 0, "content", 0, "text") != finalAnswer {
		t.Fatalf("store false: %d %s", r.Status, r.Body)
	}
	inOrder("store false", e.lastModelText())
	if got := e.conversations(bobToken); len(got) != 0 {
		t.Errorf("store false stored conversations %q", got)
	}
	if _, facts := e.facts(bobToken); len(facts) != 0 {
		t.Errorf("store false stored facts %+v", facts)
	}

	r = e.postResponse(t, aliceToken, map[string]any{"model": "support", "input": input})
	id, _ := r.json(t)["id"].(string)
	if r.Status != http.StatusOK || id == "" {
		t.Fatalf("stored: %d %s", r.Status, r.Body)
	}
	inOrder("stored", e.lastModelText())
	r = e.postResponse(t, aliceToken, map[string]any{"model": "support", "input": "What is my name?", "previous_response_id": id})
	if r.Status != http.StatusOK {
		t.Fatalf("continued: %d %s", r.Status, r.Body)
	}
	text := e.lastModelText()
	inOrder("continued", text)
	if !strings.Contains(text, finalAnswer) || !strings.Contains(text, "What is my name?") {
		t.Errorf("the continuation lacks the first response:\n%s", text)
	}
}

// The OpenAI Agents SDK runs with an agentrun agent as its model: through
// OpenAIResponsesModel and through setDefaultOpenAIClient with the agent's name
// as the model, plainly and streamed, and a second turn by previousResponseId
// continues the first.
func TestResponsesAgentsSDK(t *testing.T) {
	e := newEnv(t, envOptions{})
	got := e.nodeResponses(t, aliceToken, map[string]any{"mode": "agents", "model": "support", "input": ordersInput, "followUp": "thanks"})
	for _, k := range []string{"model", "named", "streamed"} {
		if jsonPath(got, k, "finalOutput") != finalAnswer {
			t.Errorf("%s: the SDK's run ended with %v", k, got[k])
		}
	}
	if jsonPath(got, "streamed", "text") != finalAnswer {
		t.Errorf("the streamed run's text is %v", jsonPath(got, "streamed", "text"))
	}
	if jsonPath(got, "second", "finalOutput") != greeting {
		t.Errorf("the second turn ended with %v", got["second"])
	}
	text := e.lastModelText()
	if !strings.Contains(text, ordersInput) || !strings.Contains(text, finalAnswer) || !strings.Contains(text, "thanks") {
		t.Errorf("the second turn's model request lacks the first:\n%s", text)
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice", "alice", "alice"}) {
		t.Errorf("the backend saw %q", got)
	}
}

// Without a token both routes are 401 in OpenAI's error shape; bad requests are
// OpenAI errors naming the field, which the official client reads as such.
func TestResponsesErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, r := range []response{
		e.do("POST", "/v1/responses", "", map[string]any{"model": "support", "input": "hi"}),
		e.do("GET", "/v1/responses/resp_0123456789abcdef01234567_c", "", nil),
	} {
		if r.Status != http.StatusUnauthorized || r.openAIErrorCode(t) != "invalid_api_key" {
			t.Errorf("without a token: %d %s", r.Status, r.Body)
		}
	}
	many := map[string]any{}
	for i := range 17 {
		many[string(rune('a'+i))] = "x"
	}
	for _, c := range []struct {
		name        string
		body        map[string]any
		status      int
		code, param string
	}{
		{"no model", map[string]any{"input": "hi"}, 400, "missing_model", "model"},
		{"no input", map[string]any{"model": "support"}, 400, "invalid_input", "input"},
		{"an empty input", map[string]any{"model": "support", "input": ""}, 400, "invalid_request", "input"},
		{"no items", map[string]any{"model": "support", "input": []any{}}, 400, "invalid_input", "input"},
		{"an object", map[string]any{"model": "support", "input": map[string]any{"role": "user"}}, 400, "invalid_input", "input"},
		{"ending with the assistant", map[string]any{"model": "support", "input": []any{msg("user", "hi"), msg("assistant", "hello")}}, 400, "invalid_input", "input"},
		{"an unknown role", map[string]any{"model": "support", "input": []any{msg("robot", "hi")}}, 400, "invalid_input", "input"},
		{"a file id", map[string]any{"model": "support", "input": []any{msg("user", []any{map[string]any{"type": "input_file", "file_id": "file-1"}})}}, 400, "invalid_attachment", "input"},
		{"an unknown agent", map[string]any{"model": "nope", "input": "hi"}, 404, "model_not_found", "model"},
		{"both chain fields", map[string]any{"model": "support", "input": "hi", "conversation": "c1", "previous_response_id": "resp_0123456789abcdef01234567_c1"}, 400, "mutually_exclusive_parameters", "previous_response_id"},
		{"a bad conversation", map[string]any{"model": "support", "input": "hi", "conversation": "a b"}, 400, "invalid_conversation", "conversation"},
		{"too much metadata", map[string]any{"model": "support", "input": "hi", "metadata": many}, 400, "invalid_metadata", "metadata"},
	} {
		r := e.postResponse(t, aliceToken, c.body)
		if r.Status != c.status || r.openAIErrorCode(t) != c.code || jsonPath(r.json(t), "error", "param") != c.param {
			t.Errorf("%s: %d %s, want %d %s about %s", c.name, r.Status, r.Body, c.status, c.code, c.param)
		}
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("bad requests made %d model requests", n)
	}
	got := e.nodeResponses(t, aliceToken, map[string]any{"mode": "create", "model": "nope", "input": "hi"})
	if jsonPath(got, "error", "status") != 404.0 || jsonPath(got, "error", "code") != "model_not_found" || jsonPath(got, "error", "param") != "model" {
		t.Errorf("the client got %v", got)
	}
}

// A request repeated with its Idempotency-Key is the same response — the same
// id, streamed or not — and the agent's tool runs once per key.
func TestResponsesIdempotencyKey(t *testing.T) {
	e := newEnv(t, envOptions{})
	ask := func(mode, key string) string {
		got := e.nodeResponses(t, aliceToken, map[string]any{"mode": mode, "model": "support", "input": ordersInput, "key": key})
		if mode == "stream" {
			events, _ := got["events"].([]any)
			if got["deltas"] != finalAnswer {
				t.Errorf("a stream with key %s: %v", key, got)
			}
			return jsonPath(events[len(events)-1], "response", "id").(string)
		}
		if got["outputText"] != finalAnswer {
			t.Errorf("a response with key %s: %v", key, got)
		}
		return jsonPath(got, "response", "id").(string)
	}
	if a, b := ask("create", "resp-key-1"), ask("create", "resp-key-1"); a != b {
		t.Errorf("the repeat is response %s, the first %s", b, a)
	}
	if a, b := ask("stream", "resp-key-2"), ask("stream", "resp-key-2"); a != b {
		t.Errorf("the streamed repeat is response %s, the first %s", b, a)
	}
	if got := e.backend.Users(); len(got) != 2 {
		t.Errorf("the backend saw %q: one lookup per key", got)
	}
	if got := e.conversations(aliceToken); len(got) != 2 {
		t.Errorf("conversations %q: one per key", got)
	}
	other := e.postResponse(t, aliceToken, map[string]any{"model": "support", "input": "hello"}, serve.IdempotencyHeader, "resp-key-1")
	if other.Status != http.StatusUnprocessableEntity || other.openAIErrorCode(t) != "idempotency_key_reused" {
		t.Errorf("the key reused for another request: %d %s", other.Status, other.Body)
	}
}

// A run whose model fails after a tool ran is a 424 with x-should-retry: false,
// which the official client, retrying twice otherwise, does not retry: the tool
// ran once. Streamed, the same fault ends the stream with response.failed, and
// the response retrieved is failed.
func TestResponsesFaultAfterToolIsNotRetried(t *testing.T) {
	e := newEnv(t, envOptions{reply: func(req openaitest.Request) openaitest.Reply {
		if req.Messages[len(req.Messages)-1]["role"] == "tool" {
			return openaitest.Reply{Status: http.StatusInternalServerError}
		}
		return shopReply(req)
	}})
	got := e.nodeResponses(t, aliceToken, map[string]any{"mode": "create", "model": "support", "input": ordersInput, "maxRetries": 2})
	if jsonPath(got, "error", "status") != 424.0 || jsonPath(got, "error", "code") != "model_error" ||
		jsonPath(got, "error", "type") != "server_error" || jsonPath(got, "error", "shouldRetry") != "false" {
		t.Errorf("the client ended with %v", got)
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("the backend saw %q: the tool must run once", got)
	}

	got = e.nodeResponses(t, aliceToken, map[string]any{"mode": "stream", "model": "support", "input": ordersInput, "maxRetries": 2})
	events, _ := got["events"].([]any)
	types := streamTypes(t, events)
	if !slices.Equal(types, []string{"response.created", "response.in_progress", "response.failed"}) {
		t.Fatalf("events %q", types)
	}
	failed := jsonPath(events[2], "response")
	if jsonPath(failed, "status") != "failed" || jsonPath(failed, "error", "code") != "server_error" || jsonPath(failed, "error", "message") == nil {
		t.Errorf("failed %v", failed)
	}
	kept := e.do("GET", "/v1/responses/"+jsonPath(failed, "id").(string), aliceToken, nil)
	if kept.Status != http.StatusOK || kept.json(t)["status"] != "failed" {
		t.Errorf("the failed response retrieved: %d %s", kept.Status, kept.Body)
	}
	if got := e.backend.Users(); len(got) != 2 {
		t.Errorf("the backend saw %q", got)
	}
}

// A Responses client cannot be asked for an approval: a call that needs one is
// refused, the model told why, and the tool never runs.
func TestApprovalRefusedOnResponses(t *testing.T) {
	e := newApprovalEnv(t, time.Hour, nil, "")
	r := e.do("POST", "/v1/responses", aliceToken, map[string]any{"model": "shop", "input": oneApproval})
	if r.Status != http.StatusOK || jsonPath(r.json(t), "agentrun", "stop") != "completed" || r.json(t)["status"] != "completed" {
		t.Fatalf("response: %d %s", r.Status, r.Body)
	}
	if n := e.shop.count("POST /users/alice/orders/A2/cancel"); n != 0 {
		t.Fatalf("a call that needs approval ran %d times", n)
	}
	results := e.checkToolOrder([]string{"call_look", "call_cancel", "call_look_a1"})
	if got := results["call_cancel"]; !strings.Contains(got, "cannot be asked for on this channel") {
		t.Errorf("the model was told %q", got)
	}
	if r := e.do("GET", "/v1/approvals", aliceToken, nil); !strings.Contains(string(r.Body), `"runs":[]`) {
		t.Errorf("a refused call left a paused run: %s", r.Body)
	}
}

// A response is retrieved while its run is going, in progress, then as it ended.
func TestResponsesRetrieveInProgress(t *testing.T) {
	e := newEnv(t, envOptions{latency: 300 * time.Millisecond})
	resp, err := e.request(t.Context(), "POST", "/v1/responses", aliceToken, map[string]any{"model": "support", "input": ordersInput, "stream": true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sse := newSSEReader(resp.Body)
	first, err := sse.next()
	var created struct{ Response struct{ ID string } }
	if err != nil || json.Unmarshal([]byte(first.Data), &created) != nil || first.Event != "response.created" {
		t.Fatalf("first event %+v: %v", first, err)
	}
	id := created.Response.ID
	if r := e.do("GET", "/v1/responses/"+id, aliceToken, nil); r.Status != http.StatusOK || r.json(t)["status"] != "in_progress" {
		t.Errorf("while running: %d %s", r.Status, r.Body)
	}
	sse.all(t)
	r := e.do("GET", "/v1/responses/"+id, aliceToken, nil)
	if r.Status != http.StatusOK || r.json(t)["status"] != "completed" || jsonPath(r.json(t), "output", 0, "content", 0, "text") != finalAnswer {
		t.Errorf("once done: %d %s", r.Status, r.Body)
	}
}
