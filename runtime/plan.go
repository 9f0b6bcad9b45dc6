package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// PlanStatus is where a plan step stands.
type PlanStatus string

const (
	PlanPending    PlanStatus = "pending"
	PlanInProgress PlanStatus = "in_progress"
	PlanDone       PlanStatus = "done"
	PlanDropped    PlanStatus = "dropped" // given up, with a reason
)

// PlanStatuses lists every plan status.
var PlanStatuses = []PlanStatus{PlanPending, PlanInProgress, PlanDone, PlanDropped}

// Open reports whether the step still needs work: the plan gate refuses an answer
// while any step is open.
func (s PlanStatus) Open() bool { return s == PlanPending || s == PlanInProgress }

// Mark shows the status in a rendered plan: [ ], [>], [x] or [-].
func (s PlanStatus) Mark() string {
	return map[PlanStatus]string{PlanPending: "[ ]", PlanInProgress: "[>]", PlanDone: "[x]", PlanDropped: "[-]"}[s]
}

// PlanStep is one step of the model's plan.
type PlanStep struct {
	Step   string     `json:"step"`
	Status PlanStatus `json:"status"`
	Reason string     `json:"reason,omitempty"` // why a step was dropped
}

// planTool is the built-in tool a run in plan mode offers the model. It takes the
// whole plan each time, so the model never has to address steps by number.
func planTool() model.ToolDef {
	return model.ToolDef{
		Name: spec.PlanToolName,
		Description: "Write or update your plan for this request: the whole list of steps, each with its status. " +
			"Call it first for a task of several steps, then again whenever a step starts, is done, or is dropped. " +
			"A step once written stays in the plan: mark it dropped, with a reason, if it is no longer needed. " +
			"You can only give your final answer when every step is done or dropped.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"steps": map[string]any{
					"type":     "array",
					"minItems": 1,
					"items": map[string]any{
						"type": "object",
						"properties": map[string]any{
							"step":   map[string]any{"type": "string", "minLength": 1, "description": "What the step does, in a few words."},
							"status": map[string]any{"type": "string", "enum": planStatusEnum()},
							"reason": map[string]any{"type": "string", "description": "Why a dropped step is no longer needed."},
						},
						"required":             []any{"step", "status"},
						"additionalProperties": false,
					},
				},
			},
			"required":             []any{"steps"},
			"additionalProperties": false,
		},
	}
}

// planInstructions go after the instructions of a run in plan mode.
const planInstructions = "You keep a plan with the " + spec.PlanToolName + " tool. For a request that takes several steps, " +
	"write the plan before you start, keep each step's status current, and answer only when every step is done or dropped with a reason."

// PlanFeedbackPrefix starts the message that sends an answer back while plan steps
// are open.
const PlanFeedbackPrefix = "[Plan]"

// planState is the plan's part of a run; the plan itself is the result's
// (Result.Plan), which callers and sub-run summaries show.
type planState struct {
	rejections int // answers the plan gate refused
}

// planSettings are the run's plan mode settings: its intent's, or the agent's when it
// has no intents; nil when plan mode is off.
func (r *run) planSettings() *spec.PlanSettings {
	if r.agent.intents == nil {
		return r.agent.settings.Plan
	}
	if r.intent == nil {
		return nil
	}
	return r.intent.plan
}

// updatePlan is a call of the plan tool: the model's new plan replaces the run's
// when it keeps every step written before. The plan calls of one response run one
// after the other, in call order (executeTools).
func (r *run) updatePlan(c *call) {
	c.outcome = OutcomeError
	set := r.planSettings()
	raw, _ := c.args["steps"].([]any)
	steps := make([]PlanStep, 0, len(raw))
	seen := map[string]bool{}
	for _, item := range raw {
		m, _ := item.(map[string]any)
		s := PlanStep{Step: strings.TrimSpace(fmt.Sprint(m["step"])), Status: PlanStatus(fmt.Sprint(m["status"]))}
		if reason, ok := m["reason"].(string); ok {
			s.Reason = strings.TrimSpace(reason)
		}
		switch {
		case s.Step == "":
			c.result = "Error: a plan step needs its text."
			return
		case seen[s.Step]:
			c.result = fmt.Sprintf("Error: the step %q is in the plan twice; write each step once.", s.Step)
			return
		case s.Status == PlanDropped && s.Reason == "":
			c.result = fmt.Sprintf("Error: the step %q is dropped without a reason; say why it is no longer needed.", s.Step)
			return
		}
		seen[s.Step] = true
		steps = append(steps, s)
	}
	if set != nil && len(steps) > set.MaxSteps {
		c.result = fmt.Sprintf("Error: the plan has %d steps and may have at most %d; merge some.", len(steps), set.MaxSteps)
		return
	}
	var lost []string
	for _, old := range r.result.Plan {
		if !seen[old.Step] {
			lost = append(lost, quote(old.Step))
		}
	}
	if len(lost) > 0 {
		c.result = fmt.Sprintf("Error: the plan left out %s. A step stays in the plan once written: send the whole plan again, marking a step that is no longer needed as dropped with a reason.", strings.Join(lost, ", "))
		return
	}
	r.result.Plan = steps
	c.outcome = OutcomeOK
	c.result = "Plan updated.\n" + renderPlan(steps)
	r.emit(Event{Kind: EventPlan, Tool: c.tc.Name, CallID: c.tc.ID, Plan: slices.Clone(steps), Message: planSummary(steps)})
}

// openSteps are the plan's steps that still need work.
func openSteps(plan []PlanStep) []PlanStep {
	var out []PlanStep
	for _, s := range plan {
		if s.Status.Open() {
			out = append(out, s)
		}
	}
	return out
}

// planGate refuses a draft while the plan has open steps, or before any plan was
// written when plan.required is set. It reports whether the draft may go on to
// the judge; otherwise the run goes back to thinking with feedback, or stops with
// plan_incomplete once max_rejections answers were refused.
func (r *run) planGate() bool {
	set := r.planSettings()
	if set == nil {
		return true
	}
	open := openSteps(r.result.Plan)
	var why string
	switch {
	case len(open) > 0:
		names := make([]string, len(open))
		for i, s := range open {
			names[i] = fmt.Sprintf("%q (%s)", s.Step, strings.ReplaceAll(string(s.Status), "_", " "))
		}
		why = fmt.Sprintf("%d step(s) of your plan are still open: %s", len(open), strings.Join(names, ", "))
	case set.Required && len(r.result.Plan) == 0:
		why = "this agent works from a plan and you have not written one"
	default:
		return true
	}
	r.plan.rejections++
	r.emit(Event{Kind: EventGuard, Guard: GuardPlanOpen, Plan: slices.Clone(r.result.Plan), Message: "answer refused: " + why})
	if r.plan.rejections > set.MaxRejections {
		r.stop(StopPlanIncomplete, "the model answered with its plan unfinished: "+why)
		return false
	}
	r.sendBack(PlanFeedbackPrefix + " Your answer was not accepted and the user has not seen it: " + why + ". Finish those steps (use " + spec.PlanToolName +
		" to mark each done), or mark a step dropped with a reason if it is not needed, then answer again.")
	r.transition(StateThinking, TriggerPlanOpen)
	return false
}

// renderPlan is the plan as the model and the history see it, one step a line.
func renderPlan(plan []PlanStep) string {
	var b strings.Builder
	for _, s := range plan {
		b.WriteString(s.Status.Mark() + " " + s.Step)
		switch {
		case s.Status == PlanDropped:
			b.WriteString(" (dropped: " + s.Reason + ")")
		case s.Reason != "":
			b.WriteString(" (" + s.Reason + ")")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// planSummary counts a plan's steps by status, for progress lines.
func planSummary(plan []PlanStep) string {
	n := map[PlanStatus]int{}
	for _, s := range plan {
		n[s.Status]++
	}
	parts := []string{fmt.Sprintf("%d/%d done", n[PlanDone], len(plan))}
	if n[PlanInProgress] > 0 {
		parts = append(parts, fmt.Sprintf("%d in progress", n[PlanInProgress]))
	}
	if n[PlanPending] > 0 {
		parts = append(parts, fmt.Sprintf("%d pending", n[PlanPending]))
	}
	if n[PlanDropped] > 0 {
		parts = append(parts, fmt.Sprintf("%d dropped", n[PlanDropped]))
	}
	return strings.Join(parts, ", ")
}

// usesPlan reports whether plan mode is on for the agent or any of its intents.
func usesPlan(st *spec.Settings) bool {
	return st.Plan != nil || slices.ContainsFunc(st.Intents, func(in spec.IntentSettings) bool { return in.Plan != nil })
}

// planBookkeeping reports whether a response of a run in plan mode only calls the
// plan tool: keeping the plan is not a round of work, so it does not count toward
// guards.max_tool_rounds (its model call still counts toward max_turns).
func (r *run) planBookkeeping(calls []model.ToolCall) bool {
	if r.planSettings() == nil {
		return false
	}
	for _, tc := range calls {
		if tc.Name != spec.PlanToolName {
			return false
		}
	}
	return len(calls) > 0
}

func planStatusEnum() []any {
	out := make([]any, len(PlanStatuses))
	for i, s := range PlanStatuses {
		out[i] = string(s)
	}
	return out
}
