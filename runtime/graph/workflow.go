package graph

import (
	"fmt"

	"github.com/agentrun/agentrun/spec"
)

// flowEdge is an edge waiting for the node it leads to.
type flowEdge struct{ from, label string }

// workflow adds a workflow: a when as a question with yes and skip edges, a
// parallel step as a fork and a join, a loop as its body with a back edge
// labelled with until and max, a for_each step with its list. Each edge comes
// right after the later of its two nodes.
func (b *builder) workflow(wf *spec.Workflow, st *spec.Settings) {
	b.open(GroupWorkflow, "workflow")
	b.node(Node{ID: workflowStartID, Kind: KindStart, Label: "start"})
	outs := b.flowSteps(wf.Steps, []flowEdge{{from: workflowStartID}}, st)
	answer := "answer · last step's text"
	if wf.Answer != nil {
		answer = "answer · " + wf.Answer.Source
	}
	b.node(Node{ID: workflowAnswerID, Kind: KindAnswer, Label: clip(answer, 80)})
	b.connect(outs, workflowAnswerID)
}

func (b *builder) connect(from []flowEdge, to string) {
	for _, e := range from {
		b.edge(Edge{From: e.from, To: to, Label: e.label, Kind: EdgeFlow})
	}
}

// flowSteps adds steps one after the other, starting from the edges in, and
// returns the edges that leave the last.
func (b *builder) flowSteps(steps []spec.Step, in []flowEdge, st *spec.Settings) []flowEdge {
	for i := range steps {
		in = b.flowStep(&steps[i], in, st)
	}
	return in
}

func (b *builder) flowStep(s *spec.Step, in []flowEdge, st *spec.Settings) []flowEdge {
	id := StepID(s.Name)
	var skip []flowEdge
	if s.When != nil && s.When.Source != "" {
		q := workflowID("when", s.Name)
		b.node(Node{ID: q, Kind: KindWhen, Label: "when " + clip(s.When.Source, 60)})
		b.connect(in, q)
		in = []flowEdge{{from: q, label: "yes"}}
		skip = []flowEdge{{from: q, label: "skip"}}
	}
	switch s.Kind() {
	case spec.StepParallel:
		fork, join := id, workflowID("join", s.Name)
		b.node(Node{ID: fork, Kind: KindParallel, Label: s.Name, Detail: "parallel · fork"})
		b.connect(in, fork)
		var outs []flowEdge
		for i := range s.Parallel {
			outs = append(outs, b.flowSteps(s.Parallel[i], []flowEdge{{from: fork, label: fmt.Sprintf("branch %d", i+1)}}, st)...)
		}
		b.node(Node{ID: join, Kind: KindJoin, Label: s.Name + " · join"})
		b.connect(outs, join)
		return append([]flowEdge{{from: join}}, skip...)
	case spec.StepLoop:
		head, until := id, workflowID("until", s.Name)
		b.node(Node{ID: head, Kind: KindLoop, Label: s.Name, Detail: "loop"})
		b.connect(in, head)
		outs := b.flowSteps(s.Steps, []flowEdge{{from: head}}, st)
		b.node(Node{ID: until, Kind: KindUntil, Label: "until " + clip(s.Loop.Until.Source, 60)})
		b.connect(outs, until)
		b.edge(Edge{From: until, To: head, Label: fmt.Sprintf("no · again, at most %d times", s.Loop.Max), Kind: EdgeFlow})
		return append([]flowEdge{{from: until, label: "yes"}}, skip...)
	}
	kind := KindStep
	if s.ForEach != nil && s.ForEach.Source != "" {
		kind = KindForEach
	}
	b.node(Node{ID: id, Kind: kind, Label: s.Name, Detail: StepSummary(s, st)})
	b.connect(in, id)
	return append([]flowEdge{{from: id}}, skip...)
}
