package spec

import (
	"reflect"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/checker/nature"
	"github.com/expr-lang/expr/types"
)

// Workflow is a deterministic flow: steps that call tools, the model or sub-agents
// in a fixed order, instead of a model deciding what to do next.
type Workflow struct {
	Source
	Steps []Step `yaml:"steps"`
	// Answer is the final answer's template; nil means the last step's text.
	Answer *Template `yaml:"answer"`
}

// Step is one step of a workflow. Exactly one of Tool, Model, Agent, Parallel and
// Loop says what it does (its Kind).
type Step struct {
	Source
	Name string `yaml:"name"`
	// When skips the step unless it holds.
	When *Expr `yaml:"when"`
	// ForEach runs a tool, model or agent step once for each element of the list it
	// gives, with item and index in scope; MaxParallel of them at once.
	ForEach     *Expr `yaml:"for_each"`
	MaxParallel int   `yaml:"max_parallel"`

	Tool string `yaml:"tool"`
	// Args are the tool's arguments: string leaves are templates, a leaf that is
	// one {{ expr }} and nothing else keeps the expression's value and type.
	Args map[string]any `yaml:"args"`

	Model *StepModel `yaml:"model"`

	Agent string    `yaml:"agent"` // an entry of the spec's agents
	Task  *Template `yaml:"task"`  // the sub-agent's task

	Parallel [][]Step `yaml:"parallel"` // branches, each a list of steps, run at once

	Loop  *Loop  `yaml:"loop"`
	Steps []Step `yaml:"steps"` // a loop's body

	OnError  StepOnError `yaml:"on_error"`
	Fallback any         `yaml:"fallback"` // the result of a failed step with on_error: fallback

	// ArgTemplates holds the compiled templates of Args' string leaves, by their
	// path below args (e.g. "filter.ids[0]").
	ArgTemplates map[string]*Template `yaml:"-"`
	// Output is what expressions see as steps.NAME (StepOutputType).
	Output types.Type `yaml:"-" json:"-"`
	// HasFallback: the step sets fallback (null included).
	HasFallback bool `yaml:"-"`
}

// StepModel is a single model call: the prompt, with the spec's instructions as
// the system prompt, and optionally the JSON schema its output must match.
type StepModel struct {
	Prompt Template       `yaml:"prompt"`
	Schema map[string]any `yaml:"schema"`
}

// MaxLoopIterations is the most a loop's max may be: a loop polls a few times; a
// bound in the thousands would be a run that never ends in practice.
const MaxLoopIterations = 100

// Loop repeats a step's body until Until holds, at most Max times (1 to
// MaxLoopIterations).
type Loop struct {
	Until *Expr `yaml:"until"`
	Max   int   `yaml:"max"`
}

// StepKind is what a workflow step does.
type StepKind string

const (
	StepTool     StepKind = "tool"
	StepModelK   StepKind = "model"
	StepAgent    StepKind = "agent"
	StepParallel StepKind = "parallel"
	StepLoop     StepKind = "loop"
)

// StepKinds lists every kind of step, as the keys that declare them.
var StepKinds = []StepKind{StepTool, StepModelK, StepAgent, StepParallel, StepLoop}

// StepOnError is what a failed step does to the workflow.
type StepOnError string

const (
	OnErrorFail     StepOnError = "fail"     // the workflow (or the step holding this one) fails
	OnErrorContinue StepOnError = "continue" // the step's output records the error; the flow goes on
	OnErrorFallback StepOnError = "fallback" // the step's fallback stands in for its result
)

// StepOnErrors lists every on_error policy.
var StepOnErrors = []StepOnError{OnErrorFail, OnErrorContinue, OnErrorFallback}

// DefaultStepOnError is a step's on_error when it sets none.
const DefaultStepOnError = OnErrorFail

// ErrorPolicy is the step's on_error with its default applied.
func (s *Step) ErrorPolicy() StepOnError {
	if s.OnError == "" {
		return DefaultStepOnError
	}
	return s.OnError
}

// Kind is what the step does; "" when it declares no kind.
func (s *Step) Kind() StepKind {
	if ks := s.kinds(); len(ks) > 0 {
		return ks[0]
	}
	return ""
}

func (s *Step) kinds() []StepKind {
	var ks []StepKind
	if s.Tool != "" {
		ks = append(ks, StepTool)
	}
	if s.Model != nil {
		ks = append(ks, StepModelK)
	}
	if s.Agent != "" {
		ks = append(ks, StepAgent)
	}
	if s.Parallel != nil {
		ks = append(ks, StepParallel)
	}
	if s.Loop != nil {
		ks = append(ks, StepLoop)
	}
	return ks
}

// Nested is every step inside this one: a loop's body and the parallel branches'
// steps, depth first, in declaration order.
func (s *Step) Nested() []*Step {
	var out []*Step
	var walk func(steps []Step)
	walk = func(steps []Step) {
		for i := range steps {
			out = append(out, &steps[i])
			walk(steps[i].Steps)
			for _, b := range steps[i].Parallel {
				walk(b)
			}
		}
	}
	walk(s.Steps)
	for _, b := range s.Parallel {
		walk(b)
	}
	return out
}

// RenderArgs returns Args with every string leaf rendered by its template. A leaf
// that is one {{ expr }} keeps the expression's value.
func (s *Step) RenderArgs(env map[string]any) (map[string]any, error) {
	out, err := renderLeaves(s.Args, "", func(path, x string) (any, error) {
		t := s.ArgTemplates[path]
		switch {
		case t == nil:
			return x, nil
		case len(t.Parts) == 1 && t.Parts[0].Program != nil:
			return t.Parts[0].Value(env) // one {{ expr }} keeps its value's type
		}
		return t.Render(env)
	})
	m, _ := out.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, err
}

// Output fields of a step, as expressions see them under steps.NAME.
const (
	OutOK         = "ok"
	OutSkipped    = "skipped"
	OutError      = "error"
	OutResult     = "result"     // tool: the result, decoded when it is JSON
	OutText       = "text"       // tool: the result as text; model: the answer's text
	OutOutput     = "output"     // model: the JSON output (with a schema)
	OutAnswer     = "answer"     // agent: the sub-agent's answer
	OutStop       = "stop"       // agent: its stop reason
	OutItems      = "items"      // for_each: each item's output, in order
	OutIterations = "iterations" // loop: the iterations run
)

// StepOutputType is the type of steps.NAME for a step, which for a for_each step is
// a list of what one item gives.
func StepOutputType(s *Step) types.Type {
	inner := stepKindOutput(s)
	if s.ForEach != nil && s.ForEach.Source != "" {
		return types.Map{OutOK: types.Bool, OutSkipped: types.Bool, OutError: types.String, OutItems: types.Array(inner)}
	}
	return inner
}

func stepKindOutput(s *Step) types.Map {
	m := types.Map{OutOK: types.Bool, OutSkipped: types.Bool, OutError: types.String}
	switch s.Kind() {
	case StepTool:
		m[OutResult], m[OutText] = types.Any, types.String
	case StepModelK:
		m[OutText], m[OutOutput] = types.String, types.Any
		if s.Model != nil && s.Model.Schema != nil {
			m[OutOutput] = SchemaType(s.Model.Schema)
		}
	case StepAgent:
		m[OutAnswer], m[OutStop] = types.String, types.String
	case StepLoop:
		m[OutIterations] = types.Int
	}
	return m
}

// SchemaType is the expression type of values that match a JSON schema: objects
// with properties are maps of exactly those keys (a misspelt key fails at load),
// arrays are lists of their items' type; other schemas as jsonType.
func SchemaType(schema map[string]any) types.Type {
	t, _ := schema["type"].(string)
	switch t {
	case "object":
		props, ok := schema["properties"].(map[string]any)
		if !ok || len(props) == 0 {
			return openMap
		}
		m := types.Map{}
		for name, sub := range props {
			sm, _ := sub.(map[string]any)
			m[name] = SchemaType(sm)
		}
		if ap, ok := schema["additionalProperties"]; ok && ap != false {
			m[types.Extra] = types.Any
		}
		return m
	case "array":
		items, ok := schema["items"].(map[string]any)
		if !ok {
			return types.Array(types.Any)
		}
		return types.Array(SchemaType(items))
	}
	return jsonType(schema)
}

// natureType is an expression type taken from a compiled expression's result: the
// element type of a for_each list becomes item's type.
type natureType struct{ n nature.Nature }

func (t natureType) Nature() nature.Nature { return t.n }
func (t natureType) Equal(o types.Type) bool {
	if o == types.Any {
		return true
	}
	ot, ok := o.(natureType)
	return ok && ot.n.Type == t.n.Type
}
func (t natureType) String() string { return t.n.String() }

// elemType is the element type of a list-valued nature: Any when it is not known.
// ok is false when the nature is known not to be a list.
func elemType(n nature.Nature) (types.Type, bool) {
	var c *nature.Cache
	if n.IsUnknown(c) || n.Type == nil {
		return types.Any, true
	}
	switch n.Kind {
	case reflect.Slice, reflect.Array:
		e := n.Elem(c)
		if e.IsUnknown(c) {
			return types.Any, true
		}
		return natureType{e}, true
	}
	return nil, false
}

// Value evaluates the part's expression; a text part is its text.
func (p TemplatePart) Value(env map[string]any) (any, error) {
	if p.Program == nil {
		return p.Text, nil
	}
	return expr.Run(p.Program, env)
}
