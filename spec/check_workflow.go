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

// stepCheck is the state of checking one step: where it is, the outputs of the
// steps that run before it, and the outputs it adds.
type stepCheck struct {
	wc      *workflowCheck
	s       *Step
	tokens  []string
	at      location
	visible types.Map
	item    types.Type // a for_each step's item; nil in a step without for_each
	added   types.Map
	// args and schema are a tool step's args and a model step's output schema as
	// JSON values, decoded before any check (nil when the step has none).
	args, schema any
}

// sub is the path of a key inside the step.
func (st *stepCheck) sub(more ...string) []string { return append(slices.Clip(st.tokens), more...) }

// addNew adds the outputs in after that the step did not already see: those of
// the steps inside it.
func (st *stepCheck) addNew(after types.Map) {
	for name, typ := range after {
		if _, before := st.visible[name]; !before {
			st.added[name] = typ
		}
	}
}

// checkStep checks one step and returns the outputs it adds: its own and those of
// the steps inside it.
func (c *checker) checkStep(wc *workflowCheck, s *Step, tokens []string, visible types.Map) types.Map {
	st := &stepCheck{wc: wc, s: s, tokens: tokens, at: c.at(tokens...), visible: visible, added: types.Map{}}
	c.decodeStep(st)
	c.checkStepName(st)
	c.checkStepKinds(st)
	c.checkMisplacedStepKeys(st)
	c.checkStepOnError(st)
	// when and for_each see the steps before this one.
	c.compileWorkflowExpr(wc, s.When, visible, nil, true, c.at(st.sub("when")...))
	c.checkForEach(st)
	c.checkStepAgentRef(st)
	switch s.Kind() {
	case StepTool:
		c.checkToolStep(st)
	case StepModelK:
		c.checkModelStep(st)
	case StepAgent:
		c.checkAgentStep(st)
	case StepParallel:
		c.checkParallelStep(st)
	case StepLoop:
		c.checkLoopStep(st)
	}
	s.Output = StepOutputType(s)
	if s.Name != "" {
		st.added[s.Name] = s.Output
	}
	return st.added
}

// decodeStep reads what the step's YAML holds beyond its typed fields — where it
// is, its fallback, a tool step's args and a model step's schema as JSON values — so
// the checks that follow only read the step.
func (c *checker) decodeStep(st *stepCheck) {
	s := st.s
	s.Source = Source{Pos: st.at.pos, Path: st.at.path}
	if fb := c.at(st.sub("fallback")...); fb.node != nil {
		s.HasFallback = true
		c.budget = maxJSONNodes
		s.Fallback, _ = c.toJSON(fb.node, fb.path)
	}
	switch s.Kind() {
	case StepTool:
		if a := c.at(st.sub("args")...); a.node != nil {
			c.budget = maxJSONNodes
			st.args, _ = c.toJSON(a.node, a.path)
			s.Args, _ = st.args.(map[string]any)
		}
	case StepModelK:
		if a := c.at(st.sub("model", "schema")...); a.node != nil && !c.failed[a.path] {
			c.budget = maxJSONNodes
			st.schema, _ = c.toJSON(a.node, a.path)
			s.Model.Schema, _ = st.schema.(map[string]any)
		}
	}
}

// checkStepName checks that the step has a valid name no other step has.
func (c *checker) checkStepName(st *stepCheck) {
	s := st.s
	nameAt := c.at(st.sub("name")...)
	switch {
	case s.Name == "":
		if !c.failed[nameAt.path] {
			c.errorf(st.at, "name it, e.g. name: fetch_orders: later steps read its output as steps.NAME", "step needs a name")
		}
	case !stepNameRe.MatchString(s.Name):
		if !c.failed[nameAt.path] {
			c.errorf(nameAt, "use lower-case letters, digits and _, starting with a letter or _", "step name %q is not a valid name", s.Name)
		}
	case !slices.Equal(st.wc.declared[s.Name], st.tokens):
		first := c.at(st.wc.declared[s.Name]...)
		c.errorf(nameAt, fmt.Sprintf("first declared at line %d; step names are unique in the whole workflow", first.pos.Line), "duplicate step name %q", s.Name)
	}
}

// checkStepKinds checks that the step does exactly one thing.
func (c *checker) checkStepKinds(st *stepCheck) {
	kinds := st.s.kinds()
	switch len(kinds) {
	case 0:
		c.errorf(st.at, "give it one of tool, model, agent, parallel or loop", "step %q does not say what it does", st.s.Name)
	case 1:
	default:
		slices.SortFunc(kinds, func(a, b StepKind) int {
			return comparePos(c.at(st.sub(string(a))...).pos, c.at(st.sub(string(b))...).pos)
		})
		c.errorf(c.at(st.sub(string(kinds[1]))...).keyPos(c.file), "a step does exactly one thing: split it into two steps", "step %q has both %s and %s", st.s.Name, kinds[0], kinds[1])
	}
}

// checkMisplacedStepKeys reports the keys of one kind of step set on a step of
// another. A step of two kinds is reported as that; its keys are not misplaced too.
func (c *checker) checkMisplacedStepKeys(st *stepCheck) {
	s := st.s
	kind := s.Kind()
	misplaced := func(key, hint, format string, args ...any) {
		if a := c.at(st.sub(key)...); a.node != nil {
			c.errorf(a.keyPos(c.file), hint, format, args...)
		}
	}
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
}

// checkStepOnError checks that on_error: fallback and a fallback value come
// together, on a step that has a result to stand in for.
func (c *checker) checkStepOnError(st *stepCheck) {
	s := st.s
	if fb := c.at(st.sub("fallback")...); fb.node != nil {
		if s.OnError != OnErrorFallback {
			c.errorf(fb.keyPos(c.file), "set on_error: fallback to use it", "fallback without on_error: fallback")
		}
	} else if s.OnError == OnErrorFallback {
		c.errorf(c.at(st.sub("on_error")...), "add fallback: VALUE, the result the step gives when it fails", "on_error: fallback without a fallback value")
	}
	if kind := s.Kind(); s.OnError == OnErrorFallback && (kind == StepParallel || kind == StepLoop) {
		c.errorf(c.at(st.sub("on_error")...), "use continue, or put the fallback on the steps inside", "a %s step has no result a fallback could stand in for", kind)
	}
}

// checkForEach compiles a for_each step's list and sets the type of its items,
// which the step's templates see as item.
func (c *checker) checkForEach(st *stepCheck) {
	s := st.s
	if s.ForEach == nil {
		return
	}
	at := c.at(st.sub("for_each")...)
	if c.compileWorkflowExpr(st.wc, s.ForEach, st.visible, nil, false, at) && s.ForEach.Program != nil {
		var ok bool
		if st.item, ok = elemType(*s.ForEach.Program.Node().Nature()); !ok {
			c.errorf(at, "give an expression whose value is a list, like steps.orders.result.orders", "for_each must give a list, not %s", describeNature(*s.ForEach.Program.Node().Nature()))
		}
	}
	if st.item == nil {
		st.item = types.Any
	}
}

// checkStepAgentRef checks that an agent step names a declared agent.
func (c *checker) checkStepAgentRef(st *stepCheck) {
	s := st.s
	if s.Agent == "" || c.spec.SubAgent(s.Agent) != nil {
		return
	}
	var names []string
	for _, a := range c.spec.Agents {
		names = append(names, a.Name)
	}
	hint := suggest(s.Agent, names)
	if hint == "" {
		hint = "declare it under agents: {name: " + s.Agent + ", spec: …}"
	}
	c.errorf(c.at(st.sub("agent")...), hint, "unknown agent %q", s.Agent)
}

// checkToolStep checks a tool step: the tool, and its args' templates and names.
func (c *checker) checkToolStep(st *stepCheck) {
	s := st.s
	c.toolRef(s.Tool, st.sub("tool")...)
	if st.args != nil {
		s.ArgTemplates = map[string]*Template{}
		c.walkArgs(st.wc, s, st.args, st.sub("args"), "", st.visible, st.item)
	}
	if !c.failed[c.at(st.sub("args")...).path] {
		c.checkStepArgs(s, st.sub)
	}
}

// checkModelStep checks a model step: its prompt, and its output schema, which
// must be a valid JSON schema of an object.
func (c *checker) checkModelStep(st *stepCheck) {
	s := st.s
	c.compileWorkflowTemplate(st.wc, &s.Model.Prompt, st.visible, st.item, c.at(st.sub("model", "prompt")...))
	if st.schema == nil {
		return
	}
	if err := c.loader.schemas.meta.Validate(st.schema); err != nil {
		c.schemaErrors(err, c.loader.schemas, st.sub("model", "schema"))
		s.Model.Schema = nil
	} else if typ, ok := s.Model.Schema["type"]; ok && typ != "object" {
		c.errorf(c.at(st.sub("model", "schema", "type")...), "structured output is a JSON object: wrap the value in one", "schema must have type object, not %v", typ)
	}
}

// checkAgentStep checks that an agent step has a task, and compiles it.
func (c *checker) checkAgentStep(st *stepCheck) {
	s := st.s
	if s.Task == nil {
		c.errorf(st.at, "give the agent its task, e.g. task: \"Check refunds for {{ input }}\"", "agent step %q needs a task", s.Name)
		return
	}
	c.compileWorkflowTemplate(st.wc, s.Task, st.visible, st.item, c.at(st.sub("task")...))
}

// checkParallelStep checks a parallel step's branches.
func (c *checker) checkParallelStep(st *stepCheck) {
	s := st.s
	if len(s.Parallel) < 2 && !c.failed[c.at(st.sub("parallel")...).path] {
		c.warnf(c.at(st.sub("parallel")...).keyPos(c.file), "give two or more branches, or put the steps in the workflow's list", "parallel with %d branch runs nothing at once", len(s.Parallel))
	}
	for b, branch := range s.Parallel {
		bt := st.sub("parallel", strconv.Itoa(b))
		if len(branch) == 0 {
			c.errorf(c.at(bt...), "a branch is a list of steps", "empty parallel branch")
		}
		// A branch sees the steps before the parallel step and its own earlier
		// steps, never another branch's: they run at the same time.
		st.addNew(c.checkSteps(st.wc, branch, bt, st.visible))
	}
}

// checkLoopStep checks a loop step: its body, until and max.
func (c *checker) checkLoopStep(st *stepCheck) {
	s := st.s
	if len(s.Steps) == 0 {
		c.errorf(c.at(st.sub("loop")...).keyPos(c.file), "add steps: the body the loop repeats", "loop without steps")
	}
	after := c.checkSteps(st.wc, s.Steps, st.sub("steps"), st.visible)
	st.addNew(after)
	c.checkLoopUntil(st, after)
	c.checkLoopMax(st)
}

// checkLoopUntil compiles a loop's until, which sees the body's latest outputs
// (after) and the loop's own iterations.
func (c *checker) checkLoopUntil(st *stepCheck, after types.Map) {
	s := st.s
	untilSees := maps.Clone(after)
	if s.Name != "" {
		untilSees[s.Name] = StepOutputType(s)
	}
	if s.Loop.Until == nil || s.Loop.Until.Source == "" {
		if !c.failed[c.at(st.sub("loop")...).path] {
			c.errorf(c.at(st.sub("loop")...), "say when the loop is done, e.g. until: 'steps.status.result.done'", "loop without until")
		}
		return
	}
	c.compileWorkflowExpr(st.wc, s.Loop.Until, untilSees, nil, true, c.at(st.sub("loop", "until")...))
}

// checkLoopMax checks that a loop's max bounds it within MaxLoopIterations.
func (c *checker) checkLoopMax(st *stepCheck) {
	s := st.s
	loopAt := c.at(st.sub("loop")...)
	switch maxAt := c.at(st.sub("loop", "max")...); {
	case c.failed[maxAt.path] || c.failed[loopAt.path]:
	case s.Loop.Max < 1:
		c.errorf(loopAt, "give the most iterations, e.g. max: 5: a loop must end", "loop needs max of at least 1")
	case s.Loop.Max > MaxLoopIterations:
		c.errorf(maxAt, fmt.Sprintf("a loop runs at most %d times: poll less often, or split the work", MaxLoopIterations), "loop max %d is more than %d", s.Loop.Max, MaxLoopIterations)
	}
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
			pos.pos, pos.end = c.spanInScalar(at.node, m[2], m[3])
		}
		declAt := c.at(decl...)
		c.errorf(pos, fmt.Sprintf("a step reads only the steps before it (itself or a later one would be a cycle), and a parallel branch only its own; %q is at line %d", name, declAt.pos.Line),
			"steps.%s: step %q does not run before this one", name, name)
		ok = false
	}
	return ok
}
