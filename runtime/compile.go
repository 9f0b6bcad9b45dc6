package runtime

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Options are what Compile needs besides the spec.
type Options struct {
	// Tools builds the spec's tools; a kind missing from it is a diagnostic.
	Tools tool.Registry
	// Model answers the agent's requests. It may be nil for validation; Run then fails.
	Model model.Model
	// JudgeModel answers the judge's requests; nil means Model.
	JudgeModel model.Model
	// RouterModel answers the intent classifier; nil means Model.
	RouterModel model.Model
	// Store remembers conversations and users' facts; nil for no memory.
	Store store.Store
	// Knowledge answers the FAQ cache and retrieval of intents that use them; nil
	// when the spec has neither (an intent with one then fails its runs' stage with
	// an event and runs without it).
	Knowledge knowledge.Knowledge
	// Prices are what the models cost, for the run's cost and its max_cost budget;
	// a nil price is unknown (the cost of that model's calls is not counted).
	Prices Prices
	// Version identifies the spec's content (a hash of its files): the FAQ cache's
	// learned entries belong to one version, so editing the spec starts afresh.
	Version string
	// Digest identifies what the agent is made of wherever its files are (a hash
	// of their content): a durable engine's worker runs a run only on the agent
	// the run was started with.
	Digest string
	// External are tools found at run time (an MCP server's allowed tools). One the
	// spec declares by name itself is left out: the declaration's overrides win.
	External []tool.ExternalTool
	// Now is the clock approvals expire by; nil means time.Now. Tests move it on.
	Now func() time.Time
	// Agents are the compiled agents of the spec's agents entries, by name. One
	// missing is compiled from its loaded spec with these options (the same model,
	// tools and store): what offline tests want, where one script plays every
	// agent's turns.
	Agents map[string]*Agent
	// RemoteAgents are the tools that send the tasks of the agents entries that
	// are remote agents (a2a) to them, by name. One missing is a tool whose calls
	// fail, saying the agent is not connected: what validation and inspection get.
	RemoteAgents map[string]tool.Tool
}

// Prices are the prices of an agent's models: Agent is Model's, Judge is
// JudgeModel's and Router is RouterModel's. A judge or classifier without a model of
// its own uses Model, and then Agent's price when its own is nil.
type Prices struct {
	Agent, Judge, Router *spec.Pricing
	// Fallback are the prices of the models of fallback chains, by the name the
	// chain reports (model.Answered.Name): a call a fallback model answered is
	// priced by it. A name missing here is a model of unknown price. The budgets'
	// worst case before a call is still priced by the chain's first model.
	Fallback map[string]*spec.Pricing
}

// agentTool is a tool resolved for running: its model-facing definition, compiled
// argument schema, bound parameters and limits.
type agentTool struct {
	def       model.ToolDef
	schema    *jsonschema.Schema
	bind      map[string]string // parameter → context key
	timeout   time.Duration
	maxOutput int
	impl      tool.Tool  // what a call runs, unless engine is set
	engine    engineTool // a tool of the engine (the plan tool, an agents entry's): a call works on the run
	spec      *spec.Tool // accept, accept_message and collect rules
	usesUser  bool       // its calls depend on the run context (see spec.Spec.ToolRunContext)
	remote    bool       // impl is an agents entry's remote agent (a2a)
}

// compilation is the state of one Compile: the agent being built, the compiler
// of its tools' argument schemas, and the problems found so far.
type compilation struct {
	s       *spec.Spec
	opts    Options
	a       *Agent
	schemas *jsonschema.Compiler
	diags   spec.Diagnostics
}

// Compile resolves a loaded spec into an Agent. Problems are diagnostics at the
// spec's positions, like the loader's; an Agent is returned only when there are no
// errors.
func Compile(s *spec.Spec, opts Options) (*Agent, spec.Diagnostics) {
	settings := spec.Resolve(s)
	c := &compilation{s: s, opts: opts, a: newAgent(s, settings, opts), schemas: jsonschema.NewCompiler()}
	a := c.a
	c.compileFilters()
	c.compileTools()
	c.compileSubAgents()
	c.compileExternalTools()
	a.compileWorkflow(c.schemas, c.report)
	c.compileOutputs()
	if c.diags.HasErrors() {
		return nil, c.diags
	}
	a.store = opts.Store
	a.knowledge, a.version, a.digest = opts.Knowledge, opts.Version, opts.Digest
	if usesPlan(settings) {
		c.addPlanTool(settings.Plan != nil)
	}
	a.compileIntents()
	return a, c.diags
}

// newAgent is the agent of s before its filters and tools: its settings, models
// with their prices, and instructions.
func newAgent(s *spec.Spec, settings *spec.Settings, opts Options) *Agent {
	a := &Agent{
		spec:        s,
		settings:    settings,
		model:       opts.Model,
		judgeModel:  opts.JudgeModel,
		routerModel: opts.RouterModel,
		byName:      map[string]*agentTool{},
		clock:       opts.Now,
	}
	// A price belongs to a model: the judge and the classifier pay the agent's price
	// exactly when they use the agent's model. A model of their own with no price is
	// unknown, never the agent's price.
	a.prices = opts.Prices
	if a.judgeModel == nil {
		a.judgeModel = opts.Model
		a.prices.Judge = cmp.Or(a.prices.Judge, opts.Prices.Agent)
	}
	if a.routerModel == nil {
		a.routerModel = opts.Model
		a.prices.Router = cmp.Or(a.prices.Router, opts.Prices.Agent)
	}
	if s.Instructions.Source != "" {
		a.instructions = &s.Instructions
		a.instructionsUseUser = a.instructions.ReadsRunContext()
	}
	return a
}

// report records an error at src.
func (c *compilation) report(src spec.Source, format string, args ...any) {
	c.diags = append(c.diags, spec.Diagnostic{Severity: spec.Error, Pos: src.Pos, Path: src.Path, Message: fmt.Sprintf(format, args...)})
}

// reportTool reports a problem of a tool; a skill's tool's also says which skills
// entry brought it.
func (c *compilation) reportTool(t *spec.Tool, format string, args ...any) {
	c.report(t.Source, format, args...)
	for _, ref := range c.s.Skills {
		if ref.Pack != nil && ref.Pack.Name == t.Skill && t.Skill != "" {
			c.diags[len(c.diags)-1].Notes = append(c.diags[len(c.diags)-1].Notes, spec.Note{Pos: ref.Pos, Message: "the skill as this agent uses it"})
		}
	}
}

// addTool is the one way a tool joins the agent, whatever brings it — the spec's
// tools (builtins and every kind), an MCP server's found at run time, an agents
// entry, the plan tool: it compiles the tool's parameters as the schema its
// arguments are checked against, under url, registers the tool by name, and
// offers it to the model when offer is set. An error is the parameters'.
func (c *compilation) addTool(at *agentTool, url string, offer bool) error {
	if err := c.schemas.AddResource(url, at.def.Parameters); err != nil {
		return err
	}
	schema, err := c.schemas.Compile(url)
	if err != nil {
		return err
	}
	at.schema = schema
	c.a.tools = append(c.a.tools, at)
	c.a.byName[at.def.Name] = at
	if offer {
		c.a.offered = append(c.a.offered, at.def)
	}
	return nil
}

// compileFilters sorts the spec's filters by the stage they run on.
func (c *compilation) compileFilters() {
	a, s := c.a, c.s
	a.filters = map[spec.FilterStage][]*spec.Filter{}
	for i := range s.Filters {
		f := &s.Filters[i]
		if !f.On.Allows(f.EffectiveAction()) {
			c.report(f.Source, "filter action %q does not apply on %q (actions there: %v)", f.EffectiveAction(), f.On, f.On.Actions())
			continue
		}
		a.filters[f.On] = append(a.filters[f.On], f)
		a.filtersUseUser = a.filtersUseUser || f.When.ReadsRunContext()
	}
}

// compileTools builds the spec's tools with the registry's factories.
func (c *compilation) compileTools() {
	// Absolute, so a relative program path does not get resolved twice (once here,
	// once against the command's working directory).
	dir, _ := filepath.Abs(filepath.Dir(c.s.Pos.File))
	for i := range c.s.Tools {
		t := &c.s.Tools[i]
		if at := c.compileTool(t, dir); at != nil {
			if err := c.addTool(at, fmt.Sprintf("mem://tools/%d/%s.json", i, t.Name), true); err != nil {
				c.reportTool(t, "tool %q: parameters: %v", t.Name, err)
			}
		}
	}
}

// compileTool builds a tool of the spec, whose programs run in dir unless a skill
// brought it; nil when it was reported instead.
func (c *compilation) compileTool(t *spec.Tool, dir string) *agentTool {
	g := c.a.settings.Guards
	factory, ok := c.opts.Tools[tool.Key(t)]
	if !ok {
		c.reportTool(t, "no %s tool is available in this build of agentrun", strings.TrimPrefix(tool.Key(t), "builtin:"))
		return nil
	}
	if t.Command != nil && t.SkillDir != "" {
		dir, _ = filepath.Abs(t.SkillDir) // a skill's programs are its own files
	}
	impl, err := factory(t, dir)
	if err != nil {
		c.reportTool(t, "tool %q: %v", t.Name, err)
		return nil
	}
	at := &agentTool{
		def:       model.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
		bind:      t.Bind,
		timeout:   cmp.Or(t.Timeout.Duration, g.ToolTimeout),
		maxOutput: cmp.Or(t.MaxOutput, g.MaxToolOutput),
		impl:      impl,
		spec:      t,
		usesUser:  c.s.ToolRunContext(t) != 0, // the kind's declaration, bind and accept
	}
	if d, ok := impl.(tool.Describer); ok {
		info := d.Describe()
		at.def.Description = cmp.Or(t.Description, info.Description)
		if info.Parameters != nil {
			params, err := normalizeJSON(info.Parameters)
			if err != nil {
				c.reportTool(t, "tool %q: parameters: %v", t.Name, err)
				return nil
			}
			at.def.Parameters = params
		}
	}
	if at.def.Parameters == nil {
		at.def.Parameters = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return at
}

// compileSubAgents makes each agents entry a tool that runs the entry's agent on
// a task.
func (c *compilation) compileSubAgents() {
	g := c.a.settings.Guards
	c.a.subAgents = map[string]*Agent{}
	for i := range c.s.Agents {
		entry := &c.s.Agents[i]
		if entry.Remote() {
			c.compileRemoteAgent(i, entry)
			continue
		}
		sub := c.subAgent(entry)
		if sub == nil {
			continue
		}
		def := model.ToolDef{Name: entry.Name, Description: entry.Description, Parameters: spec.SubAgentParameters()}
		params, _ := normalizeJSON(def.Parameters)
		def.Parameters = params
		// A sub-agent acts as the user (their bound values, facts and entities):
		// what it answers depends on who asked, like a tool binding user.id.
		at := &agentTool{def: def, spec: &spec.Tool{Name: entry.Name}, engine: delegation{entry.Name},
			timeout: g.ToolTimeout, maxOutput: g.MaxToolOutput, usesUser: true}
		c.a.subAgents[entry.Name] = sub
		if err := c.addTool(at, fmt.Sprintf("mem://agents/%d/%s.json", i, entry.Name), true); err != nil {
			panic(err) // the sub-agent tool's schema is ours
		}
	}
}

// subAgent is an agents entry's agent: the one given in Options, or else its
// loaded spec compiled with these options; nil when it was reported instead.
func (c *compilation) subAgent(entry *spec.SubAgent) *Agent {
	sub := c.opts.Agents[entry.Name]
	if sub == nil && entry.Loaded != nil {
		subOpts := c.opts
		subOpts.Agents, subOpts.External, subOpts.Knowledge, subOpts.RemoteAgents = nil, nil, nil, nil
		var subDiags spec.Diagnostics
		if sub, subDiags = Compile(entry.Loaded, subOpts); subDiags.HasErrors() {
			c.report(entry.Source, "agent %s (%s): %v", entry.Name, entry.Spec, subDiags.Errors())
			return nil
		}
	}
	if sub == nil {
		c.report(entry.Source, "agent %s: its spec %s was not loaded", entry.Name, entry.Spec)
	}
	return sub
}

// compileExternalTools adds the tools found at run time that the spec does not
// declare itself.
func (c *compilation) compileExternalTools() {
	g := c.a.settings.Guards
	for i, ext := range c.opts.External {
		if _, declared := c.a.byName[ext.Def.Name]; declared {
			continue
		}
		at := &agentTool{def: ext.Def, timeout: g.ToolTimeout, maxOutput: g.MaxToolOutput, impl: ext.Impl, spec: &spec.Tool{Name: ext.Def.Name}, usesUser: tool.PassesUser(ext.Impl)}
		params, err := normalizeJSON(ext.Def.Parameters)
		if err == nil {
			at.def.Parameters = params
			err = c.addTool(at, fmt.Sprintf("mem://external/%d/%s.json", i, ext.Def.Name), true)
		}
		if err != nil {
			c.report(c.s.Source, "tool %q: its parameters are not a usable JSON schema: %v", ext.Def.Name, err)
		}
	}
}

// addPlanTool adds the built-in plan tool, offered to the model when offer (the
// spec's plan mode) is set.
func (c *compilation) addPlanTool(offer bool) {
	def := planTool()
	at := &agentTool{def: def, spec: &spec.Tool{Name: def.Name}, engine: planner{}}
	if err := c.addTool(at, "mem://builtin/plan.json", offer); err != nil {
		panic(err) // planTool's schema is ours: a bug, not the spec's fault
	}
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

var printer = message.NewPrinter(language.English)
