package main

import (
	"fmt"
	"io"

	"github.com/agentrun/agentrun/runtime/graph"
	"github.com/agentrun/agentrun/spec"
)

// writeWorkflowSteps lists a workflow's steps for explain, nested steps indented.
func writeWorkflowSteps(w io.Writer, wf *spec.Workflow, st *spec.Settings) {
	fmt.Fprintf(w, "\nworkflow: %d steps\n", len(wf.Steps))
	var list func(steps []spec.Step, indent string)
	list = func(steps []spec.Step, indent string) {
		for i := range steps {
			s := &steps[i]
			fmt.Fprintf(w, "%s%s: %s\n", indent, s.Name, graph.StepSummary(s, st))
			if s.When != nil && s.When.Source != "" {
				fmt.Fprintf(w, "%s  when %s (else skipped)\n", indent, s.When.Source)
			}
			for b, branch := range s.Parallel {
				fmt.Fprintf(w, "%s  branch %d:\n", indent, b+1)
				list(branch, indent+"    ")
			}
			list(s.Steps, indent+"  ")
		}
	}
	list(wf.Steps, "  ")
	answer := "the last step's text"
	if wf.Answer != nil {
		answer = fmt.Sprintf("%q", wf.Answer.Source)
	}
	fmt.Fprintf(w, "  answer: %s\n", answer)
}
