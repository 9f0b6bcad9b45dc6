package scenario

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

	agent "github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// approvalsAgent has a tool that never asks (lookup), one that asks with a message
// (delete_item) and one that always asks (refund). ON_TIMEOUT is replaced.
const approvalsAgent = `version: 1
name: approvals
instructions: Help the user.
approval: {timeout: 1h, on_timeout: ON_TIMEOUT}
tools:
  - name: lookup
    description: Look an item up.
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://items.example/{{ args.id }}"}
  - name: delete_item
    description: Delete an item.
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://items.example/{{ args.id }}", method: DELETE}
    approval: {message: "Delete {{ args.id }}?"}
  - name: refund
    description: Refund an order.
    parameters: {type: object, properties: {order: {type: string}}, required: [order]}
    http: {url: "https://shop.example/{{ args.order }}/refund", method: POST}
    approval: always
`

// countingTools answers every http tool with "done TOOL" and counts its calls.
type countingTools struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingTools) registry() tool.Registry {
	return tool.Registry{"http": func(t *spec.Tool, _ string) (tool.Tool, error) {
		return toolFunc(func(_ context.Context, in tool.Input) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.calls == nil {
				c.calls = map[string]int{}
			}
			c.calls[in.Name]++
			return "done " + in.Name, nil
		}), nil
	}}
}

type toolFunc func(context.Context, tool.Input) (string, error)

func (f toolFunc) Call(ctx context.Context, in tool.Input) (string, error) { return f(ctx, in) }

// runApprovalCases writes the agent (with on_timeout) and the cases beside it and
// runs them.
func runApprovalCases(t *testing.T, onTimeout, cases string) (File, *countingTools) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("agent.yaml", strings.Replace(approvalsAgent, "ON_TIMEOUT", onTimeout, 1))
	write("agent.test.yaml", "agent: agent.yaml\ncases:\n"+cases)
	loader, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	tools := &countingTools{}
	return RunFile(context.Background(), filepath.Join(dir, "agent.test.yaml"), Options{Loader: loader, Registry: tools.registry}), tools
}

// The runner decides the calls a paused run waits on with the case's approvals,
// resumes it, and checks the expectations against the run as a whole.
func TestApprovals(t *testing.T) {
	tests := []struct {
		name      string
		onTimeout string // default reject
		cases     string
		failures  []string
		// trajectory is the report of the case's run (shown for failures).
		trajectory []string
		// calls counts the tools' real calls.
		calls map[string]int
	}{
		{
			name: "approve",
			cases: `
  - name: c
    input: delete x
    model:
      - tool_calls: [{id: del, name: delete_item, arguments: {id: x}}]
      - text: Deleted x.
    approvals: [{decision: approve, tool: delete_item, call: del}]
    expect:
      approvals: [delete_item]
      calls: [{tool: delete_item, args: {id: x}, outcome: ok}]
      stop: completed
      answer: {equals: Deleted x.}
`,
			trajectory: []string{
				"approval delete_item (del): approved by test-user",
				`1. delete_item {"id":"x"} → ok`,
				`stop completed: "Deleted x."`,
			},
			calls: map[string]int{"delete_item": 1},
		},
		{
			name: "reject by an approver, with a reason",
			cases: `
  - name: c
    input: refund A1
    user: {id: u-1}
    model:
      - tool_calls: [{id: r, name: refund, arguments: {order: A1}}]
      - text: The refund was rejected.
    approvals: [{decision: reject, by: boss, reason: Refunds need a receipt.}]
    expect:
      approvals: [refund]
      calls: [{tool: refund, outcome: rejected}]
      not_called: [refund]
      stop: completed
`,
			trajectory: []string{
				"approval refund (r): rejected by boss: Refunds need a receipt.",
				`1. refund {"order":"A1"} → rejected: Rejected: refund was not run: an approver (boss) rejected it. Reason: Refunds need a receipt. Do not call it again with …`,
				`stop completed: "The refund was rejected."`,
			},
			calls: map[string]int{},
		},
		{
			name: "expire: on_timeout reject",
			cases: `
  - name: c
    input: refund A1
    model:
      - tool_calls: [{id: r, name: refund, arguments: {order: A1}}]
      - text: Nobody approved the refund in time.
    approvals: [{decision: expire}]
    expect:
      calls: [{tool: refund, outcome: rejected}]
      stop: completed
`,
			trajectory: []string{
				"approval refund (r): expired",
				`1. refund {"order":"A1"} → rejected: Rejected: refund was not run: it needed a person's approval and nobody approved it in time. Do not call it again; tell t…`,
				`stop completed: "Nobody approved the refund in time."`,
			},
			calls: map[string]int{},
		},
		{
			name:      "expire: on_timeout stop",
			onTimeout: "stop",
			cases: `
  - name: c
    input: refund A1
    model:
      - tool_calls: [{id: r, name: refund, arguments: {order: A1}}]
    approvals: [{decision: expire, tool: refund}]
    expect:
      calls: [{tool: refund, outcome: rejected}]
      stop: approval_timeout
`,
			trajectory: []string{
				"approval refund (r): expired",
				`1. refund {"order":"A1"} → rejected: Not run: the run ended before a decision.`,
				`stop approval_timeout: "I could not complete this request automatically. Please rephrase it or add details."`,
			},
			calls: map[string]int{},
		},
		{
			name: "two calls wait in one response: decisions in the run's order",
			cases: `
  - name: c
    input: delete x and y
    model:
      - tool_calls: [{id: a, name: delete_item, arguments: {id: x}}, {id: b, name: delete_item, arguments: {id: y}}]
      - text: Deleted x, kept y.
    approvals:
      - {decision: approve, call: a}
      - {decision: reject, call: b, reason: keep y}
    expect:
      approvals: [delete_item, delete_item]
      calls: [{tool: delete_item, args: {id: x}, outcome: ok}, {tool: delete_item, args: {id: y}, outcome: rejected}]
      order: exact
`,
			trajectory: []string{
				"approval delete_item (a): approved by test-user",
				`1. delete_item {"id":"x"} → ok`,
				"approval delete_item (b): rejected by test-user: keep y",
				`2. delete_item {"id":"y"} → rejected: Rejected: delete_item was not run: the user rejected it. Reason: keep y. Do not call it again with the same arguments; t…`,
				`stop completed: "Deleted x, kept y."`,
			},
			calls: map[string]int{"delete_item": 1},
		},
		{
			name: "a run that pauses twice takes the decisions in turn",
			cases: `
  - name: c
    input: delete x, then refund A1
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
      - tool_calls: [{id: r, name: refund, arguments: {order: A1}}]
      - text: Deleted x; the refund was rejected.
    approvals:
      - {decision: approve, tool: delete_item}
      - {decision: reject, tool: refund}
    expect:
      approvals: [delete_item, refund]
      calls: [{tool: delete_item, outcome: ok}, {tool: refund, outcome: rejected}]
      order: exact
      stop: completed
`,
			trajectory: []string{
				"approval delete_item (d): approved by test-user",
				`1. delete_item {"id":"x"} → ok`,
				"approval refund (r): rejected by test-user",
				`2. refund {"order":"A1"} → rejected: Rejected: refund was not run: the user rejected it. Do not call it again with the same arguments; tell the user, or do w…`,
				`stop completed: "Deleted x; the refund was rejected."`,
			},
			calls: map[string]int{"delete_item": 1},
		},
		{
			name: "a call beside one that waits runs once, before the pause",
			cases: `
  - name: c
    input: look x up and delete it
    model:
      - tool_calls: [{id: l, name: lookup, arguments: {id: x}}, {id: d, name: delete_item, arguments: {id: x}}]
      - text: Looked up and deleted x.
    approvals: [{decision: approve}]
    expect:
      calls: [{tool: lookup, outcome: ok}, {tool: delete_item, outcome: ok}]
      order: exact
`,
			trajectory: []string{
				`1. lookup {"id":"x"} → ok`,
				"approval delete_item (d): approved by test-user",
				`2. delete_item {"id":"x"} → ok`,
				`stop completed: "Looked up and deleted x."`,
			},
			calls: map[string]int{"lookup": 1, "delete_item": 1},
		},
		{
			name: "decisions run out: the pause is the result",
			cases: `
  - name: c
    input: delete x, then refund A1
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
      - tool_calls: [{id: r, name: refund, arguments: {order: A1}}]
    approvals: [{decision: approve}]
    expect:
      approvals: [delete_item, refund]
      stop: awaiting_approval
`,
			trajectory: []string{
				"approval delete_item (d): approved by test-user",
				`1. delete_item {"id":"x"} → ok`,
				"approval refund (r): waiting",
				`stop awaiting_approval: ""`,
			},
			calls: map[string]int{"delete_item": 1},
		},
		{
			name: "a run left waiting that the case does not expect fails",
			cases: `
  - name: c
    input: delete x
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
`,
			failures: []string{
				"the run is left waiting for approval of delete_item (d): give the case approvals: to decide, or expect stop: awaiting_approval",
			},
			trajectory: []string{
				"approval delete_item (d): waiting: Delete x?",
				`stop awaiting_approval: ""`,
			},
			calls: map[string]int{},
		},
		{
			name: "unused decisions fail",
			cases: `
  - name: c
    input: delete x
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
      - text: Deleted x.
    approvals: [{decision: approve}, {decision: approve}, {decision: reject}]
`,
			failures: []string{"approvals: 2 decision(s) left unused: it stopped with completed"},
			trajectory: []string{
				"approval delete_item (d): approved by test-user",
				`1. delete_item {"id":"x"} → ok`,
				`stop completed: "Deleted x."`,
			},
			calls: map[string]int{"delete_item": 1},
		},
		{
			name: "decisions for a run that never waits fail",
			cases: `
  - name: c
    input: look x up
    model:
      - tool_calls: [{name: lookup, arguments: {id: x}}]
      - text: Found x.
    approvals: [{decision: approve}]
    expect: {approvals: []}
`,
			failures: []string{"approvals: 1 decision(s) left unused: it never waited for approval (it stopped with completed)"},
			trajectory: []string{
				`1. lookup {"id":"x"} → ok`,
				`stop completed: "Found x."`,
			},
			calls: map[string]int{"lookup": 1},
		},
		{
			name: "a decision for another tool fails",
			cases: `
  - name: c
    input: delete x
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
      - text: Deleted x.
    approvals: [{decision: approve, tool: refund}]
    expect: {stop: awaiting_approval}
`,
			failures: []string{"approvals[0] (approve refund): the run waits on a call of delete_item (d), not of refund"},
			trajectory: []string{
				"approval delete_item (d): waiting: Delete x?",
				`stop awaiting_approval: ""`,
			},
			calls: map[string]int{},
		},
		{
			name: "a decision for another call fails",
			cases: `
  - name: c
    input: delete x
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
    approvals: [{decision: reject, call: other}]
    expect: {stop: awaiting_approval}
`,
			failures: []string{"approvals[0] (reject): the run waits on call d (delete_item), not on other"},
			trajectory: []string{
				"approval delete_item (d): waiting: Delete x?",
				`stop awaiting_approval: ""`,
			},
			calls: map[string]int{},
		},
		{
			name: "expectations that differ",
			cases: `
  - name: c
    input: delete x
    model:
      - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
      - text: Not deleted.
    approvals: [{decision: reject}]
    expect:
      approvals: [refund]
      calls: [{tool: delete_item, outcome: ok}]
`,
			failures: []string{
				"calls (in_order) differ:\n  expected:\n    - delete_item → ok\n  actual:\n    - delete_item {\"id\":\"x\"} → rejected",
				"approvals: expected approval asked for refund, got delete_item",
			},
			trajectory: []string{
				"approval delete_item (d): rejected by test-user",
				`1. delete_item {"id":"x"} → rejected: Rejected: delete_item was not run: the user rejected it. Do not call it again with the same arguments; tell the user, or…`,
				`stop completed: "Not deleted."`,
			},
			calls: map[string]int{},
		},
		{
			name: "each turn decides its own pauses",
			cases: `
  - name: c
    turns:
      - input: delete x
        model:
          - tool_calls: [{id: d, name: delete_item, arguments: {id: x}}]
          - text: Deleted x.
        approvals: [{decision: approve}]
        expect: {approvals: [delete_item], calls: [{tool: delete_item, outcome: ok}]}
      - input: refund A1
        model:
          - tool_calls: [{id: r, name: refund, arguments: {order: A1}}]
          - text: Not refunded.
        approvals: [{decision: expire}]
        expect: {approvals: [refund], calls: [{tool: refund, outcome: rejected}], history_turns: 2}
`,
			trajectory: []string{
				`turn 1: "delete x"`,
				"approval delete_item (d): approved by test-user",
				`1. delete_item {"id":"x"} → ok`,
				`stop completed: "Deleted x."`,
				`turn 2: "refund A1"`,
				"approval refund (r): expired",
				`1. refund {"order":"A1"} → rejected: Rejected: refund was not run: it needed a person's approval and nobody approved it in time. Do not call it again; tell t…`,
				`stop completed: "Not refunded."`,
			},
			calls: map[string]int{"delete_item": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file, tools := runApprovalCases(t, cmpOr(tt.onTimeout, "reject"), tt.cases)
			if len(file.Diagnostics) > 0 || len(file.Cases) != 1 {
				t.Fatalf("diagnostics %v, %d cases", file.Diagnostics, len(file.Cases))
			}
			got := file.Cases[0]
			if got.Passed != (len(tt.failures) == 0) || !slices.Equal(got.Failures, tt.failures) {
				t.Errorf("passed %v, failures\n%q\nwant\n%q", got.Passed, got.Failures, tt.failures)
			}
			if !slices.Equal(got.Trajectory, tt.trajectory) {
				t.Errorf("trajectory\n%s\nwant\n%s", strings.Join(got.Trajectory, "\n"), strings.Join(tt.trajectory, "\n"))
			}
			tools.mu.Lock()
			defer tools.mu.Unlock()
			for _, name := range []string{"lookup", "delete_item", "refund"} {
				if tools.calls[name] != tt.calls[name] {
					t.Errorf("%s ran %d times, want %d", name, tools.calls[name], tt.calls[name])
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// A test file's approvals are checked as it loads: an expire decision takes neither
// reason nor approver, a multi-turn case decides in its turns, decisions are from
// the vocabulary.
func TestApprovalsLoadChecks(t *testing.T) {
	file, _ := runApprovalCases(t, "reject", `
  - name: expire with a reason
    input: x
    approvals: [{decision: expire, reason: late, by: boss}]
  - name: turns
    approvals: [{decision: approve}]
    turns: [{input: x, approvals: [{decision: aprove}]}]
`)
	checkDiagnostics(t, file, []string{
		"6:36 cases[0].approvals[0].reason: reason does not go with decision expire (expire means nobody decides: the agent's approval.on_timeout does)",
		"6:50 cases[0].approvals[0].by: by does not go with decision expire (expire means nobody decides: the agent's approval.on_timeout does)",
		"8:5 cases[1].approvals: approvals belongs to the turns of a multi-turn case (put it in each turn)",
		`9:47 cases[1].turns[0].approvals[0].decision: "aprove" is not one of: approve, reject, expire (did you mean "approve"?)`,
	})
}

// The tools a test file's approvals name must exist in the agent and ask for
// approval.
func TestApprovalsCheckedAgainstTheAgent(t *testing.T) {
	file, _ := runApprovalCases(t, "reject", `
  - name: unknown tool
    input: x
    approvals: [{decision: approve, tool: refnd}]
    expect: {approvals: [delete_itm]}
  - name: a tool that never asks
    turns:
      - input: x
        approvals: [{decision: approve, tool: lookup}]
        expect: {approvals: [lookup]}
`)
	checkDiagnostics(t, file, []string{
		`6:43 cases[0].approvals[0].tool: the agent has no tool "refnd" (did you mean "refund"?)`,
		`7:26 cases[0].expect.approvals[0]: the agent has no tool "delete_itm" (did you mean "delete_item"?)`,
		`11:47 cases[1].turns[0].approvals[0].tool: tool "lookup" never asks for approval: it has no approval rule (the tools that ask for approval: delete_item, refund)`,
		`12:30 cases[1].turns[0].expect.approvals[0]: tool "lookup" never asks for approval: it has no approval rule (the tools that ask for approval: delete_item, refund)`,
	})
}

func checkDiagnostics(t *testing.T, file File, want []string) {
	t.Helper()
	got := []string{}
	for _, d := range file.Diagnostics {
		got = append(got, fmt.Sprintf("%d:%d %s: %s (%s)", d.Pos.Line, d.Pos.Col, d.Path, d.Message, d.Hint))
	}
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(file.Cases) > 0 {
		t.Errorf("%d cases ran", len(file.Cases))
	}
}

// settle gives the waiting calls their decisions and resumes: a call that ran
// before the pause is not run again, and the tool messages keep the calls' order.
func TestSettleKeepsCallOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(approvalsAgent, "ON_TIMEOUT", "reject", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	loader, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	res := loader.LoadFile(path)
	if res.Diagnostics.HasErrors() {
		t.Fatal(res.Diagnostics)
	}
	tools := &countingTools{}
	clk := &clock{now: time.Now()}
	script := offline.NewScript("settle", []offline.ScriptTurn{
		{ToolCalls: []offline.ScriptToolCall{{ID: "d", Name: "delete_item", Arguments: map[string]any{"id": "x"}}, {ID: "l", Name: "lookup", Arguments: map[string]any{"id": "x"}}, {ID: "r", Name: "refund", Arguments: map[string]any{"order": "A1"}}}},
		{Text: "done"},
	})
	a, diags := agent.Compile(res.Spec, agent.Options{Tools: tools.registry(), Model: script, Store: memory.New(), Now: clk.Now})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := context.Background()
	first, err := a.Run(ctx, agent.Request{Input: "go", User: tool.User{ID: "u"}, Conversation: "c"})
	if err != nil || first.Stop != agent.StopAwaitingApproval || tools.calls["lookup"] != 1 {
		t.Fatalf("first execution: %v, stop %s, calls %v", err, first.Stop, tools.calls)
	}
	final, problems := settle(ctx, a, first, []spec.TestApproval{{Decision: spec.DecisionApprove}, {Decision: spec.DecisionReject}}, "u", clk, nil)
	if len(problems) > 0 || final.Stop != agent.StopCompleted {
		t.Fatalf("settle: %v, stop %s (%s)", problems, final.Stop, final.Detail)
	}
	if want := map[string]int{"delete_item": 1, "lookup": 1}; len(tools.calls) != 2 || tools.calls["delete_item"] != 1 || tools.calls["lookup"] != 1 {
		t.Errorf("calls %v, want %v", tools.calls, want)
	}
	var order []string
	for _, m := range final.Messages {
		if m.Role == model.RoleTool {
			order = append(order, m.ToolCallID)
		}
	}
	if !slices.Equal(order, []string{"d", "l", "r"}) {
		t.Errorf("tool messages for %v, want d, l, r", order)
	}
}
