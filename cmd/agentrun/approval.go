package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
)

// approvePrompt asks a person at the terminal about one call.
const approvePrompt = "approve? [y/n, optionally followed by a reason] "

// asker asks about the calls a paused run waits on, at the terminal, records the
// answers with runtime.Decide and resumes the run, until it no longer pauses or
// nobody answers (end of input).
type asker struct {
	agent    *agentrun.Agent
	decider  runtime.Decider
	in       io.Reader
	errOut   io.Writer
	observer runtime.Observer
	onDelta  func(string)
	// echo shows each answer read after its prompt: input that is no terminal
	// does not show itself.
	echo bool

	lines <-chan string
	done  chan struct{}
}

// untilDecided asks and resumes while the run pauses. It returns the last result:
// completed or stopped, or still paused when the input ended or the command was
// interrupted (the run then waits in the store for `agentrun resume`).
func (a *asker) untilDecided(ctx context.Context, result *runtime.Result) (*runtime.Result, error) {
	store := a.agent.PausedRuns()
	for result.Stop == runtime.StopAwaitingApproval {
		p, err := runtime.LoadPaused(ctx, store, result.RunID, a.decider)
		if err != nil {
			return nil, fmt.Errorf("paused run %s: %w", result.RunID, err)
		}
		expiry := time.NewTimer(time.Until(p.Expires))
		expired := false
	calls:
		for _, call := range p.Approvals {
			if call.Decision != nil {
				continue
			}
			approve, reason, outcome := a.ask(ctx, call, expiry.C)
			switch outcome {
			case askExpired:
				expired = true
				break calls
			case askEnded:
				expiry.Stop()
				return result, nil // left paused: the caller prints how to resume it
			}
			_, err := runtime.Decide(ctx, store, p.RunID, a.decider,
				runtime.DecideRequest{CallID: call.CallID, Approve: approve, Reason: reason, ArgsHash: call.ArgsHash}, time.Now())
			switch {
			case errors.Is(err, runtime.ErrApprovalExpired):
				expired = true
				break calls
			case errors.Is(err, runtime.ErrAlreadyDecided):
				fmt.Fprintf(a.errOut, "%s was already decided elsewhere\n", call.CallID)
			case err != nil:
				expiry.Stop()
				return nil, decideError(err, p, call.CallID, call.ArgsHash)
			}
		}
		expiry.Stop()
		if expired {
			fmt.Fprintf(a.errOut, "approvals expired at %s: approval.on_timeout decides the rest\n", p.Expires.Local().Format(time.DateTime))
		}
		if result, err = a.agent.Resume(ctx, runtime.ResumeRequest{RunID: p.RunID, Decider: a.decider, Observer: a.observer, OnDelta: a.onDelta}); err != nil {
			return nil, fmt.Errorf("resuming %s: %w", p.RunID, resumeError(err, p.RunID))
		}
	}
	return result, nil
}

// askOutcome is how asking about one call ended.
type askOutcome int

const (
	askAnswered askOutcome = iota
	askEnded               // end of input, or the command was interrupted
	askExpired             // the run's approvals expired while waiting
)

// ask shows one call and reads answers until one is y or n.
func (a *asker) ask(ctx context.Context, call runtime.Approval, expired <-chan time.Time) (approve bool, reason string, _ askOutcome) {
	writeCall(a.errOut, "", call)
	for {
		fmt.Fprint(a.errOut, approvePrompt)
		var line string
		var ok bool
		select {
		case line, ok = <-a.input():
			if !ok {
				fmt.Fprintln(a.errOut)
				return false, "", askEnded
			}
		case <-expired:
			fmt.Fprintln(a.errOut)
			return false, "", askExpired
		case <-ctx.Done():
			fmt.Fprintln(a.errOut)
			return false, "", askEnded
		}
		if a.echo {
			fmt.Fprintln(a.errOut, strings.TrimRight(line, "\r\n"))
		}
		if approve, reason, ok := parseAnswer(line); ok {
			return approve, reason, askAnswered
		}
		fmt.Fprintln(a.errOut, "answer y (run it) or n (do not run it), optionally followed by a reason")
	}
}

// input reads lines from the asker's input, from the first question on: a run
// that never pauses never reads stdin.
func (a *asker) input() <-chan string {
	if a.lines != nil {
		return a.lines
	}
	lines := make(chan string)
	a.lines, a.done = lines, make(chan struct{})
	done := a.done
	go func() {
		defer close(lines)
		r := bufio.NewReader(a.in)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				select {
				case lines <- line:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return a.lines
}

// close lets the input reader end once its read returns.
func (a *asker) close() {
	if a.done != nil {
		close(a.done)
	}
}

// parseAnswer reads "y", "yes", "n" or "no" (any case), optionally followed by a
// reason.
func parseAnswer(line string) (approve bool, reason string, ok bool) {
	line = strings.TrimSpace(line)
	word, rest := line, ""
	if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
		word, rest = line[:i], strings.TrimSpace(line[i:])
	}
	switch strings.ToLower(strings.TrimRight(word, ",.:;!")) {
	case "y", "yes":
		return true, rest, true
	case "n", "no":
		return false, rest, true
	}
	return false, "", false
}

// writeCall shows a call that needs approval: its tool, id and message, then its
// arguments.
func writeCall(w io.Writer, prefix string, call runtime.Approval) {
	fmt.Fprintf(w, "%s%s needs approval (call %s)", prefix, call.Tool, call.CallID)
	if call.Message != "" {
		fmt.Fprintf(w, ": %s", call.Message)
	}
	fmt.Fprintf(w, "\n  arguments: %s\n", call.Arguments)
}

// printPaused says what a paused run waits on and how to decide it from any
// process.
func printPaused(w io.Writer, result *runtime.Result, flags []string) {
	for _, call := range result.Pending {
		writeCall(w, "paused: ", call)
	}
	writeResumeCommands(w, result.RunID, result.Pending, flags)
}

// writeResumeCommands prints the commands that approve or reject each call.
func writeResumeCommands(w io.Writer, runID string, calls []runtime.Approval, flags []string) {
	if len(calls) == 0 {
		return
	}
	base := "agentrun resume " + shellQuote(runID)
	for _, f := range flags {
		base += " " + shellQuote(f)
	}
	fmt.Fprintln(w, "resume with:")
	for _, call := range calls {
		hash := ""
		if call.HashRequired {
			hash = " --args-hash " + call.ArgsHash
		}
		fmt.Fprintf(w, "  %s --approve %s%s\n", base, shellQuote(call.CallID), hash)
		fmt.Fprintf(w, "  %s --reject %s%s --reason \"…\"\n", base, shellQuote(call.CallID), hash)
	}
}

// hashOf is the args_hash of a waiting call of p.
func hashOf(p *runtime.Paused, callID string) string {
	for _, a := range p.Approvals {
		if a.CallID == callID {
			return a.ArgsHash
		}
	}
	return ""
}

// resumeFlags are the flags a resume command needs to open the store a command
// used: its --store, or the spec whose memory.url or project directory (the default
// place) names it. AGENTRUN_STORE needs none.
func resumeFlags(storeFlag string, s *spec.Spec) []string {
	switch env, _ := os.LookupEnv("AGENTRUN_STORE"); {
	case storeFlag != "":
		return []string{"--store", storeFlag}
	case env != "":
		return nil
	case s != nil:
		return []string{"--spec", absFile(s.Pos.File)}
	}
	return nil
}

// isProcessLocal reports whether a store URL names a store that ends with the
// process (memory:).
func isProcessLocal(url string) bool {
	kind, err := spec.StoreKindOf(url)
	return err == nil && kind == spec.StoreMemory
}

// absFile is a file's absolute path, or the path as it is if that fails.
func absFile(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// decideError says why a decision was refused, in the terms of the command line.
func decideError(err error, p *runtime.Paused, callID, argsHash string) error {
	switch {
	case errors.Is(err, store.ErrRunNotFound):
		return fmt.Errorf("no paused run %s (it finished, or never paused)", p.RunID)
	case errors.Is(err, runtime.ErrAlreadyDecided):
		return fmt.Errorf("%s was already decided", callID)
	case errors.Is(err, runtime.ErrHashRequired):
		return fmt.Errorf("%s: the run had another call of this id before: give --args-hash %s to decide this one", callID, hashOf(p, callID))
	case errors.Is(err, runtime.ErrArgsChanged):
		return fmt.Errorf("%s: the arguments changed since the decision was made: the call waits with other arguments than those of hash %s (see them with agentrun runs list --json)", callID, argsHash)
	case errors.Is(err, runtime.ErrApprovalExpired):
		return fmt.Errorf("%s: approvals expired at %s: resume without decisions to let approval.on_timeout decide", callID, p.Expires.Local().Format(time.DateTime))
	case errors.Is(err, runtime.ErrCallNotFound):
		return fmt.Errorf("%s has no call %s waiting for approval (its calls: %s)", p.RunID, callID, callList(p))
	case errors.Is(err, runtime.ErrResuming):
		return fmt.Errorf("%s is already being resumed", p.RunID)
	}
	return fmt.Errorf("%s: %w", callID, err)
}

// resumeError says why a run could not be resumed.
func resumeError(err error, runID string) error {
	switch {
	case errors.Is(err, store.ErrRunNotFound):
		return fmt.Errorf("no paused run %s (it finished, or never paused)", runID)
	case errors.Is(err, runtime.ErrResuming):
		return fmt.Errorf("%s is already being resumed", runID)
	}
	return err
}

// callList names a paused run's calls, with their decisions: "cancel_order(call_1),
// refund(call_2: approved)".
func callList(p *runtime.Paused) string {
	parts := make([]string, len(p.Approvals))
	for i, a := range p.Approvals {
		parts[i] = a.Tool + "(" + a.CallID
		if d := a.Decision; d != nil {
			if d.Approved {
				parts[i] += ": approved"
			} else {
				parts[i] += ": rejected"
			}
		}
		parts[i] += ")"
	}
	return strings.Join(parts, ", ")
}
