// Package openaitest is an OpenAI-compatible chat completions server for tests: it
// speaks the wire format (JSON and server-sent events, tool_calls, usage, errors),
// answers from a function of the request, can take its time, and tells when a
// client went away before its answer.
package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Request is what the server received.
type Request struct {
	Body     map[string]any
	Messages []map[string]any
	// Judge marks a request for structured output (the judge's, the classifier's).
	Judge  bool
	Stream bool
}

// Reply is one answer: text, tool calls, or an HTTP error status.
type Reply struct {
	Content   string // with ToolCalls: what the model says before it calls them
	ToolCalls []ToolCall
	Status    int // non-zero: answer with this status and an OpenAI error body
}

// ToolCall is a call the model asks for.
type ToolCall struct{ ID, Name, Arguments string }

// Server is the fake. Its zero value is not usable; see New.
type Server struct {
	URL string
	// Latency delays every answer; a client that leaves meanwhile is counted by
	// Canceled and gets nothing.
	Latency time.Duration

	reply    func(Request) Reply
	srv      *httptest.Server
	mu       sync.Mutex
	requests []Request
	canceled atomic.Int64
}

// New starts a server that answers with reply; it stops when the test ends.
func New(t testing.TB, reply func(Request) Reply) *Server {
	s := &Server{reply: reply}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Requests returns a copy of the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Canceled counts requests whose client went away before their answer.
func (s *Server) Canceled() int { return int(s.canceled.Load()) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	req := Request{Body: body}
	if msgs, ok := body["messages"].([]any); ok {
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok {
				req.Messages = append(req.Messages, mm)
			}
		}
	}
	_, req.Judge = body["response_format"]
	req.Stream, _ = body["stream"].(bool)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	s.mu.Unlock()
	if s.Latency > 0 {
		select {
		case <-time.After(s.Latency):
		case <-r.Context().Done():
			s.canceled.Add(1)
			return
		}
	}
	rep := s.reply(req)
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		fmt.Fprintf(w, `{"error":{"message":"status %d from the fake model","type":"server_error","param":null,"code":null}}`, rep.Status)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
		var calls []any
		for i, c := range rep.ToolCalls {
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", n, i)
			}
			calls = append(calls, map[string]any{"index": i, "id": id, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
		if rep.Content == "" {
			msg["content"] = nil
		}
	}
	usage := map[string]any{"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
	id := fmt.Sprintf("chatcmpl-fake-%d", n)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "message": msg}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant"}, nil))
	if rep.Content != "" { // text first, as models say what they do before they call a tool
		send(chunk(map[string]any{"content": rep.Content}, nil))
	}
	if calls, ok := msg["tool_calls"]; ok {
		send(chunk(map[string]any{"tool_calls": calls}, nil))
	}
	send(chunk(map[string]any{}, finish))
	send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": "fake", "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}
