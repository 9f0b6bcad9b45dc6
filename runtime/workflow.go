package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
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
	output   *structured   // a model step's output schema; nil without one
	body     []*flowStep   // a loop's steps
	branches [][]*flowStep // a parallel step's branches
	nested   []*spec.Step  // every step inside, marked skipped with it
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
				case ok && t.subAgent() != "":
					report(s.Source, "step %s: %s is an agent: write agent: %s with a task", s.Name, s.Tool, s.Tool)
				case ok && t.engine == engineTool(planner{}):
					report(s.Source, "step %s: %s is the model's plan tool, not one a workflow calls", s.Name, s.Tool)
				}
			case spec.StepModelK:
				if s.Model.Schema != nil {
					// Prefixed: a step named verdict or intent must not pass for the
					// judge's or the classifier's request.
					var err error
					fs.output, err = compileStructured(compiler, fmt.Sprintf("mem://workflow/%s.json", s.Name), "step_"+s.Name, s.Model.Schema, spec.DefaultOutputRetries)
					if err != nil {
						report(s.Source, "step %s: schema: %v", s.Name, err)
					}
				}
			case spec.StepAgent:
				if a.subAgents[s.Agent] == nil && a.remoteAgent(s.Agent) == nil {
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
	r.messages = append(r.messages, model.Message{Role: model.RoleAssistant, Content: answer})
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
