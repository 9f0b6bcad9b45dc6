package spec

import (
	"bytes"
	"errors"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"
	"go.yaml.in/yaml/v3"
)

// Conversation is the conversation a run belongs to, as expressions see it.
type Conversation struct {
	ID string `expr:"id"`
}

// argsType is the type `args` has in a tool's expressions, built from the tool's
// JSON-schema properties and its bound parameters, so `args.ordr_ref` or
// `args.count + "x"` fail when the spec loads rather than when a model happens to
// call the tool.
func argsType(schema map[string]any, bound map[string]string) types.Map {
	m := types.Map{}
	if p, ok := schema["properties"].(map[string]any); ok {
		for name, sub := range p {
			m[name] = jsonType(sub)
		}
	}
	for name := range bound {
		m[name] = types.String
	}
	return m
}

func jsonType(schema any) types.Type {
	m, _ := schema.(map[string]any)
	t, _ := m["type"].(string)
	switch t {
	case "string":
		return types.String
	case "integer":
		return types.Int
	case "number":
		return types.Float64
	case "boolean":
		return types.Bool
	case "array":
		return types.Array(types.Any)
	case "object":
		return types.TypeOf(map[string]any{})
	}
	return types.Any
}

// userType is the type of `user`: its id plus the attributes the spec declares.
func userType(attrs []string) types.Map {
	m := types.Map{"id": types.String}
	for _, a := range attrs {
		m[a] = types.String
	}
	return m
}

// conversationType is the type of `conversation`.
var conversationType = types.Map{"id": types.String}

// exprEnv names the variables an expression may use, with their types.
type exprEnv = types.Map

// compileExpr compiles src in env and reports errors at their place in the YAML.
func (d *document) compileExpr(e *Expr, env exprEnv, asBool bool, at location) {
	if e == nil || e.Source == "" || d.failed[at.path] {
		return
	}
	prog, err := compileIn(e.Source, env, asBool)
	if err != nil {
		d.exprError(err, e.Source, 0, env, at)
		return
	}
	e.Program = prog
}

// compileIn compiles an expression in env. Where env has seen, an expression that
// compiles as written is compiled again with its membership tests on seen rewritten
// (seenMembership): the errors, and their places, stay those of what the user wrote,
// and a user cannot call the hidden in_seen, which the first compile does not know.
func compileIn(src string, env exprEnv, asBool bool) (*vm.Program, error) {
	opts := func(env exprEnv, more ...expr.Option) []expr.Option {
		o := append([]expr.Option{expr.Env(env), expr.MaxNodes(2000)}, more...)
		if asBool {
			o = append(o, expr.AsBool())
		}
		return o
	}
	prog, err := expr.Compile(src, opts(env)...)
	if err != nil || !strings.Contains(src, string(VarSeen)) {
		return prog, err
	}
	if _, ok := env[string(VarSeen)]; !ok {
		return prog, nil
	}
	rewritten, err := expr.Compile(src, opts(withInSeen(env), expr.Patch(seenMembership{}))...)
	if err != nil {
		return prog, nil // cannot happen (in_seen takes what seen and in took); the list still answers
	}
	return rewritten, nil
}

// seenMembership rewrites `id in seen(kind)` into in_seen(id, kind); `id not in
// seen(kind)` parses as `not (id in seen(kind))` and follows. A check then asks for one
// entity — the run's, then an indexed lookup in the store — where `in` would load every
// entity of the kind and scan them. Any other use of seen(kind) is left as it is. The
// id comes first, as in the source, so the two sides are evaluated in the same order
// (when both fail, the same error is reported), and the call takes the place of the
// seen(kind) call, so a store that cannot answer is reported at the same place.
type seenMembership struct{}

func (seenMembership) Visit(node *ast.Node) {
	in, ok := (*node).(*ast.BinaryNode)
	if !ok || in.Operator != "in" {
		return
	}
	call, ok := in.Right.(*ast.CallNode)
	if !ok || len(call.Arguments) != 1 {
		return
	}
	callee, ok := call.Callee.(*ast.IdentifierNode)
	if !ok || callee.Value != string(VarSeen) {
		return
	}
	fn := &ast.IdentifierNode{Value: string(varInSeen)}
	fn.SetLocation(callee.Location())
	rewritten := &ast.CallNode{Callee: fn, Arguments: []ast.Node{in.Left, call.Arguments[0]}}
	rewritten.SetLocation(call.Location())
	*node = rewritten
}

// compileTemplate splits t into text and {{ expr }} parts and compiles each part.
func (d *document) compileTemplate(t *Template, env exprEnv, at location) {
	if t == nil || !strings.Contains(t.Source, "{{") || d.failed[at.path] {
		if t != nil && t.Source != "" {
			t.Parts = []TemplatePart{{Text: t.Source}}
		}
		return
	}
	src := t.Source
	var parts []TemplatePart
	for offset := 0; offset < len(src); {
		open := strings.Index(src[offset:], "{{")
		if open < 0 {
			parts = append(parts, TemplatePart{Text: src[offset:]})
			break
		}
		open += offset
		if open > offset {
			parts = append(parts, TemplatePart{Text: src[offset:open]})
		}
		closing := strings.Index(src[open+2:], "}}")
		if closing < 0 {
			at.pos, at.end = d.spanInScalar(at.node, open, len(src))
			d.errorf(at, "close it with }}", "template: unclosed {{")
			return
		}
		inner := src[open+2 : open+2+closing]
		trimmed := strings.TrimSpace(inner)
		start := open + 2 + strings.Index(inner, trimmed)
		if trimmed == "" {
			at.pos, at.end = d.spanInScalar(at.node, open, open+2+closing+2)
			d.errorf(at, "", "template: empty {{ }}")
			return
		}
		prog, err := compileIn(trimmed, env, false)
		if err != nil {
			d.exprError(err, trimmed, start, env, at)
			return
		}
		parts = append(parts, TemplatePart{Program: prog})
		offset = open + 2 + closing + 2
	}
	t.Parts = parts
}

// exprError reports an expr compile error at its line and column inside the scalar
// that holds the expression (which starts at byte offset base of the scalar's value).
func (d *document) exprError(err error, src string, base int, env exprEnv, at location) {
	msg, hint := err.Error(), ""
	var fe *file.Error
	if errors.As(err, &fe) {
		msg = fe.Message
		from := offsetOf(src, fe.Line, fe.Column)
		at.pos, at.end = d.spanInScalar(at.node, base+from, base+wordEnd(src, from))
	}
	if strings.HasPrefix(msg, "unexpected token EOF") {
		hint = "the expression ends early; inside {…} or […] a comma ends a value, so quote the expression"
	} else if field, ok := strings.CutPrefix(msg, "unknown field "); ok {
		hint = suggest(field, envFieldNames(env))
	} else if name, ok := strings.CutPrefix(msg, "unknown name "); ok {
		hint = suggest(name, envNames(env))
		if hint == "" {
			hint = "available here: " + strings.Join(envNames(env), ", ")
		}
	}
	d.errorf(at, hint, "expression: %s", msg)
}

func envNames(env exprEnv) []string {
	out := make([]string, 0, len(env))
	for k := range env {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func envFieldNames(env exprEnv) []string {
	var out []string
	var walk func(t types.Type)
	walk = func(t types.Type) { // nested maps too: steps.NAME.FIELD
		if m, ok := t.(types.Map); ok {
			for k, v := range m {
				if k != types.Extra {
					out = append(out, k)
				}
				walk(v)
			}
		}
	}
	for _, v := range env {
		walk(v)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// offsetOf converts expr's 1-based line and 0-based rune column into a byte offset.
func offsetOf(src string, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(src[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	for c := 0; c < col && off < len(src); c++ {
		_, size := utf8.DecodeRuneInString(src[off:])
		off += size
	}
	return off
}

// posInScalar maps a byte offset inside a scalar's value to a position in the file,
// following the scalar's style: quoted and plain scalars start at the node, block
// scalars (| and >) on the next line at their indentation.
func (d *document) posInScalar(n *yaml.Node, offset int) Pos {
	if n == nil {
		return d.posOf(n)
	}
	value := n.Value
	if offset > len(value) {
		offset = len(value)
	}
	prefix := value[:offset]
	lineNo := strings.Count(prefix, "\n")
	col := utf8.RuneCountInString(prefix[strings.LastIndexByte(prefix, '\n')+1:])
	block := n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
	quoted := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0
	switch {
	case block:
		line := n.Line + 1 + lineNo
		return Pos{File: d.file, Line: line, Col: d.indentOf(line) + 1 + col}
	case lineNo == 0:
		if quoted {
			col++
		}
		return Pos{File: d.file, Line: n.Line, Col: n.Column + col}
	default: // a multi-line flow scalar: its later lines start at their indentation
		line := n.Line + lineNo
		return Pos{File: d.file, Line: line, Col: d.indentOf(line) + 1 + col}
	}
}

// indentOf returns the number of leading spaces of a 1-based source line.
func (d *document) indentOf(line int) int {
	src := d.src
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src, '\n')
		if i < 0 {
			return 0
		}
		src = src[i+1:]
	}
	n := 0
	for n < len(src) && src[n] == ' ' {
		n++
	}
	return n
}
