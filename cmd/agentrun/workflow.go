package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
)

// stepSummary says what a workflow step does, in one line: its kind and target,
// and the settings that shape how it runs.
func stepSummary(s *spec.Step, st *spec.Settings) string {
	var parts []string
	switch s.Kind() {
	case spec.StepTool:
		parts = append(parts, "tool "+s.Tool)
	case spec.StepModelK:
		m := "model"
		if s.Model.Schema != nil {
			m += " (JSON schema)"
		}
		parts = append(parts, m)
	case spec.StepAgent:
		parts = append(parts, "agent "+s.Agent)
	case spec.StepParallel:
		parts = append(parts, fmt.Sprintf("parallel · %d branches", len(s.Parallel)))
	case spec.StepLoop:
		parts = append(parts, fmt.Sprintf("loop until %s · max %d", s.Loop.Until.Source, s.Loop.Max))
	}
	if s.ForEach != nil && s.ForEach.Source != "" {
		n := s.MaxParallel
		at := fmt.Sprintf("%d at once", n)
		if n == 0 {
			at = setting(st, "guards.max_parallel_tools", st.Guards.MaxParallelTools) + " at once"
		}
		parts = append(parts, fmt.Sprintf("for_each %s · %s", s.ForEach.Source, at))
	}
	if s.OnError != "" {
		parts = append(parts, "on_error "+string(s.OnError))
	} else {
		parts = append(parts, "on_error "+string(spec.DefaultStepOnError)+" (default)")
	}
	return strings.Join(parts, " · ")
}

// writeWorkflowSteps lists a workflow's steps for explain, nested steps indented.
func writeWorkflowSteps(w io.Writer, wf *spec.Workflow, st *spec.Settings) {
	fmt.Fprintf(w, "\nworkflow: %d steps\n", len(wf.Steps))
	var list func(steps []spec.Step, indent string)
	list = func(steps []spec.Step, indent string) {
		for i := range steps {
			s := &steps[i]
			fmt.Fprintf(w, "%s%s: %s\n", indent, s.Name, stepSummary(s, st))
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

// flowEdge is an edge waiting for the node it leads to.
type flowEdge struct{ from, label string }

// Node ids: a step's is w_NAME; the nodes the drawing adds start with W_, which a
// step's name (lower-case) cannot produce, so a step named start, answer or
// x_when never shares a node with them.
const (
	flowStartID  = "W_start"
	flowAnswerID = "W_answer"
)

// flowNodeID is the id of a node drawn for a step besides its own: its when, a
// parallel step's join, a loop's until.
func flowNodeID(what, step string) string { return mermaidID("W_"+what+"_", step) }

// writeWorkflowGraph draws a workflow as a Mermaid flowchart: a when as a diamond
// with yes and skip edges, a parallel step as a fork and a join, a loop as its body
// with a back edge labelled with until and max, a for_each step with its list.
func writeWorkflowGraph(b *strings.Builder, wf *spec.Workflow, st *spec.Settings) {
	fmt.Fprintf(b, "  subgraph workflow[%s]\n    direction TB\n", label("workflow"))
	fmt.Fprintf(b, "    %s((start))\n", flowStartID)
	outs := writeFlowSteps(b, wf.Steps, []flowEdge{{from: flowStartID}}, st)
	answer := "answer · last step's text"
	if wf.Answer != nil {
		answer = "answer · " + wf.Answer.Source
	}
	fmt.Fprintf(b, "    %s([%s])\n", flowAnswerID, label(clip(answer, 80)))
	connect(b, outs, flowAnswerID)
	b.WriteString("  end\n")
}

func connect(b *strings.Builder, from []flowEdge, to string) {
	for _, e := range from {
		if e.label == "" {
			fmt.Fprintf(b, "    %s --> %s\n", e.from, to)
		} else {
			fmt.Fprintf(b, "    %s -- %s --> %s\n", e.from, label(e.label), to)
		}
	}
}

// writeFlowSteps draws steps one after the other, starting from the edges in, and
// returns the edges that leave the last.
func writeFlowSteps(b *strings.Builder, steps []spec.Step, in []flowEdge, st *spec.Settings) []flowEdge {
	for i := range steps {
		in = writeFlowStep(b, &steps[i], in, st)
	}
	return in
}

func writeFlowStep(b *strings.Builder, s *spec.Step, in []flowEdge, st *spec.Settings) []flowEdge {
	id := mermaidID("w_", s.Name)
	var skip []flowEdge
	if s.When != nil && s.When.Source != "" {
		q := flowNodeID("when", s.Name)
		fmt.Fprintf(b, "    %s{%s}\n", q, label("when "+clip(s.When.Source, 60)))
		connect(b, in, q)
		in = []flowEdge{{from: q, label: "yes"}}
		skip = []flowEdge{{from: q, label: "skip"}}
	}
	text := s.Name + "\n" + stepSummary(s, st)
	switch s.Kind() {
	case spec.StepParallel:
		fork, join := id, flowNodeID("join", s.Name)
		fmt.Fprintf(b, "    %s[/%s/]\n", fork, label(s.Name+"\nparallel · fork"))
		connect(b, in, fork)
		var outs []flowEdge
		for i := range s.Parallel {
			outs = append(outs, writeFlowSteps(b, s.Parallel[i], []flowEdge{{from: fork, label: fmt.Sprintf("branch %d", i+1)}}, st)...)
		}
		fmt.Fprintf(b, "    %s[\\%s\\]\n", join, label(s.Name+" · join"))
		connect(b, outs, join)
		return append([]flowEdge{{from: join}}, skip...)
	case spec.StepLoop:
		head, until := id, flowNodeID("until", s.Name)
		fmt.Fprintf(b, "    %s([%s])\n", head, label(s.Name+"\nloop"))
		connect(b, in, head)
		outs := writeFlowSteps(b, s.Steps, []flowEdge{{from: head}}, st)
		fmt.Fprintf(b, "    %s{%s}\n", until, label("until "+clip(s.Loop.Until.Source, 60)))
		connect(b, outs, until)
		fmt.Fprintf(b, "    %s -- %s --> %s\n", until, label(fmt.Sprintf("no · again, at most %d times", s.Loop.Max)), head)
		return append([]flowEdge{{from: until, label: "yes"}}, skip...)
	}
	shape := "[%s]"
	if s.ForEach != nil && s.ForEach.Source != "" {
		shape = "[[%s]]"
	}
	fmt.Fprintf(b, "    %s"+shape+"\n", id, label(text))
	connect(b, in, id)
	return append([]flowEdge{{from: id}}, skip...)
}

// isWorkflowTrigger reports whether only a workflow's run moves on t.
func isWorkflowTrigger(t runtime.Trigger) bool {
	return t == runtime.TriggerWorkflowDone || t == runtime.Trigger(runtime.StopWorkflowFailed)
}
