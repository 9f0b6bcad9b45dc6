package temporal_test

import (
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
)

// With the SDK's test suite, whose clock skips ahead while a workflow waits: a
// run that nobody decides on waits for its approvals the whole approval
// timeout (24 hours) as a workflow, then resumes itself, approval.on_timeout
// (reject) decides the call, and the model answers without the ticket.
func TestApprovalsExpireInTheWorkflow(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	model, back := desktest.Start(t)
	agent := build(t, "testdata/desk-approval.yaml", "", memory.New())
	if err := temporal.Register(env, []*runtime.Agent{agent.Agent}, temporal.Options{}); err != nil {
		t.Fatal(err)
	}
	start := env.Now()
	res := executeInSuite(t, env, agent.Agent, temporal.Request{Input: "A1 arrived broken", User: tool.User{ID: "u-1"}})
	if waited := env.Now().Sub(start); waited < 24*time.Hour {
		t.Errorf("the workflow's clock moved %s, want the approval timeout (24h)", waited)
	}
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 3 || res.Steps[1].Decision == nil || res.Steps[1].Decision.Approved ||
		res.Steps[1].Outcome != runtime.OutcomeRejected {
		t.Fatalf("stop %s (%s), steps %+v", res.Stop, res.Detail, res.Steps)
	}
	if _, filed, requests := back.Counts(); filed != 0 || requests != 0 {
		t.Errorf("%d tickets from %d requests, want none", filed, requests)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}
}

// With the test suite's clock: a model call that would answer after an hour
// is cut by the run's max_run_time (10 minutes), a workflow timer; the run
// stops as timeout with the fallback, as in process.
func TestMaxRunTimeIsAWorkflowTimer(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	desktest.Start(t)
	store := memory.New()
	agent := build(t, deskSpec, "", store)
	if err := temporal.Register(env, []*runtime.Agent{agent.Agent}, temporal.Options{}); err != nil {
		t.Fatal(err)
	}
	env.OnActivity(temporal.ActivityModel, mock.Anything, mock.Anything).After(time.Hour).Return(
		&model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "too late"}, FinishReason: model.FinishStop}, nil)
	start := env.Now()
	res := executeInSuite(t, env, agent.Agent, temporal.Request{Input: "A1?", User: tool.User{ID: "u-1"}, Conversation: "c-1"})
	if res.Stop != runtime.StopTimeout || res.Detail != "the run took longer than max_run_time (10m0s)" || res.Answer != agent.Settings().Guards.Fallback {
		t.Errorf("stop %s %q, answer %q", res.Stop, res.Detail, res.Answer)
	}
	if took := env.Now().Sub(start); took < 10*time.Minute || took >= time.Hour {
		t.Errorf("the run ended after %s of workflow time, want max_run_time (10m)", took)
	}
}

// executeInSuite runs the agent's run as a workflow in the test suite's
// environment to its end and returns its result.
func executeInSuite(t *testing.T, env *testsuite.TestWorkflowEnvironment, agent *runtime.Agent, req temporal.Request) *runtime.Result {
	t.Helper()
	env.ExecuteWorkflow(temporal.WorkflowRun, temporal.RunInput{Agent: agent.Name(), Digest: agent.Digest(), Request: req})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v: %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var out temporal.RunOutput
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	return out.Result
}
