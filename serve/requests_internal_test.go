package serve

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

// The model requests runs keep are bounded per request, per run and for the
// server, and a run dropped from the registry gives its bytes back.
func TestKeptRequestsAreBounded(t *testing.T) {
	var budget atomic.Int64
	g := newRunRegistry()
	r := newRunRecord("run_1", "a", "u", "", func() {})
	r.keepRequests, r.keptBytes = true, &budget
	g.add(r)
	request := func(content string) runtime.Event {
		return runtime.Event{Kind: runtime.EventModelRequest, Sent: []model.Message{{Role: model.RoleUser, Content: content}},
			Offered: []string{"t"}}
	}
	r.Observe(request(strings.Repeat("x", maxKeptRequest+1)))
	if _, kept := r.request(1); kept || budget.Load() != 0 {
		t.Errorf("a request over %d bytes was kept (budget %d)", maxKeptRequest, budget.Load())
	}
	r.Observe(request("hello"))
	k, kept := r.request(2)
	if !kept || !strings.Contains(string(k.messages), "hello") || budget.Load() != int64(len(k.messages)) {
		t.Fatalf("a small request: kept %v, budget %d", kept, budget.Load())
	}
	if r.events[1].Sent != nil {
		t.Error("the event kept holds the request's messages")
	}
	used := budget.Load()
	budget.Add(maxKeptBytes - used) // the server's other runs keep the rest
	r.Observe(request("again"))
	if _, kept := r.request(3); kept {
		t.Error("a request was kept past the server's budget")
	}
	budget.Add(used - maxKeptBytes)
	g.mu.Lock()
	g.deleteLocked(r.ID)
	g.mu.Unlock()
	if budget.Load() != 0 {
		t.Errorf("a dropped run left %d bytes in the budget", budget.Load())
	}
}

// A request's files and opaque reasoning blocks are not kept.
func TestKeptRequestsLeaveOutFileBytes(t *testing.T) {
	data := sentJSON([]model.Message{
		{Role: model.RoleUser, Content: "look", Parts: []model.Part{{Kind: model.PartImage, MediaType: "image/png", Data: []byte("PNGDATA")}}},
		{Role: model.RoleAssistant, Reasoning: &model.Reasoning{Field: "thinking", Text: "hm", Blocks: []json.RawMessage{json.RawMessage(`"SIGNED"`)}}},
	})
	if s := string(data); strings.Contains(s, "UE5HREFUQQ") || strings.Contains(s, "SIGNED") || !strings.Contains(s, `"size":7`) || !strings.Contains(s, `"hm"`) {
		t.Errorf("kept %s", s)
	}
}
