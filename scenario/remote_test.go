package scenario

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// A case mocks a remote agent (agents[].a2a) like a tool: the mock answers the
// model's call, and a call no mock matches fails the call, not the test run.
func TestACaseMocksARemoteAgent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("agent.yaml", `version: 1
name: desk
instructions: Help the user.
agents:
  - name: refunds
    description: Refunds orders.
    a2a: {url: "https://agents.example/refunds", auth: {token_env: REFUNDS_TOKEN}}
`)
	write("agent.test.yaml", `agent: agent.yaml
cases:
  - name: mocked
    input: Refund A1
    mocks: [{tool: refunds, args: {task: Refund A1}, result: Refunded A1.}]
    model:
      - tool_calls: [{name: refunds, arguments: {task: Refund A1}}]
      - text: Your order A1 is refunded.
    expect:
      calls: [{tool: refunds, outcome: ok}]
      answer: {contains: refunded}
  - name: not mocked
    input: Refund A2
    model:
      - tool_calls: [{name: refunds, arguments: {task: Refund A2}}]
      - text: Sorry.
    expect:
      calls: [{tool: refunds, outcome: error}]
`)
	loader, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	f := RunFile(context.Background(), filepath.Join(dir, "agent.test.yaml"), Options{Loader: loader, Registry: func() tool.Registry { return tool.Registry{} }})
	if f.Failed() {
		var b strings.Builder
		for _, c := range f.Cases {
			b.WriteString(c.Case + ": " + strings.Join(c.Failures, "; ") + "\n")
		}
		t.Fatalf("%v\n%s", f.Diagnostics, b.String())
	}
	if got := strings.Join(f.Cases[1].Trajectory, "\n"); !strings.Contains(got, "the remote agent refunds is not reached in tests: mock it") {
		t.Errorf("the unmocked case's trajectory:\n%s", got)
	}
}
