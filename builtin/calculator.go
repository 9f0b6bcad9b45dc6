package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const (
	maxExpressionLen   = 4096
	maxExpressionNodes = 1000
)

// calculator evaluates arithmetic with expr-lang, restricted to a whitelist of node
// kinds so that nothing but numbers, operators and math functions can run.
type calculator struct {
	options []expr.Option
	public  map[string]bool // names of the functions the model may call
}

type calculatorConfig struct{}

func newCalculator(t *spec.Tool, _ string) (tool.Tool, error) {
	var cfg calculatorConfig
	if err := decodeWith("calculator", t.With, &cfg); err != nil {
		return nil, err
	}
	c := &calculator{options: calculatorOptions(), public: map[string]bool{}}
	for _, f := range publicFuncs() {
		c.public[f.name] = true
	}
	return c, nil
}

// mathFunc is a function the model may call; arity -1 means one or more arguments.
type mathFunc struct {
	name  string
	arity int
	fn    func(xs []float64) (float64, error)
}

func unary(name string, f func(float64) float64) mathFunc {
	return mathFunc{name, 1, func(xs []float64) (float64, error) { return f(xs[0]), nil }}
}

// publicFuncs are the functions the model may call, in the order the description
// lists them.
func publicFuncs() []mathFunc {
	return []mathFunc{
		unary("sqrt", math.Sqrt),
		{"pow", 2, func(xs []float64) (float64, error) { return math.Pow(xs[0], xs[1]), nil }},
		unary("abs", math.Abs),
		unary("floor", math.Floor),
		unary("ceil", math.Ceil),
		unary("round", math.Round),
		unary("log", math.Log),
		unary("log10", math.Log10),
		unary("exp", math.Exp),
		unary("sin", math.Sin),
		unary("cos", math.Cos),
		unary("tan", math.Tan),
		{"min", -1, func(xs []float64) (float64, error) { return minMax(xs, math.Min), nil }},
		{"max", -1, func(xs []float64) (float64, error) { return minMax(xs, math.Max), nil }},
	}
}

// operatorFuncs replace the operators that need a check Go's float arithmetic does
// not make. The leading underscore keeps them out of the model's reach: only public
// functions pass the whitelist, and the rewritten calls are not visited again.
func operatorFuncs() []mathFunc {
	return []mathFunc{
		{"_div", 2, func(xs []float64) (float64, error) {
			if xs[1] == 0 {
				return 0, errors.New("division by zero")
			}
			return xs[0] / xs[1], nil
		}},
		{"_mod", 2, func(xs []float64) (float64, error) {
			if xs[1] == 0 {
				return 0, errors.New("modulo by zero")
			}
			return math.Mod(xs[0], xs[1]), nil
		}},
		{"_pow", 2, func(xs []float64) (float64, error) { return math.Pow(xs[0], xs[1]), nil }},
	}
}

// operatorFunc names the function an operator is rewritten to, "" for the operators
// that stay native.
func operatorFunc(op string) string {
	switch op {
	case "/":
		return "_div"
	case "%":
		return "_mod"
	case "^", "**":
		return "_pow"
	}
	return ""
}

func operatorSymbol(fn string) string {
	switch fn {
	case "_div":
		return "/"
	case "_mod":
		return "%"
	case "_pow":
		return "^"
	}
	return ""
}

func constant(name string) (float64, bool) {
	switch name {
	case "pi":
		return math.Pi, true
	case "e":
		return math.E, true
	}
	return 0, false
}

func minMax(xs []float64, pick func(a, b float64) float64) float64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = pick(m, x)
	}
	return m
}

// calculatorOptions configures expr with no builtins, no environment and only the
// math functions; the whitelist visitor is added per call because it records errors.
func calculatorOptions() []expr.Option {
	opts := []expr.Option{
		expr.Env(map[string]any{}),
		expr.DisableAllBuiltins(),
		expr.MaxNodes(maxExpressionNodes),
	}
	for _, f := range append(publicFuncs(), operatorFuncs()...) {
		sig := any(new(func(float64) float64))
		switch f.arity {
		case 2:
			sig = new(func(float64, float64) float64)
		case -1:
			sig = new(func(float64, ...float64) float64)
		}
		opts = append(opts, expr.Function(f.name, wrapMath(f), sig))
	}
	return opts
}

// wrapMath adapts a math function to expr and turns NaN and infinite results into
// errors at the call that produced them, where the message can say which one it was.
func wrapMath(f mathFunc) func(params ...any) (any, error) {
	return func(params ...any) (any, error) {
		xs := make([]float64, len(params))
		for i, p := range params {
			x, ok := p.(float64)
			if !ok {
				return nil, fmt.Errorf("%s: argument %d is not a number", f.name, i+1)
			}
			xs[i] = x
		}
		y, err := f.fn(xs)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(y) || math.IsInf(y, 0) {
			return nil, fmt.Errorf("%s has no finite result", callText(f.name, xs))
		}
		return y, nil
	}
}

func callText(name string, xs []float64) string {
	args := make([]string, len(xs))
	for i, x := range xs {
		args[i] = formatNumber(x)
	}
	if op := operatorSymbol(name); op != "" && len(xs) == 2 {
		return args[0] + " " + op + " " + args[1]
	}
	return name + "(" + strings.Join(args, ", ") + ")"
}

func (c *calculator) Describe() tool.Info {
	var names []string
	for _, f := range publicFuncs() {
		names = append(names, f.name)
	}
	return tool.Info{
		Description: "Evaluate an arithmetic expression and return the number. Use it for every " +
			"calculation instead of computing in your head. Supports numbers, + - * / % ^ (or **), " +
			"parentheses, the constants pi and e, and the functions " + strings.Join(names, ", ") +
			" (log is the natural logarithm; angles are in radians).",
		Parameters: objectSchema(map[string]any{
			"expression": map[string]any{
				"type":        "string",
				"description": "The arithmetic expression, e.g. 2 * (3 + 4) or sqrt(2) / 3.",
				"examples":    []any{"2 * (3 + 4)", "sqrt(16) + 2 ^ 10"},
			},
		}, "expression"),
	}
}

func (c *calculator) Call(_ context.Context, in tool.Input) (string, error) {
	src, err := requiredString(in.Args, "expression")
	if err != nil {
		return "", err
	}
	v, err := c.eval(src)
	if err != nil {
		return "", err
	}
	return formatNumber(v), nil
}

func (c *calculator) eval(src string) (float64, error) {
	if strings.TrimSpace(src) == "" {
		return 0, errors.New("the expression is empty")
	}
	if len(src) > maxExpressionLen {
		return 0, fmt.Errorf("the expression is %d characters long; split it into parts of at most %d", len(src), maxExpressionLen)
	}
	w := &whitelist{src: src, public: c.public, bare: map[*ast.IdentifierNode]bool{}}
	// Clip so that concurrent calls never append into the same backing array.
	prog, err := expr.Compile(src, append(slices.Clip(c.options), expr.Patch(w))...)
	if w.err != nil {
		return 0, w.err
	}
	for id := range w.bare {
		return 0, fmt.Errorf("%s is a function; call it with parentheses, like %s(2)", id.Value, id.Value)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid expression: %s", exprMessage(err))
	}
	out, err := expr.Run(prog, map[string]any{})
	if err != nil {
		return 0, errors.New(exprMessage(err))
	}
	f, ok := out.(float64)
	if !ok {
		return 0, fmt.Errorf("the expression does not give a number (got %T)", out)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("the result is not a finite number (too large, or undefined)")
	}
	return f, nil
}

// exprMessage keeps the message and column of an expr error; its source snippet
// repeats what the model just wrote.
func exprMessage(err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		if fe.Column >= 0 && fe.Line > 0 {
			return fmt.Sprintf("%s (at column %d)", fe.Message, fe.Column+1)
		}
		return fe.Message
	}
	return err.Error()
}

// whitelist is an expr patcher that admits numbers, the arithmetic operators, the
// constants and calls of the public math functions, and refuses everything else:
// strings, booleans, comparisons, members, maps, closures, variables and the
// environment. It also turns every number into a float, so integer arithmetic cannot
// wrap around silently, and routes / % ^ through checked functions.
type whitelist struct {
	src    string
	public map[string]bool
	// bare holds function names seen so far that no call has claimed: the walk visits
	// a callee before its call, and a name left over was used as a value.
	bare map[*ast.IdentifierNode]bool
	err  error
}

// refuse records why the expression is refused. The walk visits children first, so
// a construct such as a member access or a let overrides what its parts reported:
// "fields and methods are not allowed" says more than the text of a method's name.
func (w *whitelist) refuse(n ast.Node, override bool, format string, a ...any) {
	if w.err != nil && !override {
		return
	}
	from := min(max(n.Location().From, 0), len(w.src))
	column := from - strings.LastIndexByte(w.src[:from], '\n')
	w.err = fmt.Errorf(format+" (at column %d); only numbers, + - * / %% ^, parentheses, "+
		"pi, e and the listed math functions are allowed", append(a, column)...)
}

func (w *whitelist) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IntegerNode:
		ast.Patch(node, &ast.FloatNode{Value: float64(n.Value)})
	case *ast.FloatNode:
	case *ast.IdentifierNode:
		if c, ok := constant(n.Value); ok {
			ast.Patch(node, &ast.FloatNode{Value: c})
		} else if w.public[n.Value] {
			w.bare[n] = true
		} else {
			w.refuse(n, false, "unknown name %q", n.Value)
		}
	case *ast.UnaryNode:
		if n.Operator != "-" && n.Operator != "+" {
			w.refuse(n, true, "operator %q is not allowed", n.Operator)
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "+", "-", "*":
		case "/", "%", "^", "**":
			ast.Patch(node, &ast.CallNode{
				Callee:    &ast.IdentifierNode{Value: operatorFunc(n.Operator)},
				Arguments: []ast.Node{n.Left, n.Right},
			})
		default:
			w.refuse(n, true, "operator %q is not allowed", n.Operator)
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || !w.public[id.Value] {
			w.refuse(n, false, "only the listed math functions can be called")
		}
		delete(w.bare, id)
	case *ast.StringNode, *ast.BytesNode:
		w.refuse(n, false, "text is not allowed")
	case *ast.BoolNode:
		w.refuse(n, false, "true and false are not allowed")
	case *ast.NilNode:
		w.refuse(n, false, "nil is not allowed")
	case *ast.MemberNode, *ast.ChainNode, *ast.SliceNode:
		w.refuse(n, true, "fields and methods are not allowed")
	case *ast.ArrayNode, *ast.MapNode, *ast.PairNode:
		w.refuse(n, true, "lists and maps are not allowed")
	case *ast.ConditionalNode:
		w.refuse(n, true, "conditionals are not allowed")
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		w.refuse(n, true, "variables and statements are not allowed")
	case *ast.BuiltinNode, *ast.PredicateNode, *ast.PointerNode:
		w.refuse(n, true, "collection functions are not allowed")
	default:
		w.refuse(*node, true, "this construct is not allowed")
	}
}
