package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// A delegated sub-run sees the entities its caller revealed earlier in the run.
func TestSubAgentSeesWhatTheRunRevealed(t *testing.T) {
	parent := `
version: 1
name: desk
instructions: You run the help desk.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
`
	sub := loadSpec(t, `
version: 1
name: refunds
instructions: You handle refunds.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
  - name: refund
    parameters: {type: object, properties: {order: {type: string}}, required: [order]}
    http: {url: "https://example.com/refund"}
    accept: args.order in seen("orders")
`)
	model := &stubModel{agent: []stubReply{
		stubCall("p-1", "list_orders", `{}`),
		stubCall("p-2", "refunds", task("Refund order A1.")),
		stubCall("s-1", "refund", `{"order":"A1"}`),
		stubSay("sub done"),
		stubSay("parent done"),
	}}
	refund := echo()
	tools := map[string]*funcTool{
		"list_orders": {fn: func(context.Context, tool.Input) (string, error) { return `{"orders":[{"number":"A1"}]}`, nil }},
		"refund":      refund,
	}
	a := compileWith(t, parent, withRefunds(sub), runtime.Options{Model: model, Store: memory.New()}, tools)
	res, events := runAgent(t, context.Background(), a, "refund A1")
	for _, e := range events {
		if e.Kind == runtime.EventToolRefused {
			t.Logf("refused at depth %d: %s %s", e.Depth, e.Tool, e.Error)
		}
	}
	t.Logf("stop %s, refund calls %d, sub answer %q", res.Stop, refund.calls.Load(), res.Steps[1].Result)
	if refund.calls.Load() == 0 {
		t.Errorf("the sub-agent's accept rule refused A1, which the parent revealed in this run")
	}
}

// Parallel sub-agent calls cannot both take the caller's last turn: each turn is
// checked and counted in one step.
func TestParallelSubAgentsShareMaxTurns(t *testing.T) {
	var mu sync.Mutex
	arrived := 0
	gate := make(chan struct{})
	obs := runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventGuard && e.Depth == 1 && strings.Contains(e.Message, "max_cost is not checked") {
			mu.Lock()
			arrived++
			if arrived == 2 {
				close(gate)
			}
			mu.Unlock()
			<-gate // both sub-runs have passed overTurns before either charges its turn
		}
	})
	sub := loadSpec(t, specialistSpec)
	sub.Guards.MaxCost = 5
	model := &stubModel{agent: []stubReply{
		{calls: []model.ToolCall{{ID: "c1", Name: "refunds", Arguments: task("one")}, {ID: "c2", Name: "refunds", Arguments: task("two")}}},
		stubSay("sub answer"), stubSay("sub answer"),
		stubSay("parent answer"),
	}}
	a := compileWith(t, parentSpec+"guards: {max_turns: 2}\n", withRefunds(sub), runtime.Options{Model: model}, map[string]*funcTool{"lookup": echo(), "refund": echo()})
	res, err := a.Run(context.Background(), runtime.Request{Input: "x", User: tool.User{ID: "u-1"}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stop %s (%s); model agent calls %d", res.Stop, res.Detail, len(model.agentReqs))
	if len(model.agentReqs) > 2 {
		t.Errorf("%d model calls under the parent's max_turns 2", len(model.agentReqs))
	}
}

// A run resumed after a pause still counts its sub-runs' model calls toward max_turns.
func TestResumeCountsSubRunTurns(t *testing.T) {
	parent := parentSpec + `  - name: cancel
    parameters: {type: object, properties: {n: {type: string}}}
    http: {url: "https://example.com/c"}
    approval: {message: "ok?"}
approval: {timeout: 1h}
guards: {max_turns: 3}
`
	sub := loadSpec(t, specialistSpec)
	model := &stubModel{agent: []stubReply{
		{calls: []model.ToolCall{{ID: "c1", Name: "refunds", Arguments: task("one")}, {ID: "c2", Name: "cancel", Arguments: `{"n":"1"}`}}},
		stubCall("s-1", "refund", `{"order":"A1"}`),
		stubSay("sub answer"),
		stubSay("parent answer after resume"),
	}}
	store := memory.New()
	a := compileWith(t, parent, withRefunds(sub), runtime.Options{Model: model, Store: store}, map[string]*funcTool{"lookup": echo(), "refund": echo(), "cancel": echo()})
	res, _ := runAgent(t, context.Background(), a, "do it")
	if res.Stop != runtime.StopAwaitingApproval {
		t.Fatalf("stop %s %s", res.Stop, res.Detail)
	}
	if _, err := runtime.Decide(context.Background(), a.PausedRuns(), res.RunID, runtime.Decider{ID: "u-1"}, runtime.DecideRequest{CallID: "c2", Approve: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	out, err := a.Resume(context.Background(), runtime.ResumeRequest{RunID: res.RunID, Decider: runtime.Decider{ID: "u-1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed: stop %s (%s), model calls %d", out.Stop, out.Detail, len(model.agentReqs))
	if len(model.agentReqs) > 3 {
		t.Errorf("%d model calls in all under max_turns 3: the sub-run's 2 were forgotten on resume", len(model.agentReqs))
	}
}

// tool_result filters and max_tool_output apply to a sub-agent's answer like to any
// tool's result.
func TestToolResultFiltersApplyToSubAgents(t *testing.T) {
	sub := loadSpec(t, specialistSpec)
	model := &stubModel{agent: []stubReply{
		stubCall("c-sub", "refunds", task("Refund A1")),
		stubSay("Refunded. Call me on 13812345678."),
		stubSay("done"),
	}}
	a := compileWith(t, parentSpec+`
filters:
  - {on: tool_result, redact: '\b1\d{10}\b'}
guards: {max_tool_output: 10}
`, withRefunds(sub), runtime.Options{Model: model}, map[string]*funcTool{"lookup": echo(), "refund": echo()})
	runAgent(t, context.Background(), a, "refund")
	seen := model.agentReqs[2].Messages
	last := seen[len(seen)-1].Content
	if strings.Contains(last, "13812345678") || !strings.HasPrefix(last, "Refunded.") || !strings.Contains(last, "[output truncated") {
		t.Errorf("the parent's model got the sub-agent's result as %q: want it redacted and cut", last)
	}
}

// Two update_plan calls in one response apply in call order, whatever the scheduling.
func TestPlanUpdatesApplyInCallOrder(t *testing.T) {
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		model := &stubModel{agent: []stubReply{
			{calls: []model.ToolCall{
				{ID: "p1", Name: "update_plan", Arguments: `{"steps":[{"step":"a","status":"pending"}]}`},
				{ID: "p2", Name: "update_plan", Arguments: `{"steps":[{"step":"a","status":"done"}]}`},
			}},
			stubSay("answer"),
		}}
		a := compileWith(t, parentSpec+"plan: {}\n", nil, runtime.Options{Model: model}, map[string]*funcTool{"lookup": echo()})
		res, _ := runAgent(t, context.Background(), a, "x")
		key := string(res.Stop)
		if len(res.Plan) > 0 {
			key += "/" + string(res.Plan[0].Status)
		}
		counts[key]++
	}
	if counts["completed/done"] != 30 {
		t.Errorf("outcomes over 30 runs: %v, want the second update applied last every time", counts)
	}
}

var _ = fmt.Sprint

// An answer a sub-agent's user-bound tool went into is learned for its user only,
// never served to another.
func TestCacheLearnsSubAgentAnswersPerUser(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"help.faq.yaml": helpFAQ, "delivery.md": helpArticle} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "orders.yaml"), []byte(`version: 1
name: orders
description: Looks up the user's orders.
instructions: You look up orders.
tools:
  - name: my_orders
    bind: {user: user.id}
    http: {url: "https://example.com/orders"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	src := `version: 1
name: shop
instructions: You help customers of the shop.
agents:
  - {name: order_agent, spec: ./orders.yaml}
knowledge:
  collections:
    help: {sources: ["*.md", "*.faq.yaml"]}
routing: {recognizer: rules}
intents:
  orders:
    kind: knowledge
    keywords: [my order]
    tools: [order_agent]
    cache: {learn: true}
`
	s := loadSpecIn(t, dir, src)
	_, help := indexHelp(t, dir, s)
	m := &stubModel{agent: []stubReply{
		stubCall("1", "order_agent", task("list the user's orders")),
		stubCall("s1", "my_orders", `{}`),
		stubSay("alice's order 1234 arrives at noon"),
		stubSay("Your order 1234 arrives at noon."),
	}}
	reg := tool.Registry{"http": func(st *spec.Tool, dir string) (tool.Tool, error) { return echo(), nil }}
	a, cd := runtime.Compile(s, runtime.Options{Tools: reg, Model: m, Store: memory.New(),
		Knowledge: help, Version: "v1"})
	if cd.HasErrors() {
		t.Fatalf("compile: %v", cd)
	}
	res, _ := runAs(t, a, "alice", "c1", "where is my order")
	t.Logf("alice: stop %s learned %+v", res.Stop, res.Learned)
	bob, _ := runAs(t, a, "bob", "c2", "where is my order")
	t.Logf("bob: cache %s answer %q", bob.Cache, bob.Answer)
	if res.Learned == nil || !res.Learned.PerUser {
		t.Errorf("alice's answer was learned as %+v, want for her alone", res.Learned)
	}
	if bob.Cache == runtime.CacheHitOutcome && strings.Contains(bob.Answer, "1234") {
		t.Errorf("bob was served alice's answer, learned for everyone")
	}
}

// Three sub-agents in parallel beside a plan update, with collect and fact rules, a
// judge, a token budget and a shared store: for the race detector.
func TestParallelSubAgentsRace(t *testing.T) {
	sub := loadSpec(t, `
version: 1
name: refunds
instructions: You handle refunds.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
  - name: refund
    parameters: {type: object, properties: {order: {type: string}}, required: [order]}
    bind: {user_id: user.id}
    http: {url: "https://example.com/refund"}
    accept: args.order in seen("orders")
memory:
  facts:
    from_tools:
      - {on: refund, append: {notes: '"refunded " + args.order'}}
judge: {criteria: [ok]}
guards: {max_tokens: 100000}
`)
	replies := []stubReply{{calls: []model.ToolCall{
		{ID: "c1", Name: "refunds", Arguments: task("one")},
		{ID: "c2", Name: "refunds", Arguments: task("two")},
		{ID: "c3", Name: "refunds", Arguments: task("three")},
		{ID: "p", Name: "update_plan", Arguments: `{"steps":[{"step":"a","status":"done"}]}`},
	}}}
	for range 3 {
		replies = append(replies, stubCall("x", "list_orders", `{}`))
	}
	for range 3 {
		replies = append(replies, stubCall("y", "refund", `{"order":"A1"}`))
	}
	for range 3 {
		replies = append(replies, stubSay("ok"))
	}
	replies = append(replies, stubSay("final"))
	model := &stubModel{agent: replies, judge: []stubReply{stubVerdict(true, ""), stubVerdict(true, ""), stubVerdict(true, "")}}
	tools := map[string]*funcTool{
		"lookup":      echo(),
		"list_orders": {fn: func(context.Context, tool.Input) (string, error) { return `{"orders":[{"number":"A1"}]}`, nil }},
		"refund":      echo(),
	}
	a := compileWith(t, parentSpec+"plan: {}\nguards: {max_tokens: 200000}\n", withRefunds(sub), runtime.Options{Model: model, Store: memory.New()}, tools)
	res, _ := runAgent(t, context.Background(), a, "go")
	t.Logf("stop %s (%s) usage %+v", res.Stop, res.Detail, res.Usage)
}

// concurrencyModel answers the desk (offered the refunds tool) by calling two
// sub-agents at once, then by text; it answers the sub-agents after a pause, and
// records how many of their calls were in flight at the same time.
type concurrencyModel struct {
	mu             sync.Mutex
	deskCalls      int
	inFlight, most int
	subCalls       int
}

func (m *concurrencyModel) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	usage := model.Usage{TotalTokens: 100}
	if slices.ContainsFunc(req.Tools, func(d model.ToolDef) bool { return d.Name == "refunds" }) {
		m.mu.Lock()
		m.deskCalls++
		first := m.deskCalls == 1
		m.mu.Unlock()
		if first {
			return &model.Response{Usage: usage, Message: model.Message{ToolCalls: []model.ToolCall{
				{ID: "c1", Name: "refunds", Arguments: task("one")}, {ID: "c2", Name: "refunds", Arguments: task("two")}}}}, nil
		}
		return &model.Response{Usage: usage, Message: model.Message{Content: "done"}}, nil
	}
	m.mu.Lock()
	m.subCalls++
	m.inFlight++
	m.most = max(m.most, m.inFlight)
	m.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	m.mu.Lock()
	m.inFlight--
	m.mu.Unlock()
	return &model.Response{Usage: usage, Message: model.Message{Content: "refunded"}}, nil
}

// A caller's token budget holds the worst case of every model call in flight, its
// sub-runs' included: when it leaves room for one call, parallel sub-agents cannot
// both spend it.
func TestParallelSubAgentsShareTheBudget(t *testing.T) {
	sub := loadSpec(t, "version: 1\nname: refunds\ninstructions: You handle refunds.\n")
	model := &concurrencyModel{}
	// A call's worst case is its prompt (a few dozen tokens) and 4096 out: 6000
	// leaves room for one at a time, not two.
	a := compileWith(t, parentSpec+"guards: {max_tokens: 6000}\n", withRefunds(sub), runtime.Options{Model: model}, map[string]*funcTool{"lookup": echo()})
	for range 5 {
		model.deskCalls, model.subCalls, model.most = 0, 0, 0
		res, _ := runAgent(t, context.Background(), a, "refund both")
		if model.most > 1 {
			t.Fatalf("%d sub-agent model calls were in flight at once under a budget for one", model.most)
		}
		if res.Usage.TotalTokens > 6000 {
			t.Fatalf("the run used %d tokens of max_tokens 6000", res.Usage.TotalTokens)
		}
		if model.subCalls == 0 {
			t.Fatalf("no sub-agent call was made: stop %s (%s)", res.Stop, res.Detail)
		}
	}
}
