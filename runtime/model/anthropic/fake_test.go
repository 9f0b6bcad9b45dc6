package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-ant-api03-test-0123456789secret"

// fakeAPI is the Messages API at a network boundary: reply i answers request i
// (the last repeats), with recorded bytes in the documented shapes. Before it
// answers, it checks the request as the real API does and answers 400 with the
// API's error shape when
//   - a tool_use has no tool_result in the user message right after it,
//   - a thinking block sent back differs from the one it sent (text or
//     signature), or a redacted_thinking block's data does,
//   - thinking is on and the last assistant message, which made tool calls, does
//     not start with its thinking block.
type fakeAPI struct {
	*httptest.Server
	t        *testing.T
	replies  []reply
	mu       sync.Mutex
	requests []recorded
	// What it sent: thinking text by signature, redacted data.
	thinking map[string]string
	redacted map[string]bool
}

type recorded struct {
	header http.Header
	body   []byte
	at     time.Time
}

// reply is one answer: a status, headers, and a body from testdata or inline.
type reply struct {
	status  int
	headers map[string]string
	file    string
	body    string
}

func sse(file string) reply { return reply{status: 200, file: file} }
func msg(file string) reply { return reply{status: 200, file: file} }

// apiError is an error in the API's shape.
func apiError(status int, typ, message string, headers map[string]string) reply {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
	return reply{status: status, headers: headers, body: string(b)}
}

func newFake(t *testing.T, replies ...reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, replies: replies, thinking: map[string]string{}, redacted: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, recorded{header: r.Header.Clone(), body: body, at: time.Now()})
	f.mu.Unlock()
	if r.URL.Path != "/v1/messages" || r.Method != http.MethodPost {
		writeReply(w, apiError(404, "not_found_error", "Not found: "+r.URL.Path, nil), nil)
		return
	}
	if problem := f.check(body); problem != "" {
		writeReply(w, apiError(400, "invalid_request_error", problem, nil), nil)
		return
	}
	rep := f.replies[min(n, len(f.replies)-1)]
	var data []byte
	if rep.file != "" {
		var err error
		if data, err = os.ReadFile(filepath.Join("testdata", rep.file)); err != nil {
			f.t.Errorf("fake: %v", err)
		}
		f.learn(rep.file, data)
	}
	writeReply(w, rep, data)
}

func writeReply(w http.ResponseWriter, rep reply, data []byte) {
	if data == nil {
		data = []byte(rep.body)
	}
	ct := "application/json"
	if strings.HasSuffix(rep.file, ".sse") {
		ct = "text/event-stream; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("request-id", "req_011CTest")
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	w.Write(data)
}

// learn records the thinking blocks of a reply, as the real API can verify its
// signatures.
func (f *fakeAPI) learn(file string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.HasSuffix(file, ".sse") {
		var m struct{ Content []wireBlock }
		json.Unmarshal(data, &m)
		for _, b := range m.Content {
			f.note(b)
		}
		return
	}
	blocks := map[int]*wireBlock{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string
			Index        int
			ContentBlock wireBlock `json:"content_block"`
			Delta        struct{ Type, Thinking, Signature string }
		}
		json.Unmarshal([]byte(line), &ev)
		switch ev.Type {
		case "content_block_start":
			b := ev.ContentBlock
			blocks[ev.Index] = &b
		case "content_block_delta":
			if b := blocks[ev.Index]; b != nil {
				b.Thinking += ev.Delta.Thinking
				b.Signature += ev.Delta.Signature
			}
		case "content_block_stop":
			if b := blocks[ev.Index]; b != nil {
				f.note(*b)
			}
		}
	}
}

func (f *fakeAPI) note(b wireBlock) {
	switch b.Type {
	case "thinking":
		f.thinking[b.Signature] = b.Thinking
	case "redacted_thinking":
		f.redacted[b.Data] = true
	}
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

type wireRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Thinking  *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// check is what the real API refuses, in its words, or "".
func (f *fakeAPI) check(body []byte) string {
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "The request body is not valid JSON: " + err.Error()
	}
	if req.Model == "" || req.MaxTokens <= 0 || len(req.Messages) == 0 {
		return "model, max_tokens and messages: Field required"
	}
	thinkingOn := req.Thinking != nil && req.Thinking.Type == "enabled"
	if thinkingOn && req.Thinking.BudgetTokens >= req.MaxTokens {
		return "`max_tokens` must be greater than `thinking.budget_tokens`"
	}
	msgs := make([][]wireBlock, len(req.Messages))
	for i, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			msgs[i] = []wireBlock{{Type: "text", Text: s}}
		} else if err := json.Unmarshal(m.Content, &msgs[i]); err != nil {
			return fmt.Sprintf("messages.%d.content: %v", i, err)
		}
	}
	lastAssistant := -1
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
			if p := f.checkAssistant(i, msgs, req.Messages[min(i+1, len(msgs)-1)].Role); p != "" {
				return p
			}
		}
	}
	if thinkingOn && lastAssistant >= 0 {
		blocks := msgs[lastAssistant]
		uses := false
		for _, b := range blocks {
			uses = uses || b.Type == "tool_use"
		}
		if uses && blocks[0].Type != "thinking" && blocks[0].Type != "redacted_thinking" {
			return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).", lastAssistant, blocks[0].Type)
		}
	}
	return ""
}

func (f *fakeAPI) checkAssistant(i int, msgs [][]wireBlock, nextRole string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	results := map[string]bool{}
	if i+1 < len(msgs) && nextRole == "user" {
		for _, b := range msgs[i+1] {
			if b.Type == "tool_result" {
				results[b.ToolUseID] = true
			}
		}
	}
	for j, b := range msgs[i] {
		switch b.Type {
		case "tool_use":
			if i+1 < len(msgs) && !results[b.ID] {
				return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, b.ID)
			}
		case "thinking":
			if text, ok := f.thinking[b.Signature]; !ok || text != b.Thinking {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		case "redacted_thinking":
			if !f.redacted[b.Data] {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `data` in `redacted_thinking` block", i, j)
			}
		}
	}
	return ""
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeAPI) request(t *testing.T, i int) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.requests) {
		t.Fatalf("the server saw %d requests, want request %d", len(f.requests), i)
	}
	return f.requests[i]
}

// body decodes request i's JSON body.
func (f *fakeAPI) body(t *testing.T, i int) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(f.request(t, i).body, &m); err != nil {
		t.Fatalf("request %d body: %v", i, err)
	}
	return m
}
