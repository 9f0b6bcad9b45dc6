package main

import (
	"cmp"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newGraphCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "graph SPEC",
		Short: "Print a Mermaid diagram of the compiled agent",
		Long: "Print a Mermaid flowchart of the compiled agent: intents → domains → tools, and the\n" +
			"run's state machine with its guards. Paste it into any Mermaid renderer, or\n" +
			"`agentrun graph spec.yaml > agent.mmd`.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, err := loadAgent(cmd, args[0], "", false)
			if err != nil {
				return err
			}
			defer agent.Close()
			writeGraph(cmd.OutOrStdout(), agent.Agent, agent.Spec)
			return nil
		},
	}
}

// mermaidID turns a name into a node id Mermaid accepts.
func mermaidID(prefix, name string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range name {
		if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "_%x_", r)
		}
	}
	return b.String()
}

// label quotes text for a Mermaid label.
func label(s string) string {
	return `"` + strings.NewReplacer(`"`, "#quot;", "\n", "<br/>").Replace(s) + `"`
}

func writeGraph(w io.Writer, agent *runtime.Agent, s *spec.Spec) {
	var b strings.Builder
	fmt.Fprintf(&b, "flowchart LR\n  %%%% agentrun graph of %s\n", s.Name)
	kinds := map[string]string{}
	for _, t := range s.Tools {
		kinds[t.Name] = t.Kind()
	}
	for _, a := range s.Agents {
		kinds[a.Name] = "agent " + a.Spec
		if a.Remote() {
			kinds[a.Name] = "remote agent " + remoteHost(a.A2A.URL)
		}
	}
	if st := agent.Settings(); st.Plan != nil || slices.ContainsFunc(st.Intents, func(in spec.IntentSettings) bool { return in.Plan != nil }) {
		kinds[spec.PlanToolName] = "plan mode"
	}
	st := agent.Settings()
	if len(s.Intents) > 0 {
		r := st.Routing
		fmt.Fprintf(&b, "  subgraph routing[%s]\n    direction TB\n", label(fmt.Sprintf("routing · %s · fallback %s", r.Recognizer, cmp.Or(r.Fallback, "none"))))
		for _, in := range s.Intents {
			plan, _ := agent.Explain(in.Name)
			fmt.Fprintf(&b, "    %s([%s])\n", mermaidID("i_", in.Name), label(fmt.Sprintf("%s\n%s · memory %s", in.Name, plan.Kind, plan.Memory)))
		}
		b.WriteString("  end\n")
		if len(s.Domains) > 0 {
			fmt.Fprintf(&b, "  subgraph domains[%s]\n    direction TB\n", label("domains"))
			for _, d := range s.Domains {
				fmt.Fprintf(&b, "    %s{{%s}}\n", mermaidID("d_", d.Name), label(d.Name))
			}
			b.WriteString("  end\n")
		}
	}
	fmt.Fprintf(&b, "  subgraph tools[%s]\n    direction TB\n", label("tools"))
	for _, d := range agent.Tools() {
		fmt.Fprintf(&b, "    %s[%s]\n", mermaidID("t_", d.Name), label(d.Name+" · "+kinds[d.Name]))
	}
	b.WriteString("  end\n")
	for i, in := range s.Intents {
		from := mermaidID("i_", in.Name)
		if in.Domain != "" && st.Intents[i].Kind == spec.IntentTask {
			fmt.Fprintf(&b, "  %s --> %s\n", from, mermaidID("d_", in.Domain))
		}
		for _, t := range in.Tools {
			fmt.Fprintf(&b, "  %s --> %s\n", from, mermaidID("t_", t))
		}
		if in.Agent != "" {
			fmt.Fprintf(&b, "  %s -- %s --> %s\n", from, label("hands off"), mermaidID("t_", in.Agent))
		}
	}
	for _, d := range s.Domains {
		for _, t := range d.Tools {
			fmt.Fprintf(&b, "  %s --> %s\n", mermaidID("d_", d.Name), mermaidID("t_", t))
		}
	}
	if s.Workflow != nil {
		writeWorkflowGraph(&b, s.Workflow, st)
	}
	writeStates(&b, st, machineOf(s, st))
	io.WriteString(w, b.String())
}

// machine says which of the state machine's ways a spec can take: approvals,
// whether some tool's calls may wait for a person's approval; workflow, whether it
// is a workflow (its own ways to finish and stop); plan, whether plan mode is on
// anywhere; handoff, whether an intent hands its runs to an agent.
type machine struct{ approvals, workflow, plan, handoff, output bool }

func machineOf(s *spec.Spec, st *spec.Settings) machine {
	m := machine{approvals: agentrun.NeedsApproval(s), workflow: s.Workflow != nil, plan: st.Plan != nil, output: s.Output != nil && s.Workflow == nil}
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

// possible reports whether a spec's runs can move along the edge for the trigger.
func (m machine) possible(e runtime.Edge, t runtime.Trigger) bool {
	switch {
	case isWorkflowTrigger(t):
		return m.workflow
	case t == runtime.TriggerHandoff:
		return m.handoff
	case e.From == runtime.StateThinking && slices.Contains(handoffStops, t):
		return false // drawn once, as "handoff stopped"
	case t == runtime.TriggerPlanOpen || t == runtime.Trigger(runtime.StopPlanIncomplete):
		return m.plan
	case t == runtime.TriggerOutputFeedback || t == runtime.Trigger(runtime.StopOutputInvalid):
		return m.output
	}
	return true
}

// writeStates draws the run's state machine from runtime.Edges: each edge labelled
// with what triggers it and the effective settings that decide it, leaving out
// what the spec's runs cannot do.
func writeStates(b *strings.Builder, st *spec.Settings, m machine) {
	fmt.Fprintf(b, "  subgraph run[%s]\n    direction LR\n", label("run · state machine"))
	fmt.Fprintf(b, "    s_start((start)) --> s_%s\n", runtime.StateThinking)
	for _, e := range runtime.Edges() {
		var parts []string
		for _, t := range e.Triggers {
			if !m.possible(e, t) {
				continue
			}
			if l := triggerLabel(t, st, m.approvals); l != "" {
				parts = append(parts, l)
			}
		}
		if m.handoff && e.From == runtime.StateThinking && e.To == runtime.StateStopped {
			parts = append(parts, "handoff stopped (its agent's stop reason)")
		}
		fmt.Fprintf(b, "    s_%s -- %s --> s_%s\n", e.From, label(strings.Join(parts, " · ")), e.To)
	}
	fmt.Fprintf(b, "    s_%s((%s))\n    s_%s((%s))\n  end\n", runtime.StateFinished, label("FINISHED"), runtime.StateStopped, label("STOPPED · fallback"))
}

// gateLabels name the triggers of the gates before the judge: the plan's and the
// output schema's.
var gateLabels = map[runtime.Trigger]string{
	runtime.TriggerPlanOpen:                     "plan steps open",
	runtime.Trigger(runtime.StopPlanIncomplete): "plan_incomplete",
	runtime.TriggerOutputFeedback:               "answer does not match output.schema",
	runtime.Trigger(runtime.StopOutputInvalid):  "output_invalid (after output.retries)",
}

// triggerLabel names a trigger with the setting that governs it; "" leaves out one
// that cannot happen and needs no note.
func triggerLabel(t runtime.Trigger, st *spec.Settings, approvals bool) string {
	if l, ok := gateLabels[t]; ok {
		return l
	}
	g := st.Guards
	switch t {
	case runtime.TriggerToolCalls:
		return "tool calls"
	case runtime.TriggerDraft:
		return "draft answer"
	case runtime.TriggerResults:
		return "results · ≤ " + setting(st, "guards.max_parallel_tools", g.MaxParallelTools) + " in parallel"
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
	case runtime.TriggerJudgeFeedback:
		if st.Judge == nil {
			return "judge feedback (no judge)"
		}
		return "judge feedback · max_retries " + setting(st, "judge.max_retries", st.Judge.MaxRetries)
	case runtime.Trigger(runtime.StopMaxTurns):
		return "max_turns " + setting(st, "guards.max_turns", g.MaxTurns)
	case runtime.Trigger(runtime.StopBudget):
		var limits []string
		if g.MaxTokens > 0 {
			limits = append(limits, fmt.Sprintf("max_tokens %d", g.MaxTokens))
		}
		if g.MaxCost > 0 {
			limits = append(limits, "max_cost "+formatCost(g.MaxCost))
		}
		if len(limits) == 0 {
			return "budget (none set)"
		}
		return "budget " + strings.Join(limits, ", ")
	case runtime.Trigger(runtime.StopMaxToolRounds):
		return "max_tool_rounds " + setting(st, "guards.max_tool_rounds", g.MaxToolRounds)
	case runtime.Trigger(runtime.StopDuplicateCall):
		return "duplicate_calls " + setting(st, "guards.duplicate_calls", g.DuplicateCalls)
	case runtime.Trigger(runtime.StopTimeout):
		return "timeout ≤ " + setting(st, "guards.max_run_time", g.MaxRunTime)
	case runtime.Trigger(runtime.StopAwaitingApproval):
		if !approvals {
			return ""
		}
		return "awaiting_approval (waits ≤ " + setting(st, "approval.timeout", st.Approval.Timeout) + ")"
	case runtime.Trigger(runtime.StopApprovalTimeout):
		if !approvals {
			return ""
		}
		if st.Approval.OnTimeout != spec.OnTimeoutStop { // a late call is rejected, and the run goes on
			return "approval_timeout (on_timeout " + setting(st, "approval.on_timeout", st.Approval.OnTimeout) + ": never)"
		}
		return "approval_timeout (on_timeout " + setting(st, "approval.on_timeout", st.Approval.OnTimeout) + ")"
	}
	return string(t)
}

// remoteHost is the host of a remote agent's URL, as the graph names it: no
// path or query, which may hold what the environment put there.
func remoteHost(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "(url)"
}
