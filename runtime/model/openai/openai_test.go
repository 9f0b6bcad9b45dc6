package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

const testKey = "sk-test-0123456789secret"

// server is an OpenAI-compatible fake: request i gets replies[i], the last reply
// repeats; every request's path, headers and body are recorded.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

func newServer(t *testing.T, replies ...http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body})
		s.mu.Unlock()
		replies[min(n, len(replies)-1)](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *server) request(t *testing.T, i int) recorded {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.requests) {
		t.Fatalf("server saw %d requests, want request %d", len(s.requests), i)
	}
	return s.requests[i]
}

// body decodes request i's JSON body.
func (s *server) body(t *testing.T, i int) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(s.request(t, i).body, &m); err != nil {
		t.Fatalf("request %d body: %v", i, err)
	}
	return m
}

func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// completion is a chat completion with one choice.
func completion(finish, message string) http.HandlerFunc {
	return reply(200, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test-0613",
		"choices":[{"index":0,"finish_reason":"`+finish+`","message":`+message+`}],
		"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`)
}

// sse streams events as `data: …` lines; the caller adds [DONE] when the stream
// is to end properly.
func sse(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}
}

func chunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test-0613","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

const usageChunk = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test-0613","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":9,"total_tokens":20}}`

func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func ptr[T any](v T) *T { return &v }

// newModel points a model at s with test settings: one retry, the test key.
func newModel(t *testing.T, s *server, edit ...func(*spec.Model)) *Model {
	t.Helper()
	sm := spec.Model{Name: "gpt-test", BaseURL: s.URL, APIKeyEnv: "TEST_KEY", Retries: ptr(1)}
	for _, e := range edit {
		e(&sm)
	}
	m, err := New(sm, mapEnv(map[string]string{"TEST_KEY": testKey}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func userAsks(q string) *model.Request {
	return &model.Request{Messages: []model.Message{
		{Role: model.RoleSystem, Content: "You are terse."},
		{Role: model.RoleUser, Content: q},
	}}
}

var weatherTool = model.ToolDef{
	Name:        "get_weather",
	Description: "Weather in a city.",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
}

// jsonEqual compares a decoded JSON value with JSON text.
func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON for %s: %v", what, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("%s:\n got %s\nwant %s", what, g, want)
	}
}

func modelError(t *testing.T, err error) *model.Error {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *model.Error", err, err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("the error message carries the API key: %v", err)
	}
	return me
}

func TestPlainAnswer(t *testing.T) {
	s := newServer(t, completion("stop", `{"role":"assistant","content":"It is sunny."}`))
	m := newModel(t, s, func(sm *spec.Model) { sm.Temperature = ptr(0.2); sm.MaxTokens = 300 })

	resp, err := m.Complete(context.Background(), userAsks("Weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	want := &model.Response{
		Message:      model.Message{Role: model.RoleAssistant, Content: "It is sunny."},
		FinishReason: "stop",
		Usage:        model.Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25},
		Model:        "gpt-test-0613",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response:\n got %+v\nwant %+v", resp, want)
	}

	req := s.request(t, 0)
	if req.path != "/chat/completions" {
		t.Errorf("path %q", req.path)
	}
	if got := req.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
	body := s.body(t, 0)
	jsonEqual(t, "messages", body["messages"],
		`[{"role":"system","content":"You are terse."},{"role":"user","content":"Weather in Paris?"}]`)
	jsonEqual(t, "model", body["model"], `"gpt-test"`)
	jsonEqual(t, "temperature", body["temperature"], `0.2`)
	jsonEqual(t, "max_tokens", body["max_tokens"], `300`)
	for _, k := range []string{"stream", "stream_options", "tools", "response_format"} {
		if v, ok := body[k]; ok {
			t.Errorf("unexpected %s: %v", k, v)
		}
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	s := newServer(t,
		completion("tool_calls", `{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`),
		completion("stop", `{"role":"assistant","content":"Sunny in Paris."}`),
	)
	m := newModel(t, s)
	req := userAsks("Weather in Paris?")
	req.Tools = []model.ToolDef{weatherTool, {Name: "no_params"}}

	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []model.ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	if !reflect.DeepEqual(resp.Message.ToolCalls, wantCalls) || resp.FinishReason != "tool_calls" {
		t.Fatalf("got %+v, finish %q", resp.Message.ToolCalls, resp.FinishReason)
	}
	jsonEqual(t, "tools", s.body(t, 0)["tools"], `[
		{"type":"function","function":{"name":"get_weather","description":"Weather in a city.",
			"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
		{"type":"function","function":{"name":"no_params","parameters":{"type":"object","properties":{}}}}]`)

	req.Messages = append(req.Messages, resp.Message,
		model.Message{Role: model.RoleTool, ToolCallID: "call_abc", Content: "sunny, 24°C"})
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	msgs := s.body(t, 1)["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("second request has %d messages", len(msgs))
	}
	jsonEqual(t, "assistant message", msgs[2], `{"role":"assistant","tool_calls":[
		{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`)
	jsonEqual(t, "tool message", msgs[3], `{"role":"tool","tool_call_id":"call_abc","content":"sunny, 24°C"}`)
}

func TestToolCallsInResponse(t *testing.T) {
	tests := []struct {
		name    string
		message string
		want    []model.ToolCall
	}{
		{
			name: "two parallel calls",
			message: `{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
			want: []model.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
			},
		},
		{
			name: "no type",
			message: `{"role":"assistant","tool_calls":[
				{"id":"call_x","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}`,
			want: []model.ToolCall{{ID: "call_x", Name: "get_weather", Arguments: `{"city":"Rome"}`}},
		},
		{
			name:    "no id and empty arguments",
			message: `{"role":"assistant","tool_calls":[{"function":{"name":"now","arguments":""}}]}`,
			want:    []model.ToolCall{{ID: "", Name: "now", Arguments: `{}`}}, // a made-up id
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, completion("tool_calls", tt.message), completion("stop", `{"role":"assistant","content":"ok"}`))
			m := newModel(t, s)
			req := userAsks("q")
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Message.ToolCalls
			for i := range tt.want {
				if i < len(got) && tt.want[i].ID == "" {
					if !madeUpID.MatchString(got[i].ID) {
						t.Errorf("made-up id %q", got[i].ID)
					}
					tt.want[i].ID = got[i].ID
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("tool calls:\n got %+v\nwant %+v", got, tt.want)
			}

			// The next request must carry every call, typed, whatever the server
			// sent (openai-go's ToParam would send "tool_calls":[null] here).
			req.Messages = append(req.Messages, resp.Message)
			for _, c := range resp.Message.ToolCalls {
				req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Content: "r"})
			}
			if _, err := m.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			var wantCalls []map[string]any
			for _, c := range tt.want {
				wantCalls = append(wantCalls, map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
			}
			want, _ := json.Marshal(map[string]any{"role": "assistant", "tool_calls": wantCalls})
			jsonEqual(t, "assistant message", s.body(t, 1)["messages"].([]any)[2], string(want))
		})
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		name   string
		events []string
		want   model.Message
		deltas []string
		finish model.FinishReason
		usage  model.Usage
	}{
		{
			name: "text",
			events: []string{
				chunk(`{"role":"assistant","content":""}`, ""),
				chunk(`{"content":"Hel"}`, ""),
				chunk(`{"content":"lo, "}`, ""),
				chunk(`{"content":"world."}`, ""),
				chunk(`{}`, "stop"),
				usageChunk,
				"[DONE]",
			},
			want:   model.Message{Role: model.RoleAssistant, Content: "Hello, world."},
			deltas: []string{"Hel", "lo, ", "world."},
			finish: "stop",
			usage:  model.Usage{PromptTokens: 11, CompletionTokens: 9, TotalTokens: 20},
		},
		{
			name: "tool calls with arguments split over chunks",
			events: []string{
				chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":1,"id":"call_s2","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"ty\":\"Rome\"}"}}]}`, ""),
				chunk(`{}`, "tool_calls"),
				usageChunk,
				"[DONE]",
			},
			want: model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
				{ID: "call_s1", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
				{ID: "call_s2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			}},
			finish: "tool_calls",
			usage:  model.Usage{PromptTokens: 11, CompletionTokens: 9, TotalTokens: 20},
		},
		{
			name: "whole tool calls without index or type, finish on the last, no usage, no DONE",
			events: []string{
				chunk(`{"content":"Checking."}`, ""),
				chunk(`{"tool_calls":[{"id":"a","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, ""),
				chunk(`{"tool_calls":[{"id":"b","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}`, "tool_calls"),
			},
			want: model.Message{Role: model.RoleAssistant, Content: "Checking.", ToolCalls: []model.ToolCall{
				{ID: "a", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
				{ID: "b", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			}},
			deltas: []string{"Checking."},
			finish: "tool_calls",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, sse(tt.events...))
			m := newModel(t, s)
			req := userAsks("q")
			req.Tools = []model.ToolDef{weatherTool}
			var deltas []string
			req.OnDelta = func(d string) { deltas = append(deltas, d) }

			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp.Message, tt.want) {
				t.Errorf("message:\n got %+v\nwant %+v", resp.Message, tt.want)
			}
			if !reflect.DeepEqual(deltas, tt.deltas) {
				t.Errorf("deltas %q, want %q", deltas, tt.deltas)
			}
			if resp.FinishReason != tt.finish || resp.Usage != tt.usage || resp.Model != "gpt-test-0613" {
				t.Errorf("finish %q usage %+v model %q", resp.FinishReason, resp.Usage, resp.Model)
			}
			body := s.body(t, 0)
			jsonEqual(t, "stream", body["stream"], `true`)
			jsonEqual(t, "stream_options", body["stream_options"], `{"include_usage":true}`)
		})
	}
}

func TestStreamFailures(t *testing.T) {
	start := []string{
		chunk(`{"role":"assistant","content":"Let me check."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]}`, ""),
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string // in the error message
	}{
		{
			name:    "cut off in the arguments, no finish_reason or DONE",
			handler: sse(start...),
			want:    "no finish_reason",
		},
		{
			name: "connection dropped in the middle of a chunk",
			handler: func(w http.ResponseWriter, r *http.Request) {
				sse(start...)(w, r)
				io.WriteString(w, `data: {"id":"c1","choices":[{"index":0,"delta":{"tool_`)
				w.(http.Flusher).Flush()
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
			},
			want: "model error",
		},
		{
			name:    "error chunk",
			handler: sse(append(start, `{"error":{"message":"overloaded, key `+testKey+`","type":"server_error"}}`)...),
			want:    "overloaded",
		},
		{
			name:    "a JSON answer to a stream request",
			handler: completion("stop", `{"role":"assistant","content":"hi"}`),
			want:    `did not stream (Content-Type "application/json")`,
		},
		{
			name:    "tool call cut off at max_tokens",
			handler: sse(append(start, chunk(`{}`, "length"), "[DONE]")...),
			want:    "cut off at max_tokens",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.handler)
			m := newModel(t, s)
			req := userAsks("q")
			var deltas []string
			req.OnDelta = func(d string) { deltas = append(deltas, d) }
			resp, err := m.Complete(context.Background(), req)
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			if resp != nil {
				t.Errorf("a response came with the error: %+v", resp)
			}
			if me := modelError(t, err); me.Status != 0 {
				t.Errorf("status %d", me.Status)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if s.count() != 1 {
				t.Errorf("server saw %d requests; a broken stream is not retried", s.count())
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	ok := completion("stop", `{"role":"assistant","content":"fine"}`)
	tests := []struct {
		name     string
		stream   bool
		replies  []http.HandlerFunc
		status   int // 0: success
		requests int
		want     string // in the error message
	}{
		{
			name:     "429 then success",
			replies:  []http.HandlerFunc{reply(429, `{"error":{"message":"slow down"}}`, "Retry-After", "0"), ok},
			requests: 2,
		},
		{
			name:   "429 then success, streamed",
			stream: true,
			replies: []http.HandlerFunc{reply(429, `{"error":{"message":"slow down"}}`, "Retry-After", "0"),
				sse(chunk(`{"content":"fine"}`, "stop"), "[DONE]")},
			requests: 2,
		},
		{
			name:     "persistent 500",
			replies:  []http.HandlerFunc{reply(500, `{"error":{"message":"boom","type":"server_error"}}`, "Retry-After", "0")},
			status:   500,
			requests: 2,
			want:     "Internal Server Error: boom",
		},
		{
			name:     "persistent 503, streamed",
			stream:   true,
			replies:  []http.HandlerFunc{reply(503, `<html>upstream down</html>`, "Retry-After", "0")},
			status:   503,
			requests: 2,
			want:     "upstream down",
		},
		{
			name:     "401 is not retried",
			replies:  []http.HandlerFunc{reply(401, `{"error":{"message":"Incorrect API key provided: `+testKey+`","code":"invalid_api_key"}}`)},
			status:   401,
			requests: 1,
			want:     "refused the API key: Unauthorized: Incorrect API key provided: [redacted]",
		},
		{
			name: "404 names the model and the server",
			replies: []http.HandlerFunc{reply(404, `{"error":{"message":"The model `+"`gpt-test`"+` does not exist or you do not have access to it.",`+
				`"type":"invalid_request_error","param":null,"code":"model_not_found"}}`)},
			status:   404,
			requests: 1,
			want:     `model "gpt-test" does not exist at http://127.0.0.1:`,
		},
		{
			name:     "Ollama-style error body",
			replies:  []http.HandlerFunc{reply(404, `{"error":"model \"gpt-test\" not found, try pulling it first"}`)},
			status:   404,
			requests: 1,
			want:     `model "gpt-test" not found`,
		},
		{
			name:     "FastAPI-style error body",
			replies:  []http.HandlerFunc{reply(400, `{"detail":"messages: field required"}`)},
			status:   400,
			requests: 1,
			want:     "Bad Request: messages: field required",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.replies...)
			m := newModel(t, s)
			req := userAsks("q")
			if tt.stream {
				req.OnDelta = func(string) {}
			}
			start := time.Now()
			resp, err := m.Complete(context.Background(), req)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s; Retry-After: 0 should retry at once", d)
			}
			if s.count() != tt.requests {
				t.Errorf("server saw %d requests, want %d", s.count(), tt.requests)
			}
			if tt.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Content != "fine" {
					t.Errorf("content %q", resp.Message.Content)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			if me := modelError(t, err); me.Status != tt.status {
				t.Errorf("status %d, want %d (%v)", me.Status, tt.status, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestTruncatedToolCall(t *testing.T) {
	s := newServer(t, completion("length", `{"role":"assistant","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Pa"}}]}`))
	_, err := newModel(t, s).Complete(context.Background(), userAsks("q"))
	if err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Fatalf("error %v, want the arguments cut off", err)
	}
	modelError(t, err)
}

func TestJSONSchema(t *testing.T) {
	s := newServer(t, completion("stop", `{"role":"assistant","content":"{\"passed\":true,\"missing\":[]}"}`))
	req := userAsks("judge this")
	req.JSONSchema = &model.JSONSchemaFormat{Name: "verdict", Schema: map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"passed", "missing"},
		"properties": map[string]any{
			"passed":  map[string]any{"type": "boolean"},
			"missing": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
	}}
	resp, err := newModel(t, s).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != `{"passed":true,"missing":[]}` {
		t.Errorf("content %q", resp.Message.Content)
	}
	jsonEqual(t, "response_format", s.body(t, 0)["response_format"], `{"type":"json_schema","json_schema":{
		"name":"verdict","strict":true,"schema":{"type":"object","additionalProperties":false,
		"required":["passed","missing"],"properties":{"passed":{"type":"boolean"},
		"missing":{"type":"array","items":{"type":"string"}}}}}}`)
}

func TestSettings(t *testing.T) {
	// The process environment must not leak in: openai-go's NewClient reads these.
	t.Setenv("OPENAI_API_KEY", "process-key")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/process/")
	t.Setenv("OPENAI_ORG_ID", "process-org")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Process: yes")

	s := newServer(t, completion("stop", `{"role":"assistant","content":"ok"}`))
	full := map[string]string{
		"MY_KEY":          "my-key",
		"LLM_BASE_URL":    s.URL + "/llm",
		"LLM_API_KEY":     "llm-key",
		"LLM_MODEL_NAME":  "llm-model",
		"OPENAI_BASE_URL": s.URL + "/openai",
		"OPENAI_API_KEY":  "openai-key",
	}
	tests := []struct {
		name      string
		spec      spec.Model
		env       map[string]string
		wantPath  string
		wantAuth  string
		wantModel string
	}{
		{
			name:      "spec wins over the environment",
			spec:      spec.Model{Name: "spec-model", BaseURL: s.URL + "/spec/", APIKeyEnv: "MY_KEY"},
			env:       full,
			wantPath:  "/spec/chat/completions",
			wantAuth:  "Bearer my-key",
			wantModel: "spec-model",
		},
		{
			name:      "LLM_* before OPENAI_*",
			env:       full,
			wantPath:  "/llm/chat/completions",
			wantAuth:  "Bearer llm-key",
			wantModel: "llm-model",
		},
		{
			name: "OPENAI_* last",
			env: map[string]string{"LLM_MODEL_NAME": "llm-model", "OPENAI_BASE_URL": s.URL + "/openai",
				"OPENAI_API_KEY": "openai-key", "LLM_BASE_URL": "", "LLM_API_KEY": ""},
			wantPath:  "/openai/chat/completions",
			wantAuth:  "Bearer openai-key",
			wantModel: "llm-model",
		},
		{
			name:      "no key: no Authorization header",
			spec:      spec.Model{Name: "m", BaseURL: s.URL},
			wantPath:  "/chat/completions",
			wantModel: "m",
		},
		{
			name:      "a named key variable that is unset has no fallback",
			spec:      spec.Model{Name: "m", BaseURL: s.URL, APIKeyEnv: "UNSET_KEY"},
			env:       full,
			wantPath:  "/chat/completions",
			wantModel: "m",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.spec, mapEnv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Complete(context.Background(), userAsks("q")); err != nil {
				t.Fatal(err)
			}
			req := s.request(t, i)
			if req.path != tt.wantPath {
				t.Errorf("path %q, want %q", req.path, tt.wantPath)
			}
			if got := req.header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tt.wantAuth)
			}
			for _, h := range []string{"OpenAI-Organization", "X-Process"} {
				if v := req.header.Get(h); v != "" {
					t.Errorf("header %s: %q came from the process environment", h, v)
				}
			}
			if got := s.body(t, i)["model"]; got != tt.wantModel {
				t.Errorf("model %v, want %q", got, tt.wantModel)
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		m, err := New(spec.Model{Name: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.BaseURL() != DefaultBaseURL || m.Name() != "m" || m.timeout != spec.DefaultModelTimeout {
			t.Errorf("base URL %q, name %q, timeout %s", m.BaseURL(), m.Name(), m.timeout)
		}
	})

	bad := []struct {
		name string
		spec spec.Model
		want string
	}{
		{"no model name", spec.Model{}, "no model name"},
		{"base URL without scheme", spec.Model{Name: "m", BaseURL: "localhost:8080/v1"}, "not an http(s) URL"},
		{"negative retries", spec.Model{Name: "m", Retries: ptr(-1)}, "negative retries"},
		{"other provider", spec.Model{Name: "m", Provider: "script"}, "not openai"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.spec, mapEnv(map[string]string{"OPENAI_API_KEY": testKey}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error carries the key: %v", err)
			}
		})
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	// A transport error names the URL; a key put into the URL is redacted too.
	m, err := New(spec.Model{Name: "m", BaseURL: "http://127.0.0.1:1/" + testKey + "/", Retries: ptr(0)},
		mapEnv(map[string]string{"OPENAI_API_KEY": testKey}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(context.Background(), userAsks("q"))
	if err == nil {
		t.Fatal("no error from a closed port")
	}
	if me := modelError(t, err); me.Status != 0 {
		t.Errorf("status %d for a connection failure", me.Status)
	}
}

// hang answers nothing until the client goes away.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

func TestContextCanceled(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		sse(chunk(`{"content":"Hel"}`, ""))(w, r)
		<-r.Context().Done()
	}
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		stream  bool
	}{
		{"waiting for the answer", hang, false},
		{"waiting for the headers of a stream", hang, true},
		{"in the middle of a stream", stall, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.handler)
			m := newModel(t, s)
			req := userAsks("q")
			if tt.stream {
				req.OnDelta = func(string) {}
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			_, err := m.Complete(ctx, req)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			var me *model.Error
			if errors.As(err, &me) {
				t.Errorf("cancellation was wrapped: %v", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("returned after %s", d)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		sse(chunk(`{"content":"Hel"}`, ""))(w, r)
		<-r.Context().Done()
	}
	// Every gap is shorter than the timeout, the whole is not.
	slow := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{chunk(`{"content":"a"}`, ""), chunk(`{"content":"b"}`, ""), chunk(`{}`, "stop"), "[DONE]"} {
			time.Sleep(30 * time.Millisecond)
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}
	// Headers at once, then nothing.
	silent := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
	// A JSON body that arrives a byte every 10ms.
	trickle := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for _, b := range []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`) {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for _, tt := range []struct {
		name     string
		handler  http.HandlerFunc
		stream   bool
		requests int
		want     string // in the error message
	}{
		{"an attempt that times out is retried", hang, false, 3, "no answer within the 80ms timeout"},
		{"a stream without headers is retried", hang, true, 3, "no answer within the 80ms timeout"},
		{"a stream that stalls fails", stall, true, 1, "the stream did not finish within 80ms (model.timeout)"},
		{"a silent stream fails", silent, true, 1, "no data came from the stream within 80ms (model.timeout)"},
		{"a stream longer than the timeout fails, though no gap is", slow, true, 1, "the stream did not finish within 80ms"},
		{"an answer that trickles in fails", trickle, false, 1, "no answer within the 80ms timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.handler)
			// The SDK backs off 0.5s after a connection failure; cap it.
			m, err := build(spec.Model{Name: "m", BaseURL: s.URL, Timeout: spec.Duration{Duration: 80 * time.Millisecond}},
				nil, option.WithMaxRetryDelay(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			req := userAsks("q")
			if tt.stream {
				req.OnDelta = func(string) {}
			}
			_, err = m.Complete(context.Background(), req)
			if s.count() != tt.requests {
				t.Errorf("server saw %d requests, want %d", s.count(), tt.requests)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			modelError(t, err)
		})
	}
}

func TestUnknownRole(t *testing.T) {
	s := newServer(t, completion("stop", `{"role":"assistant","content":"ok"}`))
	_, err := newModel(t, s).Complete(context.Background(), &model.Request{
		Messages: []model.Message{{Role: "developer", Content: "x"}}})
	if err == nil || !strings.Contains(err.Error(), `unknown role "developer"`) {
		t.Fatalf("error %v", err)
	}
	if s.count() != 0 {
		t.Errorf("a bad request was sent")
	}
}

// A response refused after it arrived (a tool call cut off at max_tokens) was still
// billed: the error carries its usage, so the run counts what it spent.
func TestTruncatedToolCallKeepsItsUsage(t *testing.T) {
	s := newServer(t, completion("length", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"id\":\"A"}}]}`))
	m := newModel(t, s)
	_, err := m.Complete(context.Background(), userAsks("q"))
	me := modelError(t, err)
	if !strings.Contains(err.Error(), "cut off at max_tokens") {
		t.Fatalf("error %v", err)
	}
	if me.Usage.PromptTokens != 20 || me.Usage.CompletionTokens != 5 || me.Usage.TotalTokens != 25 {
		t.Errorf("usage %+v, want the response's 20/5/25", me.Usage)
	}
}
