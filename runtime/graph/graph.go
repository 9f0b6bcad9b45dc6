package graph

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
)

// Graph is an agent as nodes, edges between them and groups of nodes.
type Graph struct {
	Agent  string  `json:"agent"`
	Nodes  []Node  `json:"nodes"`
	Edges  []Edge  `json:"edges"`
	Groups []Group `json:"groups"`
}

// Node is one thing of the agent. Label names it; Detail says what it is or
// how it is set (an intent's kind and memory, a tool's kind, a step's summary).
type Node struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Label  string `json:"label"`
	Detail string `json:"detail,omitempty"`
}

// Edge leads from one node to another. A transition's Label is its trigger
// (runtime.Trigger) and its Detail the settings that decide it.
type Edge struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Label  string `json:"label,omitempty"`
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
}

// Group gathers nodes drawn together, in order.
type Group struct {
	ID    string   `json:"id"`
	Label string   `json:"label"`
	Nodes []string `json:"nodes"`
}

// Node kinds.
const (
	KindIntent = "intent"
	KindDomain = "domain"
	KindTool   = "tool"
	KindAgent  = "agent" // a sub-agent, called as a tool or handed a run
	KindStart  = "start" // where the run, or the workflow, starts
	KindState  = "state" // a state of the run's state machine
	// A workflow's nodes: a step, a for_each step, a parallel step's fork and
	// join, a loop's head and its until, a step's when, the workflow's answer.
	KindStep     = "step"
	KindForEach  = "for_each"
	KindParallel = "parallel"
	KindJoin     = "join"
	KindLoop     = "loop"
	KindUntil    = "until"
	KindWhen     = "when"
	KindAnswer   = "answer"
)

// Edge kinds.
const (
	EdgeDomain     = "domain"     // a task intent offers its domain's tools
	EdgeTool       = "tool"       // an intent or a domain offers a tool
	EdgeHandoff    = "handoff"    // an intent hands its runs to an agent
	EdgeStart      = "start"      // the run starts in a state
	EdgeTransition = "transition" // the state machine moves on the edge's trigger
	EdgeFlow       = "flow"       // a workflow goes on from one node to the next
)

// Group ids.
const (
	GroupRouting  = "routing"
	GroupDomains  = "domains"
	GroupTools    = "tools"
	GroupWorkflow = "workflow"
	GroupRun      = "run"
)

// IntentID and the others are the ids of an agent's nodes, as events name them.
func IntentID(name string) string         { return "intent:" + name }
func DomainID(name string) string         { return "domain:" + name }
func ToolID(name string) string           { return "tool:" + name }
func AgentID(name string) string          { return "agent:" + name }
func StateID(s runtime.State) string      { return "state:" + string(s) }
func StepID(name string) string           { return "step:" + name }
func workflowID(what, step string) string { return "workflow:" + what + ":" + step }

// The nodes the drawing adds: where the run starts, and the workflow's start and
// answer. No state, step or workflow node of a step can have these ids.
const (
	runStartID       = "run:start"
	workflowStartID  = "workflow:start"
	workflowAnswerID = "workflow:answer"
)

// builder gathers a graph's parts in the order they are drawn.
type builder struct {
	g     Graph
	group *Group // the group nodes go into
}

func (b *builder) open(id, label string) {
	b.g.Groups = append(b.g.Groups, Group{ID: id, Label: label, Nodes: []string{}})
	b.group = &b.g.Groups[len(b.g.Groups)-1]
}

func (b *builder) node(n Node) {
	b.g.Nodes = append(b.g.Nodes, n)
	b.group.Nodes = append(b.group.Nodes, n.ID)
}

func (b *builder) edge(e Edge) { b.g.Edges = append(b.g.Edges, e) }

// Build is the graph of a compiled agent and the spec it was compiled from.
func Build(agent *runtime.Agent, s *spec.Spec) *Graph {
	b := &builder{g: Graph{Agent: s.Name, Nodes: []Node{}, Edges: []Edge{}, Groups: []Group{}}}
	st := agent.Settings()
	ids, kinds := toolNodes(agent, s, st)
	if len(s.Intents) > 0 {
		r := st.Routing
		b.open(GroupRouting, fmt.Sprintf("routing · %s · fallback %s", r.Recognizer, cmp.Or(r.Fallback, "none")))
		for _, in := range s.Intents {
			plan, _ := agent.Explain(in.Name)
			b.node(Node{ID: IntentID(in.Name), Kind: KindIntent, Label: in.Name, Detail: fmt.Sprintf("%s · memory %s", plan.Kind, plan.Memory)})
		}
		if len(s.Domains) > 0 {
			b.open(GroupDomains, "domains")
			for _, d := range s.Domains {
				b.node(Node{ID: DomainID(d.Name), Kind: KindDomain, Label: d.Name})
			}
		}
	}
	b.open(GroupTools, "tools")
	for _, d := range agent.Tools() {
		kind := KindTool
		if ids[d.Name] != ToolID(d.Name) {
			kind = KindAgent
		}
		b.node(Node{ID: ids[d.Name], Kind: kind, Label: d.Name, Detail: kinds[d.Name]})
	}
	b.offers(s, st, ids)
	if s.Workflow != nil {
		b.workflow(s.Workflow, st)
	}
	b.states(st, machineOf(s, st))
	return &b.g
}

// toolNodes names the node of each tool the agent may offer (a sub-agent's is
// agent:NAME) and says what kind of tool it is.
func toolNodes(agent *runtime.Agent, s *spec.Spec, st *spec.Settings) (ids, kinds map[string]string) {
	ids, kinds = map[string]string{}, map[string]string{}
	for _, d := range agent.Tools() {
		ids[d.Name] = ToolID(d.Name)
	}
	for _, t := range s.Tools {
		kinds[t.Name] = t.Kind()
	}
	for _, a := range s.Agents {
		ids[a.Name] = AgentID(a.Name)
		kinds[a.Name] = "agent " + a.Spec
		if a.Remote() {
			kinds[a.Name] = "remote agent " + RemoteHost(a.A2A.URL)
		}
	}
	if st.Plan != nil || slices.ContainsFunc(st.Intents, func(in spec.IntentSettings) bool { return in.Plan != nil }) {
		kinds[spec.PlanToolName] = "plan mode"
	}
	return ids, kinds
}

// offers draws what each intent offers (its domain, its own tools, the agent it
// hands off to) and each domain's tools.
func (b *builder) offers(s *spec.Spec, st *spec.Settings, ids map[string]string) {
	tool := func(name string) string { return cmp.Or(ids[name], ToolID(name)) }
	for i, in := range s.Intents {
		from := IntentID(in.Name)
		if in.Domain != "" && st.Intents[i].Kind == spec.IntentTask {
			b.edge(Edge{From: from, To: DomainID(in.Domain), Kind: EdgeDomain})
		}
		for _, t := range in.Tools {
			b.edge(Edge{From: from, To: tool(t), Kind: EdgeTool})
		}
		if in.Agent != "" {
			b.edge(Edge{From: from, To: cmp.Or(ids[in.Agent], AgentID(in.Agent)), Label: "hands off", Kind: EdgeHandoff})
		}
	}
	for _, d := range s.Domains {
		for _, t := range d.Tools {
			b.edge(Edge{From: DomainID(d.Name), To: tool(t), Kind: EdgeTool})
		}
	}
}

// RemoteHost is the host of a remote agent's URL, as the graph names it: no
// path or query, which may hold what the environment put there.
func RemoteHost(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "(url)"
}
