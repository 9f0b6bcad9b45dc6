package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeOpenAI is an OpenAI-compatible server that plays prepared replies in order and
// records every request body. It speaks the real wire format: chat completion JSON,
// SSE chunks, error statuses.
type fakeOpenAI struct {
	t        *testing.T
	mu       sync.Mutex
	replies  []reply
	requests []map[string]any
	srv      *httptest.Server
	// Judge requests (those asking for a response_format) are answered from
	// verdicts, or passed when it runs out, and recorded apart from the agent's.
	verdicts      []reply
	judgeRequests []map[string]any
}

// reply is one HTTP answer: a completion (JSON or, for stream requests, SSE), raw SSE
// lines, or an error status.
type reply struct {
	message map[string]any // the assistant message of a completion
	sse     []string       // raw "data: …" payloads for a streamed reply; no [DONE] when cut
	status  int
	header  map[string]string
}

func newFakeOpenAI(t *testing.T, replies ...reply) *fakeOpenAI {
	f := &fakeOpenAI{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Setenv("LLM_BASE_URL", f.srv.URL)
	t.Setenv("LLM_API_KEY", "sk-test-SECRET-key")
	t.Setenv("LLM_MODEL_NAME", "gpt-test")
	return f
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test-SECRET-key" {
		f.t.Errorf("Authorization %q", got)
	}
	f.mu.Lock()
	var rep reply
	n := 0
	if _, judge := body["response_format"]; judge {
		f.judgeRequests = append(f.judgeRequests, body)
		n = len(f.judgeRequests)
		rep = verdict(true, "")
		if n <= len(f.verdicts) {
			rep = f.verdicts[n-1]
		}
	} else {
		f.requests = append(f.requests, body)
		n = len(f.requests)
		if n > len(f.replies) {
			f.mu.Unlock()
			f.t.Errorf("request %d: no reply prepared", n)
			http.Error(w, `{"error":{"message":"no more replies"}}`, 500)
			return
		}
		rep = f.replies[n-1]
	}
	f.mu.Unlock()
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	switch {
	case rep.status != 0:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"error":{"message":"status %d from the fake server","type":"server_error"}}`, rep.status)
	case rep.sse != nil:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, data := range rep.sse {
			fmt.Fprintf(w, "data: %s\n\n", data)
			w.(http.Flusher).Flush()
		}
	default:
		finish := "stop"
		if _, ok := rep.message["tool_calls"]; ok {
			finish = "tool_calls"
		}
		rep.message["role"] = "assistant"
		resp := map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": rep.message}},
			"usage":   map[string]any{"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(resp)
	}
}

func (f *fakeOpenAI) messages(i int) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, m := range f.requests[i]["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

func toolCall(id, name, args string) map[string]any {
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
}

func calls(tcs ...map[string]any) reply {
	list := make([]any, len(tcs))
	for i, tc := range tcs {
		list[i] = tc
	}
	return reply{message: map[string]any{"content": nil, "tool_calls": list}}
}

func answer(text string) reply { return reply{message: map[string]any{"content": text}} }

func verdict(passed bool, missing string) reply {
	b, _ := json.Marshal(map[string]any{"passed": passed, "missing": missing})
	return answer(string(b))
}

// checkRequests asserts the protocol on every request the server saw: the system
// prompt exactly once and first; every tool message answers a tool call of the
// assistant message before it.
func (f *fakeOpenAI) checkRequests() {
	f.t.Helper()
	for i := range f.requests {
		open := map[string]bool{}
		for j, m := range f.messages(i) {
			switch m["role"] {
			case "system":
				if j != 0 {
					f.t.Errorf("request %d: system message at position %d", i, j)
				}
			case "assistant":
				open = map[string]bool{}
				tcs, _ := m["tool_calls"].([]any)
				for _, tc := range tcs {
					tcm := tc.(map[string]any)
					if tcm["type"] != "function" {
						f.t.Errorf("request %d: tool call without type function: %v", i, tcm)
					}
					open[tcm["id"].(string)] = true
				}
			case "tool":
				id, _ := m["tool_call_id"].(string)
				if !open[id] {
					f.t.Errorf("request %d: tool message %d answers %q, not a call of the assistant message before it", i, j, id)
				}
				delete(open, id)
			}
		}
		if first := f.messages(i)[0]; first["role"] != "system" {
			f.t.Errorf("request %d does not start with the system prompt", i)
		}
		systems := 0
		for _, m := range f.messages(i) {
			if m["role"] == "system" {
				systems++
			}
		}
		if systems != 1 {
			f.t.Errorf("request %d has %d system messages", i, systems)
		}
	}
}

const codeAssistant = "../../examples/agents/code-assistant.yaml"

// variant writes a copy of the code assistant with extra text replaced, in a
// directory that keeps its relative paths (root: ../..) pointing at the repository.
func variant(t *testing.T, replacements ...string) string {
	t.Helper()
	src, err := os.ReadFile(codeAssistant)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(replacements); i += 2 {
		if !strings.Contains(s, replacements[i]) {
			t.Fatalf("example lacks %q", replacements[i])
		}
		s = strings.Replace(s, replacements[i], replacements[i+1], 1)
	}
	s = strings.Replace(s, "root: ../..", "root: "+mustAbs(t, "../.."), 1)
	file := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The first source article's scenario: read a file, compute with its numbers, answer.
func TestWireSeedScenario(t *testing.T) {
	f := newFakeOpenAI(t,
		calls(toolCall("call_read", "read_file", `{"path":"go.mod","limit":3}`)),
		calls(toolCall("call_calc", "calculator", `{"expression":"3 * 7"}`)),
		answer("go.mod starts with the module line; 3 * 7 = 21."),
	)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	code, stdout, stderr := runCLI(t, "exec", "--trace", trace, codeAssistant, "Read go.mod and compute 3*7")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if stdout != "go.mod starts with the module line; 3 * 7 = 21.\n" {
		t.Errorf("stdout %q", stdout)
	}
	f.checkRequests()
	if len(f.requests) != 3 {
		t.Fatalf("%d requests", len(f.requests))
	}
	second := f.messages(1)
	want := []string{"system", "user", "assistant", "tool"}
	for i, role := range want {
		if second[i]["role"] != role {
			t.Fatalf("second request roles: %v", second)
		}
	}
	call := second[2]["tool_calls"].([]any)[0].(map[string]any)
	if call["id"] != "call_read" || call["function"].(map[string]any)["name"] != "read_file" {
		t.Errorf("assistant tool call %v", call)
	}
	if second[3]["tool_call_id"] != "call_read" || !strings.Contains(second[3]["content"].(string), "module github.com/agentrun/agentrun") {
		t.Errorf("tool message %v", second[3])
	}
	third := f.messages(2)
	if third[5]["tool_call_id"] != "call_calc" || third[5]["content"] != "21" {
		t.Errorf("calculator result %v", third[5])
	}
	tools := f.requests[0]["tools"].([]any)
	if len(tools) != 3 { // calculator, and read_file and list_dir from the files skill
		t.Errorf("tools offered: %v", tools)
	}
	// The trace holds every step and never the API key.
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "SECRET") || strings.Contains(stderr, "SECRET") {
		t.Error("the API key appears in the trace or the progress output")
	}
	kinds := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var e struct{ Kind string }
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		kinds[e.Kind]++
	}
	if kinds["model_request"] != 3 || kinds["tool_call"] != 2 || kinds["tool_result"] != 2 || kinds["stop"] != 1 {
		t.Errorf("trace kinds %v", kinds)
	}
}

func TestWireParallelCallsAndMissingType(t *testing.T) {
	untyped := toolCall("call_2", "calculator", `{"expression":"2+2"}`)
	delete(untyped, "type") // some compatible servers leave it out
	f := newFakeOpenAI(t,
		calls(toolCall("call_1", "read_file", `{"path":"go.mod","limit":1}`), untyped),
		answer("Both results are in: 4."),
	)
	code, _, stderr := runCLI(t, "exec", codeAssistant, "two things")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	f.checkRequests()
	msgs := f.messages(1)
	if len(msgs[2]["tool_calls"].([]any)) != 2 {
		t.Fatalf("assistant message lost a call: %v", msgs[2])
	}
	if msgs[3]["tool_call_id"] != "call_1" || msgs[4]["tool_call_id"] != "call_2" || msgs[4]["content"] != "4" {
		t.Errorf("tool messages %v / %v", msgs[3], msgs[4])
	}
}

// unjudgedCodeAssistant is the code-assistant example without its judge, in a
// temporary directory: an agent whose drafts nothing can refuse.
func unjudgedCodeAssistant(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(codeAssistant)
	if err != nil {
		t.Fatal(err)
	}
	unjudged := filepath.Join(t.TempDir(), "unjudged.yaml")
	if err := os.WriteFile(unjudged, src[:bytes.Index(src, []byte("\njudge:"))+1], 0o600); err != nil {
		t.Fatal(err)
	}
	return unjudged
}

// On a terminal, an answer shown as it streamed is not printed again: stdout
// and stderr are the same screen. (script(1) gives the command a terminal.)
func TestWireStreamedAnswerShownOnceOnATerminal(t *testing.T) {
	scriptCmd, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not installed")
	}
	streamedText := reply{sse: []string{
		sseChunk(`{"role":"assistant","content":"The answer "}`, ""),
		sseChunk(`{"content":"is forty-two."}`, ""),
		sseChunk(`{}`, "stop"),
		"[DONE]",
	}}
	newFakeOpenAI(t, streamedText)
	unjudged := unjudgedCodeAssistant(t)
	line := strings.Join([]string{agentrunBinary(t), "exec", "--stream", unjudged, "'what is 6*7?'"}, " ")
	out, err := exec.Command(scriptCmd, "-qec", line, "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(string(out), "The answer is forty-two."); n != 1 {
		t.Errorf("the answer is on the terminal %d times:\n%s", n, out)
	}
}

func sseChunk(delta string, finish string) string {
	fin := "null"
	if finish != "" {
		fin = `"` + finish + `"`
	}
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, fin)
}

func TestWireStreaming(t *testing.T) {
	streamedCall := reply{sse: []string{
		sseChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"calculator","arguments":""}}]}`, ""),
		sseChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":"}}]}`, ""),
		sseChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"6*7\"}"}}]}`, ""),
		sseChunk(`{}`, "tool_calls"),
		"[DONE]",
	}}
	streamedText := reply{sse: []string{
		sseChunk(`{"role":"assistant","content":"The answer "}`, ""),
		sseChunk(`{"content":"is 42, by calculator."}`, ""),
		sseChunk(`{}`, "stop"),
		"[DONE]",
	}}
	// Without a judge the text is shown as it streams; with one, a draft it may
	// reject is never shown: the answer appears once, accepted.
	unjudged := unjudgedCodeAssistant(t)
	for _, tt := range []struct {
		spec  string
		shown bool
	}{{unjudged, true}, {codeAssistant, false}} {
		f := newFakeOpenAI(t, streamedCall, streamedText)
		code, stdout, stderr := runCLI(t, "exec", "--stream", tt.spec, "6*7?")
		if code != 0 || stdout != "The answer is 42, by calculator.\n" {
			t.Fatalf("%s: exit %d, stdout %q\n%s", tt.spec, code, stdout, stderr)
		}
		if got := strings.Contains(stderr, "The answer is 42, by calculator."); got != tt.shown {
			t.Errorf("%s: the streamed text was shown live: %v, want %v\n%s", tt.spec, got, tt.shown, stderr)
		}
		if f.requests[0]["stream"] != true {
			t.Error("request did not ask for a stream")
		}
		f.checkRequests()
		if got := f.messages(1)[3]["content"]; got != "42" {
			t.Errorf("calculator got the streamed arguments wrong: %v", got)
		}
	}
}

// A stream that ends in the middle of a tool call's arguments must not run the tool
// on what arrived: the run stops with model_error and the fallback.
func TestWireStreamCutOff(t *testing.T) {
	f := newFakeOpenAI(t, reply{sse: []string{
		sseChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_s","type":"function","function":{"name":"calculator","arguments":"{\"expre"}}]}`, ""),
	}})
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	code, stdout, stderr := runCLI(t, "exec", "--stream", "--trace", trace, variant(t, "retries: 2", "retries: 0"), "cut")
	if code != exitStopped || !strings.Contains(stdout, "I could not finish this reliably") {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	raw, _ := os.ReadFile(trace)
	if strings.Contains(string(raw), `"kind":"tool_call"`) || !strings.Contains(string(raw), `"stop":"model_error"`) {
		t.Errorf("trace:\n%s", raw)
	}
	if len(f.requests) != 1 {
		t.Errorf("%d requests", len(f.requests))
	}
}

func TestWireRetries(t *testing.T) {
	t.Run("429 with Retry-After, then success", func(t *testing.T) {
		f := newFakeOpenAI(t, reply{status: 429, header: map[string]string{"Retry-After": "0"}}, answer("Hello! How can I help?"))
		code, stdout, stderr := runCLI(t, "exec", codeAssistant, "hi")
		if code != 0 || stdout != "Hello! How can I help?\n" || len(f.requests) != 2 {
			t.Fatalf("exit %d, stdout %q, %d requests\n%s", code, stdout, len(f.requests), stderr)
		}
	})
	t.Run("persistent 500", func(t *testing.T) {
		f := newFakeOpenAI(t, reply{status: 500}, reply{status: 500})
		code, stdout, stderr := runCLI(t, "exec", "--json", variant(t, "retries: 2", "retries: 1"), "hi")
		if code != exitStopped || len(f.requests) != 2 {
			t.Fatalf("exit %d after %d requests\n%s", code, len(f.requests), stderr)
		}
		var res struct{ Answer, Stop, Detail string }
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		if res.Stop != "model_error" || !strings.HasPrefix(res.Answer, "I could not finish this reliably") || !strings.Contains(res.Detail, "500") {
			t.Errorf("result %+v", res)
		}
		if strings.Contains(stdout+stderr, "SECRET") {
			t.Error("the key leaked into the output")
		}
	})
}

func TestWireMalformedArguments(t *testing.T) {
	f := newFakeOpenAI(t,
		calls(toolCall("call_1", "calculator", `{"expression": "1+`)),
		calls(toolCall("call_2", "read_file", `{"path": 42}`)),
		answer("Sorry, I could not read it."),
	)
	code, _, stderr := runCLI(t, "exec", codeAssistant, "x")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	f.checkRequests()
	if got := f.messages(1)[3]["content"].(string); !strings.Contains(got, "Error: the arguments for calculator are not valid JSON") {
		t.Errorf("malformed JSON answer: %q", got)
	}
	if got := f.messages(2)[5]["content"].(string); !strings.Contains(got, "Error: invalid arguments for read_file: at /path: got number, want string") {
		t.Errorf("schema answer: %q", got)
	}
}

func TestWireDuplicateCalls(t *testing.T) {
	same := func() []reply {
		return []reply{
			calls(toolCall("call_1", "calculator", `{"expression":"1+1"}`)),
			calls(toolCall("call_2", "calculator", `{"expression": "1+1"}`)),
			answer("1 + 1 is 2, by the calculator."),
		}
	}
	for _, tt := range []struct {
		mode     string
		code     int
		requests int
		stop     string
	}{
		{"stop", exitStopped, 2, "duplicate_call"},
		{"hint", 0, 3, "completed"},
		{"allow", 0, 3, "completed"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFakeOpenAI(t, same()...)
			code, stdout, stderr := runCLI(t, "exec", "--json", variant(t, "duplicate_calls: hint", "duplicate_calls: "+tt.mode), "x")
			if code != tt.code || len(f.requests) != tt.requests {
				t.Fatalf("exit %d, %d requests\n%s", code, len(f.requests), stderr)
			}
			var res struct {
				Stop  string
				Steps []struct{ Outcome string }
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatal(err)
			}
			if res.Stop != tt.stop {
				t.Errorf("stop %s", res.Stop)
			}
			f.checkRequests()
			if tt.mode == "hint" {
				if got := f.messages(2)[5]["content"].(string); !strings.Contains(got, "already called") {
					t.Errorf("hint %q", got)
				}
				if res.Steps[1].Outcome != "duplicate" {
					t.Errorf("steps %+v", res.Steps)
				}
			}
			if tt.mode == "allow" && (res.Steps[1].Outcome != "ok") {
				t.Errorf("steps %+v", res.Steps)
			}
		})
	}
}

func TestWireLimits(t *testing.T) {
	loop := func(n int) []reply {
		var rs []reply
		for i := range n {
			rs = append(rs, calls(toolCall(fmt.Sprintf("call_%d", i), "calculator", fmt.Sprintf(`{"expression":"%d+1"}`, i))))
		}
		return rs
	}
	t.Run("max_tool_rounds", func(t *testing.T) {
		f := newFakeOpenAI(t, loop(10)...)
		code, stdout, _ := runCLI(t, "exec", "--json", codeAssistant, "loop")
		var res struct {
			Stop       string
			ToolRounds int `json:"tool_rounds"`
		}
		json.Unmarshal([]byte(stdout), &res)
		if code != exitStopped || res.Stop != "max_tool_rounds" || res.ToolRounds != 6 || len(f.requests) != 7 {
			t.Errorf("exit %d, %+v, %d requests", code, res, len(f.requests))
		}
		f.checkRequests()
	})
	t.Run("max_turns", func(t *testing.T) {
		f := newFakeOpenAI(t, loop(10)...)
		code, stdout, _ := runCLI(t, "exec", "--json", variant(t, "max_turns: 10", "max_turns: 4", "max_tool_rounds: 6", "max_tool_rounds: 4"), "loop")
		var res struct {
			Stop  string
			Turns int
		}
		json.Unmarshal([]byte(stdout), &res)
		if code != exitStopped || res.Stop != "max_turns" || res.Turns != 4 || len(f.requests) != 4 {
			t.Errorf("exit %d, %+v, %d requests", code, res, len(f.requests))
		}
	})
}

// -q silences progress only: a streamed spec stays streamed on the wire, and nothing
// of the text reaches stderr.
func TestWireQuietStillStreams(t *testing.T) {
	f := newFakeOpenAI(t, reply{sse: []string{
		sseChunk(`{"role":"assistant","content":"A quiet answer, "}`, ""),
		sseChunk(`{"content":"long enough for the judge."}`, ""),
		sseChunk(`{}`, "stop"),
		"[DONE]",
	}})
	code, stdout, stderr := runCLI(t, "exec", "-q", "--stream", codeAssistant, "hi")
	if code != 0 || stdout != "A quiet answer, long enough for the judge.\n" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if f.requests[0]["stream"] != true {
		t.Error("-q turned streaming off on the wire")
	}
}
