// Package desktest is the world of the durable-run tests: a ticket desk's
// backend that files each ticket once per idempotency key, and a model that
// makes four calls (look A1 up, file a ticket, look A2 up, answer).
package desktest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/openaitest"
)

// Answer is the model's last answer.
const Answer = "Filed a ticket for A1; A2 was delivered."

// Manual is the desk's manual: 300 KB, more than a history should hold inline.
var Manual = strings.Repeat("Tickets are filed within a day. ", 300<<10/32)

// Backend is the desk's service. BACKEND names it for the spec.
type Backend struct {
	mu       sync.Mutex
	lookups  int
	filed    map[string]string // idempotency key → ticket
	requests int               // ticket requests, retries included
	onTicket func()
}

// NewBackend starts the service and sets BACKEND for the test.
func NewBackend(t testing.TB) *Backend {
	b := &Backend{filed: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	t.Setenv("BACKEND", srv.URL)
	return b
}

func (b *Backend) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/orders/"):
		b.mu.Lock()
		b.lookups++
		b.mu.Unlock()
		fmt.Fprintf(w, `{"order":%q,"status":"delivered"}`, strings.TrimPrefix(r.URL.Path, "/orders/"))
	case r.URL.Path == "/manual":
		w.Write([]byte(Manual))
	case r.URL.Path == "/tickets":
		key := r.Header.Get("Idempotency-Key")
		b.mu.Lock()
		b.requests++
		ticket, done := b.filed[key]
		if !done {
			ticket = fmt.Sprintf("T-%d", len(b.filed)+1)
			b.filed[key] = ticket
		}
		hook := b.onTicket
		b.onTicket = nil
		b.mu.Unlock()
		if hook != nil {
			hook()
		}
		fmt.Fprintf(w, `{"ticket":%q}`, ticket)
	default:
		http.NotFound(w, r)
	}
}

// OnFirstTicket runs hook when the next ticket request arrives, before it is
// answered (after it was filed).
func (b *Backend) OnFirstTicket(hook func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onTicket = hook
}

// Counts are the lookups, the tickets filed and the ticket requests so far.
func (b *Backend) Counts() (lookups, filed, requests int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lookups, len(b.filed), b.requests
}

// Keys are the idempotency keys tickets were filed under.
func (b *Backend) Keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for k := range b.filed {
		keys = append(keys, k)
	}
	return keys
}

// Reset forgets the tickets filed.
func (b *Backend) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.filed = map[string]string{}
	b.requests = 0
}

// Model answers as the desk's model: one call a response, by the tool results
// the request holds, then Answer.
func Model(req openaitest.Request) openaitest.Reply {
	results := 0
	for _, m := range req.Messages {
		if m["role"] == "tool" {
			results++
		}
	}
	switch results {
	case 0:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"order":"A1"}`}}}
	case 1:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_2", Name: "create_ticket", Arguments: `{"order":"A1","text":"Arrived broken"}`}}}
	case 2:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_3", Name: "lookup", Arguments: `{"order":"A2"}`}}}
	}
	return openaitest.Reply{Content: Answer}
}

// Start starts the desk's model (Model) and its backend, and points the
// desk's spec at them: LLM_BASE_URL, LLM_API_KEY and BACKEND, for the test.
func Start(t testing.TB) (*openaitest.Server, *Backend) {
	model := openaitest.New(t, Model)
	t.Setenv("LLM_BASE_URL", model.URL)
	t.Setenv("LLM_API_KEY", "sk-test")
	return model, NewBackend(t)
}
