package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/agentrun/agentrun/internal/heaptest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/spec"
)

// Wire tests of what real OpenAI-compatible providers send and require: calls
// without id or index, DeepSeek's reasoning_content and Gemini's thought signatures
// that must come back, finish reasons that are not success, and servers that never
// stop sending.

// providerServer is fakeOpenAI behind a gate that checks every request the way a
// provider does, answering 400 with an OpenAI-style error body when it fails. Raw
// handlers answer the agent requests they are numbered for (from 1) in place of the
// prepared replies, for what fakeOpenAI does not write.
type providerServer struct {
	*fakeOpenAI
	check func(body []byte) string // a non-empty result is the 400's message
	raw   map[int]http.HandlerFunc

	gateMu   sync.Mutex
	rejected []string
}

func newProviderServer(t *testing.T, replies ...reply) *providerServer {
	p := &providerServer{fakeOpenAI: &fakeOpenAI{t: t, replies: replies}, raw: map[int]http.HandlerFunc{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.gate))
	t.Cleanup(p.srv.Close)
	t.Setenv("LLM_BASE_URL", p.srv.URL)
	t.Setenv("LLM_API_KEY", "sk-test-SECRET-key")
	t.Setenv("LLM_MODEL_NAME", "gpt-test")
	return p
}

func (p *providerServer) gate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		p.t.Errorf("request body: %v", err)
	}
	if p.check != nil {
		if msg := p.check(body); msg != "" {
			p.gateMu.Lock()
			p.rejected = append(p.rejected, msg)
			p.gateMu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"message": msg, "type": "invalid_request_error", "param": nil, "code": "invalid_request_error"}})
			return
		}
	}
	var decoded map[string]any
	json.Unmarshal(body, &decoded)
	if _, judge := decoded["response_format"]; !judge {
		p.mu.Lock()
		if h, ok := p.raw[len(p.requests)+1]; ok {
			p.requests = append(p.requests, decoded)
			p.mu.Unlock()
			h(w, r)
			return
		}
		p.mu.Unlock()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.serve(w, r)
}

func (p *providerServer) noRejections() {
	p.t.Helper()
	p.gateMu.Lock()
	defer p.gateMu.Unlock()
	for _, msg := range p.rejected {
		p.t.Errorf("the provider answered 400: %s", msg)
	}
}

// sseReply is a streamed reply from deltas, one chunk each, ending with finish.
func sseReply(finish string, deltas ...string) reply {
	var events []string
	for _, d := range deltas {
		events = append(events, sseChunk(d, ""))
	}
	return reply{sse: append(events, sseChunk(`{}`, finish), "[DONE]")}
}

// completionWith answers with a chat completion whose finish reason is given.
func completionWith(finish string, message map[string]any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		message["role"] = "assistant"
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-p", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": message}},
			"usage":   map[string]any{"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}})
	}
}

type execResult struct {
	Answer    string
	Stop      string
	Detail    string
	Partial   string
	Reasoning []string
	Steps     []struct {
		Tool    string
		CallID  string `json:"call_id"`
		Outcome string
		Refusal string
		Result  string
	}
}

func decodeResult(t *testing.T, stdout string) execResult {
	t.Helper()
	var res execResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	return res
}

var madeUpID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// toolCalls is the tool calls of message j of agent request i.
func (f *fakeOpenAI) toolCalls(i, j int) []map[string]any {
	var out []map[string]any
	tcs, _ := f.messages(i)[j]["tool_calls"].([]any)
	for _, tc := range tcs {
		out = append(out, tc.(map[string]any))
	}
	return out
}

// Calls with neither id nor index: each tool runs with its own arguments, two calls
// of one tool are two calls, and the ids made up for them never repeat in the
// conversation — checked in what the server gets back.
func TestProvidersCallsWithoutIDOrIndex(t *testing.T) {
	noID := func(name, args string) map[string]any {
		tc := toolCall("", name, args)
		delete(tc, "id")
		return tc
	}
	tests := []struct {
		name   string
		stream bool
		rounds []reply
	}{
		{
			name:   "streamed",
			stream: true,
			rounds: []reply{
				sseReply("tool_calls",
					`{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]}`,
					`{"tool_calls":[{"function":{"arguments":"\"go.mod\",\"limit\":1}"}}]}`,
					`{"tool_calls":[{"type":"function","function":{"name":"calculator","arguments":"{\"expression\":"}}]}`,
					`{"tool_calls":[{"function":{"arguments":"\"6*7\"}"}}]}`),
				sseReply("tool_calls",
					`{"tool_calls":[{"function":{"name":"calculator","arguments":"{\"expression\":\"1+1\"}"}}]}`,
					`{"tool_calls":[{"function":{"name":"calculator","arguments":"{\"expression\":\"2+2\"}"}}]}`),
				sseReply("stop", `{"content":"go.mod names the module; 6*7 = 42, 1+1 = 2 and 2+2 = 4."}`),
			},
		},
		{
			name: "non-streamed",
			rounds: []reply{
				calls(noID("read_file", `{"path":"go.mod","limit":1}`), noID("calculator", `{"expression":"6*7"}`)),
				calls(noID("calculator", `{"expression":"1+1"}`), noID("calculator", `{"expression":"2+2"}`)),
				answer("go.mod names the module; 6*7 = 42, 1+1 = 2 and 2+2 = 4."),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, tt.rounds...)
			args := []string{"exec", "--json", codeAssistant, "go.mod, 6*7, 1+1, 2+2"}
			if tt.stream {
				args = append(args[:1], append([]string{"--stream"}, args[1:]...)...)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			f.checkRequests()
			if len(f.requests) != 3 {
				t.Fatalf("%d requests", len(f.requests))
			}
			// The last request holds both rounds: assistant, tool, tool, assistant, tool, tool.
			msgs := f.messages(2)
			want := []struct{ tool, result string }{{"read_file", "module github.com/agentrun/agentrun"}, {"calculator", "42"}, {"calculator", "2"}, {"calculator", "4"}}
			var ids []string
			for round, at := range []int{2, 5} {
				tcs := f.toolCalls(2, at)
				if len(tcs) != 2 {
					t.Fatalf("round %d: %d calls sent back: %v", round, len(tcs), msgs[at])
				}
				for k, tc := range tcs {
					w := want[2*round+k]
					id, _ := tc["id"].(string)
					ids = append(ids, id)
					if name := tc["function"].(map[string]any)["name"]; name != w.tool {
						t.Errorf("round %d call %d is %v, want %s", round, k, name, w.tool)
					}
					result := msgs[at+1+k]
					if result["tool_call_id"] != id || !strings.Contains(result["content"].(string), w.result) {
						t.Errorf("round %d call %d (%s): result %v, want %q", round, k, id, result, w.result)
					}
				}
			}
			seen := map[string]bool{}
			for _, id := range ids {
				if !madeUpID.MatchString(id) || seen[id] {
					t.Errorf("id %q (ids %v): made-up ids must be random and never repeat", id, ids)
				}
				seen[id] = true
			}
			res := decodeResult(t, stdout)
			if len(res.Steps) != 4 {
				t.Fatalf("steps %+v", res.Steps)
			}
			for _, s := range res.Steps {
				if s.Outcome != "ok" {
					t.Errorf("step %+v", s)
				}
			}
		})
	}
}

// DeepSeek's thinking mode answers 400 when an assistant message that made tool
// calls comes back without its reasoning_content — in the run and in later runs of
// the conversation.
func deepSeekCheck(sent map[string]string) func([]byte) string {
	return func(body []byte) string {
		var req struct {
			Messages []struct {
				Role             string  `json:"role"`
				ReasoningContent *string `json:"reasoning_content"`
				ToolCalls        []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return "invalid JSON: " + err.Error()
		}
		for i, m := range req.Messages {
			if m.Role != "assistant" || len(m.ToolCalls) == 0 {
				continue
			}
			want, ok := sent[m.ToolCalls[0].ID]
			switch {
			case !ok:
				continue
			case m.ReasoningContent == nil:
				return fmt.Sprintf("Missing `reasoning_content` field in the assistant message at message index %d.", i)
			case *m.ReasoningContent != want:
				return fmt.Sprintf("The reasoning_content of message %d is %q, not what was sent.", i, *m.ReasoningContent)
			}
		}
		return ""
	}
}

// The reasoning DeepSeek sends in one run goes back in it and in the next run of
// the conversation, from the store; a final answer's reasoning is shown in --json,
// never in the answer, and not kept.
func TestProvidersDeepSeekReasoning(t *testing.T) {
	const (
		thinking    = "I need the calculator for 6*7."
		answerText  = "6*7 is 42, by the calculator."
		second      = "7*8 is 56; 6*7 was 42 before."
		secondThink = "Recall the earlier result."
	)
	tests := []struct {
		name    string
		stream  bool
		replies []reply
	}{
		{
			name: "non-streamed",
			replies: []reply{
				{message: map[string]any{"content": nil, "reasoning_content": thinking,
					"tool_calls": []any{toolCall("call_ds1", "calculator", `{"expression":"6*7"}`)}}},
				{message: map[string]any{"content": answerText, "reasoning_content": "The calculator said 42; say so."}},
				{message: map[string]any{"content": second, "reasoning_content": secondThink}},
			},
		},
		{
			name:   "streamed",
			stream: true,
			replies: []reply{
				sseReply("tool_calls",
					`{"role":"assistant","content":null,"reasoning_content":"I need the "}`,
					`{"reasoning_content":"calculator for 6*7."}`,
					`{"reasoning_content":null,"tool_calls":[{"index":0,"id":"call_ds1","type":"function","function":{"name":"calculator","arguments":""}}]}`,
					`{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":\"6*7\"}"}}]}`),
				sseReply("stop", `{"role":"assistant","reasoning_content":"The calculator said 42; "}`, `{"reasoning_content":"say so."}`,
					`{"content":"6*7 is 42, "}`, `{"content":"by the calculator."}`),
				sseReply("stop", `{"reasoning_content":"Recall the earlier result."}`, `{"content":"7*8 is 56; 6*7 was 42 before."}`),
			},
		},
	}
	stores := []struct{ name, url string }{{"sqlite", "sqlite:"}}
	if url := os.Getenv("REDIS_URL"); url != "" {
		stores = append(stores, struct{ name, url string }{"redis", url})
	}
	for _, tt := range tests {
		for _, st := range stores {
			t.Run(tt.name+"/"+st.name, func(t *testing.T) {
				p := newProviderServer(t, tt.replies...)
				p.check = deepSeekCheck(map[string]string{"call_ds1": thinking})
				storeURL := st.url
				if storeURL == "sqlite:" {
					storeURL += filepath.Join(t.TempDir(), "state.db")
				}
				// The redis database is shared: a user and a conversation of this run's
				// own, forgotten at the end.
				user, conversation := fmt.Sprintf("u-ds-%d", time.Now().UnixNano()), fmt.Sprintf("c-ds-%d", time.Now().UnixNano())
				t.Cleanup(func() { runCLI(t, "memory", "forget", "--store", storeURL, "--user", user) })
				exec := func(args ...string) (int, string, string) {
					base := []string{"exec", "--store", storeURL, "--user", user, "--conversation", conversation}
					if tt.stream {
						base = append(base, "--stream")
					}
					return runCLI(t, append(base, args...)...)
				}

				code, stdout, stderr := exec(codeAssistant, "What is 6*7?")
				p.noRejections()
				if code != 0 || stdout != answerText+"\n" {
					t.Fatalf("first run: exit %d, stdout %q\n%s", code, stdout, stderr)
				}
				if len(p.requests) != 2 {
					t.Fatalf("%d requests", len(p.requests))
				}

				code, stdout, stderr = exec("--json", codeAssistant, "And 7*8?")
				p.noRejections()
				if code != 0 {
					t.Fatalf("second run: exit %d\n%s\n%s", code, stdout, stderr)
				}
				res := decodeResult(t, stdout)
				if res.Answer != second || strings.Contains(res.Answer, secondThink) {
					t.Errorf("answer %q", res.Answer)
				}
				if len(res.Reasoning) != 1 || res.Reasoning[0] != secondThink {
					t.Errorf("--json reasoning %q", res.Reasoning)
				}
				// The later run's request carries the stored tool-call message with its
				// reasoning; the earlier final answer goes back without its own.
				var withCalls, answers int
				for _, m := range p.messages(2) {
					if m["role"] != "assistant" {
						continue
					}
					if _, ok := m["tool_calls"]; ok {
						withCalls++
						if m["reasoning_content"] != thinking {
							t.Errorf("stored tool-call message: %v", m)
						}
					} else {
						answers++
						if m["content"] != answerText || m["reasoning_content"] != nil {
							t.Errorf("stored answer: %v", m)
						}
					}
				}
				if withCalls != 1 || answers != 1 {
					t.Errorf("history: %d tool-call messages, %d answers: %v", withCalls, answers, p.messages(2))
				}
			})
		}
	}
}

// Gemini's OpenAI-compatible endpoint answers 400 when a tool call comes back
// without the thought signature it was sent with, byte for byte.
func geminiCheck(sent map[string]string) func([]byte) string {
	return func(body []byte) string {
		var req struct {
			Messages []struct {
				ToolCalls []struct {
					ID           string          `json:"id"`
					ExtraContent json.RawMessage `json:"extra_content"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return "invalid JSON: " + err.Error()
		}
		for i, m := range req.Messages {
			for _, tc := range m.ToolCalls {
				if want, ok := sent[tc.ID]; ok && !bytes.Equal(tc.ExtraContent, []byte(want)) {
					return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts (message %d, call %s: %s).", i, tc.ID, tc.ExtraContent)
				}
			}
		}
		return ""
	}
}

func TestProvidersGeminiThoughtSignatures(t *testing.T) {
	const sig1 = `{"google":{"thought_signature":"CiQBVKhc7k+/Zx0KPgFUqFzuXq0r9w=="}}`
	const sig2 = `{"google":{"thought_signature":"EnQKcgFUqFzu/second+round=="}}`
	withSig := func(tc map[string]any, sig string) map[string]any {
		tc["extra_content"] = json.RawMessage(sig)
		return tc
	}
	tests := []struct {
		name    string
		stream  bool
		replies []reply
	}{
		{
			name: "non-streamed",
			replies: []reply{
				calls(withSig(toolCall("call_g1", "calculator", `{"expression":"6*7"}`), sig1), toolCall("call_g2", "calculator", `{"expression":"6+7"}`)),
				calls(withSig(toolCall("call_g3", "calculator", `{"expression":"42+13"}`), sig2)),
				answer("6*7 is 42, 6+7 is 13 and together 55."),
			},
		},
		{
			name:   "streamed",
			stream: true,
			replies: []reply{
				sseReply("tool_calls",
					`{"role":"assistant","tool_calls":[{"index":0,"id":"call_g1","type":"function","function":{"name":"calculator","arguments":""},"extra_content":`+sig1+`}]}`,
					`{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":\"6*7\"}"}}]}`,
					`{"tool_calls":[{"index":1,"id":"call_g2","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"6+7\"}"}}]}`),
				sseReply("tool_calls",
					`{"tool_calls":[{"id":"call_g3","function":{"name":"calculator","arguments":"{\"expression\":\"42+13\"}"},"extra_content":`+sig2+`}]}`),
				sseReply("stop", `{"content":"6*7 is 42, 6+7 is 13 and together 55."}`),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProviderServer(t, tt.replies...)
			p.check = geminiCheck(map[string]string{"call_g1": sig1, "call_g3": sig2})
			args := []string{"exec", codeAssistant, "6*7 plus 6+7?"}
			if tt.stream {
				args = []string{"exec", "--stream", codeAssistant, "6*7 plus 6+7?"}
			}
			code, stdout, stderr := runCLI(t, args...)
			p.noRejections()
			if code != 0 || stdout != "6*7 is 42, 6+7 is 13 and together 55.\n" {
				t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
			}
			p.checkRequests()
			if len(p.requests) != 3 {
				t.Fatalf("%d requests", len(p.requests))
			}
			// A call without a signature gets none.
			if tcs := p.toolCalls(2, 2); len(tcs) != 2 || tcs[1]["extra_content"] != nil {
				t.Errorf("first round sent back as %v", tcs)
			}
			if got := p.messages(2)[6]["content"]; got != "55" {
				t.Errorf("third call's result %v", got)
			}
		})
	}
}

// A text answer cut at max_tokens or stopped by the content filter is no answer:
// exit 3, the fallback on stdout, the stop and the cut text in --json.
func TestProvidersFinishReasons(t *testing.T) {
	const fallback = "I could not finish this reliably. Please narrow the question or name the file.\n"
	for _, tt := range []struct {
		finish, partial, stop string
	}{
		{"length", "The file has three parts: first, the module line, then", "truncated"},
		{"content_filter", "I can tell you that", "content_filter"},
		{"content_filter", "", "content_filter"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%q/stream=%v", tt.finish, tt.partial, stream), func(t *testing.T) {
				p := newProviderServer(t)
				for n := 1; n <= 2; n++ {
					p.raw[n] = completionWith(tt.finish, map[string]any{"content": tt.partial})
					if stream {
						content, _ := json.Marshal(tt.partial)
						p.raw[n] = func(w http.ResponseWriter, _ *http.Request) {
							w.Header().Set("Content-Type", "text/event-stream")
							for _, data := range []string{sseChunk(`{"role":"assistant","content":`+string(content)+`}`, ""), sseChunk(`{}`, tt.finish), "[DONE]"} {
								fmt.Fprintf(w, "data: %s\n\n", data)
							}
						}
					}
				}
				flags := []string{"exec"}
				if stream {
					flags = append(flags, "--stream")
				}
				code, stdout, stderr := runCLI(t, append(flags, codeAssistant, "Summarise go.mod")...)
				if code != exitStopped || stdout != fallback {
					t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
				}
				code, stdout, stderr = runCLI(t, append(flags, "--json", codeAssistant, "Summarise go.mod")...)
				if code != exitStopped {
					t.Fatalf("exit %d\n%s", code, stderr)
				}
				res := decodeResult(t, stdout)
				if res.Stop != tt.stop || res.Partial != tt.partial || res.Answer+"\n" != fallback {
					t.Errorf("result %+v", res)
				}
				if len(p.judgeRequests) != 0 {
					t.Errorf("a cut answer went to the judge")
				}
			})
		}
	}
}

// endlessSSE streams text chunks, gap apart, until the client goes away.
func endlessSSE(gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", sseChunk(`{"content":"and more "}`, "")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// trickleJSON sends a chat completion a byte at a time, gap apart.
func trickleJSON(gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done, slowly."}}]}`
		for i := range len(body) {
			if _, err := io.WriteString(w, body[i:i+1]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// A server that never finishes — fast, trickling, or one byte at a time — ends the
// run at model.timeout with model_error.
func TestProvidersEndlessResponses(t *testing.T) {
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		stream  bool
		want    []string // one of these is in the detail
	}{
		{"an endless stream", endlessSSE(0), true, []string{"did not finish within 1s", "larger than 16 MiB"}},
		{"a stream trickling a chunk every 200ms", endlessSSE(200 * time.Millisecond), true, []string{"the stream did not finish within 1s"}},
		{"an answer trickling a byte every 200ms", trickleJSON(200 * time.Millisecond), false, []string{"no answer within the 1s timeout"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newProviderServer(t)
			p.raw[1] = tt.handler
			file := variant(t, "timeout: 60s", "timeout: 1s", "retries: 2", "retries: 0")
			args := []string{"exec", "--json", file, "Tell me everything."}
			if tt.stream {
				args = []string{"exec", "--stream", "--json", file, "Tell me everything."}
			}
			start := time.Now()
			code, stdout, stderr := runCLI(t, args...)
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the run took %s", d)
			}
			if code != exitStopped {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			res := decodeResult(t, stdout)
			found := false
			for _, w := range tt.want {
				found = found || strings.Contains(res.Detail, w)
			}
			if res.Stop != "model_error" || !found {
				t.Errorf("stop %s, detail %q, want one of %q", res.Stop, res.Detail, tt.want)
			}
			if len(p.requests) != 1 {
				t.Errorf("%d requests", len(p.requests))
			}
		})
	}
}

// offerGigabyte serves prefix and then a gigabyte of block after block, written as
// it goes, until the client goes away.
func offerGigabyte(contentType, prefix string, block []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if _, err := io.WriteString(w, prefix); err != nil {
			return
		}
		for sent := 0; sent < 1<<30; sent += len(block) {
			if _, err := w.Write(block); err != nil || r.Context().Err() != nil {
				return
			}
		}
	}
}

// A server offering a gigabyte ends the run with a clear error, and the process's
// heap stays far below what was offered.
func TestProvidersHugeResponse(t *testing.T) {
	text := bytes.Repeat([]byte("x"), 32<<10)
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		stream  bool
	}{
		{"streamed", offerGigabyte("text/event-stream", "", []byte("data: "+sseChunk(`{"content":"`+string(text)+`"}`, "")+"\n\n")), true},
		{"non-streamed", offerGigabyte("application/json",
			`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`, text), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newProviderServer(t)
			p.raw[1] = tt.handler
			args := []string{"exec", "--json", codeAssistant, "Everything, please."}
			if tt.stream {
				args = []string{"exec", "--stream", "--json", codeAssistant, "Everything, please."}
			}
			var code int
			var stdout, stderr string
			peak := heaptest.PeakHeap(func() { code, stdout, stderr = runCLI(t, args...) })
			if code != exitStopped {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			res := decodeResult(t, stdout)
			if res.Stop != "model_error" || !strings.Contains(res.Detail, "larger than 16 MiB") {
				t.Errorf("stop %s, detail %q", res.Stop, res.Detail)
			}
			if peak > 200<<20 {
				t.Errorf("the heap grew to %d MiB", peak>>20)
			}
			t.Logf("peak heap %d MiB", peak>>20)
		})
	}
}

// A response with 1,000 tool calls: the first max_calls_per_response run, the rest
// get a tool error, and every call is answered, in order, in the next request.
func TestProvidersThousandCalls(t *testing.T) {
	const n = 1000
	limit := spec.DefaultMaxCallsPerResponse
	var whole []map[string]any
	var deltas []string
	for i := range n {
		args := fmt.Sprintf(`{"expression":"%d+1"}`, i)
		whole = append(whole, toolCall(fmt.Sprintf("call_%d", i), "calculator", args))
		quoted, _ := json.Marshal(args)
		deltas = append(deltas,
			fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"calculator","arguments":""}}]}`, i, i),
			fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, quoted))
	}
	const final = "I ran the first calculations; ask again for the rest."
	for _, tt := range []struct {
		name    string
		stream  bool
		replies []reply
	}{
		{"non-streamed", false, []reply{calls(whole...), answer(final)}},
		{"streamed", true, []reply{sseReply("tool_calls", deltas...), sseReply("stop", `{"content":"`+final+`"}`)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t, tt.replies...)
			args := []string{"exec", "-q", "--json", codeAssistant, "Compute i+1 for i below 1000."}
			if tt.stream {
				args = []string{"exec", "-q", "--stream", "--json", codeAssistant, "Compute i+1 for i below 1000."}
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			res := decodeResult(t, stdout)
			if res.Answer != final || len(res.Steps) != n {
				t.Fatalf("answer %q, %d steps", res.Answer, len(res.Steps))
			}
			ran := 0
			for i, s := range res.Steps {
				if s.CallID != fmt.Sprintf("call_%d", i) {
					t.Fatalf("step %d is %s", i, s.CallID)
				}
				switch {
				case i < limit && s.Outcome == "ok" && s.Result == fmt.Sprint(i+1):
					ran++
				case i >= limit && s.Outcome == "refused" && s.Refusal == "too_many":
				default:
					t.Errorf("step %d: %+v", i, s)
				}
			}
			if ran != limit {
				t.Errorf("%d calls ran, want %d", ran, limit)
			}
			f.checkRequests()
			msgs := f.messages(1)
			if len(msgs) != 3+n {
				t.Fatalf("the next request has %d messages", len(msgs))
			}
			if got := len(f.toolCalls(1, 2)); got != n {
				t.Errorf("the assistant message went back with %d calls", got)
			}
			for i, m := range msgs[3:] {
				content, _ := m["content"].(string)
				ok := m["role"] == "tool" && m["tool_call_id"] == fmt.Sprintf("call_%d", i)
				if i < limit {
					ok = ok && content == fmt.Sprint(i+1)
				} else {
					ok = ok && strings.HasPrefix(content, "Error: not run")
				}
				if !ok {
					t.Fatalf("tool message %d: %v", i, m)
				}
			}
		})
	}
}
