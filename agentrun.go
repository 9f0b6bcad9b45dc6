package agentrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/agentrun/agentrun/builtin"
	"github.com/agentrun/agentrun/runtime"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/a2a"
	"github.com/agentrun/agentrun/runtime/tool/kinds"
	"github.com/agentrun/agentrun/runtime/tool/mcp"
	"github.com/agentrun/agentrun/skills"
	"github.com/agentrun/agentrun/spec"
)

// Options say how to assemble an agent. The zero value runs the spec as written.
type Options struct {
	// Model overrides the spec's model: "test" (offline), "script:FILE" or
	// "openai[:NAME]"; "" keeps the spec's.
	Model string
	// Store is the memory store's URL; "" means AGENTRUN_STORE, then memory.url,
	// then memory.store's default (DefaultStoreURL).
	Store string
	// Remember opens the store even when the spec alone needs none, because runs
	// will continue conversations.
	Remember bool
	// SharedStore is an opened store the agent uses instead of opening one (serve
	// gives all its agents one); the agent does not close it.
	SharedStore store.Store
	// Inspect assembles the agent for looking at it (explain, graph): no store is
	// opened and no MCP server started; calling an MCP tool says it is not connected.
	Inspect bool
	// NoModel builds no model: the agent can be explained but not run.
	NoModel bool
	// Audit receives a record of every MCP tool call.
	Audit func(mcp.AuditRecord)
	// Record wraps the models so that their answers can be saved as a script that
	// replays the run (SaveRecording).
	Record bool
	// Index is the knowledge index's file; "" means IndexPath (AGENTRUN_INDEX,
	// knowledge.index, DefaultIndexPath).
	Index string
	// OnIndex is told of every collection Build indexed because it had never been
	// indexed or its sources changed since.
	OnIndex func(CollectionReport)
	// LookupEnv reads the environment for API keys and skill requirements; nil
	// means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Telemetry traces and measures the agent's runs (telemetry.Setup); nil, or
	// one with nothing enabled, costs the runs nothing.
	Telemetry *telemetry.Telemetry
	// RecordContent puts messages, tool arguments and results into spans, after
	// the spec's redaction filters; off, no span holds any text of a run.
	RecordContent bool

	// model is the top agent's model, which its sub-agents share when Model
	// overrides theirs: one offline script plays every agent's turns, in order.
	// recorder is the top agent's, which records its sub-agents' calls too, so
	// the saved script replays the whole run.
	model    model.Model
	recorder *offline.Recorder
}

// Agent is a compiled agent with everything it opened. It is safe for concurrent
// runs; Close it when done.
type Agent struct {
	*runtime.Agent
	// Spec is the loaded spec with the options applied (the model override).
	Spec *spec.Spec

	recorder *offline.Recorder
	closers  []func() error
	// tel traces the runs (an invoke_agent span per Run); nil when off.
	tel       *telemetry.Telemetry
	topts     []telemetry.Options
	toolNames map[string]bool
	// model is the agent's model before tracing, for sub-agents that share it.
	model model.Model
	// index is where the agent's knowledge is ("" without knowledge).
	index string
	// store is the URL of the store the agent opened; "" when it opened none.
	store string
}

// NewLoader is the spec loader with the bundled skills.
func NewLoader() (*spec.Loader, error) {
	l, err := spec.NewLoader()
	if err != nil {
		return nil, err
	}
	l.Bundled = skills.Bundled()
	l.FAQQuestions = faqQuestions
	return l, nil
}

// Open loads the spec at path and assembles its agent: Load, then Build.
func Open(ctx context.Context, path string, opts Options) (*Agent, error) {
	s, err := Load(path)
	if err != nil {
		return nil, err
	}
	return Build(ctx, s, opts)
}

// ReadError is a spec file that could not be read.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Load reads and checks a spec file. A spec with errors is a spec.Diagnostics error
// (print it with its positions); a file that cannot be read is a *ReadError.
func Load(path string) (*spec.Spec, error) {
	loader, err := NewLoader()
	if err != nil {
		return nil, err
	}
	res := loader.LoadFile(path)
	if res.ReadErr != nil {
		return nil, &ReadError{res.ReadErr}
	}
	if res.Diagnostics.HasErrors() {
		return nil, res.Diagnostics.Errors()
	}
	return res.Spec, nil
}

// Build assembles the agent of a loaded spec. Relative paths in it resolve against
// the directory of the spec's file. Compile errors are a spec.Diagnostics error.
// openStore gives the run the store it remembers in: the caller's shared one, or
// the one the options and the spec name, when the agent needs one.
func (a *Agent) openStore(ropts *runtime.Options, opts Options, lookup func(string) (string, bool)) error {
	s := a.Spec
	switch {
	case opts.SharedStore != nil:
		ropts.Store = opts.SharedStore
	case opts.Remember || NeedsStore(s):
		url, err := StoreURL(opts.Store, s.Memory, s.Pos.File, lookup)
		if err != nil {
			return err
		}
		if ropts.Store, err = OpenStore(url, s.Memory.TTL.Duration); err != nil {
			return fmt.Errorf("memory store: %w", err)
		}
		a.store = url
		a.closers = append(a.closers, ropts.Store.Close)
	}
	return nil
}

// openKnowledge opens the spec's collections. Collections never indexed, or whose
// sources changed, are indexed here (incrementally); one indexed by another
// embedder is an error rather than a silent rebuild (see ReindexError).
func (a *Agent) openKnowledge(ctx context.Context, ropts *runtime.Options, opts Options, lookup func(string) (string, bool)) error {
	s := a.Spec
	if !s.UsesKnowledge() {
		return nil
	}
	k, closeK, err := OpenKnowledge(ctx, s, KnowledgeOptions{Index: opts.Index, Offline: Offline(s), OnIndex: opts.OnIndex, LookupEnv: lookup,
		Telemetry: a.tel, TelemetryOptions: a.topts})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, closeK)
	a.index = cmp.Or(opts.Index, IndexPath(s, lookup))
	ropts.Knowledge = k
	ropts.Version = SpecVersion(s)
	if Offline(s) { // what an offline model answers must never answer a real run
		ropts.Version += "+" + string(s.Model.Provider)
	}
	return nil
}

func Build(ctx context.Context, s *spec.Spec, opts Options) (_ *Agent, err error) {
	copied := *s // the model override must not change the caller's spec
	s = &copied
	a := &Agent{Spec: s}
	defer func() {
		if err == nil {
			return
		}
		if cerr := a.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if missing := missingRequirements(s, lookup); len(missing) > 0 && !opts.Inspect {
		return nil, fmt.Errorf("cannot run %s: %s", s.Name, strings.Join(missing, "; "))
	}
	if err := OverrideModel(&s.Model, opts.Model); err != nil {
		return nil, err
	}
	dir := filepath.Dir(s.Pos.File)
	ropts := runtime.Options{Tools: Registry(), Digest: SpecDigest(s)}
	if s.Model.Name == "" && (s.Model.Provider == "" || s.Model.Provider == spec.ProviderOpenAI) {
		s.Model.Name, _ = lookup("LLM_MODEL_NAME") // as the model itself resolves it: for prices and traces
	}
	if s.Model.Provider != spec.ProviderTest { // the test model's token counts are made up: no cost
		agentPrice, judgePrice, routerPrice := spec.ResolvePrices(s)
		ropts.Prices = runtime.Prices{Agent: agentPrice, Judge: judgePrice, Router: routerPrice, Fallback: spec.FallbackPrices(s)}
	}
	if opts.Telemetry != nil && opts.Telemetry.Enabled() {
		a.tel = opts.Telemetry
		if opts.RecordContent {
			a.topts = []telemetry.Options{{RecordContent: true, Redact: redactor(s)}}
		}
	}
	if !opts.NoModel {
		a.recorder = opts.recorder
		if err := a.buildModels(&ropts, dir, lookup, opts.Record, opts.model); err != nil {
			return nil, err
		}
		a.model = ropts.Model // before tracing: a sub-agent sharing it traces its own calls
		a.traceModels(&ropts)
	}
	if !opts.Inspect {
		if err := a.startMCP(ctx, &ropts, dir, opts.Audit); err != nil {
			return nil, err
		}
		if err := a.openStore(&ropts, opts, lookup); err != nil {
			return nil, err
		}
		if err := a.openKnowledge(ctx, &ropts, opts, lookup); err != nil {
			return nil, err
		}
	}
	if a.tel != nil && a.tel.TracesEnabled() {
		tp := a.tel.TracerProvider()
		ropts.Tools = telemetry.WrapRegistry(ropts.Tools, tp, a.topts...)
		for i := range ropts.External {
			ropts.External[i].Impl = telemetry.WrapTool(ropts.External[i].Impl, tp, a.topts...)
		}
	}
	if err := a.buildSubAgents(ctx, &ropts, opts); err != nil {
		return nil, err
	}
	agent, diags := runtime.Compile(s, ropts)
	if diags.HasErrors() {
		return nil, diags
	}
	a.Agent = agent
	a.toolNames = map[string]bool{}
	for _, t := range agent.Tools() {
		a.toolNames[t.Name] = true
	}
	return a, nil
}

// buildSubAgents assembles the agents of the spec's agents entries, each from its
// own spec (its models, tools, MCP servers and knowledge) with the top agent's
// store; their Close is the top agent's.
func (a *Agent) buildSubAgents(ctx context.Context, ropts *runtime.Options, opts Options) error {
	if len(a.Spec.Agents) == 0 {
		return nil
	}
	ropts.Agents = map[string]*runtime.Agent{}
	for _, entry := range a.Spec.Agents {
		if entry.Remote() {
			if err := a.buildRemoteAgent(ropts, &entry, opts); err != nil {
				return err
			}
			continue
		}
		if entry.Loaded == nil {
			continue // the loader said why; Compile reports the entry
		}
		sub := opts
		sub.SharedStore, sub.Remember, sub.Index, sub.OnIndex = ropts.Store, false, "", nil
		sub.recorder = a.recorder
		if opts.Model != "" {
			sub.model = a.model // recording already, when Record is set
		}
		b, err := Build(ctx, entry.Loaded, sub)
		if err != nil {
			return fmt.Errorf("agent %s (%s): %w", entry.Name, entry.Spec, err)
		}
		a.closers = append(a.closers, b.Close)
		ropts.Agents[entry.Name] = b.Agent
	}
	return nil
}

// buildRemoteAgent builds the tool of an agents entry that names a remote A2A
// agent, with the token from the environment variable its auth names. A run
// needs the token; inspecting the agent does not (its calls then go without).
func (a *Agent) buildRemoteAgent(ropts *runtime.Options, entry *spec.SubAgent, opts Options) error {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var token string
	if auth := entry.A2A.Auth; auth != nil {
		var ok bool
		if token, ok = lookup(auth.TokenEnv); (!ok || token == "") && !opts.Inspect {
			return fmt.Errorf("agent %s: the environment variable %s (a2a.auth.token_env) is not set", entry.Name, auth.TokenEnv)
		}
	}
	remote, err := a2a.New(entry.Name, entry.A2A, token)
	if err != nil {
		return err
	}
	var t tool.Tool = remote
	if a.tel != nil && a.tel.TracesEnabled() {
		t = telemetry.WrapTool(t, a.tel.TracerProvider(), a.topts...)
	}
	if ropts.RemoteAgents == nil {
		ropts.RemoteAgents = map[string]tool.Tool{}
	}
	ropts.RemoteAgents[entry.Name] = t
	return nil
}

// traceModels wraps the models in chat spans and the GenAI metrics. A model the
// judge or the classifier shares with the agent is wrapped once, and each
// request's purpose is read from the request.
func (a *Agent) traceModels(ropts *runtime.Options) {
	if a.tel == nil {
		return
	}
	s := a.Spec
	tp, mp := a.tel.TracerProvider(), a.tel.MeterProvider()
	wrap := func(m model.Model, sm spec.Model) model.Model {
		if m == nil {
			return nil
		}
		return telemetry.WrapModel(m, telemetry.ModelInfo{Provider: providerName(sm), Model: sm.Name, Temperature: sm.Temperature, MaxTokens: sm.MaxTokens}, tp, mp, a.topts...)
	}
	ropts.Model = wrap(ropts.Model, s.Model)
	if s.Judge != nil && s.Judge.Model != nil {
		ropts.JudgeModel = wrap(ropts.JudgeModel, mergeModel(s.Model, *s.Judge.Model))
	}
	if s.Routing.Model != nil {
		ropts.RouterModel = wrap(ropts.RouterModel, mergeModel(s.Model, *s.Routing.Model))
	}
}

// providerName is gen_ai.provider.name for a model: "openai" for any
// OpenAI-compatible server (the API it speaks).
func providerName(m spec.Model) string {
	if m.Provider == "" {
		return string(spec.ProviderOpenAI)
	}
	return string(m.Provider)
}

// redactor applies the spec's redaction filters to text recorded in spans.
func redactor(s *spec.Spec) func(string) string {
	var filters []*spec.Filter
	for i := range s.Filters {
		if f := &s.Filters[i]; f.Redact != nil && f.Redact.Re != nil {
			filters = append(filters, f)
		}
	}
	return func(text string) string {
		for _, f := range filters {
			text = f.Redact.Re.ReplaceAllString(text, cmp.Or(f.Replacement, spec.DefaultReplacement))
		}
		return text
	}
}

// Run runs one request; with telemetry on, inside an invoke_agent span whose
// events are the run's stops, guards, verdicts and filter actions.
func (a *Agent) Run(ctx context.Context, req runtime.Request) (*runtime.Result, error) {
	if a.tel == nil {
		return a.Agent.Run(ctx, req)
	}
	ctx, span := telemetry.StartRun(ctx, a.tel.TracerProvider(), a.tel.MeterProvider(),
		telemetry.RunInfo{Agent: a.Spec.Name, Conversation: cmp.Or(req.TraceConversation, req.Conversation), Intent: req.Intent,
			Input: req.Input, Tools: a.toolNames}, a.topts...)
	req.Observer = telemetry.Tee(span, req.Observer)
	ended := false
	defer func() {
		if !ended { // a panic: the span still ends, as an error
			span.End(nil, errors.New("the run panicked"))
		}
	}()
	res, err := a.Agent.Run(ctx, req)
	ended = true
	span.End(res, err)
	return res, err
}

// IndexLocation is where the agent's knowledge index is (a file or a postgres://
// URL); "" for an agent without knowledge.
func (a *Agent) IndexLocation() string { return a.index }

// StoreLocation is the URL of the store the agent opened; "" when the caller shared
// one (Options.SharedStore) or the agent needs none.
func (a *Agent) StoreLocation() string { return a.store }

// ForgetLearned deletes the answers the FAQ cache learned for the user alone from
// the agent's knowledge index, and returns how many: part of forgetting a user.
// Shared answers stay. An agent without knowledge has none.
func (a *Agent) ForgetLearned(ctx context.Context, user string) (int, error) {
	if a.index == "" || user == "" {
		return 0, nil
	}
	idx, err := OpenIndex(ctx, a.index)
	if err != nil {
		return 0, err
	}
	defer idx.Close()
	return idx.ClearLearned(ctx, kindex.LearnedFilter{User: user})
}

// Resume goes on with a paused run (see runtime.Agent.Resume), traced like Run.
func (a *Agent) Resume(ctx context.Context, req runtime.ResumeRequest) (*runtime.Result, error) {
	if a.tel == nil {
		return a.Agent.Resume(ctx, req)
	}
	ctx, span := telemetry.StartRun(ctx, a.tel.TracerProvider(), a.tel.MeterProvider(),
		telemetry.RunInfo{Agent: a.Spec.Name, Tools: a.toolNames}, a.topts...)
	req.Observer = telemetry.Tee(span, req.Observer)
	ended := false
	defer func() {
		if !ended {
			span.End(nil, errors.New("the run panicked"))
		}
	}()
	res, err := a.Agent.Resume(ctx, req)
	ended = true
	span.End(res, err)
	return res, err
}

// buildModels builds the agent's model and, where the spec names others, the
// judge's and the classifier's.
func (a *Agent) buildModels(ropts *runtime.Options, dir string, lookup func(string) (string, bool), record bool, shared model.Model) error {
	s := a.Spec
	var err error
	if ropts.Model = shared; ropts.Model == nil {
		if ropts.Model, err = newModel(s.Model, dir, lookup); err != nil {
			return err
		}
	}
	if s.Judge != nil && s.Judge.Model != nil {
		if ropts.JudgeModel, err = newModel(mergeModel(s.Model, *s.Judge.Model), dir, lookup); err != nil {
			return fmt.Errorf("judge model: %w", err)
		}
	}
	if s.Routing.Model != nil {
		if ropts.RouterModel, err = newModel(mergeModel(s.Model, *s.Routing.Model), dir, lookup); err != nil {
			return fmt.Errorf("routing model: %w", err)
		}
	}
	if record {
		if a.recorder == nil {
			a.recorder = &offline.Recorder{}
		}
		models := []*model.Model{&ropts.JudgeModel, &ropts.RouterModel}
		if shared == nil { // a shared model records already
			models = append(models, &ropts.Model)
		}
		for _, m := range models {
			if *m != nil {
				*m = a.recorder.Wrap(*m)
			}
		}
	}
	return nil
}

// startMCP connects the spec's MCP servers and offers their allowed tools.
func (a *Agent) startMCP(ctx context.Context, ropts *runtime.Options, dir string, audit func(mcp.AuditRecord)) error {
	if len(a.Spec.MCPServers) == 0 {
		return nil
	}
	mgr, err := mcp.Start(ctx, a.Spec.MCPServers, mcp.Options{Dir: dir, Audit: audit})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, mgr.Close) // stops every server process
	mgr.Register(ropts.Tools)
	ropts.External = mgr.Undeclared(a.Spec.Tools)
	return nil
}

// Close releases what the agent opened — MCP servers, the store — in the reverse
// order of opening. It may be called more than once.
func (a *Agent) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

// SaveRecording writes the models' answers so far as a script that replays the run
// (--model script:FILE). It needs Options.Record.
func (a *Agent) SaveRecording(path string) error {
	if a.recorder == nil {
		return errors.New("the agent was not assembled with Options.Record")
	}
	return a.recorder.Save(path)
}

// CheckIntent refuses an intent the spec does not declare, suggesting the closest.
func CheckIntent(s *spec.Spec, name string) error {
	if name == "" {
		return nil
	}
	var names []string
	for _, in := range s.Intents {
		if in.Name == name {
			return nil
		}
		names = append(names, in.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("intent %s: the spec declares no intents", name)
	}
	hint := ""
	if c := spec.Closest(name, names); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	return fmt.Errorf("intent %s: no such intent%s; the spec declares %s", name, hint, strings.Join(names, ", "))
}

// User builds the run context's user from an id and key=value attributes, which
// the spec must declare under context.user. Tools bind these values where the model
// cannot change them, so values no tool could use safely are refused here, at the
// edge: an id that is empty, "." or "..", or holds "/" or a control character (see
// checkUserID), and an attribute value with a control character or, for an
// attribute an http tool renders into its URL, one that would make a path segment
// empty, "." or "..".
func User(s *spec.Spec, id string, attrs []string) (tool.User, error) {
	declared := s.Context.User
	u := tool.User{ID: id, Attributes: map[string]string{}}
	if err := checkUserID(id); err != nil {
		return u, err
	}
	inURL := urlAttributes(s)
	for _, kv := range attrs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return u, fmt.Errorf("%q: want key=value", kv)
		}
		if !slices.Contains(declared, k) {
			return u, fmt.Errorf("%s: the spec declares no user attribute %q (context.user: %s)", kv, k, strings.Join(declared, ", "))
		}
		if strings.ContainsFunc(v, unicode.IsControl) {
			return u, fmt.Errorf("%q: the value of %s contains a control character", kv, k)
		}
		if inURL[k] {
			if err := kinds.CheckPathValue(v); err != nil {
				return u, fmt.Errorf("%q: user.%s goes into an http tool's URL, and %v", kv, k, err)
			}
		}
		u.Attributes[k] = v
	}
	return u, nil
}

// UserIDError is a user id that User refuses.
type UserIDError struct {
	ID     string
	Reason string
}

func (e *UserIDError) Error() string { return fmt.Sprintf("user id %q %s", e.ID, e.Reason) }

// checkUserID refuses ids that cannot name a user everywhere tools put them: in a
// URL's path (where "", "." and ".." are steps, not names, also once decoded, like
// "%2e%2e"), in a header or a program's environment (control characters).
func checkUserID(id string) error {
	reason := ""
	switch {
	case id == "":
		reason = "is empty"
	case id == "." || id == "..":
		reason = `is not allowed: "." and ".." are steps in a URL's path, not names`
	case strings.Contains(id, "/"):
		reason = `is not allowed: it contains "/"`
	case strings.ContainsFunc(id, unicode.IsControl):
		reason = "is not allowed: it contains a control character"
	default:
		if err := kinds.CheckPathValue(id); err != nil {
			reason = "is not allowed: " + err.Error()
		}
	}
	if reason == "" {
		return nil
	}
	return &UserIDError{ID: id, Reason: reason}
}

// urlRef finds user.NAME and args.NAME in a template's source.
var urlRef = regexp.MustCompile(`\b(user|args)\.([A-Za-z_][A-Za-z0-9_]*)`)

// urlAttributes lists the user attributes that a template a tool kind declares
// InPath (an http tool's URL) renders, directly or through a bound parameter. It
// reads the templates' text, so a computed reference (user["tier"]) escapes it; the
// http tool still refuses such a value when a call would put it into a path.
func urlAttributes(s *spec.Spec) map[string]bool {
	out := map[string]bool{}
	for i := range s.Tools {
		t := &s.Tools[i]
		k := t.Config()
		if k == nil {
			continue
		}
		for _, r := range k.Templates() {
			if !r.InPath || r.Template == nil {
				continue
			}
			for _, m := range urlRef.FindAllStringSubmatch(r.Template.Source, -1) {
				ref := m[1] + "." + m[2]
				if m[1] == "args" {
					ref = t.Bind[m[2]]
				}
				if attr, ok := strings.CutPrefix(ref, "user."); ok && attr != "id" {
					out[attr] = true
				}
			}
		}
	}
	return out
}

// Registry is every tool kind this build of agentrun knows. Declared mcp tools
// resolve to a stand-in here (validate, explain); Build replaces them with the
// connected servers' tools.
func Registry() tool.Registry {
	r := tool.Registry{}
	builtin.Register(r)
	kinds.Register(r)
	r["mcp"] = func(t *spec.Tool, _ string) (tool.Tool, error) { return unconnected{t.MCP.Server}, nil }
	return r
}

// unconnected stands for an MCP tool whose server is not connected (validate,
// explain, graph, tests without the server): calling it says so.
type unconnected struct{ server string }

func (u unconnected) Call(context.Context, tool.Input) (string, error) {
	return "", fmt.Errorf("MCP server %s is not connected", u.server)
}

// missingRequirements lists what the spec's skills need and this machine lacks.
func missingRequirements(s *spec.Spec, lookup func(string) (string, bool)) []string {
	var out []string
	for _, ref := range s.Skills {
		if ref.Pack == nil {
			continue
		}
		for _, m := range ref.Pack.Missing(lookup) {
			out = append(out, fmt.Sprintf("skill %s needs %s", ref.Pack.Name, m))
		}
	}
	return out
}
