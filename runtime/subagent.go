package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// parentLink ties a sub-run to the run that started it.
type parentLink struct {
	run    *run
	agent  string // the agents entry
	callID string // the tool call that started it; "" for an intent's handoff
}

func (r *run) parentRun() *run {
	if r.parent == nil {
		return nil
	}
	return r.parent.run
}

// errNoSubAgent is a sub-agent that cannot run at all.
var errNoSubAgent = errors.New("the agent is not available")

// delegate runs an agents entry on a task, as a sub-run of r: the same user and
// conversation (so bound values and seen entities carry over; the sub-agent's
// model sees neither), none of the conversation's history, its own instructions,
// tools, guards and judge, and r's limits above its own. It cannot pause for an
// approval: a call needing one is refused.
//
// seen are the entities revealed so far, this run's included (seenSoFar), taken
// by the caller where nothing else changes them.
func (r *run) delegate(ctx context.Context, name, task string, c *call, seen map[string][]string) (*run, error) {
	sub := r.agent.subAgents[name]
	if sub == nil {
		return nil, fmt.Errorf("%w: %s", errNoSubAgent, name)
	}
	req := &Request{Input: task, User: r.req.User, Conversation: r.req.Conversation, TraceConversation: r.req.TraceConversation,
		History: []model.Message{}, Seen: seen, Observer: r.req.Observer, Approvals: ApprovalsRefuse, Host: r.req.Host, RunID: c.key}
	return sub.execute(ctx, req, &parentLink{run: r, agent: name, callID: c.tc.ID})
}

// handoffDeltas is where a specialist's text goes as it streams: nowhere when
// this agent's answer filters may still change its answer (the specialist's own
// judge and filters it checks itself).
func (r *run) handoffDeltas() func(string) {
	if r.req.OnDelta != nil && len(r.agent.filters[spec.StageAnswer]) > 0 {
		return func(string) {}
	}
	return r.req.OnDelta
}

// handoff hands the run to the agent its intent names: the specialist answers the
// user's message, with the conversation's history, and its exchange becomes this
// run's. The run's answer filters still apply; the specialist's judge replaces
// this agent's.
func (r *run) handoff() {
	it := r.intent
	if t := r.agent.remoteAgent(it.agent); t != nil {
		r.handoffRemote(t)
		return
	}
	req := &Request{Input: r.input(), Parts: r.req.Parts, User: r.req.User, Conversation: r.req.Conversation, TraceConversation: r.req.TraceConversation,
		History: r.req.History, Seen: r.seenSoFar(), Observer: r.req.Observer, OnDelta: r.handoffDeltas(), Approvals: ApprovalsRefuse,
		Host: r.req.Host, RunID: r.id + "/" + it.agent}
	if req.History == nil {
		req.History = []model.Message{}
	}
	var sub *run
	target := r.agent.subAgents[it.agent]
	err := fmt.Errorf("%w: %s", errNoSubAgent, it.agent)
	if target != nil {
		sub, err = target.execute(r.ctx, req, &parentLink{run: r, agent: it.agent})
	}
	if err != nil {
		r.stop(StopModelError, fmt.Sprintf("intent %s: the agent %s could not run: %v", it.name, it.agent, err))
		return
	}
	res := sub.result
	r.absorbSub(sub)
	r.result.Steps = append(r.result.Steps, res.Steps...)
	r.result.Plan = res.Plan
	r.result.Handoff = sub.summary(false)
	if !res.Completed() {
		r.result.Partial = res.Partial
		answer := r.agent.settings.Guards.Fallback
		if res.Stop == StopBlocked {
			answer = res.Answer // the filter's own message
		}
		r.stopWith(res.Stop, fmt.Sprintf("the agent %s stopped: %s", it.agent, cmp.Or(res.Detail, string(res.Stop))), answer)
		return
	}
	answer := res.Answer
	if !r.filterText(spec.StageAnswer, &answer) {
		return
	}
	// The specialist's exchange starts with the user's message, as this run's does.
	r.messages = append(r.messages[:1], res.Messages[1:]...)
	r.messages[len(r.messages)-1].Content = answer
	r.result.Answer = answer
	r.result.Stop = StopCompleted
	r.transition(StateFinished, TriggerHandoff)
	r.emit(Event{Kind: EventStop, Stop: StopCompleted, Usage: &r.result.Usage, Cost: r.runCost()})
}

// absorbSub takes in what a finished sub-run leaves to its parent: its usage and
// cost (its calls were charged to the parent's limits as they happened), the facts
// its tools' rules wrote and the entities they revealed, all committed with the
// parent's run.
func (r *run) absorbSub(sub *run) {
	res := sub.result
	r.result.Usage.Add(res.Usage)
	if c := sub.runCost(); c != nil {
		r.budget.cost += *c
	} else if res.Turns > 0 {
		r.budget.costUnknown = true
	}
	r.memory.factChanges = append(r.memory.factChanges, sub.memory.factChanges...)
	for kind, ids := range sub.seen.revealedByKind() {
		r.seen.reveal(kind, ids)
	}
}

// summary is the sub-run as its caller's result shows it, with its steps or
// without them (a handoff's are the caller's own).
func (sub *run) summary(steps bool) *AgentRun {
	res := sub.result
	s := &AgentRun{Agent: sub.parent.agent, RunID: sub.id, Stop: res.Stop, Turns: res.Turns, Usage: res.Usage, Plan: res.Plan}
	if steps {
		s.Steps = res.Steps
	}
	return s
}

// callSubAgent is a call of a sub-agent's tool: its answer is the result; a sub-run
// that stopped is an error the model can act on.
func (r *run) callSubAgent(ctx context.Context, c *call, agent string) {
	start := r.now()
	task, _ := c.args[spec.SubAgentTaskParam].(string)
	// The response's calls run in parallel, but none changes the entities until
	// they all ran (absorb): reading them here is safe.
	sub, err := r.delegate(ctx, agent, task, c, r.seenSoFar())
	c.duration = r.since(start)
	switch {
	case err != nil:
		c.outcome, c.result = OutcomeError, "Error: "+err.Error()
	case sub.result.Completed():
		c.outcome, c.result, c.sub = OutcomeOK, sub.result.Answer, sub
	default:
		res := sub.result
		c.outcome, c.sub = OutcomeError, sub
		c.result = fmt.Sprintf("Error: the agent %s stopped without an answer (%s): %s", agent, res.Stop, cmp.Or(res.Detail, "no detail"))
	}
}

// agentRun is what the call's sub-run did; nil for a call of any other tool.
func (c *call) agentRun() *AgentRun {
	if c.sub == nil {
		return nil
	}
	return c.sub.summary(true)
}
