package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Wiring replaces what an agent's runs reach outside themselves — its models,
// tools, store and knowledge — with stand-ins: a durable engine's workflow turns
// each call into an activity that a worker runs on the real one. Each function
// gets the path of the agent in the tree of agents entries (nil for the top
// agent, then the entries' names) and the real value; nil leaves that kind as it
// is.
type Wiring struct {
	Model     func(agent []string, purpose Purpose, m model.Model) model.Model
	Tool      func(agent []string, t *spec.Tool, impl tool.Tool) tool.Tool
	Store     func(agent []string, s store.Store) store.Store
	Knowledge func(agent []string, k knowledge.Knowledge) knowledge.Knowledge
}

// Rewire returns a copy of the agent, and of its sub-agents, wired by w. The
// copy makes the same decisions as a: only the calls it makes go elsewhere.
func (a *Agent) Rewire(w Wiring) *Agent { return a.rewire(nil, w) }

func (a *Agent) rewire(path []string, w Wiring) *Agent {
	b := *a
	path = slices.Clip(path)
	if w.Model != nil {
		wire := func(p Purpose, m model.Model) model.Model {
			if m == nil {
				return nil
			}
			return w.Model(path, p, m)
		}
		b.model = wire(PurposeAgent, a.model)
		b.judgeModel = wire(PurposeJudge, a.judgeModel)
		b.routerModel = wire(PurposeClassifier, a.routerModel)
	}
	if w.Tool != nil {
		b.tools = make([]*agentTool, len(a.tools))
		b.byName = make(map[string]*agentTool, len(a.tools))
		for i, t := range a.tools {
			c := *t
			if c.impl != nil {
				st := c.spec
				if st == nil {
					st = &spec.Tool{Name: c.def.Name}
				}
				c.impl = w.Tool(path, st, c.impl)
			}
			b.tools[i] = &c
			b.byName[c.def.Name] = &c
		}
	}
	if w.Store != nil && a.store != nil {
		b.store = w.Store(path, a.store)
	}
	if w.Knowledge != nil && a.knowledge != nil {
		b.knowledge = w.Knowledge(path, a.knowledge)
	}
	if a.subAgents != nil {
		b.subAgents = make(map[string]*Agent, len(a.subAgents))
		for _, name := range slices.Sorted(maps.Keys(a.subAgents)) {
			b.subAgents[name] = a.subAgents[name].rewire(append(path, name), w)
		}
	}
	return &b
}

// Reach finds what a Wiring's function was given: the model of a purpose, the
// tool of a name, the store or the knowledge of the agent at path. A worker
// running activities resolves each call's target this way.
func (a *Agent) Reach(path []string) (*Agent, error) {
	for i, name := range path {
		sub := a.subAgents[name]
		if sub == nil {
			return nil, fmt.Errorf("agent %s has no agents entry %q", a.Name(), path[i])
		}
		a = sub
	}
	return a, nil
}

// Model is the model answering the purpose's calls.
func (a *Agent) Model(p Purpose) model.Model {
	switch p {
	case PurposeJudge:
		return a.judgeModel
	case PurposeClassifier:
		return a.routerModel
	}
	return a.model
}

// Store is where the agent's runs remember; nil for none.
func (a *Agent) Store() store.Store { return a.store }

// Knowledge answers the agent's knowledge stages; nil for none.
func (a *Agent) Knowledge() knowledge.Knowledge { return a.knowledge }

// CallTool runs the named tool as a run of the agent would: the input's bound
// arguments already in place, templates seeing the user as the spec declares
// it, and a panic in the tool turned into an error.
func (a *Agent) CallTool(ctx context.Context, in tool.Input) (string, error) {
	t := a.byName[in.Name]
	if t == nil || t.impl == nil {
		return "", fmt.Errorf("agent %s has no tool %q", a.Name(), in.Name)
	}
	vars := runVars(a.spec, &Request{User: in.User, Conversation: in.Conversation})
	in.Values = &vars
	return callTool(ctx, t.impl, in)
}

// Digest identifies what the agent is made of (Options.Digest).
func (a *Agent) Digest() string { return a.digest }
