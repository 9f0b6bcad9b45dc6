package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// run is the state of one Run: the messages of this exchange, counters and the
// signatures of the calls made so far. The Agent itself is never modified.
//
// What every stage reads is declared here; each stage keeps its own state in a
// struct declared in its own file (judge.go, plan.go, budget.go, memory.go,
// knowledgestage.go, resume.go), so a stage's fields sit next to its code.
type run struct {
	agent    *Agent
	req      *Request
	ctx      context.Context
	state    State
	result   *Result
	messages []model.Message // this run's exchange: user input, assistant turns, tool results
	// feedback are the indexes in messages of what the judge and the plan gate
	// sent back with a refused draft: never stored (see sendBack).
	feedback []int
	// signatures maps each executed call's name+canonical arguments to its result,
	// across the whole run, for duplicate-call detection.
	signatures map[string]string
	vars       spec.Values // user, conversation and intent, for every expression of the run
	started    time.Time
	seen       seenEntities       // entities revealed to the user, by kind
	intent     *intent            // the routed intent; nil without intents or a fallback
	finish     model.FinishReason // of the response whose tool calls run
	tools      []model.ToolDef    // what this run offers the model
	// id names the run in its events; parent and depth place a sub-run below the
	// run that started it.
	id     string
	parent *parentLink
	depth  int

	judge       judgeState     // judge.go
	plan        planState      // plan.go
	budget      budgetState    // budget.go
	memory      memoryState    // memory.go
	knowledge   knowledgeState // knowledgestage.go
	resume      resumeState    // resume.go: what earlier executions of the run left
	outputState outputState    // output.go
}

// Run answers one request. It returns an error only for a misuse (no model); every
// expected failure — limits, loops, model faults, cancellation — ends the run with a
// typed stop reason and the spec's fallback message as the answer.
func (a *Agent) Run(ctx context.Context, req Request) (*Result, error) {
	r, err := a.execute(ctx, &req, nil)
	if err != nil {
		return nil, err
	}
	return r.result, nil
}

// NewRunID is a new random run id.
func NewRunID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "run_" + hex.EncodeToString(b)
}

// execute runs a request to its end: a top run, or a sub-run of parent.
func (a *Agent) execute(ctx context.Context, req *Request, parent *parentLink) (*run, error) {
	if a.model == nil {
		return nil, errors.New("agent has no model")
	}
	if err := a.CheckParts(req.Parts); err != nil {
		return nil, err // before anything of the run: no model was asked
	}
	ctx, cancel := hostOf(req.Host).RunContext(ctx, a.settings.Guards.MaxRunTime, errMaxRunTime)
	defer cancel()
	r := &run{
		agent:      a,
		req:        req,
		ctx:        ctx,
		state:      StateThinking,
		result:     &Result{Intent: req.Intent, Steps: []Step{}, RunID: req.RunID}, // --json shows [] rather than null
		signatures: map[string]string{},
		started:    hostOf(req.Host).Now(),
		seen:       newSeenEntities(req.Seen),
		id:         cmp.Or(req.RunID, NewRunID()),
		parent:     parent,
		budget:     budgetState{tally: &sync.Mutex{}},
	}
	if parent != nil {
		r.budget.tally = parent.run.budget.tally
		if r.depth = parent.run.depth + 1; r.depth > spec.MaxAgentDepth {
			return nil, fmt.Errorf("sub-agents nest deeper than %d levels", spec.MaxAgentDepth)
		}
		r.seen.stored = parent.run.seen.stored // the conversation's earlier entities, as the parent sees them
		r.emit(Event{Kind: EventAgent, CallID: parent.callID, Message: clipText(req.Input, 200)})
	}
	r.vars = runVars(a.spec, req)
	r.messages = append(r.messages, model.Message{Role: model.RoleUser, Content: req.Input, Parts: slices.Clone(req.Parts)})
	if r.filterText(spec.StageInput, &r.messages[0].Content) {
		r.prepareContext()
		if r.memory.foreignConversation {
			return nil, fmt.Errorf("conversation %q: %w", req.Conversation, store.ErrForeignConversation)
		}
		// The classifier's call may have stopped the run (its budget).
		switch {
		case r.state != StateThinking:
		case r.intent != nil && r.intent.agent != "":
			r.handoff()
		case a.workflow != nil:
			r.runWorkflow()
		case !r.answerFromCache():
			r.retrieve()
			r.loop()
			if r.result.Checkpoint != nil {
				return r, nil // it goes on in another execution: nothing ends here
			}
			r.learn()
		}
	}
	r.end()
	if parent != nil {
		r.emit(Event{Kind: EventAgent, CallID: parent.callID, Stop: r.result.Stop, Usage: &r.result.Usage, Cost: r.runCost(), Duration: r.result.Duration})
	}
	return r, nil
}

// end completes the result and commits what the run leaves behind.
func (r *run) end() *Result {
	r.result.Cost = r.runCost()
	r.result.Messages = r.storedMessages()
	r.result.Seen = r.seen.result(r.req.Seen)
	r.commit()
	r.result.Messages = withoutPartData(r.result.Messages) // stored by Ref, or not at all
	r.result.Duration = r.since(r.started)
	return r.result
}

// prepareContext routes the request and assembles what the model will get: the
// intent's tools (only those: a physical sandbox) and its level of memory.
func (r *run) prepareContext() {
	a := r.agent
	facts := r.loadMemory()
	if r.memory.foreignConversation {
		return // refused before anything else costs a model call (the classifier's)
	}
	r.memory.profile = a.profileSummary(facts)
	r.route()
	if a.intents == nil {
		r.tools = a.offered
		return
	}
	if r.intent == nil {
		return // no intent and no fallback: no tools, no memory
	}
	r.tools = r.intent.tools
	if r.memory.block = a.memoryBlock(r.intent.memory, facts); r.memory.block != "" {
		r.emit(Event{Kind: EventMemory, Level: r.intent.memory, Count: len(facts)})
	}
}

// input is the user's message as the models see it: after the input filters.
func (r *run) input() string {
	if len(r.messages) > 0 {
		return r.messages[0].Content
	}
	return r.req.Input // routing alone (Agent.Route) runs no filters
}

// sendBack adds a message that sends a refused draft back to the model (the
// judge's or the plan gate's feedback): the model reads it, the history never keeps
// it.
func (r *run) sendBack(content string) {
	r.feedback = append(r.feedback, len(r.messages))
	r.messages = append(r.messages, model.Message{Role: model.RoleUser, Content: content})
}

// storedMessages is the exchange without the judge's feedback, which only made
// sense next to a draft that is not kept either.
func (r *run) storedMessages() []model.Message {
	if len(r.feedback) == 0 {
		return r.messages
	}
	out := make([]model.Message, 0, len(r.messages)-len(r.feedback))
	for i, m := range r.messages {
		if !slices.Contains(r.feedback, i) {
			out = append(out, m)
		}
	}
	return out
}

// runVars are the variables every expression of a run may see.
func runVars(s *spec.Spec, req *Request) spec.Values {
	return spec.Values{
		User:         spec.UserValue(s.Context.User, req.User.ID, req.User.Attributes),
		Conversation: spec.ConversationValue(req.Conversation),
		Intent:       req.Intent,
	}
}

func (r *run) emit(e Event) {
	if r.req.Observer == nil {
		return
	}
	e.Time = r.now()
	r.stamp(&e)
	if e.Turn == 0 {
		e.Turn = r.result.Turns
	}
	r.req.Observer.Observe(e)
}

// toolNames are the names of the tools offered.
func toolNames(tools []model.ToolDef) []string {
	if len(tools) == 0 {
		return nil
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

// stamp fills in whose run an event is.
func (r *run) stamp(e *Event) {
	e.Run = r.id
	if p := r.parent; p != nil {
		e.Parent, e.Depth, e.Agent = p.run.id, r.depth, p.agent
	}
}

func (r *run) transition(to State, why Trigger) {
	if !canTransition(r.state, to, why) {
		panic(errBadTransition{r.state, to, why}) // a runtime bug: fail loudly in tests
	}
	r.emit(Event{Kind: EventState, From: r.state, State: to, Trigger: why})
	r.state = to
}

// stop ends the run with a reason; the answer is the spec's fallback message.
func (r *run) stop(reason StopReason, detail string) {
	r.stopWith(reason, detail, r.agent.settings.Guards.Fallback)
}

func (r *run) stopWith(reason StopReason, detail, answer string) {
	r.result.Stop = reason
	r.result.Detail = detail
	r.result.Answer = answer
	r.transition(StateStopped, Trigger(reason))
	r.emit(Event{Kind: EventStop, Stop: reason, Message: detail, Usage: &r.result.Usage, Cost: r.runCost()})
}

func (r *run) loop() {
	var draft *model.Message
	for {
		switch r.state {
		case StateThinking:
			if r.checkpoint() {
				return
			}
			draft = r.think()
		case StateToolExecuting:
			r.executeTools()
		case StateValidating:
			r.validate(draft)
		default: // FINISHED or STOPPED
			return
		}
	}
}

// deltas is where the model's text goes as it streams (Request.OnDelta). It
// reaches the request's OnDelta only where nothing after a draft can refuse or
// change it — no judge, no plan to finish, no answer filter; elsewhere a draft
// the user must not see could reach them, so the model still streams (the wire
// is the spec's) but its text is shown once accepted. A structured answer is
// not streamed: a draft is shown only once it validates.
func (r *run) deltas() func(string) {
	switch {
	case r.req.OnDelta == nil || r.output() != nil:
		return nil
	case r.agent.settings.Judge != nil || r.planSettings() != nil || len(r.agent.filters[spec.StageAnswer]) > 0:
		return func(string) {}
	}
	return r.req.OnDelta
}

// think asks the model for the next step. It returns the draft answer when the
// model answered without tool calls.
func (r *run) think() *model.Message {
	g := r.agent.settings.Guards
	if err := r.ctx.Err(); err != nil {
		r.stopForContext(err)
		return nil
	}
	req := &model.Request{Messages: r.requestMessages(), Tools: r.tools, OnDelta: r.deltas()}
	if st := r.output(); st != nil {
		req.JSONSchema = st.format() // providers combine it with the tools natively
	}
	detail, release := r.overBudget(PurposeAgent, req)
	if detail != "" {
		r.stop(StopBudget, detail)
		return nil
	}
	defer release()
	if detail := r.takeTurn(); detail != "" {
		r.emit(Event{Kind: EventGuard, Guard: GuardMaxTurns, Message: detail})
		r.stop(StopMaxTurns, detail)
		return nil
	}
	r.result.Turns++
	r.emit(Event{Kind: EventModelRequest, Purpose: PurposeAgent, Messages: len(req.Messages), Tools: len(req.Tools),
		Offered: toolNames(req.Tools), Sent: req.Messages})
	start := r.now()
	resp, err := r.agent.model.Complete(r.ctx, req)
	if err != nil {
		me := (*model.Error)(nil)
		isModelErr := errors.As(err, &me)
		if isModelErr && me.Usage != (model.Usage{}) {
			r.account(PurposeAgent, me.Usage, nil) // a response refused after it arrived was still billed
		}
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			r.stopForContext(ctxErr)
		} else {
			if isModelErr && me.Misconfigured() {
				r.result.ModelConfigStatus = me.Status
			}
			r.stop(StopModelError, err.Error())
		}
		return nil
	}
	cost := r.account(PurposeAgent, resp.Usage, resp.Answered)
	answered, from := answeredBy(resp)
	r.result.FinishReasons = append(r.result.FinishReasons, resp.FinishReason)
	r.result.Models = append(r.result.Models, answered)
	msg := resp.Message
	msg.Role = model.RoleAssistant
	reasoning := ""
	if msg.Reasoning != nil {
		reasoning = msg.Reasoning.Text
		r.result.Reasoning = append(r.result.Reasoning, reasoning)
	}
	usage := resp.Usage
	r.emit(Event{Kind: EventModelResponse, Purpose: PurposeAgent, Calls: len(msg.ToolCalls), Usage: &usage, Cost: cost,
		Duration: r.since(start), Finish: resp.FinishReason, Reasoning: reasoning, Model: answered, FallbackFrom: from})
	if len(msg.ToolCalls) == 0 {
		return r.draft(msg, resp.FinishReason)
	}
	if r.result.ToolRounds >= g.MaxToolRounds && !r.planBookkeeping(msg.ToolCalls) {
		r.emit(Event{Kind: EventGuard, Guard: GuardMaxToolRounds, Message: fmt.Sprintf("%d tool rounds", g.MaxToolRounds)})
		r.stop(StopMaxToolRounds, fmt.Sprintf("the model asked for tools after %d rounds", g.MaxToolRounds))
		return nil
	}
	r.messages = append(r.messages, msg)
	r.finish = resp.FinishReason
	r.transition(StateToolExecuting, TriggerToolCalls)
	return nil
}

// lastModel is the model that answered the agent's last call: the one whose tool
// calls a step records.
func (r *run) lastModel() string {
	if n := len(r.result.Models); n > 0 {
		return r.result.Models[n-1]
	}
	return ""
}

// draft takes a text answer to validation, unless the model did not finish it: a
// text cut off at the token limit or stopped by a content filter is no answer.
func (r *run) draft(msg model.Message, finish model.FinishReason) *model.Message {
	switch finish {
	case model.FinishLength:
		r.result.Partial = msg.Content
		r.stop(StopTruncated, "the model's answer was cut off (finish_reason length): raise model.max_tokens or ask for less")
		return nil
	case model.FinishContentFilter:
		r.result.Partial = msg.Content
		r.stop(StopContentFilter, "the provider's content filter stopped the answer")
		return nil
	}
	// Reasoning goes back only with tool calls: an answer's is not kept.
	msg.Reasoning = nil
	r.transition(StateValidating, TriggerDraft)
	return &msg
}

// errMaxRunTime is the cause of a run's context ending at guards.max_run_time.
var errMaxRunTime = errors.New("max_run_time")

func (r *run) stopForContext(err error) {
	switch {
	case errors.Is(CauseOf(r.ctx), errMaxRunTime):
		r.stop(StopTimeout, fmt.Sprintf("the run took longer than max_run_time (%s)", r.agent.settings.Guards.MaxRunTime))
	case errors.Is(err, context.DeadlineExceeded):
		r.stop(StopTimeout, "the run's deadline passed")
	default:
		r.stop(StopCanceled, "the run was canceled")
	}
}

// requestMessages is what the model sees: the system prompt (rebuilt every turn and
// never stored), the conversation's history, then this run's exchange.
func (r *run) requestMessages() []model.Message {
	msgs := make([]model.Message, 0, 1+len(r.req.History)+len(r.messages))
	if sys := r.systemPrompt(); sys != "" {
		msgs = append(msgs, model.Message{Role: model.RoleSystem, Content: sys})
	}
	// An earlier turn's parts go as notes: the bytes were sent with their turn.
	msgs = append(msgs, model.WithNotes(r.req.History)...)
	return append(msgs, r.messages...)
}

// systemPrompt is the instructions followed by the intent's memory, as one message.
func (r *run) systemPrompt() string {
	s := ""
	if t := r.agent.instructions; t != nil {
		var err error
		if s, err = t.Render(spec.EnvInstructions.Values(&r.vars)); err != nil {
			// The template compiled against its types at load; a failure here is a
			// value problem (say, nil in arithmetic). Show the template rather than fail.
			r.emit(Event{Kind: EventGuard, Guard: GuardInstructions, Error: err.Error()})
			s = t.Source
		}
	}
	plan := ""
	if r.planSettings() != nil {
		plan = planInstructions
	}
	for _, block := range []string{plan, r.memory.block, r.knowledge.rag} {
		if block == "" {
			continue
		}
		if s != "" {
			s = strings.TrimRight(s, "\n") + "\n\n"
		}
		s += block
	}
	return s
}

// call is one tool call of a response on its way to a tool message.
type call struct {
	tc        model.ToolCall
	key       string // names this call in the run (see callKey)
	tool      *agentTool
	args      map[string]any
	signature string
	// modelArgs are the model's arguments without the bound parameters it may not
	// set (canonical JSON), ran the arguments the tool ran with (bound ones
	// included): the model and the judge see the first, logs the second.
	modelArgs, ran string
	discarded      []string // bound parameters the model tried to set
	result         string
	outcome        Outcome
	refusal        Refusal
	duration       time.Duration
	approval       *Approval // the call waits for a person's decision
	decision       *Decision // what was decided, in the execution that resumes it
	sub            *run      // the sub-run a sub-agent's tool call ran
}

// executeTools runs every tool call of the last response — in parallel, bounded —
// and appends one tool message per call, in the order of the calls. Calls that
// need a person's approval wait: once the others ran, the run pauses.
func (r *run) executeTools() {
	g := r.agent.settings.Guards
	last := r.messages[len(r.messages)-1]
	calls := make([]call, len(last.ToolCalls))
	var runnable []int
	waiting := false
	for i, tc := range last.ToolCalls {
		c := &calls[i]
		c.tc, c.key = tc, r.callKey(i, tc.ID)
		if i >= g.MaxCallsPerResponse {
			if i == g.MaxCallsPerResponse {
				r.emit(Event{Kind: EventGuard, Guard: GuardMaxCalls, Message: fmt.Sprintf("%d of %d calls run", g.MaxCallsPerResponse, len(last.ToolCalls))})
			}
			r.refuseExcess(c, len(last.ToolCalls), g.MaxCallsPerResponse)
			continue
		}
		if !r.prepare(c) {
			continue
		}
		if prev, seen := r.signatures[c.signature]; seen && g.DuplicateCalls != spec.DuplicateAllow && !c.tool.ownState() {
			r.emit(Event{Kind: EventGuard, Guard: GuardDuplicateCall, Tool: tc.Name, CallID: tc.ID, Args: c.modelArgs, Message: "duplicate_calls: " + string(g.DuplicateCalls)})
			if g.DuplicateCalls == spec.DuplicateStop {
				r.messages = r.messages[:len(r.messages)-1] // never keep a tool call without its results
				r.stop(StopDuplicateCall, fmt.Sprintf("%s was called again with the same arguments", tc.Name))
				return
			}
			c.outcome = OutcomeDuplicate
			c.result = fmt.Sprintf("Not run: %s was already called with these arguments in this conversation turn. Use the result you already have instead of calling it again. It was:\n%s", tc.Name, prev)
			continue
		}
		if needs, message := r.needsApproval(c); needs && !r.awaitApproval(c, message) {
			continue
		}
		r.signatures[c.signature] = "" // reserve: a second identical call in this response is a duplicate too
		if c.approval != nil {
			waiting = true
			continue
		}
		runnable = append(runnable, i)
	}
	if !r.planBookkeeping(last.ToolCalls) {
		r.result.ToolRounds++ // this response's calls run (or get their refusals)
	}
	// Plan updates go first, one by one in call order: each builds on the one
	// before, and the plan must not depend on which goroutine ran first.
	var work []int
	for _, i := range runnable {
		if calls[i].tool.ownState() {
			r.execute(r.ctx, &calls[i])
		} else {
			work = append(work, i)
		}
	}
	r.runParallel(r.ctx, calls, work)
	r.absorb(calls, runnable)
	if waiting && r.pause(calls) {
		return
	}
	r.appendResults(calls)
	if err := r.ctx.Err(); err != nil {
		r.stopForContext(err)
		return
	}
	r.transition(StateThinking, TriggerResults)
}

// absorb takes in what the calls that ran brought: their results for the
// duplicate guard, the entities they revealed, the facts their rules write.
func (r *run) absorb(calls []call, ran []int) {
	for _, i := range ran {
		c := &calls[i]
		if c.outcome.Ran() {
			r.signatures[c.signature] = c.result // retrying the same failing call is a loop too
		}
		if c.sub != nil {
			r.absorbSub(c.sub)
		}
		if c.outcome == OutcomeOK {
			r.collect(c)
			r.applyFactRules(c)
		}
	}
}

// appendResults adds one tool message per call, in the order of the calls, and
// the calls' steps.
func (r *run) appendResults(calls []call) {
	for i := range calls {
		c := &calls[i]
		r.messages = append(r.messages, model.Message{Role: model.RoleTool, ToolCallID: c.tc.ID, Content: c.result})
		r.result.Steps = append(r.result.Steps, Step{Turn: r.result.Turns, Tool: c.tc.Name, CallID: c.tc.ID, Arguments: c.shownArgs(),
			Discarded: c.discarded, modelArgs: cmp.Or(c.modelArgs, c.tc.Arguments),
			Outcome: c.outcome, Refusal: c.refusal, Result: c.result, Duration: c.duration, Finish: r.finish, Model: r.lastModel(), Decision: c.decision, Agent: c.agentRun()})
	}
}

// refuse records that a call is not run and why; the model gets the message as the
// call's result, so it can correct itself.
func (r *run) refuse(c *call, why Refusal, result, detail string) bool {
	c.outcome, c.refusal, c.result = OutcomeRefused, why, result
	r.emit(Event{Kind: EventToolRefused, Refusal: why, Tool: c.tc.Name, CallID: c.tc.ID, Args: c.shownArgs(), Error: detail})
	return false
}

// shownArgs are a call's arguments as logs show them: those it ran with, or for a
// call that did not run, the model's without any bound parameter it tried to set.
func (c *call) shownArgs() string {
	switch {
	case c.ran != "":
		return c.ran
	case c.modelArgs != "":
		return c.modelArgs
	}
	return c.tc.Arguments // not an object of a known tool: no bound value to hide
}

// refuseExcess answers a call beyond guards.max_calls_per_response without running
// it. One guard event stands for all of them: a response may hold thousands.
func (r *run) refuseExcess(c *call, calls, limit int) {
	c.outcome, c.refusal = OutcomeRefused, RefusedTooMany
	c.result = fmt.Sprintf("Error: not run: the response asked for %d tool calls and at most %d run per response. Ask for the others in your next turn if you still need them.", calls, limit)
}

// prepare checks a call the model made — a tool offered here, JSON arguments that
// fit the schema, the tool's accept rule — and fills in bound parameters.
func (r *run) prepare(c *call) bool {
	refuse := func(why Refusal, format string, args ...any) bool {
		msg := "Error: " + fmt.Sprintf(format, args...)
		return r.refuse(c, why, msg, msg)
	}
	t, ok := r.agent.byName[c.tc.Name]
	if !ok || !r.offers(c.tc.Name) {
		return refuse(RefusedNotOffered, "there is no tool %q for this request. Available tools: %s.", c.tc.Name, r.toolNames())
	}
	c.tool = t
	raw := strings.TrimSpace(c.tc.Arguments)
	if raw == "" {
		raw = "{}"
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return refuse(RefusedInvalidJSON, "the arguments for %s are not valid JSON (%v). Send a JSON object matching the tool's parameters.", c.tc.Name, err)
	}
	args, ok := v.(map[string]any)
	if !ok {
		return refuse(RefusedNotObject, "the arguments for %s must be a JSON object, not %s.", c.tc.Name, jsonKind(v))
	}
	for _, param := range slices.Sorted(maps.Keys(t.bind)) { // the same events in the same order on every run
		if _, sent := args[param]; sent {
			delete(args, param) // the model may not choose a bound value; the run context does
			c.discarded = append(c.discarded, param)
			r.emit(Event{Kind: EventBindDiscarded, Tool: c.tc.Name, CallID: c.tc.ID, Param: param,
				Message: fmt.Sprintf("discarded the model's value for bound parameter %q", param)})
		}
	}
	canonical, _ := json.Marshal(args) // map keys come out sorted: a canonical form
	c.modelArgs = string(canonical)
	if err := t.schema.Validate(args); err != nil {
		return refuse(RefusedSchema, "invalid arguments for %s: %s", c.tc.Name, schemaProblems(err))
	}
	c.signature = c.tc.Name + "\x00" + c.modelArgs
	for param, key := range t.bind {
		args[param] = r.contextValue(key)
	}
	if len(t.bind) == 0 {
		c.ran = c.modelArgs
	} else {
		ran, _ := json.Marshal(args)
		c.ran = string(ran)
	}
	if ok, msg := r.acceptCall(t, args); !ok {
		return r.refuse(c, RefusedAccept, "Refused: "+msg, msg)
	}
	c.args = args
	return true
}

func (r *run) contextValue(key string) string {
	switch {
	case key == "user.id":
		return r.req.User.ID
	case key == "conversation.id":
		return r.req.Conversation
	case strings.HasPrefix(key, "user."):
		return r.req.User.Attributes[strings.TrimPrefix(key, "user.")]
	}
	return ""
}

// offers reports whether this run offered the tool: a call to any other is refused,
// even when the agent has it, so an intent's whitelist is a real sandbox.
func (r *run) offers(name string) bool {
	if r.agent.intents == nil {
		return true
	}
	return r.intent != nil && r.intent.allowed[name]
}

func (r *run) toolNames() string {
	names := make([]string, len(r.tools))
	for i, d := range r.tools {
		names[i] = d.Name
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// schemaProblems lists a validation error's leaves as "at /pointer: problem".
func schemaProblems(err error) string {
	return strings.Join(schemaProblemList(err), "; ")
}

// runParallel runs the runnable calls, at most guards.max_parallel_tools at a time.
func (r *run) runParallel(ctx context.Context, calls []call, runnable []int) {
	if len(runnable) == 0 {
		return
	}
	r.host().Go(ctx, len(runnable), r.agent.settings.Guards.MaxParallelTools, func(ctx context.Context, i int) {
		r.execute(ctx, &calls[runnable[i]])
	})
}

// execute runs one prepared call with its timeout and output cap; ctx is the
// context of the branch it runs in.
func (r *run) execute(ctx context.Context, c *call) {
	t := c.tool
	r.emit(Event{Kind: EventToolCall, Tool: c.tc.Name, CallID: c.tc.ID, Args: c.ran}) // what runs, never a discarded value
	if t.engine != nil {
		t.engine.call(ctx, r, c)
	} else {
		r.callTool(ctx, c)
	}
	if t.ownState() { // the run's own state: no filter or cap applies
		e := Event{Kind: EventToolResult, Tool: c.tc.Name, CallID: c.tc.ID, Result: preview(c.result)}
		if c.outcome == OutcomeError {
			e.Error = c.result
		}
		r.emit(e)
		return
	}
	r.filterToolResult(c)
	if len(c.result) > t.maxOutput {
		c.result = truncate(c.result, t.maxOutput)
		r.emit(Event{Kind: EventGuard, Guard: GuardMaxToolOutput, Tool: c.tc.Name, CallID: c.tc.ID, Message: fmt.Sprintf("cut to %d bytes", t.maxOutput)})
	}
	e := Event{Kind: EventToolResult, Tool: c.tc.Name, CallID: c.tc.ID, Result: preview(c.result), Duration: c.duration}
	if c.outcome == OutcomeError {
		e.Error = c.result
	}
	r.emit(e)
}

// callKey names the call at position pos of the response the model gave in this
// turn: unique in the run even where a provider reuses call ids from one round to
// the next, and the same on every attempt, resume and replay of the call. It is
// the call's idempotency key and the id of the sub-run a sub-agent's call starts.
func (r *run) callKey(pos int, id string) string {
	return fmt.Sprintf("%s/%d/%d/%s", r.id, r.result.Turns, pos, id)
}

// callTool runs the call's tool with its timeout.
func (r *run) callTool(ctx context.Context, c *call) {
	t := c.tool
	ctx, cancel := r.host().CallContext(ctx, t.timeout)
	defer cancel()
	start := r.now()
	out, err := callTool(ctx, t.impl, tool.Input{Args: c.args, User: r.req.User, Conversation: r.req.Conversation,
		Name: c.tc.Name, CallID: c.tc.ID, IdempotencyKey: c.key, Timeout: t.timeout, Values: &r.vars,
		Run: r.id, OnRemoteTask: r.remoteTasks(c.tc.Name, c.tc.ID)})
	c.duration = r.since(start)
	switch {
	case err != nil && (ctx.Err() == context.DeadlineExceeded || errors.Is(err, tool.ErrTimeout)) && r.ctx.Err() == nil:
		c.outcome, c.result = OutcomeError, fmt.Sprintf("Error: %s timed out after %s.", c.tc.Name, t.timeout)
		r.emit(Event{Kind: EventGuard, Guard: GuardToolTimeout, Tool: c.tc.Name, CallID: c.tc.ID, Message: t.timeout.String()})
	case err != nil:
		c.outcome, c.result = OutcomeError, "Error: "+err.Error()
	default:
		c.outcome, c.result = OutcomeOK, out
	}
}

// callTool runs a tool and turns a panic inside it into an error: one broken tool
// must not take the run, or a server's other runs, down with it.
func callTool(ctx context.Context, t tool.Tool, in tool.Input) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the tool failed unexpectedly: %v", p)
		}
	}()
	return t.Call(ctx, in)
}
