package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const parentSpec = `
version: 1
name: desk
instructions: You run the help desk.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
`

const specialistSpec = `
version: 1
name: refunds
instructions: You handle refunds.
tools:
  - name: refund
    parameters:
      type: object
      properties: {order: {type: string}}
      required: [order]
    bind: {user_id: user.id}
    http: {url: "https://example.com/refund"}
`

// subAgentFixture compiles the desk agent with the refunds agent as its agents
// entry "refunds", both answered by one scripted model.
type subAgentFixture struct {
	agent        *runtime.Agent
	model        *stubModel
	lookup       *funcTool
	refund       *funcTool
	mu           sync.Mutex
	refundedFor  []string
	parentGuards string
}

func newSubAgentFixture(t *testing.T, parentExtra, subExtra string, edit func(*spec.Spec), replies ...stubReply) *subAgentFixture {
	t.Helper()
	f := &subAgentFixture{model: &stubModel{agent: replies}, lookup: echo()}
	f.refund = &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.refundedFor = append(f.refundedFor, fmt.Sprint(in.Args["user_id"]))
		return fmt.Sprintf(`{"refunded":%q}`, in.Args["order"]), nil
	}}
	sub := loadSpec(t, specialistSpec+subExtra)
	f.agent = compileWith(t, parentSpec+parentExtra, func(s *spec.Spec) {
		s.Agents = []spec.SubAgent{{Name: "refunds", Description: "Refunds an order.", Loaded: sub}}
		if edit != nil {
			edit(s)
		}
	}, runtime.Options{Model: f.model, Store: memory.New()}, map[string]*funcTool{"lookup": f.lookup, "refund": f.refund})
	return f
}

// withRefunds gives the spec sub as its agents entry "refunds".
func withRefunds(sub *spec.Spec) func(*spec.Spec) {
	return func(s *spec.Spec) {
		s.Agents = []spec.SubAgent{{Name: "refunds", Description: "Refunds.", Loaded: sub}}
	}
}

func task(text string) string {
	b, _ := json.Marshal(map[string]string{"task": text})
	return string(b)
}

// A sub-agent runs on its own whitelist: the parent's tools are refused to it. The
// bound user id reaches its tool, never its model (even when the model tries to set
// it). Its answer is the parent's tool result, its events nest under the parent's
// run, and its usage is the parent's.
func TestSubAgentAsTool(t *testing.T) {
	f := newSubAgentFixture(t, "", "", nil,
		stubCall("c-sub", "refunds", task("Refund order A1.")), // the desk delegates
		stubCall("s-1", "lookup", `{"id":"A1"}`),               // the specialist tries the desk's tool
		stubCall("s-2", "refund", `{"order":"A1","user_id":"someone-else"}`),
		stubSay("Order A1 is refunded."),
		stubSay("Your order A1 is refunded."),
	)
	res, events := runAgent(t, context.Background(), f.agent, "Please refund A1")
	if res.Stop != runtime.StopCompleted || res.Answer != "Your order A1 is refunded." {
		t.Fatalf("stop %s %q (%s)", res.Stop, res.Answer, res.Detail)
	}
	if f.lookup.calls.Load() != 0 {
		t.Fatal("the sub-agent ran the parent's tool")
	}
	if len(f.refundedFor) != 1 || f.refundedFor[0] != "u-1" {
		t.Fatalf("the refund tool ran for %v, want the run's user u-1", f.refundedFor)
	}
	// The sub-agent's model saw the task, the refusal and no user id.
	subReqs := f.model.agentReqs[1:4]
	if got := subReqs[0].Messages[len(subReqs[0].Messages)-1].Content; got != "Refund order A1." {
		t.Fatalf("the sub-agent's first request ends with %q", got)
	}
	second := subReqs[1].Messages
	if tool := second[len(second)-1]; !strings.Contains(tool.Content, `there is no tool "lookup"`) {
		t.Fatalf("the parent's tool was not refused to the sub-agent: %q", tool.Content)
	}
	for i, req := range subReqs {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "u-1") || strings.Contains(fmt.Sprint(m.ToolCalls), "u-1") {
				t.Fatalf("sub-agent request %d shows the user id: %+v", i, m)
			}
		}
		for _, d := range req.Tools {
			if d.Name == "lookup" || d.Name == "refunds" {
				t.Fatalf("the sub-agent was offered %s", d.Name)
			}
			if strings.Contains(fmt.Sprint(d.Parameters), "user_id") {
				t.Fatal("the sub-agent's model sees the bound parameter")
			}
		}
	}
	if len(res.Steps) != 1 || res.Steps[0].Tool != "refunds" || res.Steps[0].Result != "Order A1 is refunded." {
		t.Fatalf("steps %+v", res.Steps)
	}
	if ar := res.Steps[0].Agent; ar == nil || ar.Agent != "refunds" || ar.Stop != runtime.StopCompleted || ar.Turns != 3 ||
		len(ar.Steps) != 2 || ar.Steps[0].Refusal != runtime.RefusedNotOffered || ar.Steps[1].Tool != "refund" {
		t.Fatalf("the step's sub-run: %+v", ar)
	}
	if res.Turns != 2 || res.Usage.TotalTokens != 5*stubAgentTokens {
		t.Fatalf("turns %d, tokens %d: want the parent's 2 turns and all 5 calls' tokens", res.Turns, res.Usage.TotalTokens)
	}
	var top, nested string
	for _, e := range events {
		switch {
		case e.Depth == 0 && top == "":
			top = e.Run
		case e.Depth == 1:
			if e.Parent != top || e.Agent != "refunds" || e.Run == "" || e.Run == top {
				t.Fatalf("nested event %+v: want parent %s, agent refunds, a run id of its own", e, top)
			}
			if nested != "" && e.Run != nested {
				t.Fatalf("one sub-run has two ids: %s and %s", nested, e.Run)
			}
			nested = e.Run
		}
	}
	if top == "" || nested == "" {
		t.Fatalf("events lack the top run (%q) or the sub-run (%q)", top, nested)
	}
}

// The parent's limits bound its sub-runs: a sub-agent looping inside its own
// generous limits stops at the parent's max_turns or max_tokens, and the parent
// stops too.
func TestSubAgentCountsTowardParentLimits(t *testing.T) {
	// The specialist's calls each use 3000 tokens.
	loop := func(n int) []stubReply {
		out := []stubReply{stubCall("c-sub", "refunds", task("Refund everything."))}
		for i := range n {
			out = append(out, used(stubCall(fmt.Sprintf("s-%d", i), "refund", fmt.Sprintf(`{"order":"A%d"}`, i)), 3000))
		}
		return out
	}
	tests := []struct {
		name      string
		guards    string
		maxTokens int64
		stop      runtime.StopReason
		detail    string
		subCalls  int
	}{
		// The desk's first call and the specialist's two: the specialist's third
		// call would be the desk's fourth.
		{name: "max_turns", guards: "guards: {max_turns: 3}\n", stop: runtime.StopMaxTurns, detail: "the agent desk's runs made 3 model calls", subCalls: 2},
		// A call counts its prompt and up to 4096 tokens out before it is made: the
		// specialist's third call, after 6001 tokens, could break the desk's 10000.
		{name: "max_tokens", maxTokens: 10000, stop: runtime.StopBudget, detail: "the budget of the agent desk", subCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSubAgentFixture(t, tt.guards, "guards: {max_turns: 20, max_tool_rounds: 20}\n",
				func(s *spec.Spec) { s.Guards.MaxTokens = tt.maxTokens }, loop(10)...)
			var subStop *runtime.Event
			res, events := runAgent(t, context.Background(), f.agent, "refund it all")
			for i, e := range events {
				if e.Kind == runtime.EventAgent && e.Stop != "" {
					subStop = &events[i]
				}
			}
			if subStop == nil || subStop.Stop != tt.stop {
				t.Fatalf("the sub-run ended with %+v, want %s", subStop, tt.stop)
			}
			if got := int(f.refund.calls.Load()); got != tt.subCalls {
				t.Fatalf("the specialist's tool ran %d times, want %d", got, tt.subCalls)
			}
			if !strings.Contains(res.Steps[0].Result, tt.detail) {
				t.Fatalf("the parent's tool result %q does not say %q", res.Steps[0].Result, tt.detail)
			}
			if res.Stop != tt.stop {
				t.Fatalf("the parent ended %s (%s), want %s", res.Stop, res.Detail, tt.stop)
			}
		})
	}
}

// An intent handed to an agent: the specialist answers the user's message with the
// conversation's history, its exchange is the run's, stored whole.
func TestIntentHandoff(t *testing.T) {
	st := memory.New()
	m := &stubModel{agent: []stubReply{
		stubCall("s-1", "refund", `{"order":"A1"}`),
		stubSay("Order A1 is refunded."),
	}}
	refunded := &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
		return fmt.Sprintf(`{"refunded":%q,"for":%q}`, in.Args["order"], in.Args["user_id"]), nil
	}}
	sub := loadSpec(t, specialistSpec)
	a := compileWith(t, parentSpec+`
intents:
  refund: {description: Refunds, keywords: [refund]}
  other: {description: Anything else, tools: [lookup]}
routing: {recognizer: rules, fallback: other}
`, func(s *spec.Spec) {
		withRefunds(sub)(s)
		s.Intents[0].Agent = "refunds"
	}, runtime.Options{Model: m, Store: st}, map[string]*funcTool{"lookup": echo(), "refund": refunded})
	if err := st.Commit(context.Background(), store.Record{UserID: "u-1", Conversation: "c-1", Messages: []model.Message{
		{Role: model.RoleUser, Content: "I bought A1."}, {Role: model.RoleAssistant, Content: "Noted."}}}); err != nil {
		t.Fatal(err)
	}
	res, events := runAgent(t, context.Background(), a, "I want a refund for A1")
	if res.Stop != runtime.StopCompleted || res.Answer != "Order A1 is refunded." || res.Intent != "refund" {
		t.Fatalf("stop %s %q intent %s (%s)", res.Stop, res.Answer, res.Intent, res.Detail)
	}
	first := m.agentReqs[0].Messages
	if !strings.Contains(first[0].Content, "You handle refunds.") || first[1].Content != "I bought A1." {
		t.Fatalf("the specialist did not get its instructions and the history: %+v", first)
	}
	if len(res.Steps) != 1 || res.Steps[0].Tool != "refund" || !strings.Contains(res.Steps[0].Arguments, `"user_id":"u-1"`) {
		t.Fatalf("steps %+v", res.Steps)
	}
	if res.Handoff == nil || res.Handoff.Agent != "refunds" || res.Handoff.Turns != 2 || res.Handoff.RunID == "" {
		t.Fatalf("handoff %+v", res.Handoff)
	}
	conv, err := st.Conversation(context.Background(), "c-1", 10)
	if err != nil {
		t.Fatal(err)
	}
	roles := ""
	for _, m := range conv.Messages {
		roles += string(m.Role) + " "
	}
	if roles != "user assistant user assistant tool assistant " {
		t.Fatalf("stored %q", roles)
	}
	var states []string
	for _, e := range events {
		if e.Kind == runtime.EventState && e.Depth == 0 {
			states = append(states, string(e.State)+"/"+string(e.Trigger))
		}
	}
	if strings.Join(states, " ") != "FINISHED/handoff" {
		t.Fatalf("the top run moved %v", states)
	}
}

// A workflow's agent step runs the sub-agent on its task for the same user: the
// bound id reaches the sub-agent's tool, its answer is the step's output, and its
// model calls count toward the workflow's max_turns.
func TestWorkflowAgentStep(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "refunds.yaml")
	if err := os.WriteFile(sub, []byte(specialistSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `
version: 1
name: flow
agents: [{name: refunds, spec: ` + sub + `, description: Refunds.}]
workflow:
  steps:
    - name: ask
      agent: refunds
      task: "Refund the order in: {{ input }}"
  answer: "{{ steps.ask.ok ? 'Done: ' + steps.ask.answer : 'Failed: ' + steps.ask.stop }}"
`
	for _, tt := range []struct {
		name, guards string
		replies      []stubReply
		answer       string
		refunds      int
	}{
		{name: "answers", replies: []stubReply{stubCall("s-1", "refund", `{"order":"A1"}`), stubSay("A1 refunded.")},
			answer: "Done: A1 refunded.", refunds: 1},
		{name: "the workflow's max_turns bounds the sub-run", guards: "guards: {max_turns: 1}\n",
			replies: []stubReply{stubCall("s-1", "refund", `{"order":"A1"}`), stubSay("never")}, answer: "", refunds: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var users []string
			var mu sync.Mutex
			refund := &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
				mu.Lock()
				users = append(users, fmt.Sprint(in.Args["user_id"]))
				mu.Unlock()
				return `{"ok":true}`, nil
			}}
			model := &stubModel{agent: tt.replies}
			a := compileWith(t, src+tt.guards, nil, runtime.Options{Model: model}, map[string]*funcTool{"refund": refund})
			res, events := runAgent(t, context.Background(), a, "A1 was cold")
			if got := model.agentReqs[0].Messages[len(model.agentReqs[0].Messages)-1].Content; got != "Refund the order in: A1 was cold" {
				t.Fatalf("the sub-agent's task is %q", got)
			}
			if len(users) != tt.refunds || users[0] != "u-1" {
				t.Fatalf("the refund tool ran for %v", users)
			}
			if tt.answer != "" && (res.Stop != runtime.StopCompleted || res.Answer != tt.answer) {
				t.Fatalf("stop %s %q (%s), want %q", res.Stop, res.Answer, res.Detail, tt.answer)
			}
			if tt.answer == "" && len(model.agentReqs) != 1 {
				t.Fatalf("the sub-run made %d model calls past the workflow's max_turns 1", len(model.agentReqs))
			}
			if tt.answer == "" && (res.Stop != runtime.StopWorkflowFailed || !strings.Contains(res.Detail, "(max_turns): the agent flow's runs made 1 model calls")) {
				t.Fatalf("stop %s (%s): want workflow_failed naming the workflow's max_turns", res.Stop, res.Detail)
			}
			nested := false
			for _, e := range events {
				nested = nested || e.Depth == 1 && e.Agent == "refunds"
			}
			if !nested {
				t.Fatal("no event of the sub-run")
			}
		})
	}
}
