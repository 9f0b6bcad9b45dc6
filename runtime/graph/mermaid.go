package graph

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteMermaid draws g as a Mermaid flowchart: each group a subgraph; the
// groups that only list nodes first, then the edges between groups, then the
// groups with edges of their own (a workflow, the state machine).
func WriteMermaid(w io.Writer, g *Graph) error {
	var b strings.Builder
	fmt.Fprintf(&b, "flowchart LR\n  %%%% agentrun graph of %s\n", g.Agent)
	nodes := map[string]*Node{}
	for i := range g.Nodes {
		nodes[g.Nodes[i].ID] = &g.Nodes[i]
	}
	groupOf := map[string]string{}
	for _, gr := range g.Groups {
		for _, id := range gr.Nodes {
			groupOf[id] = gr.ID
		}
	}
	inner := map[string][]Edge{} // a group's own edges
	var between []Edge
	for _, e := range g.Edges {
		if gr := groupOf[e.From]; gr != "" && gr == groupOf[e.To] {
			inner[gr] = append(inner[gr], e)
		} else {
			between = append(between, e)
		}
	}
	for _, gr := range g.Groups {
		if len(inner[gr.ID]) == 0 {
			writeGroup(&b, &gr, nodes, nil)
		}
	}
	for _, e := range between {
		writeEdge(&b, "  ", e)
	}
	for _, gr := range g.Groups {
		if len(inner[gr.ID]) > 0 {
			writeGroup(&b, &gr, nodes, inner[gr.ID])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeGroup draws a group. A group whose edges are transitions is a state
// machine, drawn left to right: its start, its transitions, and its final
// states. In any other group each edge follows the later of its nodes.
func writeGroup(b *strings.Builder, gr *Group, nodes map[string]*Node, edges []Edge) {
	machine := slices.ContainsFunc(edges, func(e Edge) bool { return e.Kind == EdgeTransition })
	direction := "TB"
	if machine {
		direction = "LR"
	}
	fmt.Fprintf(b, "  subgraph %s[%s]\n    direction %s\n", gr.ID, label(gr.Label), direction)
	if machine {
		writeMachine(b, gr, nodes, edges)
	} else {
		declared := map[string]bool{}
		for _, id := range gr.Nodes {
			writeNode(b, nodes[id])
			declared[id] = true
			for len(edges) > 0 && declared[edges[0].From] && declared[edges[0].To] {
				writeEdge(b, "    ", edges[0])
				edges = edges[1:]
			}
		}
		for _, e := range edges {
			writeEdge(b, "    ", e)
		}
	}
	b.WriteString("  end\n")
}

// writeMachine draws a state machine: a transition edge per pair of states,
// labelled with the details of its triggers; the states that are not declared
// by a node of their own are drawn with their names.
func writeMachine(b *strings.Builder, gr *Group, nodes map[string]*Node, edges []Edge) {
	final := map[string]bool{}
	for _, id := range gr.Nodes {
		final[id] = nodes[id].Kind == KindState
	}
	for i := 0; i < len(edges); {
		e := edges[i]
		if e.Kind != EdgeTransition {
			if n := nodes[e.From]; n.Kind == KindStart {
				fmt.Fprintf(b, "    %s((%s)) --> %s\n", mermaidID(e.From), n.Label, mermaidID(e.To))
			} else {
				writeEdge(b, "    ", e)
			}
			i++
			continue
		}
		final[e.From] = false
		var parts []string
		for ; i < len(edges) && edges[i].From == e.From && edges[i].To == e.To && edges[i].Kind == EdgeTransition; i++ {
			if d := edges[i].Detail; len(parts) == 0 || parts[len(parts)-1] != d {
				parts = append(parts, d)
			}
		}
		fmt.Fprintf(b, "    %s -- %s --> %s\n", mermaidID(e.From), label(strings.Join(parts, " · ")), mermaidID(e.To))
	}
	for _, id := range gr.Nodes {
		if final[id] {
			n := nodes[id]
			fmt.Fprintf(b, "    %s((%s))\n", mermaidID(id), label(joined(n.Label, " · ", n.Detail)))
		}
	}
}

// shapes are the Mermaid shapes of the node kinds, and how a node's detail
// joins its label.
var shapes = map[string]struct{ open, close, sep string }{
	KindIntent:   {"([", "])", "\n"},
	KindDomain:   {"{{", "}}", "\n"},
	KindTool:     {"[", "]", " · "},
	KindAgent:    {"[", "]", " · "},
	KindStep:     {"[", "]", "\n"},
	KindForEach:  {"[[", "]]", "\n"},
	KindParallel: {"[/", "/]", "\n"},
	KindJoin:     {`[\`, `\]`, "\n"},
	KindLoop:     {"([", "])", "\n"},
	KindUntil:    {"{", "}", "\n"},
	KindWhen:     {"{", "}", "\n"},
	KindAnswer:   {"([", "])", "\n"},
	KindState:    {"((", "))", " · "},
}

func writeNode(b *strings.Builder, n *Node) {
	if n.Kind == KindStart {
		fmt.Fprintf(b, "    %s((%s))\n", mermaidID(n.ID), n.Label)
		return
	}
	s := shapes[n.Kind]
	text := n.Label
	if n.Kind == KindTool || n.Kind == KindAgent || n.Detail != "" {
		text += s.sep + n.Detail // a tool of no known kind still shows its separator, as before
	}
	fmt.Fprintf(b, "    %s%s%s%s\n", mermaidID(n.ID), s.open, label(text), s.close)
}

func writeEdge(b *strings.Builder, indent string, e Edge) {
	if e.Label == "" {
		fmt.Fprintf(b, "%s%s --> %s\n", indent, mermaidID(e.From), mermaidID(e.To))
		return
	}
	fmt.Fprintf(b, "%s%s -- %s --> %s\n", indent, mermaidID(e.From), label(e.Label), mermaidID(e.To))
}

func joined(a, sep, b string) string {
	if b == "" {
		return a
	}
	return a + sep + b
}

// mermaidPrefixes turn a node id's kind into the prefix of its Mermaid id.
var mermaidPrefixes = map[string]string{"intent": "i_", "domain": "d_", "tool": "t_", "agent": "t_", "step": "w_"}

// mermaidID is the Mermaid id of a node: i_, d_, t_ (a tool's or an agent's), w_
// (a step's) and the escaped name; s_STATE; W_start, W_answer and W_WHAT_STEP for
// what a workflow's drawing adds. A name's characters other than letters, digits
// and _ are escaped, so ids never collide.
func mermaidID(id string) string {
	kind, name, _ := strings.Cut(id, ":")
	switch kind {
	case "state", "run":
		return "s_" + name
	case "workflow":
		if what, step, ok := strings.Cut(name, ":"); ok {
			return escapeID("W_"+what+"_", step)
		}
		return "W_" + name
	}
	return escapeID(mermaidPrefixes[kind], name)
}

func escapeID(prefix, name string) string {
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
