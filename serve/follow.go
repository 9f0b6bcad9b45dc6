package serve

import (
	"context"
	"time"

	"github.com/agentrun/agentrun/runtime"
)

// follow passes a run's events after sequence number after to each, a batch at a
// time as they come (first is the sequence number of events[0]), and calls idle
// at every heartbeat while none come, for a stream's keep-alive. It returns the
// sequence number of the last event passed, and true once the run's execution is
// over; false when ctx ended or each or idle returned false first.
//
// Every protocol's stream (the run API's, chat completions, Responses, A2A,
// AG-UI, MCP progress) is this loop with its own encoding of the events.
func follow(ctx context.Context, rec *runRecord, after int, each func(events []runtime.Event, first int) bool, idle func() bool) (int, bool) {
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		events, last, finished, changed := rec.since(after)
		if len(events) > 0 && !each(events, last-len(events)+1) {
			return after, false
		}
		after = last
		if finished {
			return after, true
		}
		select {
		case <-ctx.Done():
			return after, false
		case <-changed:
		case <-tick.C:
			if !idle() {
				return after, false
			}
		}
	}
}
