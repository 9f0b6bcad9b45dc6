package runtime_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
)

// keyRecorder is a tool that keeps the idempotency key of every call it gets.
func keyRecorder() (*funcTool, func() []string) {
	var mu sync.Mutex
	var keys []string
	return &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, in.IdempotencyKey)
			return "created", nil
		}}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(keys)
		}
}

// A model server that reuses call ids (call_0 every turn, even twice in one
// response) must not make two calls share a key: a service deduping on it would
// drop the second order as a retry of the first. The keys are also the same when
// the same run is played again (a replay).
func TestIdempotencyKeysAreUniquePerCall(t *testing.T) {
	const src = `
version: 1
name: orders
instructions: Order things.
tools:
  - name: create_order
    parameters: {type: object, properties: {item: {type: string}}, required: [item]}
    http: {url: "https://example.com/orders", method: POST}
guards: {max_turns: 5}
`
	order := func(id, item string) offline.ScriptToolCall {
		return offline.ScriptToolCall{ID: id, Name: "create_order", Arguments: map[string]any{"item": item}}
	}
	play := func() []string {
		tool, keys := keyRecorder()
		model := script(calls(order("call_0", "tea")), calls(order("call_0", "rice")),
			calls(order("call_0", "soy"), order("call_0", "miso")), say("Four orders."))
		agent := compile(t, src, model, map[string]*funcTool{"create_order": tool})
		res, err := agent.Run(context.Background(), runtime.Request{Input: "order", RunID: "run_fixed"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stop != runtime.StopCompleted {
			t.Fatalf("stop %s: %s", res.Stop, res.Detail)
		}
		return keys()
	}
	first := play()
	if len(first) != 4 {
		t.Fatalf("keys %q: want 4 calls", first)
	}
	sorted := slices.Sorted(slices.Values(first))
	if len(slices.Compact(sorted)) != 4 {
		t.Fatalf("keys %q: two calls share a key", first)
	}
	for _, k := range first {
		if len(k) <= len("run_fixed/") || k[:len("run_fixed/")] != "run_fixed/" {
			t.Fatalf("key %q does not name the run", k)
		}
	}
	again := play()
	slices.Sort(again)
	if !slices.Equal(sorted, again) {
		t.Fatalf("the same run played again gave keys %q, first %q", again, sorted)
	}
}

// An approved call runs on resume with the key it would have had without waiting:
// the run, the turn and the place in the response that asked for it.
func TestApprovedCallKeepsItsKey(t *testing.T) {
	f := newApprovalFixture(t, memory.New(), say("Order A2 is cancelled."))
	cancel, keys := keyRecorder()
	f.tools["cancel"] = cancel
	f.agent = f.compile(t)
	res := f.start(t, runtime.Request{})
	if res.Stop != runtime.StopAwaitingApproval {
		t.Fatalf("stop %s", res.Stop)
	}
	decide(t, f, res.RunID, runtime.DecideRequest{CallID: "call_c", Approve: true, ArgsHash: res.Pending[0].ArgsHash})
	f.agent = f.compile(t) // another process
	out, err := f.agent.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: owner})
	if err != nil || out.Stop != runtime.StopCompleted {
		t.Fatalf("resumed: %v, %+v", err, out)
	}
	if got, want := keys(), []string{res.RunID + "/2/1/call_c"}; !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
}

// Two delegations under one reused call id are two sub-runs with ids of their own:
// their calls' keys derive from those ids.
func TestSubRunsOfReusedCallIDsAreApart(t *testing.T) {
	f := newSubAgentFixture(t, "", "", nil,
		stubCall("c-sub", "refunds", task("Refund order A1.")),
		stubCall("s-1", "refund", `{"order":"A1"}`),
		stubSay("Order A1 is refunded."),
		stubCall("c-sub", "refunds", task("Refund order A2.")),
		stubCall("s-1", "refund", `{"order":"A2"}`),
		stubSay("Order A2 is refunded."),
		stubSay("Both are refunded."),
	)
	res, _ := runAgent(t, context.Background(), f.agent, "Please refund A1 and A2")
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 2 {
		t.Fatalf("stop %s (%s), steps %+v", res.Stop, res.Detail, res.Steps)
	}
	first, second := res.Steps[0].Agent, res.Steps[1].Agent
	if first == nil || second == nil || first.RunID == "" || first.RunID == second.RunID {
		t.Fatalf("sub-runs %+v and %+v: want two ids", first, second)
	}
}
