package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/builtin"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/kinds"
	"github.com/agentrun/agentrun/runtime/mcp"
	"github.com/agentrun/agentrun/runtime/offline"
	"github.com/agentrun/agentrun/runtime/openai"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

// Exit codes of exec: a run stopped by a guard or a fault still printed an answer
// (the fallback), but scripts need to tell it from a completed one.
const (
	exitStopped = 3
)

type execOptions struct {
	quiet, asJSON, stream       bool
	trace, store, record, audit string
	user, conversation          string
	intent                      string
	set                         []string
	model                       string
}

func newExecCommand() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec SPEC QUESTION",
		Short: "Run an agent once",
		Long: "Run an agent on one question (\"-\" reads it from stdin). Progress goes to stderr, the\n" +
			"answer to stdout. Exit status: 0 completed, 3 stopped by a guard or a fault (the\n" +
			"spec's fallback message is printed), 1 error, 2 usage error.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd, args[0], args[1], o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress on stderr")
	f.BoolVar(&o.asJSON, "json", false, "print the whole result as JSON")
	f.BoolVar(&o.stream, "stream", false, "stream the model's text as it arrives (also set by model.stream)")
	f.StringVar(&o.trace, "trace", "", "write every event as JSON lines to `FILE`")
	f.StringVar(&o.user, "user", "cli-user", "the user's id (bound into tools, never shown to the model)")
	f.StringVar(&o.conversation, "conversation", "", "the conversation's id")
	f.StringVar(&o.intent, "intent", "", "a pre-recognised intent")
	f.StringArrayVar(&o.set, "set", nil, "a user attribute, `key=value` (repeatable)")
	f.StringVar(&o.model, "model", "", "override the model: test, script:FILE, openai[:NAME]")
	f.StringVar(&o.audit, "audit", "", "write every MCP tool call (server, tool, arguments, user, outcome) as JSON lines to `FILE`")
	f.StringVar(&o.record, "record", "", "save the models' answers as a script `FILE` to replay with --model script:FILE")
	f.StringVar(&o.store, "store", "", "the memory store's URL (default: AGENTRUN_STORE, memory.url, "+DefaultStoreURL+")")
	return cmd
}

func runExec(cmd *cobra.Command, specPath, question string, o execOptions) error {
	errOut := cmd.ErrOrStderr()
	if question == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return err
		}
		question = strings.TrimSpace(string(b))
	}
	if strings.TrimSpace(question) == "" {
		return errors.New("the question is empty")
	}
	loader, err := newLoader()
	if err != nil {
		return err
	}
	res := loader.LoadFile(specPath)
	if res.ReadErr != nil {
		return res.ReadErr
	}
	if res.Diagnostics.HasErrors() {
		fmt.Fprint(errOut, formatDiagnostics(onlyErrors(res.Diagnostics)))
		return exitError{1}
	}
	s := res.Spec
	if missing := missingRequirements(s); len(missing) > 0 {
		fmt.Fprintf(errOut, "agentrun: cannot run %s: %s\n", s.Name, strings.Join(missing, "; "))
		return exitError{1}
	}
	if err := overrideModel(&s.Model, o.model); err != nil {
		return err
	}
	user, err := userFromFlags(o.user, o.set, s.Context.User)
	if err != nil {
		return err
	}
	model, err := newModel(s.Model, filepath.Dir(specPath))
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return exitError{1}
	}
	if err := checkIntent(s, o.intent); err != nil {
		return err
	}
	opts, err := compileOptions(s, model, filepath.Dir(specPath))
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return exitError{1}
	}
	if len(s.MCPServers) > 0 {
		mopts := mcp.Options{Dir: filepath.Dir(specPath)}
		if o.audit != "" {
			f, err := os.Create(o.audit)
			if err != nil {
				return err
			}
			defer f.Close()
			audit := &traceWriter{enc: json.NewEncoder(f)}
			mopts.Audit = func(r mcp.AuditRecord) { audit.write(r) }
		}
		mgr, err := mcp.Start(cmd.Context(), s.MCPServers, mopts)
		if err != nil {
			fmt.Fprintf(errOut, "agentrun: %v\n", err)
			return exitError{1}
		}
		defer mgr.Close() // stops every server process, also after Ctrl-C
		mgr.Register(opts.Tools)
		opts.External = mgr.Tools()
	}
	if needsStore(s, o.conversation) {
		url, err := storeURL(o.store, s.Memory)
		if err != nil {
			return err
		}
		if opts.Store, err = openStore(url, s.Memory.TTL.Duration); err != nil {
			fmt.Fprintf(errOut, "agentrun: memory store: %v\n", err)
			return exitError{1}
		}
		defer opts.Store.Close()
	}
	var recorder *offline.Recorder
	if o.record != "" {
		recorder = &offline.Recorder{}
		opts.Model = recorder.Wrap(opts.Model)
		for _, m := range []*runtime.Model{&opts.JudgeModel, &opts.RouterModel} {
			if *m != nil {
				*m = recorder.Wrap(*m)
			}
		}
	}
	agent, diags := runtime.Compile(s, opts)
	if diags.HasErrors() {
		fmt.Fprint(errOut, formatDiagnostics(diags))
		return exitError{1}
	}

	var observers multiObserver
	if !o.quiet {
		observers = append(observers, &progress{w: errOut, start: time.Now()})
		fmt.Fprintf(errOut, "agentrun · %s · %s · %d tools\n", agent.Name(), modelLabel(s.Model), len(agent.Tools()))
	}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			return err
		}
		defer f.Close()
		observers = append(observers, &traceWriter{enc: json.NewEncoder(f)})
	}
	req := runtime.Request{Input: question, User: user, Conversation: o.conversation, Intent: o.intent}
	if len(observers) > 0 {
		req.Observer = observers
	}
	if (o.stream || boolValue(s.Model.Stream)) && !o.quiet {
		req.OnDelta = func(text string) { fmt.Fprint(errOut, text) }
	}
	result, err := agent.Run(cmd.Context(), req)
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return exitError{1}
	}
	if recorder != nil {
		if err := recorder.Save(o.record); err != nil {
			fmt.Fprintf(errOut, "agentrun: --record: %v\n", err)
			return exitError{1}
		}
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(result); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out, result.Answer)
	}
	// After the answer is out: extraction never delays it.
	if err := agent.ExtractFacts(cmd.Context(), req, result); err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
	}
	if !result.Completed() {
		return exitError{exitStopped}
	}
	return nil
}

// compileOptions builds the models a spec names — the agent's, and the judge's and
// the classifier's where they differ — and the tool registry.
func compileOptions(s *spec.Spec, model runtime.Model, specDir string) (runtime.Options, error) {
	opts := runtime.Options{Tools: newRegistry(), Model: model}
	var err error
	if s.Judge != nil && s.Judge.Model != nil {
		if opts.JudgeModel, err = newModel(mergeModel(s.Model, *s.Judge.Model), specDir); err != nil {
			return opts, fmt.Errorf("judge model: %v", err)
		}
	}
	if s.Routing.Model != nil {
		if opts.RouterModel, err = newModel(mergeModel(s.Model, *s.Routing.Model), specDir); err != nil {
			return opts, fmt.Errorf("routing model: %v", err)
		}
	}
	return opts, nil
}

// checkIntent refuses an --intent the spec does not declare.
func checkIntent(s *spec.Spec, name string) error {
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
		return fmt.Errorf("--intent %s: the spec declares no intents", name)
	}
	hint := ""
	if c := spec.Closest(name, names); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	return fmt.Errorf("--intent %s: no such intent%s; the spec declares %s", name, hint, strings.Join(names, ", "))
}

// missingRequirements lists what the spec's skills need and this machine lacks.
func missingRequirements(s *spec.Spec) []string {
	var out []string
	for _, ref := range s.Skills {
		if ref.Pack == nil {
			continue
		}
		for _, m := range ref.Pack.Missing(os.LookupEnv) {
			out = append(out, fmt.Sprintf("skill %s needs %s", ref.Pack.Name, m))
		}
	}
	return out
}

// newRegistry is every tool kind this build of agentrun knows. Declared mcp tools
// resolve statically here (validate, explain); exec replaces the kind with the
// connected servers' tools.
func newRegistry() runtime.Registry {
	r := runtime.Registry{}
	builtin.Register(r)
	kinds.Register(r)
	r["mcp"] = func(t *spec.Tool, _ string) (runtime.Tool, error) { return unconnected{t.MCP.Server}, nil }
	return r
}

// unconnected stands for an MCP tool whose server is not connected (validate,
// explain, graph, tests without the server): calling it says so.
type unconnected struct{ server string }

func (u unconnected) Call(context.Context, runtime.ToolInput) (string, error) {
	return "", fmt.Errorf("MCP server %s is not connected", u.server)
}

// newModel builds the provider a spec's model names. A script path in the spec is
// relative to the spec's directory.
func newModel(m spec.Model, specDir string) (runtime.Model, error) {
	switch m.Provider {
	case "", "openai":
		return openai.New(m, os.LookupEnv)
	case "test":
		return offline.Test{}, nil
	case "script":
		if m.Script == "" {
			return nil, errors.New("the script provider needs a script: set model.script or use --model script:FILE")
		}
		path := m.Script
		if !filepath.IsAbs(path) {
			path = filepath.Join(specDir, path)
		}
		return offline.LoadScript(path)
	}
	return nil, fmt.Errorf("unknown model provider %q", m.Provider)
}

// mergeModel is the agent's model with what an override (judge.model,
// routing.model) sets on top: a cheaper model usually differs only by name.
func mergeModel(base, over spec.Model) spec.Model {
	m := base
	if over.Provider != "" {
		m.Provider = over.Provider
	}
	if over.Name != "" {
		m.Name = over.Name
	}
	if over.BaseURL != "" {
		m.BaseURL = over.BaseURL
	}
	if over.APIKeyEnv != "" {
		m.APIKeyEnv = over.APIKeyEnv
	}
	if over.Temperature != nil {
		m.Temperature = over.Temperature
	}
	if over.MaxTokens != 0 {
		m.MaxTokens = over.MaxTokens
	}
	if over.Timeout.Duration != 0 {
		m.Timeout = over.Timeout
	}
	if over.Retries != nil {
		m.Retries = over.Retries
	}
	if over.Script != "" {
		m.Script = over.Script
	}
	m.Stream = nil // a judge or a classifier answers in JSON: nothing to show live
	return m
}

// overrideModel applies --model: test, script:FILE (relative to the working
// directory) or openai[:NAME].
func overrideModel(m *spec.Model, flag string) error {
	if flag == "" {
		return nil
	}
	provider, arg, _ := strings.Cut(flag, ":")
	switch provider {
	case "test":
		m.Provider = "test"
	case "script":
		if arg == "" {
			return errors.New("--model script needs a file: --model script:turns.yaml")
		}
		abs, err := filepath.Abs(arg)
		if err != nil {
			return err
		}
		m.Provider, m.Script = "script", abs
	case "openai":
		m.Provider = "openai"
		if arg != "" {
			m.Name = arg
		}
	default:
		return fmt.Errorf("unknown --model %q: use test, script:FILE or openai[:NAME]", flag)
	}
	return nil
}

func userFromFlags(id string, set []string, declared []string) (runtime.User, error) {
	u := runtime.User{ID: id, Attributes: map[string]string{}}
	for _, kv := range set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return u, fmt.Errorf("--set %q: want key=value", kv)
		}
		if !slices.Contains(declared, k) {
			return u, fmt.Errorf("--set %s: the spec declares no user attribute %q (context.user: %s)", kv, k, strings.Join(declared, ", "))
		}
		u.Attributes[k] = v
	}
	return u, nil
}

func onlyErrors(ds spec.Diagnostics) spec.Diagnostics {
	var out spec.Diagnostics
	for _, d := range ds {
		if d.Severity == spec.Error {
			out = append(out, d)
		}
	}
	return out
}

func modelLabel(m spec.Model) string {
	switch m.Provider {
	case "test":
		return "test model (offline)"
	case "script":
		return "script " + filepath.Base(m.Script)
	}
	name := m.Name
	if name == "" {
		name, _ = os.LookupEnv("LLM_MODEL_NAME")
	}
	return "model " + name
}

func boolValue(b *bool) bool { return b != nil && *b }

// multiObserver sends each event to several observers.
type multiObserver []runtime.Observer

func (m multiObserver) Observe(e runtime.Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

// traceWriter writes events as JSON lines. Events carry no secrets by construction.
type traceWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (t *traceWriter) Observe(e runtime.Event) { t.write(e) }

func (t *traceWriter) write(v any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.enc.Encode(v)
}

// progress prints a run's steps for a person watching the terminal.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *progress) Observe(e runtime.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case runtime.EventModelRequest:
		if e.Purpose == runtime.PurposeClassifier {
			fmt.Fprintf(p.w, "[%d] → classifier\n", e.Turn)
			return
		}
		fmt.Fprintf(p.w, "[%d] → model: %d messages, %d tools\n", e.Turn, e.Messages, e.Tools)
	case runtime.EventModelResponse:
		what := "answer"
		if e.Calls > 0 {
			what = fmt.Sprintf("%d tool call(s)", e.Calls)
		}
		fmt.Fprintf(p.w, "[%d] ← %s · %d tokens · %s\n", e.Turn, what, e.Usage.TotalTokens, round(e.Duration))
	case runtime.EventToolCall:
		fmt.Fprintf(p.w, "[%d]   ⚙ %s %s\n", e.Turn, e.Tool, clip(e.Args, 120))
	case runtime.EventToolResult:
		mark := "✓"
		if e.Error != "" {
			mark = "✗"
		}
		fmt.Fprintf(p.w, "[%d]   %s %s · %s · %s\n", e.Turn, mark, e.Tool, round(e.Duration), clip(e.Result, 100))
	case runtime.EventToolRefused:
		by := ""
		if e.Refusal == runtime.RefusedAccept {
			by = " by accept"
		}
		fmt.Fprintf(p.w, "[%d]   ✗ %s refused%s: %s\n", e.Turn, e.Tool, by, clip(e.Error, 160))
	case runtime.EventBindDiscarded:
		fmt.Fprintf(p.w, "[%d]   ! %s: %s\n", e.Turn, e.Tool, e.Message)
	case runtime.EventGuard:
		fmt.Fprintf(p.w, "[%d] ! guard %s %s %s\n", e.Turn, e.Guard, e.Tool, e.Message)
	case runtime.EventIntent:
		fmt.Fprintf(p.w, "[%d] intent %s · by %s", e.Turn, cmp.Or(e.Intent, "(none)"), e.RoutedBy)
		if e.Message != "" {
			fmt.Fprintf(p.w, " · %s", e.Message)
		}
		fmt.Fprintln(p.w)
	case runtime.EventMemory:
		switch {
		case e.Error != "":
			fmt.Fprintf(p.w, "[%d] ! memory: %s (%s)\n", e.Turn, e.Message, e.Error)
		case e.Level != "":
			fmt.Fprintf(p.w, "[%d] memory %s · %d facts\n", e.Turn, e.Level, e.Count)
		default:
			fmt.Fprintf(p.w, "[%d] memory %s\n", e.Turn, e.Message)
		}
	case runtime.EventVerdict:
		if *e.Passed {
			fmt.Fprintf(p.w, "[%d] ✓ judge passed the draft\n", e.Turn)
		} else {
			fmt.Fprintf(p.w, "[%d] ✗ judge rejected the draft (%s): %s\n", e.Turn, e.Verdict, clip(e.Missing, 160))
		}
	case runtime.EventFilter:
		fmt.Fprintf(p.w, "[%d] ! filter %s: %s: %s", e.Turn, e.Filter, e.Stage, cmp.Or(string(e.Action), e.Message))
		if e.Error != "" {
			fmt.Fprintf(p.w, " (%s)", e.Error)
		}
		fmt.Fprintln(p.w)
	case runtime.EventCollect:
		if e.Error != "" {
			fmt.Fprintf(p.w, "[%d]   ! collect %s from %s failed: %s\n", e.Turn, e.Entity, e.Tool, e.Error)
		} else if e.Count > 0 {
			fmt.Fprintf(p.w, "[%d]   + %d %s revealed by %s\n", e.Turn, e.Count, e.Entity, e.Tool)
		}
	case runtime.EventStop:
		tokens := int64(0)
		if e.Usage != nil {
			tokens = e.Usage.TotalTokens
		}
		fmt.Fprintf(p.w, "■ %s · %d model calls · %d tokens · %s", e.Stop, e.Turn, tokens, round(time.Since(p.start)))
		if e.Message != "" {
			fmt.Fprintf(p.w, " · %s", e.Message)
		}
		fmt.Fprintln(p.w)
	}
}

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	case d > time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
