package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/spec"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Defaults for guards the spec leaves unset.
const (
	DefaultMaxTurns         = 10
	DefaultMaxToolRounds    = 8
	DefaultMaxParallelTools = 4
	DefaultToolTimeout      = 30 * time.Second
	DefaultMaxToolOutput    = 16000
	DefaultFallback         = "I could not complete this request automatically. Please rephrase it or add details."
	DefaultJudgeRetries     = 2
	DefaultWindow           = 10
	DefaultMaxFactChars     = 500
)

// Options are what Compile needs besides the spec.
type Options struct {
	// Tools builds the spec's tools; a kind missing from it is a diagnostic.
	Tools Registry
	// Model answers the agent's requests. It may be nil for validation; Run then fails.
	Model Model
	// JudgeModel answers the judge's requests; nil means Model.
	JudgeModel Model
	// RouterModel answers the intent classifier; nil means Model.
	RouterModel Model
	// Store remembers conversations and users' facts; nil for no memory.
	Store Store
	// External are tools found at run time (an MCP server's allowed tools). One the
	// spec declares by name itself is left out: the declaration's overrides win.
	External []ExternalTool
}

// ExternalTool is a tool that brings its own definition.
type ExternalTool struct {
	Def  ToolDef
	Impl Tool
}

// Agent is a compiled spec: immutable and safe for concurrent runs. Per-run state
// lives in a run value.
type Agent struct {
	spec         *spec.Spec
	model        Model
	tools        []*agentTool
	byName       map[string]*agentTool
	offered      []ToolDef // every tool, in spec order
	instructions *spec.Template
	guards       guards
	judge        *judge
	filters      map[string][]*spec.Filter // by stage: input, tool_result, answer
	intents      map[string]*intent        // nil when the spec declares none
	intentOrder  []*intent
	routing      routing
	store        Store
	window       int // turns of history a run loads
	maxFactChars int
}

// judge is the spec's judge with its defaults resolved.
type judge struct {
	criteria    []string
	maxRetries  int
	minChars    int
	onError     string // pass | fail
	onExhausted string // accept | fallback
	model       Model
}

type guards struct {
	maxTurns, maxToolRounds, maxParallel int
	duplicates                           string
	fallback                             string
}

// agentTool is a tool resolved for running: its model-facing definition, compiled
// argument schema, bound parameters and limits.
type agentTool struct {
	def       ToolDef
	schema    *jsonschema.Schema
	bind      map[string]string // parameter → context key
	timeout   time.Duration
	maxOutput int
	impl      Tool
	spec      *spec.Tool // accept, accept_message and collect rules
}

// Compile resolves a loaded spec into an Agent. Problems are diagnostics at the
// spec's positions, like the loader's; an Agent is returned only when there are no
// errors.
func Compile(s *spec.Spec, opts Options) (*Agent, spec.Diagnostics) {
	var diags spec.Diagnostics
	report := func(src spec.Source, format string, args ...any) {
		diags = append(diags, spec.Diagnostic{Severity: spec.Error, Pos: src.Pos, Path: src.Path, Message: fmt.Sprintf(format, args...)})
	}
	reportTool := func(t *spec.Tool, format string, args ...any) {
		report(t.Source, format, args...)
		for _, ref := range s.Skills { // a skill's tool: say which agent entry brought it
			if ref.Pack != nil && ref.Pack.Name == t.Skill && t.Skill != "" {
				diags[len(diags)-1].Notes = append(diags[len(diags)-1].Notes, spec.Note{Pos: ref.Pos, Message: "the skill as this agent uses it"})
			}
		}
	}
	g := s.Guards
	a := &Agent{
		spec:   s,
		model:  opts.Model,
		byName: map[string]*agentTool{},
		guards: guards{
			maxTurns:      or(g.MaxTurns, DefaultMaxTurns),
			maxToolRounds: or(g.MaxToolRounds, min(DefaultMaxToolRounds, or(g.MaxTurns, DefaultMaxTurns))),
			maxParallel:   or(g.MaxParallelTools, DefaultMaxParallelTools),
			duplicates:    cmpOr(g.DuplicateCalls, "stop"),
			fallback:      cmpOr(g.Fallback, DefaultFallback),
		},
	}
	if s.Instructions.Source != "" {
		a.instructions = &s.Instructions
	}
	if j := s.Judge; j != nil {
		a.judge = &judge{
			criteria:    j.Criteria,
			maxRetries:  DefaultJudgeRetries,
			minChars:    j.MinChars,
			onError:     cmpOr(j.OnError, "pass"),
			onExhausted: cmpOr(j.OnExhausted, "fallback"),
			model:       opts.JudgeModel,
		}
		if j.MaxRetries != nil {
			a.judge.maxRetries = *j.MaxRetries
		}
		if a.judge.model == nil {
			a.judge.model = opts.Model
		}
	}
	a.filters = map[string][]*spec.Filter{}
	for i := range s.Filters {
		f := &s.Filters[i]
		a.filters[f.On] = append(a.filters[f.On], f)
	}
	// Absolute, so a relative program path does not get resolved twice (once here,
	// once against the command's working directory).
	dir, _ := filepath.Abs(filepath.Dir(s.Pos.File))
	schemas := jsonschema.NewCompiler()
	for i := range s.Tools {
		t := &s.Tools[i]
		factory, ok := opts.Tools[Key(t)]
		if !ok {
			reportTool(t, "no %s tool is available in this build of agentrun", strings.TrimPrefix(Key(t), "builtin:"))
			continue
		}
		toolDir := dir
		if t.Command != nil && t.SkillDir != "" {
			toolDir, _ = filepath.Abs(t.SkillDir) // a skill's programs are its own files
		}
		impl, err := factory(t, toolDir)
		if err != nil {
			reportTool(t, "tool %q: %v", t.Name, err)
			continue
		}
		at := &agentTool{
			def:       ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
			bind:      t.Bind,
			timeout:   orDuration(t.Timeout.Duration, g.ToolTimeout.Duration, DefaultToolTimeout),
			maxOutput: or(t.MaxOutput, or(g.MaxToolOutput, DefaultMaxToolOutput)),
			impl:      impl,
			spec:      t,
		}
		if d, ok := impl.(Describer); ok {
			info := d.Describe()
			at.def.Description = cmpOr(t.Description, info.Description)
			if info.Parameters != nil {
				params, err := normalizeJSON(info.Parameters)
				if err != nil {
					reportTool(t, "tool %q: parameters: %v", t.Name, err)
					continue
				}
				at.def.Parameters = params
			}
		}
		if at.def.Parameters == nil {
			at.def.Parameters = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		url := fmt.Sprintf("mem://tools/%d/%s.json", i, t.Name)
		if err := schemas.AddResource(url, at.def.Parameters); err != nil {
			reportTool(t, "tool %q: parameters: %v", t.Name, err)
			continue
		}
		if at.schema, err = schemas.Compile(url); err != nil {
			reportTool(t, "tool %q: parameters: %v", t.Name, err)
			continue
		}
		a.tools = append(a.tools, at)
		a.byName[t.Name] = at
		a.offered = append(a.offered, at.def)
	}
	for i, ext := range opts.External {
		if _, declared := a.byName[ext.Def.Name]; declared {
			continue
		}
		at := &agentTool{def: ext.Def, timeout: orDuration(g.ToolTimeout.Duration, DefaultToolTimeout),
			maxOutput: or(g.MaxToolOutput, DefaultMaxToolOutput), impl: ext.Impl, spec: &spec.Tool{Name: ext.Def.Name}}
		params, err := normalizeJSON(ext.Def.Parameters)
		if err == nil {
			at.def.Parameters = params
			url := fmt.Sprintf("mem://external/%d/%s.json", i, ext.Def.Name)
			if err = schemas.AddResource(url, params); err == nil {
				at.schema, err = schemas.Compile(url)
			}
		}
		if err != nil {
			report(s.Source, "tool %q: its parameters are not a usable JSON schema: %v", ext.Def.Name, err)
			continue
		}
		a.tools = append(a.tools, at)
		a.byName[at.def.Name] = at
		a.offered = append(a.offered, at.def)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	a.store = opts.Store
	a.window = DefaultWindow
	if w := s.Memory.Window; w != nil {
		a.window = *w
	}
	a.maxFactChars = or(s.Memory.Facts.MaxChars, DefaultMaxFactChars)
	a.compileIntents(opts)
	return a, diags
}

// normalizeJSON turns Go values (say []string) into the JSON values a schema
// validator and a JSON encoder agree on, by a round trip through JSON.
func normalizeJSON(v map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, errors.New("parameters must be a JSON object")
	}
	return m, nil
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.spec.Name }

// Spec is the spec the agent was compiled from. Callers must not modify it.
func (a *Agent) Spec() *spec.Spec { return a.spec }

// Tools lists the tools as offered to the model.
func (a *Agent) Tools() []ToolDef { return a.offered }

func or(v, def int) int {
	if v != 0 {
		return v
	}
	return def
}

func cmpOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func orDuration(ds ...time.Duration) time.Duration {
	for _, d := range ds {
		if d != 0 {
			return d
		}
	}
	return 0
}

var printer = message.NewPrinter(language.English)
