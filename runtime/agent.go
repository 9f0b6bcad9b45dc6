package runtime

import (
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
)

// Agent is a compiled spec: immutable and safe for concurrent runs. Per-run state
// lives in a run value.
type Agent struct {
	spec         *spec.Spec
	settings     *spec.Settings // every default applied
	model        model.Model
	judgeModel   model.Model
	routerModel  model.Model
	tools        []*agentTool
	byName       map[string]*agentTool
	offered      []model.ToolDef // every tool, in spec order
	instructions *spec.Template
	filters      map[spec.FilterStage][]*spec.Filter
	intents      map[string]*intent // nil when the spec declares none
	intentOrder  []*intent
	rules        *spec.Rules // the intents' routing rules
	store        store.Store
	knowledge    knowledge.Knowledge
	prices       Prices // by the model that answers each purpose's calls (see Compile)
	version      string
	digest       string
	// instructionsUseUser: the instructions render the user or the conversation,
	// so every answer depends on who asked (the FAQ cache's scope rule).
	instructionsUseUser bool
	// filtersUseUser: a filter's when reads the user, so what it lets through
	// depends on who asked.
	filtersUseUser bool
	clock          func() time.Time
	subAgents      map[string]*Agent // the agents entries' agents, by name
	workflow       *workflow         // the spec's workflow; nil: the model decides
	// output is the structured answer of the agent's runs (output.go), and
	// intentOutputs each intent's own, which wins; nil: free text.
	output        *structured
	intentOutputs map[string]*structured
}

// now is the clock approvals expire by: the agent's when it has one (tests move
// it on), else the host's.
func (a *Agent) now(h Host) time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return hostOf(h).Now()
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.spec.Name }

// Tools lists the tools as offered to the model.
func (a *Agent) Tools() []model.ToolDef { return a.offered }

// Settings are the agent's effective settings: the spec with every default applied.
// explain, graph and serve show these, never defaults of their own. They are the
// agent's own: read them, never change them.
func (a *Agent) Settings() *spec.Settings { return a.settings }

// PausedRuns is the agent's store as a keeper of paused runs, nil if it is none.
func (a *Agent) PausedRuns() store.PausedRuns {
	p, _ := a.store.(store.PausedRuns)
	return p
}
