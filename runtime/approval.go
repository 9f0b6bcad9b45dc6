package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// Approval is a call that waits for a person's decision, as the people deciding see
// it.
type Approval struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the model's, without bound values, as canonical JSON; ArgsHash
	// digests the tool and them, so a decision can say which arguments it saw.
	Arguments string `json:"arguments"`
	ArgsHash  string `json:"args_hash"`
	Message   string `json:"message,omitempty"` // the tool's approval.message, rendered
	// HashRequired: an earlier pause of the run had a call of this id (some model
	// servers reuse ids), so a decision must name ArgsHash — a late decision meant
	// for the earlier call must not land on this one.
	HashRequired bool      `json:"hash_required,omitempty"`
	Decision     *Decision `json:"decision,omitempty"`
}

// Decision is what became of a call that needed approval.
type Decision struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by,omitempty"` // who decided; "" when approval.on_timeout did
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Expired: nobody decided before the run's approvals expired; on_timeout did.
	Expired bool `json:"expired,omitempty"`
}

// Paused is a paused run as lists and approval screens show it.
type Paused struct {
	RunID        string      `json:"run_id"`
	Agent        string      `json:"agent"`
	Spec         string      `json:"spec,omitempty"` // the agent's spec file, absolute
	User         string      `json:"user"`
	Conversation string      `json:"conversation,omitempty"`
	Intent       string      `json:"intent,omitempty"`
	Input        string      `json:"input"` // the user's message that started the run
	Status       PauseStatus `json:"status"`
	// ClaimedUntil is, for a run being resumed, when its execution is given up for
	// dead and another may take the run over (Agent.Resume does).
	ClaimedUntil time.Time  `json:"claimed_until,omitzero"`
	Created      time.Time  `json:"created"`
	Expires      time.Time  `json:"expires"`
	Approvals    []Approval `json:"approvals"`
	// Placement is where the run waits: only an execution there may resume it.
	Placement Placement `json:"placement,omitzero"`
}

// Undecided lists the ids of the calls nobody has decided on yet.
func (p *Paused) Undecided() []string {
	var out []string
	for _, a := range p.Approvals {
		if a.Decision == nil {
			out = append(out, a.CallID)
		}
	}
	return out
}

// Decider is who decides on a paused run's calls, or resumes it.
type Decider struct {
	ID string // recorded with the decision
	// Approver may decide on any user's runs; anyone else only on runs that act
	// for them (ID is the run's user).
	Approver bool
}

func (d Decider) may(p *PausedRun) bool { return d.Approver || d.ID != "" && d.ID == p.UserID }

// DecideRequest is one decision on a call.
type DecideRequest struct {
	CallID  string
	Approve bool
	Reason  string
	// ArgsHash, when set, must be the call's (Approval.ArgsHash): a decision made
	// on other arguments than those waiting is refused.
	ArgsHash string
}

// claimGrace is how long past its max_run_time an execution that resumes a run may
// take to save it, before another may take the run over.
const claimGrace = time.Minute

// maxReasonRunes caps a decision's reason, which the model reads.
const maxReasonRunes = 1000

var (
	ErrCallNotFound    = errors.New("the run has no call waiting for approval with this id")
	ErrAlreadyDecided  = errors.New("the call was already decided")
	ErrArgsChanged     = errors.New("the call's arguments are not those the decision was made for")
	ErrHashRequired    = errors.New("the run had another call of this id: the decision must name the call's args_hash")
	ErrApprovalExpired = errors.New("the run's approvals have expired")
	ErrResuming        = errors.New("the run is already being resumed")
	ErrUndecided       = errors.New("calls still wait for a decision")
	ErrOtherAgent      = errors.New("the paused run belongs to another agent")
	ErrNoPausedStore   = errors.New("the agent's store cannot keep paused runs")
)

// pausedState is everything a paused run needs to go on in another process: the
// exchange so far, the guards' counters, and the calls of the response it stopped
// in, each with its result or its approval.
type pausedState struct {
	Format            int                 `json:"format"`
	SpecVersion       string              `json:"spec_version,omitempty"`
	SpecFile          string              `json:"spec_file,omitempty"` // absolute, so another process can load the agent
	User              User                `json:"user"`
	Conversation      string              `json:"conversation,omitempty"`
	TraceConversation string              `json:"trace_conversation,omitempty"`
	Intent            string              `json:"intent,omitempty"`
	History           []Message           `json:"history,omitempty"`
	StoredSeen        bool                `json:"stored_seen,omitempty"` // the store answers seen() for the conversation
	Seen              map[string][]string `json:"seen,omitempty"`        // the caller's (Request.Seen)
	Revealed          map[string][]string `json:"revealed,omitempty"`    // what the run revealed before it paused
	Messages          []Message           `json:"messages"`
	Feedback          []int               `json:"feedback,omitempty"`
	Profile           string              `json:"profile,omitempty"`
	Memory            string              `json:"memory,omitempty"`
	RAG               string              `json:"rag,omitempty"`
	Signatures        map[string]string   `json:"signatures,omitempty"`
	Rejections        int                 `json:"rejections,omitempty"`
	PlanRejections    int                 `json:"plan_rejections,omitempty"`
	SpentTurns        int                 `json:"spent_turns,omitempty"` // model calls of the run and its sub-runs
	FactChanges       []FactChange        `json:"fact_changes,omitempty"`
	Cost              float64             `json:"cost,omitempty"`
	CostUnknown       bool                `json:"cost_unknown,omitempty"`
	CostUnchecked     bool                `json:"cost_unchecked,omitempty"`
	Result            Result              `json:"result"`
	StepArgs          []string            `json:"step_args,omitempty"` // the steps' model-visible arguments
	Finish            FinishReason        `json:"finish,omitempty"`
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
	ToolCall  ToolCall      `json:"tool_call"`
	Outcome   Outcome       `json:"outcome,omitempty"`
	Refusal   Refusal       `json:"refusal,omitempty"`
	Result    string        `json:"result,omitempty"`
	ModelArgs string        `json:"model_args,omitempty"`
	Ran       string        `json:"ran,omitempty"`
	Discarded []string      `json:"discarded,omitempty"`
	Duration  time.Duration `json:"duration,omitempty"`
	Approval  *Approval     `json:"approval,omitempty"`
}

func (s *pausedState) undecided() []string {
	var out []string
	for _, c := range s.Calls {
		if c.Approval != nil && c.Approval.Decision == nil {
			out = append(out, c.ToolCall.ID)
		}
	}
	return out
}

func (s *pausedState) view(p *PausedRun) *Paused {
	v := &Paused{RunID: p.ID, Agent: p.Agent, Spec: s.SpecFile, User: p.UserID, Conversation: cmp.Or(s.TraceConversation, s.Conversation),
		Intent: s.Intent, Status: p.Status, ClaimedUntil: s.ClaimedUntil, Created: p.Created, Expires: p.Expires, Approvals: []Approval{},
		Placement: s.Placement}
	if len(s.Messages) > 0 {
		v.Input = s.Messages[0].Content
	}
	for _, c := range s.Calls {
		if c.Approval != nil {
			v.Approvals = append(v.Approvals, *c.Approval)
		}
	}
	return v
}

// argsHash digests a call's tool and canonical model arguments.
func argsHash(tool, modelArgs string) string {
	sum := sha256.Sum256([]byte(tool + "\x00" + modelArgs))
	return hex.EncodeToString(sum[:])
}

// loadPaused reads a paused run that who may see. A run of another user is not
// found, like one that does not exist.
func loadPaused(ctx context.Context, store PausedRuns, id string, who Decider) (PausedRun, *pausedState, error) {
	if store == nil {
		return PausedRun{}, nil, ErrNoPausedStore
	}
	p, err := store.PausedRun(ctx, id)
	if err != nil {
		return PausedRun{}, nil, err
	}
	if !who.may(&p) {
		return PausedRun{}, nil, ErrRunNotFound
	}
	st, err := decodePaused(p.State)
	if err != nil {
		return PausedRun{}, nil, fmt.Errorf("paused run %s: %w", id, err)
	}
	return p, st, nil
}

func decodePaused(b []byte) (*pausedState, error) {
	var st pausedState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("its state does not decode: %w", err)
	}
	if st.Format != pausedFormat {
		return nil, fmt.Errorf("its state has format %d; this agentrun reads format %d", st.Format, pausedFormat)
	}
	return &st, nil
}

// LoadPaused returns a paused run that who may see.
func LoadPaused(ctx context.Context, store PausedRuns, id string, who Decider) (*Paused, error) {
	p, st, err := loadPaused(ctx, store, id, who)
	if err != nil {
		return nil, err
	}
	return st.view(&p), nil
}

// ListPaused lists the paused runs q selects. A record whose state does not
// decode is left out rather than failing the list.
func ListPaused(ctx context.Context, store PausedRuns, q PausedQuery) ([]*Paused, error) {
	if store == nil {
		return nil, ErrNoPausedStore
	}
	recs, err := store.PausedRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]*Paused, 0, len(recs))
	for i := range recs {
		if st, err := decodePaused(recs[i].State); err == nil {
			out = append(out, st.view(&recs[i]))
		}
	}
	return out, nil
}

// Decide records a decision on one call of a paused run. Each call is decided once;
// a decision after the run's approvals expired, or on a run being resumed, is
// refused. It returns the run as it now stands: when Undecided is empty, Resume can
// go on with it.
func Decide(ctx context.Context, store PausedRuns, runID string, who Decider, d DecideRequest, now time.Time) (*Paused, error) {
	for attempt := 0; ; attempt++ {
		p, st, err := loadPaused(ctx, store, runID, who)
		if err != nil {
			return nil, err
		}
		if p.Status != PauseWaiting {
			return nil, ErrResuming
		}
		i := slices.IndexFunc(st.Calls, func(c pausedCall) bool { return c.Approval != nil && c.ToolCall.ID == d.CallID })
		if i < 0 {
			return nil, ErrCallNotFound
		}
		a := st.Calls[i].Approval
		switch {
		case a.Decision != nil:
			return nil, ErrAlreadyDecided
		case d.ArgsHash != "" && d.ArgsHash != a.ArgsHash:
			return nil, ErrArgsChanged
		case a.HashRequired && d.ArgsHash == "":
			return nil, ErrHashRequired
		case !now.Before(p.Expires):
			return nil, ErrApprovalExpired
		}
		a.Decision = &Decision{Approved: d.Approve, By: who.ID, Reason: clipText(d.Reason, maxReasonRunes), At: now.UTC()}
		if p.State, err = json.Marshal(st); err != nil {
			return nil, err
		}
		p.Version++
		switch err := store.UpdatePaused(ctx, p); {
		case err == nil:
			return st.view(&p), nil
		case errors.Is(err, ErrPausedConflict) && attempt < 8:
			continue // another decision came first: read it and decide again
		default:
			return nil, err
		}
	}
}

// ResumeRequest resumes a paused run.
type ResumeRequest struct {
	RunID string
	// Decider is who resumes it: the run's user or an approver.
	Decider  Decider
	Observer Observer
	OnDelta  func(text string)
	// Host runs the execution; nil is this process (see Request.Host).
	Host Host
}

// Resume goes on with a paused run as a new execution, once every call it waits
// on is decided or its approvals expired (then approval.on_timeout decides the
// rest). The run is claimed first, so of two processes resuming it one runs it and
// the other gets ErrResuming: an approved call runs exactly once.
func (a *Agent) Resume(ctx context.Context, req ResumeRequest) (*Result, error) {
	if a.model == nil {
		return nil, errors.New("agent has no model")
	}
	store := a.PausedRuns()
	now := a.now(req.Host)
	var p PausedRun
	var st *pausedState
	abandoned := false
	for attempt := 0; ; attempt++ {
		var err error
		if p, st, err = loadPaused(ctx, store, req.RunID, req.Decider); err != nil {
			return nil, err
		}
		if p.Agent != a.spec.Name {
			return nil, fmt.Errorf("%w: %s, not %s", ErrOtherAgent, p.Agent, a.spec.Name)
		}
		if err := st.Placement.ResumableFrom(placementOf(req.Host)); err != nil {
			return nil, err
		}
		// An execution that claimed the run and neither finished nor paused it
		// within its max_run_time is gone (its process died): the run is taken over.
		abandoned = p.Status == PauseResuming && now.After(st.ClaimedUntil)
		if p.Status != PauseWaiting && !abandoned {
			return nil, ErrResuming
		}
		if undecided := st.undecided(); len(undecided) > 0 && now.Before(p.Expires) {
			return nil, fmt.Errorf("%w: %s (until %s)", ErrUndecided, strings.Join(undecided, ", "), p.Expires.UTC().Format(time.RFC3339))
		}
		st.ClaimedUntil = now.Add(a.settings.Guards.MaxRunTime + claimGrace).UTC()
		if p.State, err = json.Marshal(st); err != nil {
			return nil, err
		}
		p.Status = PauseResuming
		p.Version++
		err = store.UpdatePaused(ctx, p)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrPausedConflict) || attempt >= 8 {
			return nil, err
		}
	}
	ctx, cancel := hostOf(req.Host).RunContext(ctx, a.settings.Guards.MaxRunTime, errMaxRunTime)
	defer cancel()
	r := a.restore(ctx, &p, st, &req)
	r.finishPaused(st, now, abandoned)
	if r.state == StateThinking {
		r.loop()
		if r.result.Checkpoint != nil {
			return r.result, nil
		}
		r.learn()
	}
	return r.end(), nil
}

// restore rebuilds a paused run's state for the execution that resumes it.
func (a *Agent) restore(ctx context.Context, p *PausedRun, st *pausedState, req *ResumeRequest) *run {
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
	r := &run{agent: a, req: rq, ctx: ctx, tally: &sync.Mutex{}, state: StateToolExecuting, result: &res, messages: st.Messages,
		signatures: st.Signatures, started: hostOf(req.Host).Now(), seen: newSeenEntities(st.Seen),
		rejections: st.Rejections, planRejections: st.PlanRejections, feedback: st.Feedback, factChanges: st.FactChanges, finish: st.Finish,
		profile: st.Profile, memory: st.Memory, rag: st.RAG, cost: st.Cost, costUnknown: st.CostUnknown,
		costUnchecked: st.CostUnchecked, resumed: p.ID, pausedVersion: p.Version, decidedIDs: st.Decided, id: p.ID, turnsBefore: res.Turns}
	r.spent = spend{turns: max(st.SpentTurns, res.Turns), tokens: max(res.Usage.TotalTokens, res.Usage.PromptTokens+res.Usage.CompletionTokens), cost: st.Cost}
	for _, c := range st.Calls {
		if c.Approval != nil {
			r.decidedIDs = append(r.decidedIDs, c.ToolCall.ID)
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

// finishPaused gives every call of the paused response its result — the kept one,
// the tool's for an approved call, a rejection for the others — and goes on
// thinking; or, when approvals expired and approval.on_timeout is stop, ends the run.
//
// A run taken over from an execution that died (abandoned) never runs its approved
// calls again: they may have run before the process stopped, so the model is told
// their outcome is unknown. At most once is the only promise a crash allows.
func (r *run) finishPaused(st *pausedState, now time.Time, abandoned bool) {
	onTimeout := r.agent.settings.Approval.OnTimeout
	calls := make([]call, len(st.Calls))
	var approved []int
	expired := false
	for i, pc := range st.Calls {
		c := &calls[i]
		c.tc, c.key, c.outcome, c.refusal, c.result = pc.ToolCall, r.callKey(i, pc.ToolCall.ID), pc.Outcome, pc.Refusal, pc.Result
		c.modelArgs, c.ran, c.discarded, c.duration = pc.ModelArgs, pc.Ran, pc.Discarded, pc.Duration
		if pc.Approval == nil {
			continue
		}
		d := pc.Approval.Decision
		if d == nil {
			expired = true
			d = &Decision{Approved: false, Expired: true, At: now.UTC()}
		}
		c.decision = d
		r.emit(Event{Kind: EventApprovalDecided, Tool: c.tc.Name, CallID: c.tc.ID, Passed: &d.Approved, Message: decidedBy(d, r.req.User.ID)})
		if d.Approved {
			approved = append(approved, i)
		}
	}
	if expired && onTimeout == spec.OnTimeoutStop {
		for i := range calls {
			if calls[i].decision != nil {
				calls[i].outcome, calls[i].result = OutcomeRejected, "Not run: the run ended before a decision."
			}
		}
		r.appendResults(calls)
		r.stop(StopApprovalTimeout, "nobody decided on "+strings.Join(st.undecided(), ", ")+" before the approvals expired")
		return
	}
	var runnable []int
	for _, i := range approved {
		c := &calls[i]
		if abandoned {
			c.outcome, c.result = OutcomeError, fmt.Sprintf("Error: the execution that was running the approved call %s stopped before it saved the result, so it is unknown whether %s ran. Check before calling it again.", c.tc.Name, c.tc.Name)
			continue
		}
		if r.prepare(c) {
			if hash := argsHash(c.tc.Name, c.modelArgs); hash != st.Calls[i].Approval.ArgsHash {
				r.refuse(c, RefusedSchema, "Error: the call's arguments changed after they were approved; it was not run.", "arguments changed after approval")
				continue
			}
			runnable = append(runnable, i)
		}
	}
	for i := range calls {
		c := &calls[i]
		if c.decision != nil && !c.decision.Approved {
			c.outcome, c.result = OutcomeRejected, rejectionText(c.tc.Name, c.decision, r.req.User.ID)
			r.emit(Event{Kind: EventToolRefused, Tool: c.tc.Name, CallID: c.tc.ID, Args: c.shownArgs(), Error: c.result})
		}
	}
	r.runParallel(r.ctx, calls, runnable)
	r.absorb(calls, runnable)
	for i := range calls {
		// A call that waited and did not run leaves the duplicate guard: the model
		// may retry it once the reason for the rejection is gone.
		if c := &calls[i]; c.decision != nil && !c.outcome.Ran() {
			delete(r.signatures, c.tc.Name+"\x00"+st.Calls[i].ModelArgs)
		}
	}
	r.appendResults(calls)
	if err := r.ctx.Err(); err != nil {
		r.stopForContext(err)
		return
	}
	r.transition(StateThinking, TriggerResults)
}

// decidedBy says who decided, for events: the run's own user is "the user", never
// their id.
func decidedBy(d *Decision, user string) string {
	switch {
	case d.Expired:
		return "nobody decided in time"
	case d.By == user:
		return "decided by the user"
	}
	return "decided by " + d.By
}

// rejectionText is a rejected call's result, for the model: who rejected it and
// why. The run's user is named as "the user": a bound value the model never sees.
func rejectionText(tool string, d *Decision, user string) string {
	if d.Expired {
		return fmt.Sprintf("Rejected: %s was not run: it needed a person's approval and nobody approved it in time. Do not call it again; tell the user it was not done.", tool)
	}
	who := "the user"
	if d.By != user {
		who = "an approver (" + d.By + ")"
	}
	text := fmt.Sprintf("Rejected: %s was not run: %s rejected it", tool, who)
	if reason := strings.TrimRight(strings.TrimSpace(d.Reason), "."); reason != "" {
		text += ". Reason: " + reason
	}
	return text + ". Do not call it again with the same arguments; tell the user, or do what the reason asks."
}

// needsApproval reports whether a prepared call waits for a person, and the
// message they see. A when rule that fails to evaluate asks for approval: it fails
// closed, like an accept rule.
func (r *run) needsApproval(c *call) (bool, string) {
	rule := c.tool.spec.Approval
	if rule == nil {
		return false, ""
	}
	vars := r.vars
	vars.Args, vars.Seen, vars.InSeen = c.args, r.seenList, r.inSeen
	env := spec.EnvApproval.Values(&vars)
	note := ""
	if rule.When != nil && rule.When.Program != nil {
		out, err := expr.Run(rule.When.Program, env)
		if ok, isBool := out.(bool); err == nil && isBool && !ok {
			return false, ""
		}
		if err != nil {
			note = "(the approval rule could not be checked: " + err.Error() + ")"
		}
	}
	msg := ""
	if t := rule.Message; t != nil {
		var err error
		if msg, err = t.Render(env); err != nil {
			msg = t.Source
		}
	}
	return true, strings.TrimSpace(msg + " " + note)
}

// awaitApproval decides what becomes of a call that needs approval: it waits for
// one (true), or is refused because this run cannot ask (false).
func (r *run) awaitApproval(c *call, message string) bool {
	why := ""
	switch {
	case r.req.Approvals == ApprovalsRefuse:
		why = "approvals cannot be asked for on this channel"
	case r.agent.PausedRuns() == nil:
		why = "this agent has no store to keep the run while it waits"
	case r.req.Ephemeral:
		why = "this run keeps no state to wait in"
	}
	if why == "" {
		c.approval = &Approval{CallID: c.tc.ID, Tool: c.tc.Name, Arguments: c.modelArgs, ArgsHash: argsHash(c.tc.Name, c.modelArgs),
			Message: message, HashRequired: slices.Contains(r.decidedIDs, c.tc.ID)}
		return true
	}
	result := fmt.Sprintf("Refused: %s needs a person's approval and %s, so it was not run. Tell the user it needs approval and cannot be done here.", c.tc.Name, why)
	r.refuse(c, RefusedNoApproval, result, why)
	return false
}

// pause stores the run with the calls of the last response — those that ran with
// their results, those that wait with their approvals — and stops it with
// awaiting_approval. A run whose context ended, or whose record the store refuses,
// cannot be resumed: its waiting calls are refused instead and it goes on (false).
func (r *run) pause(calls []call) bool {
	err := r.ctx.Err()
	if err == nil {
		err = r.storePaused(calls)
	}
	if err == nil {
		return true
	}
	for i := range calls {
		if c := &calls[i]; c.approval != nil {
			c.approval = nil
			r.refuse(c, RefusedNoApproval, fmt.Sprintf("Refused: %s needs a person's approval and the request for it could not be stored, so it was not run. Tell the user it could not be done now.", c.tc.Name), err.Error())
		}
	}
	return false
}

// discardPause deletes the record a pause that reported a failure may have written
// all the same (a reply lost after the write): nobody may resume a run that went on
// without its waiting calls. A first pause's record has version 1; a record that is
// not there, or that another execution changed, is left alone.
func (r *run) discardPause(id string) {
	if r.resumed != "" {
		return // a resumed run's record is deleted, or kept, by its own final commit
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), commitTimeout)
	defer cancel()
	r.agent.store.Commit(ctx, Record{UserID: r.req.User.ID, Resumed: id, ResumedVersion: 1})
}

func (r *run) storePaused(calls []call) error {
	a := r.agent
	now := a.now(r.req.Host)
	id := cmp.Or(r.req.RunID, r.resumed, r.id)
	st := r.snapshot()
	var pending []Approval
	for i := range calls {
		c := &calls[i]
		st.Calls = append(st.Calls, pausedCall{ToolCall: c.tc, Outcome: c.outcome, Refusal: c.refusal, Result: c.result,
			ModelArgs: c.modelArgs, Ran: c.ran, Discarded: c.discarded, Duration: c.duration, Approval: c.approval})
		if c.approval != nil {
			pending = append(pending, *c.approval)
		}
	}
	state, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rec := PausedRun{ID: id, UserID: r.req.User.ID, Agent: a.spec.Name, Status: PauseWaiting, Version: r.pausedVersion + 1,
		Created: now.UTC(), Expires: now.Add(a.settings.Approval.Timeout).UTC(), State: state}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), commitTimeout)
	defer cancel()
	if err := a.store.Commit(ctx, Record{UserID: r.req.User.ID, Pause: &rec}); err != nil {
		r.emit(Event{Kind: EventMemory, Error: err.Error(), Message: "the run could not be paused for approval"})
		r.discardPause(id)
		return err
	}
	for _, p := range pending {
		r.emit(Event{Kind: EventApprovalRequested, Tool: p.Tool, CallID: p.CallID, Args: p.Arguments, Message: p.Message})
	}
	r.result.RunID, r.result.Pending = id, pending
	names := make([]string, len(pending))
	for i, p := range pending {
		names[i] = p.Tool + " (" + p.CallID + ")"
	}
	r.stopWith(StopAwaitingApproval, "waiting for approval of "+strings.Join(names, ", "), "")
	return nil
}

// snapshot is what a later execution needs to go on with the run: a paused
// run's record, or a checkpoint's.
func (r *run) snapshot() *pausedState {
	a := r.agent
	st := &pausedState{Format: pausedFormat, SpecVersion: a.version, SpecFile: absPath(a.spec.Pos.File), User: r.req.User, Conversation: r.req.Conversation,
		TraceConversation: r.req.TraceConversation, Intent: r.result.Intent, History: r.req.History,
		StoredSeen: r.seen.stored.store != nil, SeenError: errText(r.seen.stored.err), Seen: r.req.Seen, Revealed: r.seen.revealedByKind(), Messages: r.messages,
		Feedback: r.feedback, Profile: r.profile, Memory: r.memory, RAG: r.rag, Signatures: r.signatures,
		Rejections: r.rejections, PlanRejections: r.planRejections, SpentTurns: r.spentTurns(), FactChanges: r.factChanges, Cost: r.cost, CostUnknown: r.costUnknown,
		CostUnchecked: r.costUnchecked, Result: *r.result, Finish: r.finish, Decided: r.decidedIDs, Placement: placementOf(r.req.Host)}
	for _, s := range r.result.Steps {
		st.StepArgs = append(st.StepArgs, s.modelArgs)
	}
	return st
}

// PausedRuns is the agent's store as a keeper of paused runs, nil if it is none.
func (a *Agent) PausedRuns() PausedRuns {
	p, _ := a.store.(PausedRuns)
	return p
}

// NewRunID is a new random run id.
func NewRunID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "run_" + hex.EncodeToString(b)
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
