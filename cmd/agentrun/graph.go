package main

import (
	"fmt"
	"io"
	"strings"

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
			agent, s, err := loadAgent(cmd, args[0], "", false)
			if err != nil {
				return err
			}
			writeGraph(cmd.OutOrStdout(), agent, s)
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
	if len(s.Intents) > 0 {
		r := s.Routing
		fmt.Fprintf(&b, "  subgraph routing[%s]\n    direction TB\n", label(fmt.Sprintf("routing · %s · fallback %s", cmpOr(r.Recognizer, "llm"), cmpOr(r.Fallback, "none"))))
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
	for _, in := range s.Intents {
		from := mermaidID("i_", in.Name)
		kind := cmpOr(in.Kind, "task")
		if in.Domain != "" && kind == "task" {
			fmt.Fprintf(&b, "  %s --> %s\n", from, mermaidID("d_", in.Domain))
		}
		for _, t := range in.Tools {
			fmt.Fprintf(&b, "  %s --> %s\n", from, mermaidID("t_", t))
		}
	}
	for _, d := range s.Domains {
		for _, t := range d.Tools {
			fmt.Fprintf(&b, "  %s --> %s\n", mermaidID("d_", d.Name), mermaidID("t_", t))
		}
	}
	writeStates(&b, s)
	io.WriteString(w, b.String())
}

// writeStates draws the run's state machine from runtime.Transitions, each edge
// labelled with the guards that decide it.
func writeStates(b *strings.Builder, s *spec.Spec) {
	g := s.Guards
	turns := orDefault(g.MaxTurns, runtime.DefaultMaxTurns)
	rounds := orDefault(g.MaxToolRounds, runtime.DefaultMaxToolRounds)
	judge := "no judge: accepted"
	retry := "judge feedback"
	if j := s.Judge; j != nil {
		judge = "judge passed"
		retry = "judge feedback · max_retries " + orDefault(deref(j.MaxRetries), runtime.DefaultJudgeRetries)
	}
	labels := map[[2]runtime.State]string{
		{runtime.StateThinking, runtime.StateToolExecuting}: "tool calls",
		{runtime.StateThinking, runtime.StateValidating}:    "draft answer",
		{runtime.StateThinking, runtime.StateStopped}:       "max_turns " + turns + " · max_tool_rounds " + rounds + " · model_error",
		{runtime.StateToolExecuting, runtime.StateThinking}: "results · ≤ " + orDefault(g.MaxParallelTools, runtime.DefaultMaxParallelTools) + " in parallel",
		{runtime.StateToolExecuting, runtime.StateStopped}:  "duplicate_calls " + cmpOr(g.DuplicateCalls, "stop"),
		{runtime.StateValidating, runtime.StateFinished}:    judge,
		{runtime.StateValidating, runtime.StateThinking}:    retry,
		{runtime.StateValidating, runtime.StateStopped}:     "judge_rejected · blocked",
	}
	fmt.Fprintf(b, "  subgraph run[%s]\n    direction LR\n", label("run · state machine"))
	fmt.Fprintf(b, "    s_start((start)) --> s_%s\n", runtime.StateThinking)
	transitions := runtime.Transitions()
	for _, from := range []runtime.State{runtime.StateThinking, runtime.StateToolExecuting, runtime.StateValidating} {
		for _, to := range transitions[from] {
			fmt.Fprintf(b, "    s_%s -- %s --> s_%s\n", from, label(labels[[2]runtime.State{from, to}]), to)
		}
	}
	fmt.Fprintf(b, "    s_%s((%s))\n    s_%s((%s))\n  end\n", runtime.StateFinished, label("FINISHED"), runtime.StateStopped, label("STOPPED · fallback"))
}
