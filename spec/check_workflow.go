package spec

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/checker/nature"
	"github.com/expr-lang/expr/types"
	"go.yaml.in/yaml/v3"
)

var stepNameRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// stepRefRe finds steps.NAME in an expression's source, to tell a step that runs
// later (a cycle) from one that does not exist.
var stepRefRe = regexp.MustCompile(`\bsteps\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)`)

// workflowCheck is the state of checking one workflow: every step's name, to tell
// a reference to a later step from an unknown one, and where each was declared.
type workflowCheck struct {
	declared map[string][]string // name → tokens of the first step with it
	all      []string
}

// checkWorkflow checks a workflow's steps in order: names, kinds, references to
// tools and agents, and every expression against the steps that run before it.
func (c *checker) checkWorkflow() {
	w := c.spec.Workflow
	at := c.at("workflow")
	if w == nil || c.failed[at.path] {
		return
	}
	w.Source = Source{Pos: at.pos, Path: at.path}
	if len(c.spec.Intents) > 0 {
		c.errorf(at.keyPos(c.file), "a spec is either a workflow or an agent that routes intents; split it into two specs",
			"workflow and intents cannot be combined")
	}
	if c.spec.Judge != nil {
		c.warnf(c.at("judge").keyPos(c.file), "a workflow's answer is not judged; remove judge or check the answer in a model step", "judge has no effect on a workflow")
	}
	wc := &workflowCheck{declared: map[string][]string{}}
	var collect func(steps []Step, tokens []string)
	collect = func(steps []Step, tokens []string) {
		for i := range steps {
			t := append(slices.Clip(tokens), strconv.Itoa(i))
			s := &steps[i]
			if s.Name != "" {
				if _, dup := wc.declared[s.Name]; !dup {
					wc.declared[s.Name] = t
					wc.all = append(wc.all, s.Name)
				}
			}
			collect(s.Steps, append(slices.Clip(t), "steps"))
			for b := range s.Parallel {
				collect(s.Parallel[b], append(slices.Clip(t), "parallel", strconv.Itoa(b)))
			}
		}
	}
	collect(w.Steps, []string{"workflow", "steps"})
	if len(w.Steps) == 0 && !c.failed[c.at("workflow", "steps").path] {
		c.errorf(at.keyPos(c.file), "add steps: a tool, model, agent, parallel or loop step", "workflow has no steps")
	}
	visible := c.checkSteps(wc, w.Steps, []string{"workflow", "steps"}, types.Map{})
	if w.Answer != nil {
		c.compileWorkflowTemplate(wc, w.Answer, visible, nil, c.at("workflow", "answer"))
	}
}

// checkSteps checks a list of steps that run one after the other, each seeing the
// outputs of those before it, and returns the outputs visible after the last.
func (c *checker) checkSteps(wc *workflowCheck, steps []Step, tokens []string, visible types.Map) types.Map {
	visible = maps.Clone(visible)
	for i := range steps {
		t := append(slices.Clip(tokens), strconv.Itoa(i))
		for name, typ := range c.checkStep(wc, &steps[i], t, visible) {
			visible[name] = typ
		}
	}
	return visible
}

// checkStep checks one step and returns the outputs it adds: its own and those of
// the steps inside it.
func (c *checker) checkStep(wc *workflowCheck, s *Step, tokens []string, visible types.Map) types.Map {
	at := c.at(tokens...)
	s.Source = Source{Pos: at.pos, Path: at.path}
	sub := func(more ...string) []string { return append(slices.Clip(tokens), more...) }
	added := types.Map{}
	// The name.
	nameAt := c.at(sub("name")...)
	switch {
	case s.Name == "":
		if !c.failed[nameAt.path] {
			c.errorf(at, "name it, e.g. name: fetch_orders: later steps read its output as steps.NAME", "step needs a name")
		}
	case !stepNameRe.MatchString(s.Name):
		if !c.failed[nameAt.path] {
			c.errorf(nameAt, "use lower-case letters, digits and _, starting with a letter or _", "step name %q is not a valid name", s.Name)
		}
	case !slices.Equal(wc.declared[s.Name], tokens):
		first := c.at(wc.declared[s.Name]...)
		c.errorf(nameAt, fmt.Sprintf("first declared at line %d; step names are unique in the whole workflow", first.pos.Line), "duplicate step name %q", s.Name)
	}
	// The kind.
	kinds := s.kinds()
	switch len(kinds) {
	case 0:
		c.errorf(at, "give it one of tool, model, agent, parallel or loop", "step %q does not say what it does", s.Name)
	case 1:
	default:
		slices.SortFunc(kinds, func(a, b StepKind) int { return comparePos(c.at(sub(string(a))...).pos, c.at(sub(string(b))...).pos) })
		c.errorf(c.at(sub(string(kinds[1]))...).keyPos(c.file), "a step does exactly one thing: split it into two steps", "step %q has both %s and %s", s.Name, kinds[0], kinds[1])
	}
	kind := s.Kind()
	misplaced := func(key, hint, format string, args ...any) {
		if a := c.at(sub(key)...); a.node != nil {
			c.errorf(a.keyPos(c.file), hint, format, args...)
		}
	}
	// A step of two kinds is reported as that; its keys are not misplaced too.
	if s.Tool == "" {
		misplaced("args", "args are a tool step's arguments", "args without tool")
	}
	if s.Agent == "" {
		misplaced("task", "task is an agent step's task", "task without agent")
	}
	if s.Loop == nil {
		misplaced("steps", "steps is a loop's body: add loop: {until: …, max: …}", "steps without loop")
	}
	if kind == StepParallel || kind == StepLoop {
		misplaced("for_each", "for_each repeats a tool, model or agent step", "for_each on a %s step", kind)
	}
	if s.ForEach == nil {
		misplaced("max_parallel", "max_parallel bounds a for_each step's items", "max_parallel without for_each")
	}
	// on_error and fallback.
	if fb := c.at(sub("fallback")...); fb.node != nil {
		s.HasFallback = true
		c.budget = maxJSONNodes
		s.Fallback, _ = c.toJSON(fb.node, fb.path)
		if s.OnError != OnErrorFallback {
			c.errorf(fb.keyPos(c.file), "set on_error: fallback to use it", "fallback without on_error: fallback")
		}
	} else if s.OnError == OnErrorFallback {
		c.errorf(c.at(sub("on_error")...), "add fallback: VALUE, the result the step gives when it fails", "on_error: fallback without a fallback value")
	}
	if s.OnError == OnErrorFallback && (kind == StepParallel || kind == StepLoop) {
		c.errorf(c.at(sub("on_error")...), "use continue, or put the fallback on the steps inside", "a %s step has no result a fallback could stand in for", kind)
	}
	// when and for_each see the steps before this one.
	c.compileWorkflowExpr(wc, s.When, visible, nil, true, c.at(sub("when")...))
	var item types.Type
	if s.ForEach != nil {
		at := c.at(sub("for_each")...)
		if c.compileWorkflowExpr(wc, s.ForEach, visible, nil, false, at) && s.ForEach.Program != nil {
			var ok bool
			if item, ok = elemType(*s.ForEach.Program.Node().Nature()); !ok {
				c.errorf(at, "give an expression whose value is a list, like steps.orders.result.orders", "for_each must give a list, not %s", describeNature(*s.ForEach.Program.Node().Nature()))
			}
		}
		if item == nil {
			item = types.Any
		}
	}
	if s.Agent != "" && c.spec.SubAgent(s.Agent) == nil {
		var names []string
		for _, a := range c.spec.Agents {
			names = append(names, a.Name)
		}
		hint := suggest(s.Agent, names)
		if hint == "" {
			hint = "declare it under agents: {name: " + s.Agent + ", spec: …}"
		}
		c.errorf(c.at(sub("agent")...), hint, "unknown agent %q", s.Agent)
	}
	switch kind {
	case StepTool:
		c.toolRef(s.Tool, sub("tool")...)
		if a := c.at(sub("args")...); a.node != nil {
			s.ArgTemplates = map[string]*Template{}
			c.budget = maxJSONNodes
			v, _ := c.toJSON(a.node, a.path)
			args, _ := v.(map[string]any)
			s.Args = args
			c.walkArgs(wc, s, v, sub("args"), "", visible, item)
		}
		if !c.failed[c.at(sub("args")...).path] {
			c.checkStepArgs(s, sub)
		}
	case StepModelK:
		c.compileWorkflowTemplate(wc, &s.Model.Prompt, visible, item, c.at(sub("model", "prompt")...))
		if a := c.at(sub("model", "schema")...); a.node != nil && !c.failed[a.path] {
			c.budget = maxJSONNodes
			v, _ := c.toJSON(a.node, a.path)
			s.Model.Schema, _ = v.(map[string]any)
			if err := c.loader.schemas.meta.Validate(v); err != nil {
				c.schemaErrors(err, c.loader.schemas, sub("model", "schema"))
				s.Model.Schema = nil
			} else if typ, ok := s.Model.Schema["type"]; ok && typ != "object" {
				c.errorf(c.at(sub("model", "schema", "type")...), "structured output is a JSON object: wrap the value in one", "schema must have type object, not %v", typ)
			}
		}
	case StepAgent:
		if s.Task == nil {
			c.errorf(at, "give the agent its task, e.g. task: \"Check refunds for {{ input }}\"", "agent step %q needs a task", s.Name)
		} else {
			c.compileWorkflowTemplate(wc, s.Task, visible, item, c.at(sub("task")...))
		}
	case StepParallel:
		if len(s.Parallel) < 2 && !c.failed[c.at(sub("parallel")...).path] {
			c.warnf(c.at(sub("parallel")...).keyPos(c.file), "give two or more branches, or put the steps in the workflow's list", "parallel with %d branch runs nothing at once", len(s.Parallel))
		}
		for b, branch := range s.Parallel {
			bt := sub("parallel", strconv.Itoa(b))
			if len(branch) == 0 {
				c.errorf(c.at(bt...), "a branch is a list of steps", "empty parallel branch")
			}
			// A branch sees the steps before the parallel step and its own earlier
			// steps, never another branch's: they run at the same time.
			after := c.checkSteps(wc, branch, bt, visible)
			for name, typ := range after {
				if _, before := visible[name]; !before {
					added[name] = typ
				}
			}
		}
	case StepLoop:
		if len(s.Steps) == 0 {
			c.errorf(c.at(sub("loop")...).keyPos(c.file), "add steps: the body the loop repeats", "loop without steps")
		}
		after := c.checkSteps(wc, s.Steps, sub("steps"), visible)
		for name, typ := range after {
			if _, before := visible[name]; !before {
				added[name] = typ
			}
		}
		// until sees the body's latest outputs, and the loop's own iterations.
		untilSees := maps.Clone(after)
		if s.Name != "" {
			untilSees[s.Name] = StepOutputType(s)
		}
		if s.Loop.Until == nil || s.Loop.Until.Source == "" {
			if !c.failed[c.at(sub("loop")...).path] {
				c.errorf(c.at(sub("loop")...), "say when the loop is done, e.g. until: 'steps.status.result.done'", "loop without until")
			}
		} else {
			c.compileWorkflowExpr(wc, s.Loop.Until, untilSees, nil, true, c.at(sub("loop", "until")...))
		}
		switch maxAt := c.at(sub("loop", "max")...); {
		case c.failed[maxAt.path] || c.failed[c.at(sub("loop")...).path]:
		case s.Loop.Max < 1:
			c.errorf(c.at(sub("loop")...), "give the most iterations, e.g. max: 5: a loop must end", "loop needs max of at least 1")
		case s.Loop.Max > MaxLoopIterations:
			c.errorf(maxAt, fmt.Sprintf("a loop runs at most %d times: poll less often, or split the work", MaxLoopIterations), "loop max %d is more than %d", s.Loop.Max, MaxLoopIterations)
		}
	}
	s.Output = StepOutputType(s)
	if s.Name != "" {
		added[s.Name] = s.Output
	}
	return added
}

// checkStepArgs checks what can be known at load of a tool step's args against
// the tool's parameters: a bound parameter (the run context sets it, never the
// workflow), a parameter the tool does not take (additionalProperties: false), a
// required one missing. The values are checked against the parameters' schema when
// the step runs, as a model's arguments are: templates decide most of them.
func (c *checker) checkStepArgs(s *Step, sub func(...string) []string) {
	i, ok := c.tools[s.Tool]
	if !ok {
		return
	}
	t := &c.spec.Tools[i]
	if t.Builtin != "" || t.MCP != nil {
		return
	}
	props, _ := t.Parameters["properties"].(map[string]any)
	closed := t.Parameters["additionalProperties"] == false
	names := slices.Sorted(maps.Keys(props))
	for _, k := range slices.Sorted(maps.Keys(s.Args)) {
		at := c.at(sub("args", k)...)
		if from, bound := t.Bind[k]; bound {
			c.errorf(at.keyPos(c.file), fmt.Sprintf("remove it: the run context sets %s from %s, never a step", k, from), "%s is a bound parameter of %s", k, s.Tool)
			continue
		}
		if _, known := props[k]; !known && closed {
			hint := suggest(k, names)
			if hint == "" {
				hint = "its parameters: " + strings.Join(names, ", ")
			}
			c.errorf(at.keyPos(c.file), hint, "tool %s has no parameter %q", s.Tool, k)
		}
	}
	required, _ := t.Parameters["required"].([]any)
	for _, r := range required {
		name, _ := r.(string)
		if _, given := s.Args[name]; !given && name != "" {
			if _, bound := t.Bind[name]; !bound {
				c.errorf(c.at(sub("tool")...), fmt.Sprintf("add it under args: {%s: …}", name), "%s needs %q, a required parameter", s.Tool, name)
			}
		}
	}
}

// describeNature says what kind of value an expression gives, in words.
func describeNature(n nature.Nature) string {
	if n.Type == nil {
		return "an unknown value"
	}
	switch n.Kind {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return n.String()
}

// walkArgs compiles the templates in the string leaves of a tool step's args.
func (c *checker) walkArgs(wc *workflowCheck, s *Step, v any, tokens []string, rel string, visible types.Map, item types.Type) {
	switch x := v.(type) {
	case string:
		t := &Template{Source: x}
		c.compileWorkflowTemplate(wc, t, visible, item, c.at(tokens...))
		s.ArgTemplates[rel] = t
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			c.walkArgs(wc, s, x[k], append(slices.Clip(tokens), k), joinKey(rel, k), visible, item)
		}
	case []any:
		for i, e := range x {
			c.walkArgs(wc, s, e, append(slices.Clip(tokens), strconv.Itoa(i)), rel+"["+strconv.Itoa(i)+"]", visible, item)
		}
	}
}

// workflowEnv is the environment of a step's expressions: the steps before it and,
// in a for_each step (item not nil), item and index.
func (c *checker) workflowEnv(visible types.Map, item types.Type) exprEnv {
	if item != nil {
		return EnvWorkflowItem.Types(VarTypes{User: c.user, Steps: visible, Item: item})
	}
	return EnvWorkflow.Types(VarTypes{User: c.user, Steps: visible})
}

// compileWorkflowExpr compiles a step's expression; it returns false when a
// reference to a step that does not run before it was reported instead.
func (c *checker) compileWorkflowExpr(wc *workflowCheck, e *Expr, visible types.Map, item types.Type, asBool bool, at location) bool {
	if e == nil || e.Source == "" || c.failed[at.path] {
		return true
	}
	if !c.stepRefsRunBefore(wc, e.Source, visible, at) {
		return false
	}
	c.compileExpr(e, c.workflowEnv(visible, item), asBool, at)
	return true
}

func (c *checker) compileWorkflowTemplate(wc *workflowCheck, t *Template, visible types.Map, item types.Type, at location) {
	if t == nil || c.failed[at.path] {
		return
	}
	if strings.Contains(t.Source, "{{") && !c.stepRefsRunBefore(wc, t.Source, visible, at) {
		return
	}
	c.compileTemplate(t, c.workflowEnv(visible, item), at)
}

// stepRefsRunBefore reports each steps.NAME in src naming a step that exists but
// does not run before this place — itself, a later step, or one of another
// parallel branch — which would make the flow a cycle or a race. Unknown names are
// left to the compiler, which suggests the closest.
func (c *checker) stepRefsRunBefore(wc *workflowCheck, src string, visible types.Map, at location) bool {
	ok := true
	for _, m := range stepRefRe.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		if _, seen := visible[name]; seen {
			continue
		}
		decl, exists := wc.declared[name]
		if !exists {
			continue
		}
		pos := at
		if at.node != nil && at.node.Kind == yaml.ScalarNode {
			pos.pos = c.posInScalar(at.node, m[2])
		}
		declAt := c.at(decl...)
		c.errorf(pos, fmt.Sprintf("a step reads only the steps before it (itself or a later one would be a cycle), and a parallel branch only its own; %q is at line %d", name, declAt.pos.Line),
			"steps.%s: step %q does not run before this one", name, name)
		ok = false
	}
	return ok
}
