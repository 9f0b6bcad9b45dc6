package temporal_test

import (
	"context"
	"testing"

	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/runtime/tool"
	"go.temporal.io/server/temporaltest"
)

// deskScript is four model calls: three tool rounds and the answer.
func deskScript() model.Model {
	return offline.NewScript("desk", []offline.ScriptTurn{
		{ToolCalls: []offline.ScriptToolCall{{ID: "c1", Name: "lookup", Arguments: map[string]any{"order": "A1"}}}},
		{ToolCalls: []offline.ScriptToolCall{{ID: "c2", Name: "create_ticket", Arguments: map[string]any{"order": "A1", "text": "broken"}}}},
		{ToolCalls: []offline.ScriptToolCall{{ID: "c3", Name: "lookup", Arguments: map[string]any{"order": "A2"}}}},
		{Text: "Done."},
	})
}

// BenchmarkRun is one run of four model calls and three tool calls (an http
// backend on loopback), in process and as a workflow on the embedded server:
// the difference is what durability costs a run.
func BenchmarkRun(b *testing.B) {
	desktest.NewBackend(b)
	req := runtime.Request{Input: "file it", User: tool.User{ID: "u-1"}}
	b.Run("in_process", func(b *testing.B) {
		for b.Loop() {
			a := compileWith(b, deskSpec, deskScript())
			if res, err := a.Run(context.Background(), req); err != nil || res.Stop != runtime.StopCompleted {
				b.Fatal(err, res.Stop)
			}
		}
	})
	b.Run("temporal", func(b *testing.B) {
		ts := temporaltest.NewServer() // WithT takes only a *testing.T
		defer ts.Stop()
		c := ts.GetDefaultClient()
		var m model.Model
		w := newWorker(b, c, "bench", compileWith(b, deskSpec, modelFunc(func(ctx context.Context, r *model.Request) (*model.Response, error) {
			return m.Complete(ctx, r)
		})))
		defer w.Stop()
		starter := compileWith(b, deskSpec, nil)
		for b.Loop() {
			m = deskScript()
			run, err := temporal.Start(context.Background(), c, "bench", starter, req, temporal.StartOptions{})
			if err != nil {
				b.Fatal(err)
			}
			res, err := temporal.Follow(context.Background(), c, run, temporal.FollowOptions{})
			if err != nil || res.Stop != runtime.StopCompleted {
				b.Fatal(err, res)
			}
		}
	})
}
