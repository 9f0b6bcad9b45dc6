package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// PurposeWorkflow is a workflow's model step.
const PurposeWorkflow Purpose = "workflow"

// workflow is a spec's workflow compiled: each step with its model output schema
// compiled once; tools are looked up by name when a step runs, so an MCP server's
// tools, known only then, can be called too.
type workflow struct {
	steps  []*flowStep
	answer *spec.Template
}

// flowStep is one compiled step.
type flowStep struct {
	spec     *spec.Step
	kind     spec.StepKind
	schema   *jsonschema.Schema // a model step's output schema; nil without one
	body     []*flowStep        // a loop's steps
	branches [][]*flowStep      // a parallel step's branches
	nested   []*spec.Step       // every step inside, marked skipped with it
}

// compileWorkflow compiles the spec's workflow, if any, reporting what cannot run:
// a tool step naming no tool (and no MCP server could bring it), or a model
// step's schema that does not compile.
func (a *Agent) compileWorkflow(compiler *jsonschema.Compiler, report func(src spec.Source, format string, args ...any)) {
	w := a.spec.Workflow
	if w == nil {
		return
	}
	var compile func(steps []spec.Step) []*flowStep
	compile = func(steps []spec.Step) []*flowStep {
		out := make([]*flowStep, 0, len(steps))
		for i := range steps {
			s := &steps[i]
			fs := &flowStep{spec: s, kind: s.Kind(), nested: s.Nested()}
			switch fs.kind {
			case spec.StepTool:
				t, ok := a.byName[s.Tool]
				switch {
				case !ok && len(a.spec.MCPServers) == 0:
					report(s.Source, "step %s: no tool %q", s.Name, s.Tool)
				case ok && t.subAgent != "":
					report(s.Source, "step %s: %s is an agent: write agent: %s with a task", s.Name, s.Tool, s.Tool)
				case ok && t.plan:
					report(s.Source, "step %s: %s is the model's plan tool, not one a workflow calls", s.Name, s.Tool)
				}
			case spec.StepModelK:
				if s.Model.Schema != nil {
					url := fmt.Sprintf("mem://workflow/%s.json", s.Name)
					schema, err := normalizeJSON(s.Model.Schema)
					if err == nil {
						if err = compiler.AddResource(url, schema); err == nil {
							fs.schema, err = compiler.Compile(url)
						}
					}
					if err != nil {
						report(s.Source, "step %s: schema: %v", s.Name, err)
					}
				}
			case spec.StepAgent:
				if a.subAgents[s.Agent] == nil {
					report(s.Source, "step %s: the agent %s is not available", s.Name, s.Agent)
				}
			case spec.StepLoop:
				fs.body = compile(s.Steps)
			case spec.StepParallel:
				for _, b := range s.Parallel {
					fs.branches = append(fs.branches, compile(b))
				}
			default:
				report(s.Source, "step %s does not say what it does", s.Name)
			}
			out = append(out, fs)
		}
		return out
	}
	a.workflow = &workflow{steps: compile(w.Steps), answer: w.Answer}
}

// flow is one run of a workflow. Steps of parallel branches and for_each items run
// at once; mu guards what they share of the run: its counters and budget, seen
// entities, facts and the result's usage.
type flow struct {
	r     *run
	mu    sync.Mutex
	base  int // the run's model calls before the workflow
	turns int // the workflow's model calls, under mu
	// ordered: the model answers calls in the order they arrive (a script, a
	// recorder), so concurrent steps that call it run one at a time.
	ordered bool
	// serial: every parallel branch and for_each item runs one at a time, in
	// order. A durable engine's workflow (a host other than this process) runs
	// them so: what they share is guarded by a mutex a workflow cannot wait on.
	serial bool
	// fatal is set when a guard or the run's context ends the whole workflow,
	// whatever the steps' on_error says; under mu.
	fatal *flowStop
}

type flowStop struct {
	reason StopReason
	detail string
}

func (s *flowStop) Error() string { return s.detail }

// frame is a sequence of steps: the outputs it can read (steps.NAME) and the tool
// calls it made, in order. A parallel branch and a for_each item run in frames of
// their own, merged into their parent's in declaration order once all are done,
// so a run's steps come out the same whatever finished first.
type frame struct {
	outputs map[string]any
	steps   []Step
	// suffix tells a loop's iterations apart in call ids.
	suffix string
	// top: no other step runs at the same time, so the run's result may be
	// written directly.
	top bool
	// turn is the run's model calls when the enclosing top-level step started: the
	// Turn of the frame's tool and agent steps, the same whatever finishes first.
	turn int
	// branch: the frame is a parallel branch's, or inside one. What its calls reveal
	// and write waits in pending (its entities in seen, which its own later steps
	// see) until the parallel step joins and takes them in, in branch order.
	branch  bool
	pending []*call
	seen    map[string][]string
}

// runWorkflow runs the agent's workflow instead of the model loop: the answer is
// the workflow's answer template, or the last step's text, after the answer
// filters; a step that fails with on_error fail stops the run with
// workflow_failed and the fallback message.
func (r *run) runWorkflow() {
	w := r.agent.workflow
	_, local := r.host().(LocalHost)
	f := &flow{r: r, base: r.result.Turns, ordered: isOrdered(r.agent.model), serial: !local}
	top := &frame{outputs: map[string]any{}, top: true}
	err := f.runSteps(top, w.steps)
	f.sync(top)
	if r.ctx.Err() != nil {
		// The run's time ran out or it was canceled: whatever a step made of that
		// (an error, or one continue let pass), the run did not complete.
		r.stopForContext(r.ctx.Err())
		return
	}
	if err != nil {
		var stop *flowStop
		if errors.As(err, &stop) {
			if stop.reason == StopTimeout || stop.reason == StopCanceled {
				r.stopForContext(r.ctx.Err())
				return
			}
			r.stop(stop.reason, stop.detail)
			return
		}
		r.stop(StopWorkflowFailed, err.Error())
		return
	}
	answer := ""
	if w.answer != nil {
		answer, err = w.answer.Render(f.values(top, nil).env(spec.EnvWorkflow))
		if err != nil {
			r.stop(StopWorkflowFailed, "the answer: "+err.Error())
			return
		}
	} else if answer, err = lastText(w.steps, top.outputs); err != nil {
		r.stop(StopWorkflowFailed, err.Error())
		return
	}
	if !r.filterText(spec.StageAnswer, &answer) {
		return
	}
	r.messages = append(r.messages, Message{Role: RoleAssistant, Content: answer})
	r.result.Answer = answer
	r.result.Stop = StopCompleted
	r.transition(StateFinished, TriggerWorkflowDone)
	r.emit(Event{Kind: EventStop, Stop: StopCompleted, Usage: &r.result.Usage, Cost: r.runCost()})
}

// sync moves what the top frame recorded into the run's result. Only the run's own
// goroutine calls it, between steps, when no other step runs.
func (f *flow) sync(top *frame) {
	f.r.result.Turns = f.base + f.turns
	f.r.result.Steps = append(f.r.result.Steps, top.steps...)
	top.steps = nil
}

// stepError is a step that failed with on_error fail: its container fails too.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return fmt.Sprintf("step %s: %v", e.step, e.err) }
func (e *stepError) Unwrap() error { return e.err }

// runSteps runs steps one after the other. It returns the first error that ends
// the sequence: a step's failure under on_error fail, or a *flowStop.
func (f *flow) runSteps(fr *frame, steps []*flowStep) error {
	for _, st := range steps {
		if fr.top {
			f.mu.Lock()
			fr.turn = f.base + f.turns
			f.mu.Unlock()
		}
		err := f.runStep(fr, st)
		if fr.top {
			f.sync(fr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// vals are the values a step's expressions see.
type vals struct {
	v spec.Values
}

func (v vals) env(e spec.Env) map[string]any { return e.Values(&v.v) }

func (f *flow) values(fr *frame, item *forItem) vals {
	v := f.r.vars
	v.Input = f.r.input()
	v.Steps = fr.outputs
	if item != nil {
		v.Item, v.Index = item.value, item.index
	}
	return vals{v}
}

// forItem is the element a for_each run works on.
type forItem struct {
	value any
	index int
}

func (f *flow) emitStep(st *flowStep, status StepStatus, d time.Duration, err error) {
	e := Event{Kind: EventStep, Step: st.spec.Name, StepStatus: status, Duration: d}
	if err != nil {
		e.Error = err.Error()
	}
	if !status.final() {
		e.Message = string(st.kind)
	}
	f.r.emit(e)
}

func (s StepStatus) final() bool { return s != StepStarted }

// runStep runs one step and records its output, following its on_error.
func (f *flow) runStep(fr *frame, st *flowStep) error {
	s := st.spec
	start := f.r.now()
	f.emitStep(st, StepStarted, 0, nil)
	if s.When != nil && s.When.Program != nil {
		hold, err := evalBool(s.When.Program, f.values(fr, nil).env(spec.EnvWorkflow))
		if err == nil && !hold {
			f.skip(fr, st)
			f.emitStep(st, StepSkipped, f.r.since(start), nil)
			return nil
		}
		if err != nil {
			return f.failed(fr, st, start, fmt.Errorf("when: %w", err))
		}
	}
	if stop := f.stopped(); stop != nil {
		return f.failed(fr, st, start, stop)
	}
	var out map[string]any
	var err error
	switch {
	case s.ForEach != nil && s.ForEach.Program != nil:
		out, err = f.forEach(fr, st)
	case st.kind == spec.StepParallel:
		out, err = f.parallel(fr, st)
	case st.kind == spec.StepLoop:
		out, err = f.loop(fr, st)
	default:
		var calls []*call
		out, calls, err = f.once(fr, st, nil, "")
		f.absorb(fr, calls)
	}
	if err != nil {
		return f.failed(fr, st, start, err)
	}
	fr.outputs[s.Name] = out
	status := StepOK
	if ok, _ := out[spec.OutOK].(bool); !ok {
		status = StepErrored // for_each items that failed under continue or fallback
	}
	f.emitStep(st, status, f.r.since(start), nil)
	return nil
}

// failed records a step's failure and applies its on_error: fail passes the error
// on, continue and fallback record it in the step's output. A guard or the end of
// the run's context passes on whatever on_error says.
func (f *flow) failed(fr *frame, st *flowStep, start time.Time, err error) error {
	var stop *flowStop
	fatal := errors.As(err, &stop)
	policy := st.spec.ErrorPolicy()
	out := zeroOutput(st.spec)
	out[spec.OutError] = err.Error()
	if policy == spec.OnErrorFallback && !fatal {
		fallbackOutput(st.spec, out)
	}
	fr.outputs[st.spec.Name] = out
	// The steps inside a parallel or loop step that never ran read as not ok,
	// as validate typed them, rather than failing the expression that reads them.
	for _, n := range st.nested {
		if _, ok := fr.outputs[n.Name]; !ok {
			fr.outputs[n.Name] = zeroOutput(n)
		}
	}
	if fatal || policy == spec.OnErrorFail {
		f.emitStep(st, StepFailed, f.r.since(start), err)
		if fatal {
			return err
		}
		return &stepError{st.spec.Name, err}
	}
	f.emitStep(st, StepErrored, f.r.since(start), err)
	return nil
}

// skip records a step whose when was false, and the steps inside it, as skipped.
func (f *flow) skip(fr *frame, st *flowStep) {
	out := zeroOutput(st.spec)
	out[spec.OutSkipped] = true
	fr.outputs[st.spec.Name] = out
	for _, n := range st.nested {
		o := zeroOutput(n)
		o[spec.OutSkipped] = true
		fr.outputs[n.Name] = o
	}
}

func (f *flow) stopped() *flowStop {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal == nil {
		if err := f.r.ctx.Err(); err != nil {
			reason := StopCanceled
			if errors.Is(err, context.DeadlineExceeded) {
				reason = StopTimeout
			}
			f.fatal = &flowStop{reason, "the run ended: " + err.Error()}
		}
	}
	return f.fatal
}

// stop ends the workflow for a guard; the first reason wins.
func (f *flow) stop(reason StopReason, detail string) *flowStop {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal == nil {
		f.fatal = &flowStop{reason, detail}
	}
	return f.fatal
}

// once runs a tool, model or agent step once: for a for_each item when item is
// set. It returns the step's output and the tool call it made, whose entities and
// facts the caller takes in.
func (f *flow) once(fr *frame, st *flowStep, item *forItem, id string) (map[string]any, []*call, error) {
	env := f.values(fr, item).env(spec.EnvWorkflow)
	if item != nil {
		env = f.values(fr, item).env(spec.EnvWorkflowItem)
	}
	id = "step:" + st.spec.Name + fr.suffix + id
	switch st.kind {
	case spec.StepTool:
		out, c, err := f.tool(fr, st, env, id)
		if c == nil {
			return out, nil, err
		}
		return out, []*call{c}, err
	case spec.StepModelK:
		out, err := f.model(st, env, id)
		return out, nil, err
	case spec.StepAgent:
		out, c, err := f.agentStep(fr, st, env, id)
		if c == nil {
			return out, nil, err
		}
		return out, []*call{c}, err
	}
	return nil, nil, fmt.Errorf("step %s does not say what it does", st.spec.Name)
}

// tool calls a tool with the step's rendered arguments, through the checks a
// model's call gets: the tool's schema, bound parameters, accept rule, timeout,
// output cap and result filters. A call that needs a person's approval is refused:
// a workflow does not pause.
func (f *flow) tool(fr *frame, st *flowStep, env map[string]any, id string) (map[string]any, *call, error) {
	r := f.r
	args, err := st.spec.RenderArgs(env)
	if err != nil {
		return nil, nil, fmt.Errorf("args: %w", err)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, nil, fmt.Errorf("args: %w", err)
	}
	c := &call{tc: ToolCall{ID: id, Name: st.spec.Tool, Arguments: string(raw)}, key: r.id + "/" + id} // a step's id is unique in the run
	f.mu.Lock()
	// In a parallel branch, the accept rule also sees what the branch's own earlier
	// steps revealed, which the run takes in only when the branches join.
	r.seen.pending = fr.seen
	if r.prepare(c) {
		if needs, _ := r.needsApproval(c); needs {
			msg := fmt.Sprintf("Error: %s needs a person's approval, and a workflow step cannot wait for one.", c.tc.Name)
			r.refuse(c, RefusedNoApproval, msg, msg)
		}
	}
	r.seen.pending = nil
	f.mu.Unlock()
	if c.outcome == "" { // prepared: it runs
		r.execute(r.ctx, c)
	}
	fr.steps = append(fr.steps, Step{Turn: fr.turn, Tool: c.tc.Name, CallID: c.tc.ID, Arguments: c.shownArgs(), Discarded: c.discarded,
		modelArgs: cmp.Or(c.modelArgs, c.tc.Arguments), Outcome: c.outcome, Refusal: c.refusal, Result: c.result, Duration: c.duration})
	out := zeroOutput(st.spec)
	out[spec.OutText] = c.result
	if c.outcome != OutcomeOK {
		return out, c, errors.New(strings.TrimPrefix(c.result, "Error: "))
	}
	out[spec.OutOK] = true
	out[spec.OutResult] = parseResult(c.result)
	return out, c, nil
}

// absorb takes in what calls revealed and wrote: their entities, facts and
// sub-runs. In a parallel branch they wait in the frame until the branches join,
// its entities visible to the branch's own later steps only.
func (f *flow) absorb(fr *frame, calls []*call) {
	if len(calls) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fr.branch {
		for _, c := range calls {
			fr.pending = append(fr.pending, c)
			for kind, ids := range f.reveals(c) {
				fr.seen[kind] = append(fr.seen[kind], ids...)
			}
		}
		return
	}
	for _, c := range calls {
		if c.sub != nil {
			f.r.absorbSub(c.sub)
		}
		if c.outcome == OutcomeOK {
			f.r.collect(c)
			f.r.applyFactRules(c)
		}
	}
}

// reveals are the entities a call will reveal once the run takes it in: a
// sub-run's, and those its tool's collect rules find in its result (a rule that
// fails is reported when the call is taken in). Called under f.mu.
func (f *flow) reveals(c *call) map[string][]string {
	out := map[string][]string{}
	if c.sub != nil {
		maps.Copy(out, c.sub.seen.revealedByKind())
	}
	if c.outcome != OutcomeOK || c.tool == nil {
		return out
	}
	vars := f.r.vars
	vars.Args, vars.Result = c.args, parseResult(c.result)
	env := spec.EnvCollect.Values(&vars)
	for _, kind := range slices.Sorted(maps.Keys(c.tool.spec.Collect)) {
		rule := c.tool.spec.Collect[kind]
		if rule.Program == nil {
			continue
		}
		if v, err := expr.Run(rule.Program, env); err == nil {
			out[kind] = append(out[kind], flatten(v)...)
		}
	}
	return out
}

// model makes a model step's call: the spec's instructions as the system prompt,
// the rendered prompt as the user's message, no tools; with a schema, the answer
// must be JSON matching it. It counts as a model call of the run: max_turns and the
// budgets apply, and a guard that trips ends the workflow.
func (f *flow) model(st *flowStep, env map[string]any, id string) (map[string]any, error) {
	r := f.r
	m := st.spec.Model
	prompt, err := m.Prompt.Render(env)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	var msgs []Message
	if sys := r.systemPrompt(); sys != "" {
		msgs = append(msgs, Message{Role: RoleSystem, Content: sys})
	}
	req := &ModelRequest{Messages: append(msgs, Message{Role: RoleUser, Content: prompt})}
	if m.Schema != nil {
		// Prefixed: a step named verdict or intent must not pass for the judge's or
		// the classifier's request.
		req.JSONSchema = &JSONSchemaFormat{Name: "step_" + st.spec.Name, Schema: m.Schema}
	}
	f.mu.Lock()
	// The budget holds the call's worst case while it is in flight: model steps
	// running at once cannot each spend the same remainder.
	detail, release := r.overBudget(PurposeWorkflow, req)
	if detail != "" {
		f.mu.Unlock()
		return nil, f.stop(StopBudget, detail)
	}
	defer release()
	if detail := r.takeTurn(); detail != "" {
		f.mu.Unlock()
		r.emit(Event{Kind: EventGuard, Guard: GuardMaxTurns, Step: st.spec.Name, Message: detail})
		return nil, f.stop(StopMaxTurns, detail)
	}
	f.turns++
	turn := f.base + f.turns
	f.mu.Unlock()
	r.emit(Event{Kind: EventModelRequest, Purpose: PurposeWorkflow, Turn: turn, Step: st.spec.Name, CallID: id, Messages: len(req.Messages)})
	start := r.now()
	resp, err := r.agent.model.Complete(r.ctx, req)
	if err != nil {
		f.mu.Lock()
		if me := (*ModelError)(nil); errors.As(err, &me) && me.Usage != (Usage{}) {
			r.account(PurposeWorkflow, me.Usage)
		}
		f.mu.Unlock()
		if stop := f.stopped(); stop != nil {
			return nil, stop
		}
		return nil, err
	}
	f.mu.Lock()
	cost := r.account(PurposeWorkflow, resp.Usage)
	r.result.FinishReasons = append(r.result.FinishReasons, resp.FinishReason)
	f.mu.Unlock()
	usage := resp.Usage
	r.emit(Event{Kind: EventModelResponse, Purpose: PurposeWorkflow, Turn: turn, Step: st.spec.Name, CallID: id, Usage: &usage, Cost: cost,
		Duration: f.r.since(start), Finish: resp.FinishReason})
	switch resp.FinishReason {
	case FinishLength:
		return nil, errors.New("the model's answer was cut off (finish_reason length)")
	case FinishContentFilter:
		return nil, errors.New("the provider's content filter stopped the answer")
	}
	out := zeroOutput(st.spec)
	text := resp.Message.Content
	out[spec.OutText] = text
	if st.schema != nil {
		v, err := decodeOutput(text, st.schema, st.spec.Model.Schema)
		if err != nil {
			return out, err
		}
		out[spec.OutOutput] = v
	} else {
		out[spec.OutOutput] = text
	}
	out[spec.OutOK] = true
	return out, nil
}

// decodeOutput reads a model's JSON answer, in a ```json fence or not, and checks
// it against the step's schema.
func decodeOutput(text string, schema *jsonschema.Schema, decl map[string]any) (any, error) {
	content := strings.TrimSpace(text)
	content = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(content, "```json"), "```"), "```"))
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		return nil, fmt.Errorf("the model's answer is not JSON: %s", preview(text))
	}
	if err := schema.Validate(v); err != nil {
		return nil, fmt.Errorf("the model's answer does not match the schema: %s", schemaProblems(err))
	}
	// The validator's numbers are json.Number; expressions want the types validate
	// gave them: int where the schema says integer, float64 elsewhere.
	return typedJSON(v, decl), nil
}

// typedJSON turns the validator's json.Number values into what the step's output
// was typed as at load (spec.SchemaType): int for a value the schema declares an
// integer, float64 for any other number.
func typedJSON(v any, schema map[string]any) any {
	switch x := v.(type) {
	case json.Number:
		if t, _ := schema["type"].(string); t == "integer" {
			if n, err := x.Int64(); err == nil {
				return int(n)
			}
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for k, e := range x {
			sub, ok := props[k].(map[string]any)
			if !ok {
				sub = extra
			}
			x[k] = typedJSON(e, sub)
		}
		return x
	case []any:
		items, _ := schema["items"].(map[string]any)
		for i, e := range x {
			x[i] = typedJSON(e, items)
		}
		return x
	}
	return v
}

// agentStep runs an agents entry on the step's task as a sub-run. Like a model's
// call of the agent's tool, it is a step of the run (the entry's name as its tool,
// {"task": …} as its arguments, the sub-run under Agent); the returned call carries
// the sub-run, whose usage, facts and entities the caller takes in.
func (f *flow) agentStep(fr *frame, st *flowStep, env map[string]any, id string) (map[string]any, *call, error) {
	r := f.r
	task, err := st.spec.Task.Render(env)
	if err != nil {
		return nil, nil, fmt.Errorf("task: %w", err)
	}
	f.mu.Lock()
	seen := r.seenSoFar() // what the run took in so far, and the branch's own
	if seen == nil && len(fr.seen) > 0 {
		seen = map[string][]string{}
	}
	for kind, ids := range fr.seen {
		seen[kind] = append(slices.Clip(seen[kind]), ids...)
	}
	f.mu.Unlock()
	args, _ := json.Marshal(map[string]string{spec.SubAgentTaskParam: task})
	start := r.now()
	sub, err := r.delegate(r.ctx, st.spec.Agent, task, &call{tc: ToolCall{ID: id}, key: r.id + "/" + id}, seen)
	step := Step{Turn: fr.turn, Tool: st.spec.Agent, CallID: id, Arguments: string(args), modelArgs: string(args), Duration: r.since(start)}
	if err != nil {
		step.Outcome, step.Result = OutcomeError, "Error: "+err.Error()
		fr.steps = append(fr.steps, step)
		return nil, nil, err
	}
	res := sub.result
	step.Agent = sub.summary(true)
	out := zeroOutput(st.spec)
	out[spec.OutAnswer], out[spec.OutStop] = res.Answer, string(res.Stop)
	c := &call{sub: sub, outcome: OutcomeError}
	if !res.Completed() {
		err := fmt.Errorf("the agent %s stopped without an answer (%s): %s", st.spec.Agent, res.Stop, cmp.Or(res.Detail, "no detail"))
		step.Outcome, step.Result = OutcomeError, "Error: "+err.Error()
		fr.steps = append(fr.steps, step)
		return out, c, err
	}
	step.Outcome, step.Result = OutcomeOK, res.Answer
	fr.steps = append(fr.steps, step)
	out[spec.OutOK] = true
	return out, c, nil
}

// forEach runs a step once for each element of its list, max_parallel at once;
// the items' outputs and tool calls come out in the list's order. A failed item
// follows the step's on_error: fallback and continue keep the item's output and go
// on, fail fails the step once every item is done.
func (f *flow) forEach(fr *frame, st *flowStep) (map[string]any, error) {
	s := st.spec
	v, err := expr.Run(s.ForEach.Program, f.values(fr, nil).env(spec.EnvWorkflow))
	if err != nil {
		return nil, fmt.Errorf("for_each: %w", err)
	}
	list, ok := asList(v)
	if !ok {
		return nil, fmt.Errorf("for_each: %s is %s, not a list", s.ForEach.Source, jsonKind(v))
	}
	type result struct {
		out   map[string]any
		calls []*call
		steps []Step
		err   error
	}
	results := make([]result, len(list))
	item := func(i int) {
		sub := &frame{outputs: fr.outputs, suffix: fr.suffix, turn: fr.turn, seen: fr.seen}
		res := &results[i]
		res.out, res.calls, res.err = f.once(sub, st, &forItem{list[i], i}, fmt.Sprintf("[%d]", i))
		res.steps = sub.steps
	}
	if f.inOrder(st) {
		// In this goroutine: a workflow's run may not wait on goroutines of its own.
		for i := range list {
			item(i)
		}
	} else {
		sem := make(chan struct{}, cmp.Or(s.MaxParallel, f.r.agent.settings.Guards.MaxParallelTools))
		var wg sync.WaitGroup
		for i := range list {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				item(i)
			})
		}
		wg.Wait()
	}
	items := make([]any, len(list))
	out := zeroOutput(s)
	out[spec.OutOK] = true
	var firstErr error
	for i := range results {
		res := &results[i]
		fr.steps = append(fr.steps, res.steps...)
		f.absorb(fr, res.calls)
		item := res.out
		if res.err != nil {
			var stop *flowStop
			if errors.As(res.err, &stop) {
				return nil, stop
			}
			if item == nil {
				item = zeroOutput(&spec.Step{Tool: s.Tool, Model: s.Model, Agent: s.Agent})
			}
			item[spec.OutError] = res.err.Error()
			if s.ErrorPolicy() == spec.OnErrorFallback {
				fallbackOutput(s, item)
			}
			out[spec.OutOK] = false
			if firstErr == nil {
				firstErr = fmt.Errorf("item %d: %w", i, res.err)
				out[spec.OutError] = firstErr.Error()
			}
		}
		items[i] = item
	}
	out[spec.OutItems] = items
	if firstErr != nil && s.ErrorPolicy() == spec.OnErrorFail {
		return nil, firstErr
	}
	return out, nil
}

// parallel runs the branches at once, each in a frame of its own that starts from
// the outputs before the step; their outputs, calls, entities and facts join the
// step's frame in branch order. The first branch (in order) that failed fails the
// step, once all are done.
func (f *flow) parallel(fr *frame, st *flowStep) (map[string]any, error) {
	subs := make([]*frame, len(st.branches))
	errs := make([]error, len(st.branches))
	var wg sync.WaitGroup
	for i, b := range st.branches {
		seen := make(map[string][]string, len(fr.seen))
		for kind, ids := range fr.seen {
			seen[kind] = slices.Clip(ids)
		}
		subs[i] = &frame{outputs: maps.Clone(fr.outputs), suffix: fr.suffix, turn: fr.turn, branch: true, seen: seen}
		if f.inOrder(st) {
			errs[i] = f.runSteps(subs[i], b)
			continue
		}
		wg.Go(func() { errs[i] = f.runSteps(subs[i], b) })
	}
	wg.Wait()
	for i, sub := range subs {
		fr.steps = append(fr.steps, sub.steps...)
		f.absorb(fr, sub.pending)
		for _, s := range st.spec.Parallel[i] {
			for _, n := range append([]*spec.Step{&s}, s.Nested()...) {
				if o, ok := sub.outputs[n.Name]; ok {
					fr.outputs[n.Name] = o
				}
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	out := zeroOutput(st.spec)
	out[spec.OutOK] = true
	return out, nil
}

// loop runs the body until until holds, at most max times; its steps' outputs are
// the latest iteration's. Not holding after max iterations is the step's error.
func (f *flow) loop(fr *frame, st *flowStep) (map[string]any, error) {
	s := st.spec
	out := zeroOutput(s)
	suffix := fr.suffix
	defer func() { fr.suffix = suffix }()
	for i := 1; i <= s.Loop.Max; i++ {
		fr.suffix = fmt.Sprintf("%s#%d", suffix, i)
		if err := f.runSteps(fr, st.body); err != nil {
			return nil, err
		}
		out = zeroOutput(s)
		out[spec.OutIterations] = i
		fr.outputs[s.Name] = out
		done, err := evalBool(s.Loop.Until.Program, f.values(fr, nil).env(spec.EnvWorkflow))
		if err != nil {
			return nil, fmt.Errorf("until: %w", err)
		}
		if done {
			out[spec.OutOK] = true
			return out, nil
		}
		if stop := f.stopped(); stop != nil {
			return nil, stop
		}
	}
	return nil, fmt.Errorf("until (%s) did not hold after %d iterations", s.Loop.Until.Source, s.Loop.Max)
}

func evalBool(p *vm.Program, env map[string]any) (bool, error) {
	v, err := expr.Run(p, env)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("got %T, not a boolean", v)
	}
	return b, nil
}

// asList is a for_each list's elements: any slice or array (1..3 is an []int).
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case nil:
		return nil, true // nothing to do
	}
	rv := reflect.ValueOf(v)
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// OrderedModel is a model that answers calls in the order they come, from a list
// (offline.Script), or keeps them in that order (offline.Recorder's wrapper).
type OrderedModel interface {
	Model
	// Ordered reports whether the order of calls decides the answers.
	Ordered() bool
}

func isOrdered(m Model) bool {
	o, ok := m.(OrderedModel)
	return ok && o.Ordered()
}

// inOrder reports whether a for_each or parallel step runs its items or branches
// one at a time, in declaration order: when the model is ordered and the step
// makes model calls (a model step, or an agent step's sub-run, inside it), so a
// script answers them, and a recorder keeps them, in the same order on every run.
// Real providers answer concurrent steps at once.
func (f *flow) inOrder(st *flowStep) bool {
	if f.serial {
		return true
	}
	if !f.ordered {
		return false
	}
	for _, s := range append([]*spec.Step{st.spec}, st.nested...) {
		if k := s.Kind(); k == spec.StepModelK || k == spec.StepAgent {
			return true
		}
	}
	return false
}

// zeroOutput is a step's output before it produced anything: every field its type
// declares, at its zero value, so an expression reading a skipped or failed step
// gets "" or false rather than an error.
func zeroOutput(s *spec.Step) map[string]any {
	out := map[string]any{spec.OutOK: false, spec.OutSkipped: false, spec.OutError: ""}
	if s.ForEach != nil && s.ForEach.Source != "" {
		out[spec.OutItems] = []any{}
		return out
	}
	switch s.Kind() {
	case spec.StepTool:
		out[spec.OutResult], out[spec.OutText] = nil, ""
	case spec.StepModelK:
		out[spec.OutText], out[spec.OutOutput] = "", nil
	case spec.StepAgent:
		out[spec.OutAnswer], out[spec.OutStop] = "", ""
	case spec.StepLoop:
		out[spec.OutIterations] = 0
	}
	return out
}

// fallbackOutput puts a step's fallback where its result would be.
func fallbackOutput(s *spec.Step, out map[string]any) {
	text := fallbackText(s.Fallback)
	switch s.Kind() {
	case spec.StepTool:
		out[spec.OutResult], out[spec.OutText] = s.Fallback, text
	case spec.StepModelK:
		out[spec.OutOutput], out[spec.OutText] = s.Fallback, text
	case spec.StepAgent:
		out[spec.OutAnswer] = text
	}
}

func fallbackText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// lastText is the default answer: the text of the last step that ran — a tool's
// result, a model's text, an agent's answer; for a for_each step its items' texts,
// one a line; for a loop or parallel step the last of its steps'. A last step that
// failed (and continue let the flow go on) leaves no answer: that is an error, so
// the run stops with workflow_failed rather than answer nothing. A fallback value
// stands in for a failed step's text.
func lastText(steps []*flowStep, outputs map[string]any) (string, error) {
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		out, _ := outputs[st.spec.Name].(map[string]any)
		if out == nil || out[spec.OutSkipped] == true {
			continue
		}
		switch {
		case st.kind == spec.StepLoop:
			if t, err := lastText(st.body, outputs); t != "" || err != nil {
				return t, err
			}
			continue
		case st.kind == spec.StepParallel:
			for b := len(st.branches) - 1; b >= 0; b-- {
				if t, err := lastText(st.branches[b], outputs); t != "" || err != nil {
					return t, err
				}
			}
			continue
		}
		answered := func(o map[string]any) bool {
			return o[spec.OutOK] == true || st.spec.ErrorPolicy() == spec.OnErrorFallback
		}
		if items, ok := out[spec.OutItems].([]any); ok {
			var lines []string
			for _, it := range items {
				if m, ok := it.(map[string]any); ok && answered(m) {
					lines = append(lines, outputText(m))
				}
			}
			if len(lines) == 0 && len(items) > 0 {
				return "", fmt.Errorf("the last step, %s, failed for every item and the workflow has no answer: %v", st.spec.Name, out[spec.OutError])
			}
			return strings.Join(lines, "\n"), nil
		}
		if !answered(out) {
			return "", fmt.Errorf("the last step, %s, failed and the workflow has no answer: %v", st.spec.Name, out[spec.OutError])
		}
		return outputText(out), nil
	}
	return "", nil
}

func outputText(out map[string]any) string {
	if s, _ := out[spec.OutAnswer].(string); s != "" {
		return s
	}
	s, _ := out[spec.OutText].(string)
	return s
}
