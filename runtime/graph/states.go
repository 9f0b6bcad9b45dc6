package graph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
)

// machine says which of the state machine's ways a spec can take: approvals,
// whether some tool's calls may wait for a person's approval; workflow, whether it
// is a workflow (its own ways to finish and stop); plan, whether plan mode is on
// anywhere; handoff, whether an intent hands its runs to an agent.
type machine struct{ approvals, workflow, plan, handoff, output bool }

func machineOf(s *spec.Spec, st *spec.Settings) machine {
	m := machine{approvals: s.NeedsApproval(), workflow: s.Workflow != nil, plan: st.Plan != nil, output: s.Output != nil && s.Workflow == nil}
	for _, in := range s.Intents {
		m.output = m.output || in.Output != nil && in.Agent == ""
	}
	for _, in := range st.Intents {
		m.plan = m.plan || in.Plan != nil
		m.handoff = m.handoff || in.Agent != ""
	}
	return m
}

// handoffStops are the stops a run reaches from THINKING only through a handoff:
// the agent it handed to stopped that way.
var handoffStops = []runtime.Trigger{runtime.Trigger(runtime.StopDuplicateCall), runtime.Trigger(runtime.StopJudgeRejected), runtime.Trigger(runtime.StopPlanIncomplete),
	runtime.Trigger(runtime.StopOutputInvalid)}

// handoffStopped is the detail of the edges of handoffStops.
const handoffStopped = "handoff stopped (its agent's stop reason)"

// possible reports whether a spec's runs can move along the edge for the trigger.
func (m machine) possible(e runtime.Edge, t runtime.Trigger) bool {
	switch {
	case isWorkflowTrigger(t):
		return m.workflow
	case t == runtime.TriggerHandoff:
		return m.handoff
	case e.From == runtime.StateThinking && slices.Contains(handoffStops, t):
		return false // added once, after the others, as "handoff stopped"
	case t == runtime.TriggerPlanOpen || t == runtime.Trigger(runtime.StopPlanIncomplete):
		return m.plan
	case t == runtime.TriggerOutputFeedback || t == runtime.Trigger(runtime.StopOutputInvalid):
		return m.output
	}
	return true
}

// isWorkflowTrigger reports whether only a workflow's run moves on t.
func isWorkflowTrigger(t runtime.Trigger) bool {
	return t == runtime.TriggerWorkflowDone || t == runtime.Trigger(runtime.StopWorkflowFailed)
}

// states adds the run's state machine from runtime.Edges: an edge for each
// trigger the spec's runs can move on, labelled with the trigger, its detail the
// effective settings that decide it.
func (b *builder) states(st *spec.Settings, m machine) {
	b.open(GroupRun, "run · state machine")
	b.node(Node{ID: runStartID, Kind: KindStart, Label: "start"})
	b.edge(Edge{From: runStartID, To: StateID(runtime.StateThinking), Kind: EdgeStart})
	seen := map[runtime.State]bool{}
	state := func(s runtime.State) {
		if !seen[s] {
			seen[s] = true
			n := Node{ID: StateID(s), Kind: KindState, Label: string(s)}
			if s == runtime.StateStopped {
				n.Detail = "fallback" // a stopped run answers with guards.fallback
			}
			b.node(n)
		}
	}
	for _, e := range runtime.Edges() {
		state(e.From)
		state(e.To)
		transition := func(t runtime.Trigger, detail string) {
			b.edge(Edge{From: StateID(e.From), To: StateID(e.To), Label: string(t), Kind: EdgeTransition, Detail: detail})
		}
		for _, t := range e.Triggers {
			if !m.possible(e, t) {
				continue
			}
			if d := triggerDetail(t, st, m.approvals); d != "" {
				transition(t, d)
			}
		}
		if m.handoff && e.From == runtime.StateThinking && e.To == runtime.StateStopped {
			for _, t := range handoffStops {
				if slices.Contains(e.Triggers, t) {
					transition(t, handoffStopped)
				}
			}
		}
	}
}

// gateDetails name the triggers of the gates before the judge: the plan's and the
// output schema's.
var gateDetails = map[runtime.Trigger]string{
	runtime.TriggerPlanOpen:                     "plan steps open",
	runtime.Trigger(runtime.StopPlanIncomplete): "plan_incomplete",
	runtime.TriggerOutputFeedback:               "answer does not match output.schema",
	runtime.Trigger(runtime.StopOutputInvalid):  "output_invalid (after output.retries)",
}

// triggerDetail names a trigger with the setting that governs it; "" leaves out
// one that cannot happen and needs no note.
func triggerDetail(t runtime.Trigger, st *spec.Settings, approvals bool) string {
	if l, ok := gateDetails[t]; ok {
		return l
	}
	g := st.Guards
	switch t {
	case runtime.TriggerToolCalls:
		return "tool calls"
	case runtime.TriggerDraft:
		return "draft answer"
	case runtime.TriggerResults:
		return "results · ≤ " + Setting(st, "guards.max_parallel_tools", g.MaxParallelTools) + " in parallel"
	case runtime.TriggerAccepted:
		if st.Judge == nil {
			return "no judge: accepted"
		}
		return "judge passed"
	case runtime.TriggerHandoff:
		var to []string
		for _, in := range st.Intents {
			if in.Agent != "" {
				to = append(to, in.Name+" → "+in.Agent)
			}
		}
		return "handoff · " + strings.Join(to, ", ")
	case runtime.TriggerCacheHit:
		return cacheHitDetail(st)
	case runtime.TriggerJudgeFeedback:
		if st.Judge == nil {
			return "judge feedback (no judge)"
		}
		return "judge feedback · max_retries " + Setting(st, "judge.max_retries", st.Judge.MaxRetries)
	case runtime.Trigger(runtime.StopMaxTurns):
		return "max_turns " + Setting(st, "guards.max_turns", g.MaxTurns)
	case runtime.Trigger(runtime.StopBudget):
		return budgetDetail(g)
	case runtime.Trigger(runtime.StopMaxToolRounds):
		return "max_tool_rounds " + Setting(st, "guards.max_tool_rounds", g.MaxToolRounds)
	case runtime.Trigger(runtime.StopDuplicateCall):
		return "duplicate_calls " + Setting(st, "guards.duplicate_calls", g.DuplicateCalls)
	case runtime.Trigger(runtime.StopTimeout):
		return "timeout ≤ " + Setting(st, "guards.max_run_time", g.MaxRunTime)
	case runtime.Trigger(runtime.StopAwaitingApproval), runtime.Trigger(runtime.StopApprovalTimeout):
		return approvalDetail(t, st, approvals)
	}
	return string(t)
}

func cacheHitDetail(st *spec.Settings) string {
	var hits []string
	for _, in := range st.Intents {
		if in.Cache != nil {
			hits = append(hits, fmt.Sprintf("%s ≥ %.2f", in.Name, in.Cache.Threshold))
		}
	}
	if len(hits) == 0 {
		return "cache hit (no intent has a cache)"
	}
	return "FAQ cache hit · " + strings.Join(hits, ", ")
}

func budgetDetail(g spec.GuardSettings) string {
	var limits []string
	if g.MaxTokens > 0 {
		limits = append(limits, fmt.Sprintf("max_tokens %d", g.MaxTokens))
	}
	if g.MaxCost > 0 {
		limits = append(limits, "max_cost "+FormatCost(g.MaxCost))
	}
	if len(limits) == 0 {
		return "budget (none set)"
	}
	return "budget " + strings.Join(limits, ", ")
}

// approvalDetail names the approval stops, "" when no tool needs approval.
func approvalDetail(t runtime.Trigger, st *spec.Settings, approvals bool) string {
	if !approvals {
		return ""
	}
	if t == runtime.Trigger(runtime.StopAwaitingApproval) {
		return "awaiting_approval (waits ≤ " + Setting(st, "approval.timeout", st.Approval.Timeout) + ")"
	}
	if st.Approval.OnTimeout != spec.OnTimeoutStop { // a late call is rejected, and the run goes on
		return "approval_timeout (on_timeout " + Setting(st, "approval.on_timeout", st.Approval.OnTimeout) + ": never)"
	}
	return "approval_timeout (on_timeout " + Setting(st, "approval.on_timeout", st.Approval.OnTimeout) + ")"
}
