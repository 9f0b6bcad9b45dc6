package serve

import (
	"testing"

	"github.com/agentrun/agentrun/runtime"
)

// A run keeps its last maxRunEvents events whatever its readers do: a reader that
// fell behind resumes from the oldest kept, with the right sequence numbers, and
// the run never waits for it.
func TestRunEventsAreBounded(t *testing.T) {
	r := newRunRecord("run_1", "a", "u", "", func() {})
	const n = 3*maxRunEvents + 17
	for i := range n {
		r.Observe(runtime.Event{Kind: runtime.EventToolCall, Tool: "t", Turn: i + 1})
	}
	if len(r.events) < maxRunEvents || len(r.events) >= 2*maxRunEvents {
		t.Fatalf("%d events kept, want %d to %d", len(r.events), maxRunEvents, 2*maxRunEvents-1)
	}
	events, last, done, _ := r.since(0) // a reader from the start
	if last != n || done || len(events) != len(r.events) || events[0].Turn != n-len(r.events)+1 {
		t.Fatalf("since(0): %d events, last %d, first turn %d", len(events), last, events[0].Turn)
	}
	events, last, _, _ = r.since(n - 5) // a reader five behind
	if len(events) != 5 || last != n || events[0].Turn != n-4 {
		t.Fatalf("since(n-5): %d events, last %d", len(events), last)
	}
	r.finish(&runtime.Result{Stop: runtime.StopCompleted}, nil)
	if _, _, done, _ := r.since(n); !done {
		t.Fatal("a finished run is not done")
	}
	select {
	case <-r.done:
	default:
		t.Fatal("done is not closed")
	}
}

// A full registry drops its oldest finished runs in one sweep, never a run in
// flight, and another user's run is not found.
func TestRunRegistryBounds(t *testing.T) {
	g := newRunRegistry()
	running := newRunRecord("running", "a", "u", "", func() {})
	g.add(running)
	for range maxRuns - 1 {
		r := newRunRecord(newID("run_"), "a", "u", "", func() {})
		r.finish(&runtime.Result{}, nil)
		g.add(r)
	}
	g.add(newRunRecord("next", "a", "u", "", func() {}))
	if n := len(g.runs); n > maxRuns*9/10+1 || n < maxRuns*9/10-1 {
		t.Fatalf("%d runs after a sweep, want about %d", n, maxRuns*9/10)
	}
	if g.get("running", "u") == nil || g.get("next", "u") == nil {
		t.Fatal("a run in flight was dropped")
	}
	if g.get("running", "someone-else") != nil {
		t.Fatal("another user's run was found")
	}
}

// Streamed text is kept a few tokens to an event, in order, and what waits is
// kept before the next other event and before the run's end: a long answer does
// not crowd the run's other events out.
func TestRunTextIsKeptInChunks(t *testing.T) {
	r := newRunRecord("run_1", "a", "u", "", func() {})
	var want string
	for i := range 400 {
		token := string(rune('a'+i%26)) + "·"
		want += token
		r.text(token)
	}
	r.Observe(runtime.Event{Kind: runtime.EventModelResponse})
	r.text("tail")
	r.finish(&runtime.Result{Stop: runtime.StopCompleted}, nil)
	var got string
	texts := 0
	for i, e := range r.events {
		if e.Kind == runtime.EventText {
			got += e.Text
			texts++
		}
		if e.Kind == runtime.EventModelResponse && got != want {
			t.Fatalf("event %d: the model response came before the text that preceded it", i)
		}
	}
	if got != want+"tail" || texts > 400*len("a·")/textChunk+2 {
		t.Errorf("%d text events holding %q", texts, got)
	}
}
