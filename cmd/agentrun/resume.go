package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

type resumeOptions struct {
	approve, reject      []string
	reason, argsHash, by string
	store, spec, model   string
	trace                string
	asJSON, quiet        bool
	stream               bool
	temporal             temporalFlags
}

func newResumeCommand() *cobra.Command {
	var o resumeOptions
	cmd := &cobra.Command{
		Use:   "resume RUN_ID [--approve CALL_ID]... [--reject CALL_ID]... [--reason TEXT]",
		Short: "Decide on a paused run's tool calls and go on with it",
		Long: "Record decisions on the tool calls a paused run waits on, then go on with the run\n" +
			"once every call is decided, or its approvals expired (approval.on_timeout then\n" +
			"decides the rest). The run was paused by exec, serve or another resume, in this\n" +
			"or any other process: it is kept in the store, which is --store URL, else\n" +
			"AGENTRUN_STORE, else the memory settings of --spec, else " + agentrun.DefaultStoreURL + "\n" +
			"in the spec's project folder (`agentrun version --paths` shows where).\n" +
			"The agent is built from the spec file the run was paused with, or --spec.\n" +
			"A run paused on Temporal is resumed with --engine temporal and its cluster's flags;\n" +
			"a resume on another engine than the run's is refused before anything is decided,\n" +
			"printing the command that reaches the run.\n\n" +
			"Each call is decided once: a second decision, a decision after the approvals\n" +
			"expired, or one whose --args-hash is not that of the waiting call is refused.\n\n" +
			"Exit status: 0 completed, 3 stopped by a guard or a fault, 4 still awaiting\n" +
			"approval (calls left undecided, or the resumed run paused again), 1 error\n" +
			"(a refused decision, no such paused run), 2 usage error.",
		Example: "  agentrun resume run_3f2a… --approve call_1\n" +
			"  agentrun resume run_3f2a… --reject call_1 --reason \"the customer called back\"\n" +
			"  agentrun resume run_3f2a… --approve call_1 --reject call_2 --store redis://127.0.0.1:6379/0\n" +
			"  agentrun resume run_3f2a…    # after the approvals expired: approval.on_timeout decides",
		Args: argsOf(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runResume(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.approve, "approve", nil, "approve the call `CALL_ID` (repeatable)")
	f.StringArrayVar(&o.reject, "reject", nil, "reject the call `CALL_ID` (repeatable)")
	f.StringVar(&o.reason, "reason", "", "why, for the rejected calls: the model reads it")
	f.StringVar(&o.argsHash, "args-hash", "", "the args_hash of the call the decision was made for (one decision only): refused if the call's arguments differ")
	f.StringVar(&o.by, "by", "", "who decides, recorded with the decision (default: $USER, else cli)")
	f.StringVar(&o.store, "store", "", "the store's URL (default: AGENTRUN_STORE, --spec's memory.url, "+agentrun.DefaultStoreURL+")")
	f.StringVar(&o.spec, "spec", "", "the agent's spec file (default: the one the run was paused with)")
	f.StringVar(&o.model, "model", "", "override the model: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	f.StringVar(&o.trace, "trace", "", "write every event as JSON lines to `FILE`")
	f.BoolVar(&o.asJSON, "json", false, "print the whole result as JSON")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress on stderr")
	f.BoolVar(&o.stream, "stream", false, "stream the model's text as it arrives (also set by model.stream)")
	o.temporal.add(f, true)
	return cmd
}

func runResume(cmd *cobra.Command, runID string, o resumeOptions) error {
	errOut := cmd.ErrOrStderr()
	if err := o.check(); err != nil {
		return err
	}
	var s *spec.Spec
	memory := spec.Memory{}
	if o.spec != "" {
		var err error
		if s, err = loadSpec(cmd, o.spec); err != nil {
			return err
		}
		memory = s.Memory
	}
	url, err := agentrun.StoreURL(o.store, memory, o.spec, nil)
	if err != nil {
		return err
	}
	st, err := agentrun.OpenStore(url, memory.TTL.Duration)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer func() { st.Close() }()
	store, ok := st.(store.PausedRuns)
	if !ok {
		fmt.Fprintf(errOut, "agentrun: the store %s cannot keep paused runs\n", url)
		return exitError{1}
	}
	flags := resumeFlags(o.store, s)
	decider := runtime.Decider{ID: cmp.Or(o.by, os.Getenv("USER"), "cli"), Approver: true}
	p, err := loadResumable(cmd, store, runID, decider, o, flags)
	if err != nil {
		return err
	}
	if p, err = decideCalls(cmd, store, p, decider, o); err != nil {
		return err
	}
	if waiting := waitingCalls(p); len(waiting) > 0 && time.Now().Before(p.Expires) {
		for _, call := range waiting {
			writeCall(errOut, "waiting: ", call)
		}
		fmt.Fprintf(errOut, "%s goes on once every call is decided, or at %s when its approvals expire\n",
			runID, p.Expires.Local().Format(time.DateTime))
		writeResumeCommands(errOut, runID, waiting, flags)
		return exitError{exitAwaitingApproval}
	}
	if o.temporal.onTemporal() {
		return resumeTemporal(cmd, url, runID, p, o, flags)
	}
	if s == nil {
		if s, st, err = pausedSpec(cmd, p, url, st); err != nil {
			return err
		}
	}
	return resumeHere(cmd, s, st, p, decider, o, flags)
}

// loadResumable reads the paused run and checks it waits where this command would
// resume it, before any decision is stored: the command to use instead must still
// work.
func loadResumable(cmd *cobra.Command, st store.PausedRuns, runID string, decider runtime.Decider, o resumeOptions, flags []string) (*runtime.Paused, error) {
	errOut := cmd.ErrOrStderr()
	p, err := runtime.LoadPaused(cmd.Context(), st, runID, decider)
	if err != nil {
		if errors.Is(err, store.ErrRunNotFound) {
			err = fmt.Errorf("no paused run %s (it finished, or never paused)", runID)
		}
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return nil, exitError{1}
	}
	if err := p.Placement.ResumableFrom(o.temporal.placement()); err != nil {
		fmt.Fprintf(errOut, "agentrun: run %s: %v\n", runID, err)
		writeResumeThere(errOut, p, o, flags)
		return nil, exitError{1}
	}
	return p, nil
}

// decideCalls stores the decisions the flags make, approvals first, and returns
// the run as the last of them left it.
func decideCalls(cmd *cobra.Command, store store.PausedRuns, p *runtime.Paused, decider runtime.Decider, o resumeOptions) (*runtime.Paused, error) {
	errOut := cmd.ErrOrStderr()
	decide := func(callID string, approve bool, reason string) error {
		decided, err := runtime.Decide(cmd.Context(), store, p.RunID, decider,
			runtime.DecideRequest{CallID: callID, Approve: approve, Reason: reason, ArgsHash: o.argsHash}, time.Now())
		if err != nil {
			fmt.Fprintf(errOut, "agentrun: %v\n", decideError(err, p, callID, o.argsHash))
			return exitError{1}
		}
		p = decided
		if !o.quiet {
			what := "rejected"
			if approve {
				what = "approved"
			}
			fmt.Fprintf(errOut, "%s %s by %s\n", callID, what, decider.ID)
		}
		return nil
	}
	for _, id := range o.approve {
		if err := decide(id, true, ""); err != nil {
			return nil, err
		}
	}
	for _, id := range o.reject {
		if err := decide(id, false, o.reason); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// pausedSpec loads the spec the paused run names. The store was opened before the
// spec was known: with the spec's memory.ttl, which the run's writes keep, it is
// opened again, and the store returned is the one to use (and close).
func pausedSpec(cmd *cobra.Command, p *runtime.Paused, url string, st store.Store) (*spec.Spec, store.Store, error) {
	if p.Spec == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: the paused run %s does not say which spec file it ran: give --spec\n", p.RunID)
		return nil, st, exitError{1}
	}
	s, err := loadSpec(cmd, p.Spec)
	if err != nil {
		return nil, st, err
	}
	if ttl := s.Memory.TTL.Duration; ttl != 0 {
		reopened, err := agentrun.OpenStore(url, ttl)
		if err != nil {
			return nil, st, fmt.Errorf("store: %w", err)
		}
		st.Close()
		st = reopened
	}
	return s, st, nil
}

// resumeHere goes on with the run in this process.
func resumeHere(cmd *cobra.Command, s *spec.Spec, st store.Store, p *runtime.Paused, decider runtime.Decider, o resumeOptions, flags []string) error {
	errOut, ctx := cmd.ErrOrStderr(), cmd.Context()
	opts := agentrun.Options{Model: o.model, SharedStore: st}
	tel, err := setupTelemetry(ctx, &opts, telemetryLogger(errOut, o.quiet))
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	agent, err := buildAgent(cmd, s, opts)
	if err != nil {
		return err
	}
	defer agent.Close()
	observers, closeTrace, err := execObservers(errOut, agent, execOptions{quiet: o.quiet, trace: o.trace})
	if err != nil {
		return err
	}
	defer closeTrace()
	req := runtime.ResumeRequest{RunID: p.RunID, Decider: decider}
	if len(observers) > 0 {
		req.Observer = observers
	}
	live := showDeltas(errOut, o.stream || boolValue(agent.Spec.Model.Stream), o.quiet)
	req.OnDelta = live.onDelta()
	if waiting := waitingCalls(p); len(waiting) > 0 && !o.quiet {
		fmt.Fprintf(errOut, "approvals expired at %s: approval.on_timeout decides %s\n", p.Expires.Local().Format(time.DateTime), callList(&runtime.Paused{Approvals: waiting}))
	}
	result, err := agent.Resume(ctx, req)
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", resumeError(err, p.RunID))
		return exitError{1}
	}
	// The request the run was started with, as far as fact extraction reads it.
	started := runtime.Request{User: tool.User{ID: p.User}, Conversation: p.Conversation}
	return finishResult(cmd, agent, started, result, resultOptions{asJSON: o.asJSON, quiet: o.quiet, resume: flags, live: live})
}

// check rejects flags that cannot be used, or not together: usage errors,
// found before anything is opened.
func (o *resumeOptions) check() error {
	if err := checkModelFlag(o.model); err != nil {
		return err
	}
	if err := o.temporal.check(); err != nil {
		return err
	}
	if o.argsHash != "" && len(o.approve)+len(o.reject) != 1 {
		return errors.New("--args-hash goes with exactly one --approve or --reject")
	}
	if o.reason != "" && len(o.reject) == 0 {
		return errors.New("--reason is the reason of a rejection: give it with --reject")
	}
	return nil
}

// resumeTemporal wakes the run's workflow, which resumes the run on a worker,
// and follows it as exec does.
func resumeTemporal(cmd *cobra.Command, store, runID string, p *runtime.Paused, o resumeOptions, flags []string) error {
	errOut := cmd.ErrOrStderr()
	var obs runtime.Observer
	if !o.quiet || o.trace != "" {
		observers, closeTrace, err := execObservers(errOut, nil, execOptions{quiet: o.quiet, trace: o.trace})
		if err != nil {
			return err
		}
		defer closeTrace()
		obs = observers
	}
	result, err := resumeOnTemporal(cmd, o.temporal, store, runID, obs)
	if err != nil {
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return exitError{1}
	}
	started := runtime.Request{User: tool.User{ID: p.User}, Conversation: p.Conversation}
	return finishResult(cmd, nil, started, result, resultOptions{asJSON: o.asJSON, quiet: o.quiet,
		resume: append(flags, o.temporal.resumeFlags()...)})
}

// waitingCalls are the calls of a paused run nobody decided on yet.
func waitingCalls(p *runtime.Paused) []runtime.Approval {
	var out []runtime.Approval
	for _, a := range p.Approvals {
		if a.Decision == nil {
			out = append(out, a)
		}
	}
	return out
}

// writeResumeThere prints the command that resumes p where it waits: the
// decisions given, the store's flags and the run's engine's.
func writeResumeThere(w io.Writer, p *runtime.Paused, o resumeOptions, flags []string) {
	flags = append(flags, placementFlags(p.Placement, o.temporal)...)
	if len(o.approve)+len(o.reject) == 0 {
		if waiting := waitingCalls(p); len(waiting) > 0 && time.Now().Before(p.Expires) {
			writeResumeCommands(w, p.RunID, waiting, flags)
			return
		}
	}
	var args []string
	for _, id := range o.approve {
		args = append(args, "--approve", id)
	}
	for _, id := range o.reject {
		args = append(args, "--reject", id)
	}
	if o.reason != "" {
		args = append(args, "--reason", o.reason)
	}
	if o.argsHash != "" {
		args = append(args, "--args-hash", o.argsHash)
	}
	cmd := "agentrun resume " + shellQuote(p.RunID)
	for _, a := range append(args, flags...) {
		cmd += " " + shellQuote(a)
	}
	fmt.Fprintf(w, "resume with:\n  %s\n", cmd)
}

// placementFlags are the flags that reach a run on its engine: none for the
// local engine; for Temporal its cluster's address (as its worker dialed it),
// namespace, and the TLS flags given here.
func placementFlags(at runtime.Placement, t temporalFlags) []string {
	if at.Engine != runtime.EngineTemporal {
		return nil
	}
	out := []string{"--engine", engineTemporal, "--temporal", cmp.Or(at.Address, "HOST:PORT")}
	if at.Namespace != "" {
		out = append(out, "--namespace", at.Namespace)
	}
	return append(out, t.tls.flags()...)
}
