package runtime

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

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
	c := &call{tc: model.ToolCall{ID: id, Name: st.spec.Tool, Arguments: string(raw)}, key: r.id + "/" + id} // a step's id is unique in the run
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
// must be JSON matching it, and one that does not goes back to the model with its
// problems, as an agent's structured answer does (output.go). Each call counts as
// a model call of the run: max_turns and the budgets apply, and a guard that trips
// ends the workflow.
func (f *flow) model(st *flowStep, env map[string]any, id string) (map[string]any, error) {
	r := f.r
	m := st.spec.Model
	prompt, err := m.Prompt.Render(env)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	var msgs []model.Message
	if sys := r.systemPrompt(); sys != "" {
		msgs = append(msgs, model.Message{Role: model.RoleSystem, Content: sys})
	}
	req := &model.Request{Messages: append(msgs, model.Message{Role: model.RoleUser, Content: prompt})}
	if st.output != nil {
		req.JSONSchema = st.output.format()
	}
	out := zeroOutput(st.spec)
	for attempt := 0; ; attempt++ {
		text, err := f.callModel(st, req, id)
		if err != nil {
			return nil, err
		}
		out[spec.OutText] = text
		if st.output == nil {
			out[spec.OutOutput], out[spec.OutOK] = text, true
			return out, nil
		}
		c := st.output.check(text)
		if c.valid() {
			// The validator's numbers are json.Number; expressions want the types
			// validate gave them: int where the schema says integer, float64 elsewhere.
			out[spec.OutOutput], out[spec.OutOK] = typedJSON(c.value, st.output.decl), true
			return out, nil
		}
		r.emit(Event{Kind: EventGuard, Guard: GuardOutputInvalid, Step: st.spec.Name, Message: strings.Join(c.problems, "; ")})
		if attempt >= st.output.retries {
			return out, fmt.Errorf("the model's answer does not match the schema: %s", strings.Join(c.problems, "; "))
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: text},
			model.Message{Role: model.RoleUser, Content: st.output.correction(c)})
	}
}

// callModel makes one call of a model step and returns its text.
func (f *flow) callModel(st *flowStep, req *model.Request, id string) (string, error) {
	r := f.r
	f.mu.Lock()
	// The budget holds the call's worst case while it is in flight: model steps
	// running at once cannot each spend the same remainder.
	detail, release := r.overBudget(PurposeWorkflow, req)
	if detail != "" {
		f.mu.Unlock()
		return "", f.stop(StopBudget, detail)
	}
	defer release()
	if detail := r.takeTurn(); detail != "" {
		f.mu.Unlock()
		r.emit(Event{Kind: EventGuard, Guard: GuardMaxTurns, Step: st.spec.Name, Message: detail})
		return "", f.stop(StopMaxTurns, detail)
	}
	f.turns++
	turn := f.base + f.turns
	f.mu.Unlock()
	r.emit(Event{Kind: EventModelRequest, Purpose: PurposeWorkflow, Turn: turn, Step: st.spec.Name, CallID: id, Messages: len(req.Messages), Sent: req.Messages})
	start := r.now()
	resp, err := r.agent.model.Complete(r.ctx, req)
	if err != nil {
		f.mu.Lock()
		if me := (*model.Error)(nil); errors.As(err, &me) && me.Usage != (model.Usage{}) {
			r.account(PurposeWorkflow, me.Usage, nil)
		}
		f.mu.Unlock()
		if stop := f.stopped(); stop != nil {
			return "", stop
		}
		return "", err
	}
	f.mu.Lock()
	cost := r.account(PurposeWorkflow, resp.Usage, resp.Answered)
	answered, from := answeredBy(resp)
	r.result.FinishReasons = append(r.result.FinishReasons, resp.FinishReason)
	r.result.Models = append(r.result.Models, answered)
	f.mu.Unlock()
	usage := resp.Usage
	r.emit(Event{Kind: EventModelResponse, Purpose: PurposeWorkflow, Turn: turn, Step: st.spec.Name, CallID: id, Usage: &usage, Cost: cost,
		Duration: f.r.since(start), Finish: resp.FinishReason, Model: answered, FallbackFrom: from})
	switch resp.FinishReason {
	case model.FinishLength:
		return "", errors.New("the model's answer was cut off (finish_reason length)")
	case model.FinishContentFilter:
		return "", errors.New("the provider's content filter stopped the answer")
	}
	return resp.Message.Content, nil
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
	if r.agent.remoteAgent(st.spec.Agent) != nil {
		return f.remoteStep(fr, st, task, id)
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
	sub, err := r.delegate(r.ctx, st.spec.Agent, task, &call{tc: model.ToolCall{ID: id}, key: r.id + "/" + id}, seen)
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
