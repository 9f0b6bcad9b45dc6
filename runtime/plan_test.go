package runtime_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const planSpec = `
version: 1
name: planner
instructions: Work through the request.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
`

func planCall(id, steps string) stubReply {
	return stubCall(id, spec.PlanToolName, `{"steps":[`+steps+`]}`)
}

// An answer while steps are open goes back to the model with the open steps named;
// a plan that loses a step or drops one without a reason is refused; the answer
// is accepted once every step is done or dropped, and the plan is in the result,
// the events and the stored history, never the refused answer or the feedback.
func TestPlanGateRefusesAnswersWhileStepsAreOpen(t *testing.T) {
	m := &stubModel{agent: []stubReply{
		planCall("p1", `{"step":"Look up order 1","status":"in_progress"},{"step":"Check the policy","status":"pending"}`),
		stubSay("Order 1 is fine."), // open steps: refused
		stubCall("l1", "lookup", `{"id":"1"}`),
		planCall("p2", `{"step":"Look up order 1","status":"done"}`), // loses a step
		planCall("p3", `{"step":"Look up order 1","status":"done"},{"step":"Check the policy","status":"dropped"}`),                // no reason
		planCall("p4", `{"step":"Look up order 1","status":"done"},{"step":"Check the policy","status":"dropped","reason":"n/a"}`), // fine
		stubSay("Order 1 is on its way."),
	}}
	store := memory.New()
	a := compileWith(t, planSpec, func(s *spec.Spec) { s.Plan = &spec.Plan{} }, runtime.Options{Model: m, Store: store},
		map[string]*funcTool{"lookup": echo()})
	res, events := runAgent(t, context.Background(), a, "Where is order 1?")
	if res.Stop != runtime.StopCompleted || res.Answer != "Order 1 is on its way." {
		t.Fatalf("stop %s %q (%s)", res.Stop, res.Answer, res.Detail)
	}
	want := []runtime.PlanStep{{Step: "Look up order 1", Status: runtime.PlanDone}, {Step: "Check the policy", Status: runtime.PlanDropped, Reason: "n/a"}}
	if !slices.Equal(res.Plan, want) {
		t.Fatalf("plan %+v, want %+v", res.Plan, want)
	}
	// The request after the early answer carries the gate's feedback, naming both steps.
	third := m.agentReqs[2].Messages
	feedback := third[len(third)-1]
	if feedback.Role != model.RoleUser || !strings.HasPrefix(feedback.Content, runtime.PlanFeedbackPrefix) ||
		!strings.Contains(feedback.Content, `"Look up order 1" (in progress)`) || !strings.Contains(feedback.Content, `"Check the policy" (pending)`) {
		t.Fatalf("feedback %+v", feedback)
	}
	results := map[string]string{}
	for _, s := range res.Steps {
		results[s.CallID] = s.Result
	}
	if !strings.Contains(results["p2"], `left out "Check the policy"`) || !strings.Contains(results["p3"], "without a reason") {
		t.Fatalf("the bad plans were not refused: p2 %q, p3 %q", results["p2"], results["p3"])
	}
	if !strings.Contains(results["p4"], "[x] Look up order 1") || !strings.Contains(results["p4"], "[-] Check the policy (dropped: n/a)") {
		t.Fatalf("p4's result %q", results["p4"])
	}
	var planEvents, refusals int
	for _, e := range events {
		switch {
		case e.Kind == runtime.EventPlan:
			planEvents++
		case e.Kind == runtime.EventGuard && e.Guard == runtime.GuardPlanOpen:
			refusals++
		}
	}
	if planEvents != 2 || refusals != 1 {
		t.Fatalf("%d plan updates and %d refusals in the events, want 2 and 1", planEvents, refusals)
	}
	conv, err := store.Conversation(context.Background(), "c-1", 10)
	if err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for _, m := range conv.Messages {
		stored.WriteString(m.Content + "\n")
		for _, tc := range m.ToolCalls {
			stored.WriteString(tc.Name + tc.Arguments + "\n")
		}
	}
	for _, want := range []string{"[x] Look up order 1", `"reason":"n/a"`, "Order 1 is on its way."} {
		if !strings.Contains(stored.String(), want) {
			t.Errorf("the stored history lacks %q:\n%s", want, stored.String())
		}
	}
	for _, never := range []string{"Order 1 is fine.", runtime.PlanFeedbackPrefix} {
		if strings.Contains(stored.String(), never) {
			t.Errorf("the stored history has %q", never)
		}
	}
}

func TestPlanGate(t *testing.T) {
	one := 1
	tests := []struct {
		name   string
		plan   spec.Plan
		guards string
		agent  []stubReply
		stop   runtime.StopReason
		detail string // in the result's detail
	}{
		{name: "no plan is fine unless required", agent: []stubReply{stubSay("done")}, stop: runtime.StopCompleted},
		{name: "required: an answer before any plan is refused", plan: spec.Plan{Required: true, MaxRejections: &one},
			agent: []stubReply{stubSay("a"), stubSay("b")}, stop: runtime.StopPlanIncomplete, detail: "you have not written one"},
		{name: "max_rejections refusals, then plan_incomplete", plan: spec.Plan{MaxRejections: &one},
			agent: []stubReply{planCall("p", `{"step":"x","status":"pending"}`), stubSay("a"), stubSay("b"), stubSay("never")},
			stop:  runtime.StopPlanIncomplete, detail: `"x" (pending)`},
		{name: "plan updates are no tool rounds", guards: "max_tool_rounds: 1",
			agent: []stubReply{planCall("p1", `{"step":"x","status":"in_progress"}`), stubCall("l", "lookup", `{}`),
				planCall("p2", `{"step":"x","status":"done"}`), stubSay("done")},
			stop: runtime.StopCompleted},
		{name: "the same plan twice is no duplicate call", guards: "duplicate_calls: stop",
			agent: []stubReply{planCall("p1", `{"step":"x","status":"done"}`), planCall("p2", `{"step":"x","status":"done"}`), stubSay("done")},
			stop:  runtime.StopCompleted},
		{name: "max_steps", plan: spec.Plan{MaxSteps: 1},
			agent: []stubReply{planCall("p1", `{"step":"x","status":"pending"},{"step":"y","status":"pending"}`), stubSay("done")},
			stop:  runtime.StopCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := planSpec
			if tt.guards != "" {
				src += "guards: {" + tt.guards + "}\n"
			}
			m := &stubModel{agent: tt.agent}
			a := compileWith(t, src, func(s *spec.Spec) { p := tt.plan; s.Plan = &p }, runtime.Options{Model: m},
				map[string]*funcTool{"lookup": echo()})
			res, _ := runAgent(t, context.Background(), a, "go")
			if res.Stop != tt.stop || !strings.Contains(res.Detail, tt.detail) {
				t.Fatalf("stop %s (%s), want %s with %q", res.Stop, res.Detail, tt.stop, tt.detail)
			}
			if tt.name == "max_steps" && (len(res.Plan) != 0 || !strings.Contains(res.Steps[0].Result, "at most 1")) {
				t.Fatalf("a plan over max_steps was taken: %+v / %q", res.Plan, res.Steps[0].Result)
			}
			// The plan tool and its instructions are offered in plan mode.
			req := m.agentReqs[0]
			if !slices.ContainsFunc(req.Tools, func(d model.ToolDef) bool { return d.Name == spec.PlanToolName }) ||
				!strings.Contains(req.Messages[0].Content, spec.PlanToolName) {
				t.Fatalf("the first request lacks the plan tool or its instructions: %+v", req.Tools)
			}
		})
	}
}

// Plan mode per intent: the plan tool is offered where the intent turns it on and
// refused elsewhere; an intent's plan: false turns the agent's off.
func TestPlanPerIntent(t *testing.T) {
	src := planSpec + `
intents:
  research: {description: Research, tools: [lookup], plan: {required: true, max_rejections: 0}}
  chat: {description: Chat, kind: chat, plan: false}
routing: {recognizer: rules}
`
	for _, tt := range []struct {
		name, intent string
		agent        []stubReply
		offered      bool
		stop         runtime.StopReason
	}{
		{"planned research", "research", []stubReply{planCall("p", `{"step":"x","status":"done"}`), stubSay("found")}, true, runtime.StopCompleted},
		{"research without a plan", "research", []stubReply{stubSay("found")}, true, runtime.StopPlanIncomplete},
		{"chat turns the agent's plan mode off", "chat", []stubReply{stubSay("hello")}, false, runtime.StopCompleted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &stubModel{agent: tt.agent}
			a := compileWith(t, src, func(s *spec.Spec) { s.Plan = &spec.Plan{} }, runtime.Options{Model: m}, map[string]*funcTool{"lookup": echo()})
			res, err := a.Run(context.Background(), runtime.Request{Input: "x", User: tool.User{ID: "u"}, Intent: tt.intent})
			if err != nil {
				t.Fatal(err)
			}
			offered := slices.ContainsFunc(m.agentReqs[0].Tools, func(d model.ToolDef) bool { return d.Name == spec.PlanToolName })
			if offered != tt.offered || res.Stop != tt.stop {
				t.Fatalf("plan tool offered: %v, stop %s (%s); want %v, %s", offered, res.Stop, res.Detail, tt.offered, tt.stop)
			}
		})
	}
}
