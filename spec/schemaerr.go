package spec

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/schema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

const metaSchemaURL = "https://json-schema.org/draft/2020-12/schema"

// schemas are the compiled agent schema and, compiled on first use, the skill and
// test file schemas and the JSON-schema metaschema (for tools' parameters): a run of
// a spec without skills or inline parameters never pays for those at start-up.
type schemas struct {
	agent *jsonschema.Schema
	skill *lazySchema
	test  *lazySchema
	// script is the test schema's definition of a model script file.
	script *lazySchema
	serve  *lazySchema
	meta   *lazySchema
	doc    any // the agent schema as JSON, to list the keys a mapping may have
	// testDoc is the test schema as JSON, for the same in test files; set when test
	// is compiled, which comes before any error it could explain.
	testDoc any
	// serveDoc is the serve config schema as JSON, likewise.
	serveDoc any
	// eval is the eval file schema; it refers to the test schema's expect and the
	// agent schema's model. evalDoc is its JSON, as testDoc.
	eval    *lazySchema
	evalDoc any

	// mu guards compiler, shared by the lazy schemas: the skill schema refers to the
	// agent schema's definitions, which it finds there already loaded.
	mu       sync.Mutex
	compiler *jsonschema.Compiler
}

func compileSchemas() (*schemas, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.JSON))
	if err != nil {
		return nil, fmt.Errorf("agent schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ID, doc); err != nil {
		return nil, fmt.Errorf("agent schema: %w", err)
	}
	agent, err := c.Compile(schema.ID)
	if err != nil {
		return nil, fmt.Errorf("agent schema: %w", err)
	}
	s := &schemas{agent: agent, doc: doc, compiler: c}
	s.skill = s.lazy("skill schema", schema.SkillID, schema.SkillJSON, nil)
	s.test = s.lazy("test schema", schema.TestID, schema.TestJSON, &s.testDoc)
	s.script = &lazySchema{compile: sync.OnceValues(func() (*jsonschema.Schema, error) {
		if _, err := s.test.compile(); err != nil { // adds the test schema, which holds the definition
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.compiler.Compile(schema.TestID + "#/definitions/script_file")
	})}
	s.serve = s.lazy("serve schema", schema.ServeID, schema.ServeJSON, &s.serveDoc)
	evalSchema := s.lazy("eval schema", schema.EvalID, schema.EvalJSON, &s.evalDoc)
	s.eval = &lazySchema{compile: func() (*jsonschema.Schema, error) {
		if _, err := s.test.compile(); err != nil { // adds the test schema, whose expect it uses
			return nil, err
		}
		return evalSchema.compile()
	}}
	s.meta = s.lazy("metaschema", metaSchemaURL, nil, nil)
	return s, nil
}

// lazy is the schema at url, compiled on its first use with the shared compiler. src,
// when not nil, is its text, added to the compiler first; doc then receives it as
// JSON.
func (s *schemas) lazy(what, url string, src []byte, doc *any) *lazySchema {
	return &lazySchema{compile: sync.OnceValues(func() (*jsonschema.Schema, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if src != nil {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if err := s.compiler.AddResource(url, v); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if doc != nil {
				*doc = v
			}
		}
		sch, err := s.compiler.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return sch, nil
	})}
}

// lazySchema is compiled once, when it first validates something. Its schema is
// embedded and covered by the tests, so a compile error is a bug in this build; it
// comes back as the validation's error.
type lazySchema struct {
	compile func() (*jsonschema.Schema, error)
}

func (l *lazySchema) Validate(v any) error {
	sch, err := l.compile()
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

var printer = message.NewPrinter(language.English)

// schemaErrors turns a validation error into diagnostics at the offending nodes.
// base is the instance location of the validated value inside the spec.
func (d *document) schemaErrors(err error, s *schemas, base []string) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		d.errorf(d.at(base...), "", "%v", err)
		return
	}
	all := leaves(ve)
	// A key that is not a valid name makes every other error about its value noise.
	badNames := map[string]bool{}
	for _, leaf := range all {
		if k, ok := leaf.ErrorKind.(*kind.PropertyNames); ok {
			badNames[strings.Join(append(slices.Clone(leaf.InstanceLocation), k.Property), "/")] = true
		}
	}
	for _, leaf := range all {
		if _, ok := leaf.ErrorKind.(*kind.PropertyNames); !ok && badNames[strings.Join(leaf.InstanceLocation, "/")] {
			continue
		}
		tokens := append(slices.Clone(base), leaf.InstanceLocation...)
		if d.checkedShape(tokens) {
			continue
		}
		d.schemaError(leaf, s, tokens)
	}
}

// checkedShape reports whether the value at tokens is one the checks explain better
// than the schema's "oneOf failed" or "must be \"always\"": a tool's approval that is
// not a mapping (checkToolApproval).
func (d *document) checkedShape(tokens []string) bool {
	if d.kind == testFile || len(tokens) != 3 || tokens[0] != "tools" || tokens[2] != "approval" {
		return false
	}
	n := d.at(tokens...).node
	if _, unset := d.unset[n]; unset { // the schema's message names the variable
		return false
	}
	n = resolveAlias(n)
	return n != nil && n.Kind != yaml.MappingNode
}

// leaves flattens the error tree into the errors a person can act on. For oneOf and
// anyOf it keeps the branch that matched the value's type, so `skills: [{use: 1}]`
// says "expected string" for use, not "expected string" for the whole entry.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	switch e.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
		var kept []*jsonschema.ValidationError
		for _, c := range e.Causes {
			if _, ok := c.ErrorKind.(*kind.Type); ok && sameLocation(c, e) {
				continue // this branch wants another type: not the one the author meant
			}
			kept = append(kept, leaves(c)...)
		}
		if len(kept) == 0 {
			return []*jsonschema.ValidationError{e}
		}
		return kept
	case *kind.PropertyNames:
		return []*jsonschema.ValidationError{e}
	}
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		if _, ok := c.ErrorKind.(*kind.PropertyNames); ok {
			c.InstanceLocation = propertyNamesLocation(e, c)
		}
		out = append(out, leaves(c)...)
	}
	return out
}

// propertyNamesLocation works around jsonschema v6.0.3, whose propertyNames errors
// share (and so lose) their instance location: it is the parent's location plus the
// property that the keyword location names.
func propertyNamesLocation(parent, e *jsonschema.ValidationError) []string {
	loc := slices.Clone(parent.InstanceLocation)
	_, frag, _ := strings.Cut(e.SchemaURL, "#")
	toks := strings.Split(strings.TrimSuffix(frag, "/propertyNames"), "/")
	// The parent is the object holding the property, or (when other errors sit
	// beside this one) the property itself: never name it twice.
	if n := len(toks); n >= 2 && toks[n-2] == "properties" && (len(loc) == 0 || loc[len(loc)-1] != toks[n-1]) {
		loc = append(loc, toks[n-1])
	}
	return loc
}

func sameLocation(a, b *jsonschema.ValidationError) bool {
	return strings.Join(a.InstanceLocation, "/") == strings.Join(b.InstanceLocation, "/")
}

func (d *document) schemaError(e *jsonschema.ValidationError, s *schemas, tokens []string) {
	at := d.at(tokens...)
	d.failed[at.path] = true
	if at.node != nil {
		if ref, ok := d.unset[at.node]; ok {
			d.errorf(at, fmt.Sprintf("set it, or give a default: ${%s:-value}", ref.vars[0]),
				"environment variable %s is not set and has no default", ref.vars[0])
			return
		}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := s.propertiesAt(e.SchemaURL)
		for _, p := range k.Properties {
			kat := d.at(append(tokens, p)...).keyPos(d.file)
			d.failed[kat.path] = true
			kat.path = at.path // the key is in the message; the path names its mapping
			hint := suggest(p, allowed)
			if hint == "" && len(allowed) > 0 {
				hint = "allowed keys: " + strings.Join(allowed, ", ")
			}
			d.errorf(kat, hint, "unknown key %q", p)
		}
	case *kind.Required:
		at = at.keyPos(d.file)
		for _, m := range k.Missing {
			d.errorf(at, "", "missing required key %q", m)
		}
	case *kind.Type:
		d.errorf(at, "", "expected %s, got %s", strings.Join(k.Want, " or "), describe(k.Got))
	case *kind.Enum:
		if (d.kind == scriptFile || d.kind == testFile) && tokens[len(tokens)-1] == "finish_reason" {
			d.finishReasonError(at, k.Got)
			return
		}
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		got := fmt.Sprint(k.Got)
		hint := suggest(got, want)
		d.errorf(at, hint, "%s is not one of: %s", quoteValue(k.Got), strings.Join(want, ", "))
	case *kind.Const:
		if len(tokens) == 1 && tokens[0] == "version" {
			d.errorf(at, fmt.Sprintf("this agentrun reads version %v specs", k.Want), "unsupported version %s", quoteValue(k.Got))
			return
		}
		d.errorf(at, "", "must be %s", quoteValue(k.Want))
	case *kind.Pattern:
		msg, hint := patternMessage(e.SchemaURL, k.Got)
		d.errorf(at, hint, "%s", msg)
	case *kind.PropertyNames:
		kat := d.at(append(tokens, k.Property)...).keyPos(d.file)
		msg, hint := patternMessage("#/definitions/name", k.Property)
		d.errorf(kat, hint, "%s", msg)
	case *kind.Minimum:
		d.errorf(at, "", "must be at least %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		d.errorf(at, "", "must be at most %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		d.errorf(at, "", "must be more than %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MinLength:
		d.errorf(at, "", "must not be empty")
	case *kind.MinItems:
		d.errorf(at, "", "needs at least %d item(s)", k.Want)
	default:
		d.errorf(at, "", "%s", e.ErrorKind.LocalizedString(printer))
	}
}

// patternMessage explains a pattern failure by the definition the pattern belongs to.
func patternMessage(schemaURL, got string) (msg, hint string) {
	_, frag, _ := strings.Cut(schemaURL, "#")
	def := ""
	if toks := strings.Split(frag, "/"); len(toks) >= 3 && toks[1] == "definitions" {
		def = toks[2]
	}
	switch def {
	case "name":
		return fmt.Sprintf("invalid name %q", got), `use lower case letters, digits, "-" and "_", starting with a letter (at most 64)`
	case "tool_name":
		return fmt.Sprintf("invalid tool name %q", got), `use letters, digits, "-" and "_" (at most 64), as function-calling APIs require`
	case "env_name":
		return fmt.Sprintf("invalid environment variable name %q", got), "give the variable's name (like LLM_API_KEY), never its value"
	case "duration":
		return fmt.Sprintf("invalid duration %q", got), "use a number with a unit: 500ms, 30s, 2m, 1h30m"
	case "dataset": // an eval file's dataset file
		return fmt.Sprintf("%q is not a .jsonl or .csv file", got), "a dataset is JSON Lines (one object a line) or CSV with a header row"
	case "sha256": // serve.yaml's tokens
		return "want 64 hex digits, the SHA-256 of the token", "never the token itself: printf %s TOKEN | sha256sum"
	}
	return fmt.Sprintf("%q does not match the required pattern", got), ""
}

// propertiesAt lists the keys allowed by the object schema that an
// additionalProperties keyword at schemaURL belongs to.
func (s *schemas) propertiesAt(schemaURL string) []string {
	base, frag, _ := strings.Cut(schemaURL, "#")
	node := s.doc
	switch base {
	case schema.TestID:
		node = s.testDoc
	case schema.ServeID:
		node = s.serveDoc
	case schema.EvalID:
		node = s.evalDoc
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "additionalProperties" || tok == "" {
			break
		}
		switch n := node.(type) {
		case map[string]any:
			node = n[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
		case []any: // a branch of oneOf or anyOf
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	m, _ := node.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for p := range props {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func describe(jsonType string) string {
	switch jsonType {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "null":
		return "nothing"
	}
	return jsonType
}

func quoteValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(2)
}
