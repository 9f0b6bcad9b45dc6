package runtime

import (
	"fmt"
	"slices"
)

// State is a state of the run's state machine.
type State string

const (
	StateThinking      State = "THINKING"       // waiting for the model
	StateToolExecuting State = "TOOL_EXECUTING" // running the tool calls of a response
	StateValidating    State = "VALIDATING"     // checking a draft answer before it is accepted
	StateFinished      State = "FINISHED"       // an answer was accepted
	StateStopped       State = "STOPPED"        // a guard or a fault ended the run
)

// Trigger is why the run moves along an edge. A move to STOPPED is triggered by its
// stop reason.
type Trigger string

const (
	TriggerToolCalls     Trigger = "tool_calls"     // the model asked for tools
	TriggerDraft         Trigger = "draft"          // the model answered without tool calls
	TriggerResults       Trigger = "results"        // every call of the response has its result
	TriggerJudgeFeedback Trigger = "judge_feedback" // the judge failed the draft; retries remain
	TriggerAccepted      Trigger = "accepted"       // the draft passed the judge (or there is none) and the answer filters
	TriggerCacheHit      Trigger = "cache_hit"      // the FAQ cache answered: no model call
	TriggerPlanOpen      Trigger = "plan_open"      // the answer came while plan steps were open; refusals remain
	TriggerHandoff       Trigger = "handoff"        // the intent's agent answered in the run's place
	TriggerWorkflowDone  Trigger = "workflow_done"  // the workflow's steps ran and its answer passed the answer filters
	// TriggerOutputFeedback: the answer did not match the output schema; retries remain.
	TriggerOutputFeedback Trigger = "output_feedback"
)

// Edge is one transition of the state machine with everything that triggers it.
type Edge struct {
	From, To State
	Triggers []Trigger
}

// edges is the state machine as data: the runtime checks every move against it, and
// graph draws it. FINISHED and STOPPED are final.
var edges = []Edge{
	{StateThinking, StateToolExecuting, []Trigger{TriggerToolCalls}},
	{StateThinking, StateValidating, []Trigger{TriggerDraft}},
	{StateThinking, StateFinished, []Trigger{TriggerCacheHit, TriggerHandoff, TriggerWorkflowDone}},
	// A handoff ends as its agent's run did: the judge's, plan's and duplicate
	// guard's stops reach THINKING that way.
	{StateThinking, StateStopped, stops(StopBlocked, StopMaxTurns, StopMaxToolRounds, StopModelError, StopTruncated, StopContentFilter, StopBudget, StopTimeout, StopCanceled,
		StopDuplicateCall, StopJudgeRejected, StopPlanIncomplete, StopWorkflowFailed, StopOutputInvalid)},
	{StateToolExecuting, StateThinking, []Trigger{TriggerResults}},
	{StateToolExecuting, StateStopped, stops(StopDuplicateCall, StopTimeout, StopCanceled, StopAwaitingApproval, StopApprovalTimeout)},
	{StateValidating, StateFinished, []Trigger{TriggerAccepted}},
	{StateValidating, StateThinking, []Trigger{TriggerOutputFeedback, TriggerPlanOpen, TriggerJudgeFeedback}},
	{StateValidating, StateStopped, stops(StopOutputInvalid, StopPlanIncomplete, StopJudgeRejected, StopBlocked, StopBudget, StopTimeout, StopCanceled)},
}

func stops(reasons ...StopReason) []Trigger {
	out := make([]Trigger, len(reasons))
	for i, r := range reasons {
		out[i] = Trigger(r)
	}
	return out
}

// Edges returns the state machine's edges with their triggers, for diagrams and docs.
func Edges() []Edge {
	out := slices.Clone(edges)
	for i := range out {
		out[i].Triggers = slices.Clone(out[i].Triggers)
	}
	return out
}

func canTransition(from, to State, why Trigger) bool {
	return slices.ContainsFunc(edges, func(e Edge) bool {
		return e.From == from && e.To == to && slices.Contains(e.Triggers, why)
	})
}

// errBadTransition is a bug in the runtime, never the model's or the spec's fault.
type errBadTransition struct {
	from, to State
	why      Trigger
}

func (e errBadTransition) Error() string {
	return fmt.Sprintf("internal error: no transition from %s to %s on %s", e.from, e.to, e.why)
}
