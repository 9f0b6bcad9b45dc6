package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Plan is what the model would receive for one intent, without running anything.
type Plan struct {
	Intent       string // "" when the agent has no intents
	Kind         spec.IntentKind
	Memory       spec.MemoryLevel
	SystemPrompt string          // the instructions, rendered for a placeholder user
	Tools        []model.ToolDef // the tools offered
	AllTools     []model.ToolDef // every tool of the agent
	// Cache and RAG are the intent's knowledge stages; nil when it has none. A run
	// with RAG adds up to RAG.MaxTokens tokens of passages to the system prompt.
	Cache *spec.CacheSettings
	RAG   *spec.RAGSettings
	// PlanMode is the intent's plan mode (nil: off); Agent the agents entry the
	// intent hands its runs to ("" for none).
	PlanMode *spec.PlanSettings
	Agent    string
}

// Explain lays out the request the agent would make for an intent ("" for an agent
// without intents). ok is false for an unknown intent.
func (a *Agent) Explain(intentName string) (Plan, bool) { return a.ExplainFor(intentName, nil) }

// ExplainFor is Explain for a user with these attributes (context.user): an unset
// one renders as "" in the instructions, as it would in a run.
func (a *Agent) ExplainFor(intentName string, attributes map[string]string) (Plan, bool) {
	p := Plan{Tools: a.offered, AllTools: a.offered, Memory: spec.MemoryNone, PlanMode: a.settings.Plan}
	var it *intent
	if a.intents != nil {
		if it = a.intents[intentName]; it == nil {
			return p, false
		}
		p.Intent, p.Kind, p.Memory, p.Tools = it.name, it.kind, it.memory, it.tools
		p.Cache, p.RAG, p.PlanMode, p.Agent = it.cache, it.rag, it.plan, it.agent
	}
	r := &run{agent: a, req: &Request{User: tool.User{ID: "<user>", Attributes: attributes}, Conversation: "<conversation>", Intent: intentName}, result: &Result{}, intent: it}
	r.vars = runVars(a.spec, r.req)
	if p.Memory.Injects() {
		r.memory.block = "## What is known about this user\n[" + string(p.Memory) + " memory of the user, added at run time]"
	}
	if p.RAG != nil {
		r.knowledge.rag = fmt.Sprintf("%s\n\n[up to %d passages of collection %s, at most %d tokens, added at run time]",
			ragPreamble, p.RAG.TopK, p.RAG.Collection, p.RAG.MaxTokens)
	}
	p.SystemPrompt = r.systemPrompt()
	return p, true
}

// Route runs only the router for a request: pre-recognised intent, rules, classifier,
// fallback. It returns the intent, how it was chosen and why.
func (a *Agent) Route(ctx context.Context, req Request) (name string, how RoutedBy, detail string) {
	var last Event
	outer := req.Observer
	req.Observer = ObserverFunc(func(e Event) {
		if e.Kind == EventIntent {
			last = e
		}
		if outer != nil {
			outer.Observe(e)
		}
	})
	// The classifier's call is charged like a run's (charge, overBudget): the run
	// needs the tree's mutex a real run has.
	r := &run{agent: a, req: &req, ctx: ctx, state: StateThinking, result: &Result{}, budget: budgetState{tally: &sync.Mutex{}}, started: hostOf(req.Host).Now()}
	r.vars = runVars(a.spec, &req)
	r.messages = []model.Message{{Role: model.RoleUser, Content: req.Input}}
	if !r.filterText(spec.StageInput, &r.messages[0].Content) { // routes what a run would
		return "", RoutedNone, r.result.Detail
	}
	r.prepareContext()
	return r.result.Intent, r.result.IntentHow, last.Message
}
