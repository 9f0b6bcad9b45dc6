package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/graph"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/attach"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool/mcp"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

// Exit codes of exec and resume: a run stopped by a guard or a fault still printed
// an answer (the fallback), but scripts need to tell it from a completed one; a run
// that waits for a person's approval has no answer yet.
const (
	exitStopped          = 3
	exitAwaitingApproval = 4
)

type execOptions struct {
	quiet, asJSON, stream       bool
	trace, store, record, audit string
	user, conversation          string
	intent                      string
	set                         []string
	attach                      []string
	model                       string
	// ask: ask on the terminal about calls that need approval; askSet says --ask
	// was given (else exec asks when stdin and stderr are terminals).
	ask, askSet bool
	temporal    temporalFlags
}

func newExecCommand() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec SPEC QUESTION",
		Short: "Run an agent once",
		Long: "Run an agent on one question (\"-\" reads it from stdin). Progress goes to stderr, the\n" +
			"answer to stdout. Exit status: 0 completed, 3 stopped by a guard or a fault (the\n" +
			"spec's fallback message is printed and the reason on stderr), 4 awaiting approval\n" +
			"(the run is paused in the store; stderr says how to resume it), 1 error, 2 usage error.\n\n" +
			"A tool call that needs a person's approval (the tool's approval setting) is asked\n" +
			"about on the terminal when stdin and stderr are one, or with --ask: answer y or n,\n" +
			"optionally followed by a reason. Otherwise the run pauses (exit 4) and waits in the\n" +
			"store until `agentrun resume RUN_ID --approve CALL_ID` (or --reject) decides, from\n" +
			"any process; `agentrun runs list` shows the paused runs.\n\n" +
			"--attach sends images (png, jpeg, gif, webp), PDFs and text files with the question; a\n" +
			"file's type is read from its content and must match its name, and an http(s) URL goes\n" +
			"to the provider as a URL, for it to fetch. A missing, oversized or unsupported file, or\n" +
			"one the agent's model cannot take, is an error (exit 1) before any model call.\n\n" +
			"The model's server comes from the spec's model section; what it leaves out comes from\n" +
			"the environment: LLM_BASE_URL or OPENAI_BASE_URL, LLM_API_KEY or OPENAI_API_KEY (unless\n" +
			"the spec names its own variable with api_key_env), LLM_MODEL_NAME. AGENTRUN_STORE names\n" +
			"the memory store unless --store does.\n\n" +
			"With --engine temporal the run is a Temporal workflow that `agentrun worker` runs (the\n" +
			"worker's model, tools and store; this process only starts it and shows its progress):\n" +
			"it survives the loss of the worker running it. A run that waits for approval keeps\n" +
			"waiting as a workflow; `agentrun resume --engine temporal` decides and follows it.",
		Example: "  agentrun exec --model test examples/agents/code-assistant.yaml \"What is 2*(3+4)?\"\n" +
			"  agentrun exec --engine temporal --temporal 127.0.0.1:7233 shop.yaml \"Where is my order?\"\n" +
			"  echo \"Where is my order?\" | agentrun exec --user u-42 --conversation c-1 shop.yaml -\n" +
			"  agentrun exec --ask --user u-42 shop.yaml \"Cancel order A2002\"\n" +
			"  agentrun exec shop.yaml \"What is wrong with this bill?\" --attach bill.pdf --attach photo.png",
		Args: argsOf(2, "a spec and a question"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.askSet = cmd.Flags().Changed("ask")
			return runExec(cmd, args[0], args[1], o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.ask, "ask", false, "ask about tool calls that need approval on the terminal (default: when stdin and stderr are terminals; --ask=false never asks)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress on stderr")
	f.BoolVar(&o.asJSON, "json", false, "print the whole result as JSON")
	f.BoolVar(&o.stream, "stream", false, "stream the model's text as it arrives (also set by model.stream)")
	f.StringVar(&o.trace, "trace", "", "write every event as JSON lines to `FILE`")
	f.StringVar(&o.user, "user", "cli-user", "the user's id (bound into tools, never shown to the model)")
	f.StringVar(&o.conversation, "conversation", "", "the conversation's id")
	f.StringVar(&o.intent, "intent", "", "a pre-recognised intent")
	f.StringArrayVar(&o.set, "set", nil, "a user attribute, `key=value` (repeatable)")
	f.StringArrayVar(&o.attach, "attach", nil, "send an image or a document with the question: a `FILE|URL` (repeatable; png, jpeg, gif, webp, pdf, text; "+
		attach.Size(attach.DefaultMaxPart)+" each, "+attach.Size(attach.DefaultMaxTotal)+" and "+strconv.Itoa(attach.DefaultMaxCount)+" files in all)")
	f.StringVar(&o.model, "model", "", "override the model: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	f.StringVar(&o.audit, "audit", "", "write every MCP tool call (server, tool, arguments, user, outcome) as JSON lines to `FILE`")
	f.StringVar(&o.record, "record", "", "save the models' answers as a script `FILE` to replay with --model script:FILE")
	f.StringVar(&o.store, "store", "", "the memory store's URL (default: AGENTRUN_STORE, memory.url, "+agentrun.DefaultStoreURL+")")
	o.temporal.add(f, true)
	return cmd
}

// argsOf is cobra.ExactArgs(n) with an error that says what the command takes, in
// words, and then its usage, so that a wrong call shows how to make a right one.
func argsOf(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %s, got %d argument(s)\n\n%s", cmd.Name(), what, len(args), cmd.UsageString())
		}
		return nil
	}
}

// telemetryLogger is where telemetry's warnings go: stderr, even under -q, since
// an exporter that fails (a collector that is down) is an error the user must see;
// telemetry logs only the first at warning level, so it is one line.
func telemetryLogger(errOut io.Writer, quiet bool) *slog.Logger {
	level := slog.LevelInfo
	if quiet {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level}))
}

// liveAnswer shows a streamed answer's text on stderr as it arrives, and keeps
// what it showed. -q hides the text, but the request stays streamed: quiet never
// changes what goes over the wire.
type liveAnswer struct {
	w     io.Writer
	shown strings.Builder
}

// showDeltas is the live answer of a run, nil when the run is not streamed.
func showDeltas(errOut io.Writer, stream, quiet bool) *liveAnswer {
	switch {
	case !stream:
		return nil
	case quiet:
		return &liveAnswer{w: io.Discard}
	}
	return &liveAnswer{w: errOut}
}

// onDelta is the run's Request.OnDelta: nil for no live answer.
func (l *liveAnswer) onDelta() func(string) {
	if l == nil {
		return nil
	}
	return func(text string) {
		fmt.Fprint(l.w, text)
		l.shown.WriteString(text)
	}
}

// onScreen reports whether answer is on the terminal that out writes to
// already: shown live on errOut, the same terminal. Printing it again would
// show it twice.
func (l *liveAnswer) onScreen(out, errOut io.Writer, answer string) bool {
	return l != nil && l.w == errOut && answer != "" && isTerminal(out) && isTerminal(errOut) &&
		strings.HasSuffix(strings.TrimSpace(l.shown.String()), strings.TrimSpace(answer))
}

func runExec(cmd *cobra.Command, specPath, question string, o execOptions) error {
	errOut := cmd.ErrOrStderr()
	question, err := readQuestion(cmd.InOrStdin(), question)
	if err != nil {
		return err
	}
	if err := checkModelFlag(o.model); err != nil {
		return err
	}
	if err := o.temporal.check(); err != nil {
		return err
	}
	s, err := loadSpec(cmd, specPath)
	if err != nil {
		return err
	}
	req, err := execRequest(s, question, o) // usage errors before anything is opened
	if err != nil {
		return err
	}
	if o.temporal.onTemporal() {
		return execOnTemporal(cmd, s, req, o)
	}
	if err := checkModelKey(errOut, s.Model, o.model, o.quiet); err != nil {
		return err
	}
	opts := agentrun.Options{Model: o.model, Store: o.store, Remember: o.conversation != "", Record: o.record != ""}
	tel, err := setupTelemetry(cmd.Context(), &opts, telemetryLogger(errOut, o.quiet))
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	if !o.quiet {
		// A collection never indexed, or whose sources changed, is indexed before
		// the run: say so, since it can take a while and spends embedding calls.
		opts.OnIndex = func(r agentrun.CollectionReport) {
			writeWarnings(errOut, filepath.Dir(specPath), r.Warnings)
			fmt.Fprintf(errOut, "indexed %s: %s\n", r.Collection, r.Summary())
		}
	}
	if o.audit != "" && len(s.MCPServers) > 0 {
		f, err := os.Create(o.audit)
		if err != nil {
			return err
		}
		defer f.Close()
		audit := &traceWriter{enc: json.NewEncoder(f)}
		opts.Audit = func(r mcp.AuditRecord) { audit.write(r) }
	}
	agent, err := buildAgent(cmd, s, opts)
	if err != nil {
		return err
	}
	defer agent.Close() // stops every MCP server process, also after Ctrl-C
	closeTrace, err := observeExec(errOut, agent, o, &req)
	if err != nil {
		return err
	}
	defer closeTrace()
	live := showDeltas(errOut, o.stream || boolValue(agent.Spec.Model.Stream), o.quiet)
	req.OnDelta = live.onDelta()
	storeURL, _ := agentrun.StoreURL(o.store, s.Memory, s.Pos.File, nil)
	stdin, _ := cmd.InOrStdin().(*os.File)
	stdinTerminal := stdin != nil && isTerminal(stdin)
	asking := o.ask
	if !o.askSet {
		asking = stdinTerminal && isTerminal(errOut)
	}
	if !asking && isProcessLocal(storeURL) {
		// A run paused in a process-local store (memory:) could never be resumed:
		// the store ends with this process and nobody is asked. Such calls are
		// refused instead, and the model is told why.
		req.Approvals = runtime.ApprovalsRefuse
	}
	decider := runtime.Decider{ID: req.User.ID, Approver: true}
	result, err := agent.Run(cmd.Context(), req)
	if err == nil && asking && result.Stop == runtime.StopAwaitingApproval {
		ask := &asker{agent: agent, decider: decider, in: cmd.InOrStdin(), errOut: errOut,
			observer: req.Observer, onDelta: req.OnDelta, echo: !stdinTerminal}
		result, err = ask.untilDecided(cmd.Context(), result)
		ask.close()
	}
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return exitError{1}
	}
	if o.record != "" {
		if err := agent.SaveRecording(o.record); err != nil {
			fmt.Fprintf(errOut, "agentrun: --record: %v\n", err)
			return exitError{1}
		}
	}
	if result.Stop == runtime.StopAwaitingApproval && isProcessLocal(storeURL) {
		fmt.Fprintf(errOut, "agentrun: the store %s ends with this process: nothing can resume the paused run\n", storeURL)
	}
	return finishResult(cmd, agent, req, result, resultOptions{asJSON: o.asJSON, quiet: o.quiet,
		resume: resumeFlags(o.store, s), live: live})
}

// execOnTemporal starts the run as a workflow and shows it as exec shows a
// run: the worker's model, tools and store run it, so only the spec's name and
// version are needed here (the worker refuses another version).
func execOnTemporal(cmd *cobra.Command, s *spec.Spec, req runtime.Request, o execOptions) error {
	errOut := cmd.ErrOrStderr()
	if o.model != "" || o.record != "" || o.audit != "" {
		return errors.New("--model, --record and --audit apply to the worker's runs: give them to `agentrun worker`")
	}
	agent, err := buildAgent(cmd, s, agentrun.Options{Inspect: true, NoModel: true})
	if err != nil {
		return err
	}
	defer agent.Close()
	closeTrace, err := observeExec(errOut, agent, o, &req)
	if err != nil {
		return err
	}
	defer closeTrace()
	blobs, _ := agentrun.StoreURL(o.store, s.Memory, s.Pos.File, nil) // the workers' store, as they find it
	result, err := runOnTemporal(cmd, o.temporal, blobs, agent, req)
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return exitError{1}
	}
	return finishResult(cmd, nil, req, result, resultOptions{asJSON: o.asJSON, quiet: o.quiet,
		resume: append(resumeFlags(o.store, s), o.temporal.resumeFlags()...)})
}

// resultOptions say how finishResult prints a run's result.
type resultOptions struct {
	asJSON, quiet bool
	resume        []string    // the flags a printed resume command needs to find the store
	live          *liveAnswer // the answer shown as it streamed, if it was
}

// finishResult prints a run's result as exec and resume do and returns the exit
// status: the answer (or the result as JSON) on stdout, then fact extraction; a
// paused run prints nothing but its JSON on stdout and, on stderr, the calls it
// waits on and the commands that decide them (exit 4); a stopped run says why (3).
func finishResult(cmd *cobra.Command, agent *agentrun.Agent, req runtime.Request, result *runtime.Result, o resultOptions) error {
	errOut := cmd.ErrOrStderr()
	if result.Stop == runtime.StopAwaitingApproval {
		if o.asJSON {
			if err := printResult(cmd.OutOrStdout(), result, true); err != nil {
				return err
			}
		}
		printPaused(errOut, result, o.resume)
		return exitError{exitAwaitingApproval}
	}
	if result.ModelConfigStatus != 0 {
		var model spec.Model // a run on Temporal: the worker's settings, not known here
		if agent != nil {
			model = agent.Spec.Model
		}
		return reportModelConfig(errOut, model, result.ModelConfigStatus, result.Detail)
	}
	if out := cmd.OutOrStdout(); !o.asJSON && o.live.onScreen(out, errOut, result.Answer) {
		fmt.Fprintln(out) // the answer is on the screen: only its line ends
	} else if err := printResult(out, result, o.asJSON); err != nil {
		return err
	}
	// After the answer is out: extraction never delays it. (A run on Temporal has
	// no agent here: its workflow extracted the facts.)
	if agent != nil {
		if err := agent.ExtractFacts(cmd.Context(), req, result); err != nil {
			fmt.Fprintf(errOut, "agentrun: %v\n", err)
		}
	}
	if !result.Completed() {
		if o.quiet { // progress would have said it; a stopped run is never silent
			fmt.Fprintf(errOut, "agentrun: stopped: %s: %s\n", result.Stop, result.Detail)
		}
		return exitError{exitStopped}
	}
	return nil
}

// checkModelFlag rejects a --model that names no provider: a usage error (exit 2),
// found before anything is opened.
func checkModelFlag(flag string) error {
	var scratch spec.Model
	return agentrun.OverrideModel(&scratch, flag)
}

// readQuestion takes the question from the argument, or from stdin for "-".
func readQuestion(in io.Reader, question string) (string, error) {
	if question == "-" {
		b, err := io.ReadAll(in)
		if err != nil {
			return "", err
		}
		question = strings.TrimSpace(string(b))
	}
	if strings.TrimSpace(question) == "" {
		return "", errors.New("the question is empty")
	}
	return question, nil
}

// loadSpec loads a spec for a command: one with errors prints its diagnostics
// (exit 1); an unreadable file is an I/O error (exit 2).
func loadSpec(cmd *cobra.Command, path string) (*spec.Spec, error) {
	s, err := agentrun.Load(path)
	var diags spec.Diagnostics
	var readErr *agentrun.ReadError
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &readErr):
		return nil, readErr.Err
	case errors.As(err, &diags):
		fmt.Fprint(cmd.ErrOrStderr(), formatDiagnostics(diags))
		return nil, exitError{1}
	}
	return nil, err
}

// buildAgent assembles a loaded spec's agent for a command; a failure prints its
// diagnostics or its reason (exit 1).
func buildAgent(cmd *cobra.Command, s *spec.Spec, opts agentrun.Options) (*agentrun.Agent, error) {
	agent, err := agentrun.Build(cmd.Context(), s, opts)
	var diags spec.Diagnostics
	switch {
	case err == nil:
		return agent, nil
	case errors.As(err, &diags):
		fmt.Fprint(cmd.ErrOrStderr(), formatDiagnostics(diags))
	default:
		fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: %v\n", err)
	}
	return nil, exitError{1}
}

// execRequest is the run's request from the flags: the question and the run context.
func execRequest(s *spec.Spec, question string, o execOptions) (runtime.Request, error) {
	if err := agentrun.CheckIntent(s, o.intent); err != nil {
		return runtime.Request{}, fmt.Errorf("--%w", err)
	}
	user, err := agentrun.User(s, o.user, o.set)
	var idErr *agentrun.UserIDError
	switch {
	case errors.As(err, &idErr):
		return runtime.Request{}, fmt.Errorf("--user: %w", err)
	case err != nil:
		return runtime.Request{}, fmt.Errorf("--set %w", err)
	}
	parts, err := attachments(o.attach)
	if err != nil {
		return runtime.Request{}, fmt.Errorf("--attach: %w", err)
	}
	return runtime.Request{Input: question, Parts: parts, User: user, Conversation: o.conversation, Intent: o.intent}, nil
}

// attachments reads the --attach arguments: every file read and checked, and the
// request's limits applied, before anything is opened or any model asked.
func attachments(args []string) ([]model.Part, error) {
	var parts []model.Part
	for _, a := range args {
		p, err := attach.Parse(a, attach.DefaultLimits)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, attach.DefaultLimits.Check(parts)
}

// execObservers are the progress printer and the trace file the flags ask for.
// observeExec gives the request exec's observers (progress, --trace), if any.
func observeExec(errOut io.Writer, agent *agentrun.Agent, o execOptions, req *runtime.Request) (func(), error) {
	observers, closeTrace, err := execObservers(errOut, agent, o)
	if err != nil {
		return nil, err
	}
	if len(observers) > 0 {
		req.Observer = observers
	}
	return closeTrace, nil
}

func execObservers(errOut io.Writer, agent *agentrun.Agent, o execOptions) (multiObserver, func(), error) {
	var observers multiObserver
	if !o.quiet {
		observers = append(observers, &progress{w: errOut, start: time.Now(), colour: useColour(isTerminal(errOut), os.Getenv("NO_COLOR"))})
		if agent != nil { // nil: a run on Temporal resumes on a worker
			where := modelLabel(agent.Spec.Model)
			if o.temporal.onTemporal() { // the worker's model answers, whatever this spec says
				where = "on Temporal, task queue " + o.temporal.queue
			}
			fmt.Fprintf(errOut, "agentrun · %s · %s · %d tools%s\n", agent.Name(), where, len(agent.Tools()), statePlaces(agent))
		}
	}
	if o.trace == "" {
		return observers, func() {}, nil
	}
	f, err := os.Create(o.trace)
	if err != nil {
		return nil, nil, err
	}
	return append(observers, &traceWriter{enc: json.NewEncoder(f)}), func() { f.Close() }, nil
}

func printResult(out io.Writer, result *runtime.Result, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(out, result.Answer)
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(result)
}

func modelLabel(m spec.Model) string {
	switch m.Provider {
	case spec.ProviderTest:
		return "test model (offline)"
	case spec.ProviderScript:
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
	mu     sync.Mutex
	w      io.Writer
	start  time.Time
	colour bool // see useColour
}

// Observe prints one event; a sub-run's events are indented under its parent's,
// one level per depth.
func (p *progress) Observe(e runtime.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Depth == 0 && !p.colour {
		p.print(p.w, e)
		return
	}
	var b strings.Builder
	p.print(&b, e)
	indent := ""
	if e.Depth > 0 {
		indent = strings.Repeat("    ", e.Depth-1) + "  │ "
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line == "" {
			continue
		}
		if p.colour {
			line = colourLine(line)
		}
		io.WriteString(p.w, indent+line)
	}
}

func (p *progress) print(w io.Writer, e runtime.Event) {
	if printer, ok := printers[e.Kind]; ok {
		printer(p, w, e)
	}
}

// eventPrinter prints one event of the kinds it is in printers for.
type eventPrinter func(p *progress, w io.Writer, e runtime.Event)

// printers is what progress prints for each kind of event. A kind missing here
// must be in silentKinds (TestEveryEventKindIsPrintedOrSilent).
var printers = map[runtime.EventKind]eventPrinter{
	runtime.EventAgent:             stateless(printFlow),
	runtime.EventPlan:              stateless(printFlow),
	runtime.EventStep:              stateless(printFlow),
	runtime.EventRemote:            stateless(printFlow),
	runtime.EventModelRequest:      stateless(printModel),
	runtime.EventModelResponse:     stateless(printModel),
	runtime.EventToolCall:          stateless(printTool),
	runtime.EventToolResult:        stateless(printTool),
	runtime.EventToolRefused:       stateless(printTool),
	runtime.EventBindDiscarded:     stateless(printTool),
	runtime.EventCollect:           stateless(printTool),
	runtime.EventApprovalRequested: stateless(printApproval),
	runtime.EventApprovalDecided:   stateless(printApproval),
	runtime.EventGuard:             stateless(printGuard),
	runtime.EventIntent:            stateless(printIntent),
	runtime.EventMemory:            stateless(printMemory),
	runtime.EventVerdict:           stateless(printVerdict),
	runtime.EventFilter:            stateless(printFilter),
	runtime.EventCache:             (*progress).cache,
	runtime.EventRetrieve:          stateless(printRetrieve),
	runtime.EventStop:              (*progress).printStop,
}

// silentKinds are the events progress deliberately does not print: the state
// machine's moves are for traces, the steps they lead to are printed; streamed
// text is shown as it comes (--stream), not as events.
var silentKinds = []runtime.EventKind{runtime.EventState, runtime.EventText}

// stateless is a printer that needs nothing of the progress it prints on.
func stateless(print func(io.Writer, runtime.Event)) eventPrinter {
	return func(_ *progress, w io.Writer, e runtime.Event) { print(w, e) }
}

func printGuard(w io.Writer, e runtime.Event) {
	fmt.Fprintf(w, "[%d] ! guard %s %s %s\n", e.Turn, e.Guard, e.Tool, e.Message)
}

func printIntent(w io.Writer, e runtime.Event) {
	fmt.Fprintf(w, "[%d] intent %s · by %s%s\n", e.Turn, cmp.Or(e.Intent, "(none)"), e.RoutedBy, suffix(" · ", e.Message))
}

func printVerdict(w io.Writer, e runtime.Event) {
	if *e.Passed {
		fmt.Fprintf(w, "[%d] ✓ judge passed the draft\n", e.Turn)
	} else {
		fmt.Fprintf(w, "[%d] ✗ judge rejected the draft (%s): %s\n", e.Turn, e.Verdict, clip(e.Missing, 160))
	}
}

func printFilter(w io.Writer, e runtime.Event) {
	fmt.Fprintf(w, "[%d] ! filter %s: %s: %s%s\n", e.Turn, e.Filter, e.Stage, cmp.Or(string(e.Action), e.Message), parenthesized(e.Error))
}

// suffix is sep+s, or nothing when s is empty.
func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// parenthesized is " (s)", or nothing when s is empty.
func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// printFlow prints what sub-agents, the plan and a workflow's steps do.
func printFlow(w io.Writer, e runtime.Event) {
	switch e.Kind {
	case runtime.EventAgent:
		if e.Stop == "" {
			fmt.Fprintf(w, "▶ agent %s: %s\n", e.Agent, clip(e.Message, 120))
		}
	case runtime.EventRemote:
		if r := e.Remote; r != nil {
			fmt.Fprintf(w, "[%d]   ↗ %s @ %s · task %s · %s\n", e.Turn, e.Tool, r.Host, r.Task, r.State)
		}
	case runtime.EventPlan:
		fmt.Fprintf(w, "[%d]   ☰ plan · %s\n", e.Turn, e.Message)
		for _, s := range e.Plan {
			fmt.Fprintf(w, "[%d]     %s %s\n", e.Turn, s.Status.Mark(), clip(s.Step, 100))
		}
	case runtime.EventStep:
		switch e.StepStatus {
		case runtime.StepStarted:
			fmt.Fprintf(w, "▸ step %s\n", e.Step)
		case runtime.StepOK:
			fmt.Fprintf(w, "✓ step %s · %s\n", e.Step, round(e.Duration))
		case runtime.StepSkipped:
			fmt.Fprintf(w, "· step %s skipped\n", e.Step)
		default:
			fmt.Fprintf(w, "✗ step %s %s · %s\n", e.Step, e.StepStatus, clip(e.Error, 160))
		}
	}
}

func printModel(w io.Writer, e runtime.Event) {
	if e.Kind == runtime.EventModelRequest {
		if e.Purpose == runtime.PurposeClassifier {
			fmt.Fprintf(w, "[%d] → classifier\n", e.Turn)
			return
		}
		fmt.Fprintf(w, "[%d] → model: %d messages, %d tools\n", e.Turn, e.Messages, e.Tools)
		return
	}
	what := "answer"
	if e.Calls > 0 {
		what = fmt.Sprintf("%d tool call(s)", e.Calls)
	}
	if e.Finish != "" {
		what += " (" + string(e.Finish) + ")"
	}
	fmt.Fprintf(w, "[%d] ← %s · %d tokens · %s\n", e.Turn, what, e.Usage.TotalTokens, round(e.Duration))
}

func printTool(w io.Writer, e runtime.Event) {
	switch e.Kind {
	case runtime.EventToolCall:
		fmt.Fprintf(w, "[%d]   ⚙ %s %s\n", e.Turn, e.Tool, clip(e.Args, 120))
	case runtime.EventToolResult:
		mark := "✓"
		if e.Error != "" {
			mark = "✗"
		}
		fmt.Fprintf(w, "[%d]   %s %s · %s · %s\n", e.Turn, mark, e.Tool, round(e.Duration), clip(e.Result, 100))
	case runtime.EventToolRefused:
		by := ""
		if e.Refusal == runtime.RefusedAccept {
			by = " by accept"
		}
		fmt.Fprintf(w, "[%d]   ✗ %s refused%s: %s\n", e.Turn, e.Tool, by, clip(e.Error, 160))
	case runtime.EventBindDiscarded:
		fmt.Fprintf(w, "[%d]   ! %s: %s\n", e.Turn, e.Tool, e.Message)
	case runtime.EventCollect:
		if e.Error != "" {
			fmt.Fprintf(w, "[%d]   ! collect %s from %s failed: %s\n", e.Turn, e.Entity, e.Tool, e.Error)
		} else if e.Count > 0 {
			fmt.Fprintf(w, "[%d]   + %d %s revealed by %s\n", e.Turn, e.Count, e.Entity, e.Tool)
		}
	}
}

func printApproval(w io.Writer, e runtime.Event) {
	if e.Kind == runtime.EventApprovalRequested {
		fmt.Fprintf(w, "[%d]   ? %s waits for approval (%s)%s\n", e.Turn, e.Tool, e.CallID, suffix(": ", clip(e.Message, 160)))
		return
	}
	mark, what := "✗", "rejected"
	if e.Passed != nil && *e.Passed {
		mark, what = "✓", "approved"
	}
	fmt.Fprintf(w, "[%d]   %s %s %s (%s)%s\n", e.Turn, mark, e.Tool, what, e.CallID, suffix(" · ", e.Message))
}

func printMemory(w io.Writer, e runtime.Event) {
	switch {
	case e.Error != "":
		fmt.Fprintf(w, "[%d] ! memory: %s (%s)\n", e.Turn, e.Message, e.Error)
	case e.Level != "":
		fmt.Fprintf(w, "[%d] memory %s · %d facts\n", e.Turn, e.Level, e.Count)
	default:
		fmt.Fprintf(w, "[%d] memory %s\n", e.Turn, e.Message)
	}
}

func printRetrieve(w io.Writer, e runtime.Event) {
	switch {
	case e.Error != "":
		fmt.Fprintf(w, "[%d] ! retrieve: %s (%s)\n", e.Turn, cmp.Or(e.Message, "failed"), e.Error)
	case len(e.Passages) == 0:
		fmt.Fprintf(w, "[%d] retrieved no passages\n", e.Turn)
	default:
		parts := make([]string, len(e.Passages))
		for i, ps := range e.Passages {
			parts[i] = fmt.Sprintf("%s %s (%.2f)", ps.ID, passageRef(ps), ps.Score)
		}
		fmt.Fprintf(w, "[%d] retrieved %s\n", e.Turn, strings.Join(parts, ", "))
	}
}

func (p *progress) printStop(w io.Writer, e runtime.Event) {
	tokens := int64(0)
	if e.Usage != nil {
		tokens = e.Usage.TotalTokens
	}
	fmt.Fprintf(w, "■ %s · %d model calls · %d tokens", e.Stop, e.Turn, tokens)
	if e.Cost != nil {
		fmt.Fprintf(w, " · %s", formatCost(*e.Cost))
	}
	fmt.Fprintf(w, " · %s%s\n", round(time.Since(p.start)), suffix(" · ", e.Message))
}

// cache prints what the FAQ cache did: a hit with its entry and score, a miss with
// why, or what became of the answer (learned or not).
func (p *progress) cache(w io.Writer, e runtime.Event) {
	switch {
	case e.Error != "":
		fmt.Fprintf(w, "[%d] ! cache: %s (%s)\n", e.Turn, cmp.Or(e.Message, "failed"), e.Error)
	case e.CacheOutcome == runtime.CacheHitOutcome && e.Cached != nil:
		fmt.Fprintf(w, "[%d] cache hit  %s score %.2f\n", e.Turn, cacheEntry(e.Cached), e.Cached.Score)
	case e.CacheOutcome == runtime.CacheMissOutcome:
		fmt.Fprintf(w, "[%d] cache miss", e.Turn)
		if e.Message != "" {
			fmt.Fprintf(w, " (%s)", e.Message)
		}
		if e.Cached != nil {
			fmt.Fprintf(w, " · nearest %s", cacheEntry(e.Cached))
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "[%d] cache: %s\n", e.Turn, e.Message)
	}
}

// cacheEntry names a cache entry: `faq help-center/faq.yaml:12 "怎么退货"`, or
// `learned #17 (per user)`.
func cacheEntry(h *knowledge.CacheHit) string {
	entry := h.Entry
	if h.Kind == knowledge.CacheEntryLearned {
		entry = "#" + entry
	}
	s := fmt.Sprintf("%s %s", h.Kind, entry)
	if h.Question != "" { // a learned entry's question is not shown: another user may have asked it
		s += fmt.Sprintf(" %q", clip(h.Question, 60))
	}
	if h.PerUser {
		s += " (per user)"
	}
	return s
}

// passageRef is a passage's source and lines, e.g. help-center/returns.md:3-20.
func passageRef(p knowledge.Passage) string {
	switch {
	case p.StartLine == 0:
		return p.Source
	case p.EndLine <= p.StartLine:
		return fmt.Sprintf("%s:%d", p.Source, p.StartLine)
	}
	return fmt.Sprintf("%s:%d-%d", p.Source, p.StartLine, p.EndLine)
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

// setupTelemetry reads the standard OTEL_* variables: with an OTLP endpoint, runs
// are traced and measured (nothing is exported without one).
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true records messages, tool
// arguments and results in the spans, after the spec's redaction filters.
func setupTelemetry(ctx context.Context, opts *agentrun.Options, log *slog.Logger) (*telemetry.Telemetry, error) {
	tel, err := telemetry.Setup(ctx, os.LookupEnv, telemetry.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	tel.Install()
	opts.Telemetry = tel
	if v, _ := os.LookupEnv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"); strings.EqualFold(v, "true") {
		opts.RecordContent = true
	}
	return tel, nil
}

// shutdownTelemetry flushes what is left to export, within a few seconds: a
// collector that is down never holds the command up.
func shutdownTelemetry(tel *telemetry.Telemetry) {
	if tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	tel.Shutdown(ctx)
}

// formatCost shows US dollars as the graph does: $0.000081, $1.234, $1235.
func formatCost(usd float64) string { return graph.FormatCost(usd) }
