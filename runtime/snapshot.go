package runtime

// A run between two executions: what a pause or a checkpoint writes
// (snapshot) and the execution that goes on with it reads back (restore).

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
)

// pausedState is everything a paused run needs to go on in another process: the
// exchange so far, the guards' counters, and the calls of the response it stopped
// in, each with its result or its approval.
type pausedState struct {
	Format            int                 `json:"format"`
	SpecVersion       string              `json:"spec_version,omitempty"`
	SpecFile          string              `json:"spec_file,omitempty"` // absolute, so another process can load the agent
	User              tool.User           `json:"user"`
	Conversation      string              `json:"conversation,omitempty"`
	TraceConversation string              `json:"trace_conversation,omitempty"`
	Intent            string              `json:"intent,omitempty"`
	History           []model.Message     `json:"history,omitempty"`
	StoredSeen        bool                `json:"stored_seen,omitempty"` // the store answers seen() for the conversation
	Seen              map[string][]string `json:"seen,omitempty"`        // the caller's (Request.Seen)
	Revealed          map[string][]string `json:"revealed,omitempty"`    // what the run revealed before it paused
	Messages          []model.Message     `json:"messages"`
	Feedback          []int               `json:"feedback,omitempty"`
	Profile           string              `json:"profile,omitempty"`
	Memory            string              `json:"memory,omitempty"`
	RAG               string              `json:"rag,omitempty"`
	Signatures        map[string]string   `json:"signatures,omitempty"`
	Rejections        int                 `json:"rejections,omitempty"`
	PlanRejections    int                 `json:"plan_rejections,omitempty"`
	OutputRejections  int                 `json:"output_rejections,omitempty"`
	SpentTurns        int                 `json:"spent_turns,omitempty"` // model calls of the run and its sub-runs
	FactChanges       []store.FactChange  `json:"fact_changes,omitempty"`
	Cost              float64             `json:"cost,omitempty"`
	CostUnknown       bool                `json:"cost_unknown,omitempty"`
	CostUnchecked     bool                `json:"cost_unchecked,omitempty"`
	Result            Result              `json:"result"`
	StepArgs          []string            `json:"step_args,omitempty"` // the steps' model-visible arguments
	Finish            model.FinishReason  `json:"finish,omitempty"`
	Calls             []pausedCall        `json:"calls"`
	// ClaimedUntil is when the execution that claimed the run to resume it is
	// given up for dead: its max_run_time (its own spec's) and claimGrace after
	// the claim.
	ClaimedUntil time.Time `json:"claimed_until,omitzero"`
	// Decided are the ids of the calls earlier pauses of the run waited on.
	Decided []string `json:"decided,omitempty"`
	// SeenError says why the run could not ask the store about the entities of
	// the conversation's earlier turns: seen() checks keep failing closed.
	SeenError string `json:"seen_error,omitempty"`
	// A checkpoint's (see Checkpoint): when the run started, and the paused run
	// it resumed, whose record its final commit deletes.
	Started       time.Time `json:"started,omitzero"`
	Resumed       string    `json:"resumed,omitempty"`
	PausedVersion int       `json:"paused_version,omitempty"`
	// Placement is the engine the run executes on; none for a process on the
	// store. A record written before it was kept reads as none.
	Placement Placement `json:"placement,omitzero"`
}

const pausedFormat = 1

// pausedCall is one call of the response the run paused in: done (its result kept)
// or waiting (Approval set, Outcome empty).
type pausedCall struct {
	ToolCall  model.ToolCall `json:"tool_call"`
	Outcome   Outcome        `json:"outcome,omitempty"`
	Refusal   Refusal        `json:"refusal,omitempty"`
	Result    string         `json:"result,omitempty"`
	ModelArgs string         `json:"model_args,omitempty"`
	Ran       string         `json:"ran,omitempty"`
	Discarded []string       `json:"discarded,omitempty"`
	Duration  time.Duration  `json:"duration,omitempty"`
	Approval  *Approval      `json:"approval,omitempty"`
}

// restore rebuilds a paused run's state for the execution that resumes it.
func (a *Agent) restore(ctx context.Context, p *store.PausedRun, st *pausedState, req *ResumeRequest) *run {
	rq := &Request{User: st.User, Conversation: st.Conversation, TraceConversation: st.TraceConversation, Intent: st.Intent,
		History: st.History, Seen: st.Seen, Observer: req.Observer, OnDelta: req.OnDelta, RunID: p.ID, Host: req.Host}
	res := st.Result
	res.RunID, res.Pending, res.Stop, res.Detail, res.Answer = p.ID, nil, "", "", ""
	res.Prior = &Prior{Steps: len(res.Steps), Usage: res.Usage, Cost: st.Cost}
	for i := range res.Steps {
		if i < len(st.StepArgs) {
			res.Steps[i].modelArgs = st.StepArgs[i]
		}
	}
	r := &run{agent: a, req: rq, ctx: ctx, state: StateToolExecuting, result: &res, messages: st.Messages,
		signatures: st.Signatures, started: hostOf(req.Host).Now(), seen: newSeenEntities(st.Seen),
		feedback: st.Feedback, finish: st.Finish, id: p.ID,
		judge:       judgeState{rejections: st.Rejections},
		plan:        planState{rejections: st.PlanRejections},
		outputState: outputState{rejections: st.OutputRejections},
		memory:      memoryState{profile: st.Profile, block: st.Memory, factChanges: st.FactChanges},
		knowledge:   knowledgeState{rag: st.RAG},
		budget: budgetState{cost: st.Cost, costUnknown: st.CostUnknown, costUnchecked: st.CostUnchecked, tally: &sync.Mutex{},
			spent: spend{turns: max(st.SpentTurns, res.Turns), tokens: max(res.Usage.TotalTokens, res.Usage.PromptTokens+res.Usage.CompletionTokens), cost: st.Cost}},
		resume: resumeState{id: p.ID, version: p.Version, decided: st.Decided, turnsBefore: res.Turns},
	}
	for _, c := range st.Calls {
		if c.Approval != nil {
			r.resume.decided = append(r.resume.decided, c.ToolCall.ID)
		}
	}
	if r.signatures == nil {
		r.signatures = map[string]string{}
	}
	if r.result.Steps == nil {
		r.result.Steps = []Step{}
	}
	r.vars = runVars(a.spec, rq)
	if a.intents != nil {
		r.intent = a.intents[st.Intent]
		if r.intent != nil {
			r.tools = r.intent.tools
		}
	} else {
		r.tools = a.offered
	}
	switch {
	case st.SeenError != "":
		r.seen.stored = storedSeen{err: errors.New(st.SeenError)}
	case st.StoredSeen && a.store != nil:
		r.seen.stored = storedSeen{store: a.store, conversation: st.Conversation}
	}
	for kind, ids := range st.Revealed {
		r.seen.reveal(kind, ids)
	}
	return r
}

// snapshot is what a later execution needs to go on with the run: a paused
// run's record, or a checkpoint's.
func (r *run) snapshot() *pausedState {
	a := r.agent
	st := &pausedState{Format: pausedFormat, SpecVersion: a.version, SpecFile: absPath(a.spec.Pos.File), User: r.req.User, Conversation: r.req.Conversation,
		TraceConversation: r.req.TraceConversation, Intent: r.result.Intent, History: r.req.History,
		StoredSeen: r.seen.stored.store != nil, SeenError: errText(r.seen.stored.err), Seen: r.req.Seen, Revealed: r.seen.revealedByKind(), Messages: r.messages,
		Feedback: r.feedback, Profile: r.memory.profile, Memory: r.memory.block, RAG: r.knowledge.rag, Signatures: r.signatures,
		Rejections: r.judge.rejections, PlanRejections: r.plan.rejections, OutputRejections: r.outputState.rejections, SpentTurns: r.spentTurns(), FactChanges: r.memory.factChanges, Cost: r.budget.cost, CostUnknown: r.budget.costUnknown,
		CostUnchecked: r.budget.costUnchecked, Result: *r.result, Finish: r.finish, Decided: r.resume.decided, Placement: placementOf(r.req.Host)}
	for _, s := range r.result.Steps {
		st.StepArgs = append(st.StepArgs, s.modelArgs)
	}
	return st
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func absPath(file string) string {
	if file == "" {
		return ""
	}
	if abs, err := filepath.Abs(file); err == nil {
		return abs
	}
	return file
}
