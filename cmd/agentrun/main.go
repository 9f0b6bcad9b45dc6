// Command agentrun validates and runs LLM agents written as YAML.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command; its message, if any, has
// been printed already.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// failure is an error of the work a command does, not of how it was called: exit
// 1, not 2 (a cluster that cannot be reached, whichever command dials it).
type failure struct{ error }

func (f failure) Unwrap() error { return f.error }

func main() {
	// Start-up (package initialisation, compiling the spec's schema) allocates about
	// 4 MB, garbage once the agent is built. With Go's default GOGC=100 that crosses
	// the 4 MB minimum heap and costs a whole GC cycle, a fifth of a one-turn exec's
	// CPU time (bench/startup.sh); at 200 the minimum is 8 MB, and a long run's heap
	// may grow to 3× its live data instead of 2×. GOGC in the environment wins.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(200)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI in-process and returns the exit code: 0 success, 1 a failed
// check or run (exitError, failure), 2 a usage or I/O error.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	root := newRootCommand(in, out, errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, new(failure)):
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return 1
	default:
		fmt.Fprintf(errOut, "agentrun: %v\n", err)
		return 2
	}
}

func newRootCommand(in io.Reader, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentrun",
		Short:         "Validate and run LLM agents written as YAML",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = buildVersion() // --version, like `agentrun version`
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	root.AddCommand(newInitCommand(), newValidateCommand(), newExecCommand(), newResumeCommand(), newRunsCommand(), newExplainCommand(), newGraphCommand(), newMemoryCommand(), newStoreCommand(), newIndexCommand(), newCacheCommand(), newKnowledgeCommand(), newServeCommand(), newDevCommand(), newMCPCommand(), newWorkerCommand(), newSkillsCommand(), newTestCommand(), newSchemaCommand(), newVersionCommand())
	return root
}
