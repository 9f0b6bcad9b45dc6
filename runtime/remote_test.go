package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/tool"
)

const remoteSpec = `
version: 1
name: desk
instructions: You run the help desk.
agents:
  - name: refunds
    description: Refunds orders.
    a2a: {url: "https://agents.example/refunds", timeout: 5s}
`

// remoteRefunds is a remote agent's tool that answers each task after telling
// the run about its task, and fails a task that starts with "fail".
func remoteRefunds(runs *[]string) *funcTool {
	return &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
		*runs = append(*runs, in.Run)
		in.ReportRemoteTask(tool.RemoteTask{Host: "agents.example", Task: "t-1", Context: "ctx-1", State: "working"})
		task, _ := in.Args["task"].(string)
		if strings.HasPrefix(task, "fail") {
			in.ReportRemoteTask(tool.RemoteTask{Host: "agents.example", Task: "t-1", Context: "ctx-1", State: "failed"})
			return "", errors.New("the remote agent refunds failed the task: down")
		}
		in.ReportRemoteTask(tool.RemoteTask{Host: "agents.example", Task: "t-1", Context: "ctx-1", State: "completed"})
		return "Refunded: " + task, nil
	}}
}

// A remote agent is a tool of the run: the model's call reaches the tool the
// assembly gave (with the run's id), its answer is the call's result, and what
// it reports of its task are remote_agent events under the call.
func TestARemoteAgentIsCalledAsATool(t *testing.T) {
	var runs []string
	m := &stubModel{agent: []stubReply{stubCall("c-1", "refunds", task("Refund A1.")), stubSay("Done.")}}
	a := compileWith(t, remoteSpec, nil, runtime.Options{Model: m, RemoteAgents: map[string]tool.Tool{"refunds": remoteRefunds(&runs)}}, nil)
	res, events := runAgent(t, context.Background(), a, "Refund A1")
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 1 || res.Steps[0].Result != "Refunded: Refund A1." {
		t.Fatalf("stop %s, steps %+v", res.Stop, res.Steps)
	}
	if defs := m.agentReqs[0].Tools; len(defs) != 1 || defs[0].Name != "refunds" || defs[0].Description != "Refunds orders." {
		t.Fatalf("tools offered %+v", defs)
	}
	var states []string
	for _, e := range events {
		if e.Kind == runtime.EventRemote {
			if e.Tool != "refunds" || e.CallID != "c-1" || e.Remote.Task != "t-1" || e.Depth != 0 {
				t.Fatalf("event %+v", e)
			}
			states = append(states, e.Remote.State)
		}
	}
	if strings.Join(states, ",") != "working,completed" || len(runs) != 1 || runs[0] != events[0].Run {
		t.Fatalf("states %v, runs %v (the run is %s)", states, runs, events[0].Run)
	}
}

// Compiled without its tool (validation, inspection), a remote agent is still
// offered, and a call says it is not connected.
func TestARemoteAgentWithoutItsToolIsNotConnected(t *testing.T) {
	m := &stubModel{agent: []stubReply{stubCall("c-1", "refunds", task("Refund A1.")), stubSay("Sorry.")}}
	a := compileWith(t, remoteSpec, nil, runtime.Options{Model: m}, nil)
	res, _ := runAgent(t, context.Background(), a, "Refund A1")
	if len(res.Steps) != 1 || res.Steps[0].Result != "Error: the remote agent refunds is not connected" {
		t.Fatalf("steps %+v", res.Steps)
	}
}

// A workflow step may name a remote agent: its task goes to the agent's tool,
// its answer and stop are the step's outputs, and a failed call is the step's
// error.
func TestAWorkflowStepRunsARemoteAgent(t *testing.T) {
	src := remoteSpec + `workflow:
  steps:
    - name: ask
      agent: refunds
      task: "Refund {{ input }}"
    - name: broken
      agent: refunds
      task: "fail {{ input }}"
      on_error: continue
  answer: "{{ steps.ask.answer }} / {{ steps.ask.stop }} / {{ steps.broken.ok }}: {{ steps.broken.error }}"
`
	var runs []string
	a := compileWith(t, src, nil, runtime.Options{Model: &stubModel{}, RemoteAgents: map[string]tool.Tool{"refunds": remoteRefunds(&runs)}}, nil)
	res, _ := runAgent(t, context.Background(), a, "A1")
	if res.Stop != runtime.StopCompleted || res.Answer != "Refunded: Refund A1 / completed / false: the remote agent refunds failed the task: down" {
		t.Fatalf("stop %s (%s), answer %q", res.Stop, res.Detail, res.Answer)
	}
	if len(res.Steps) != 2 || res.Steps[0].Tool != "refunds" || res.Steps[1].Outcome != runtime.OutcomeError ||
		res.Steps[1].Result != "Error: the remote agent refunds failed the task: down" {
		t.Fatalf("steps %+v", res.Steps)
	}
}
