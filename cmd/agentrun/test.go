package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/scenario"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newTestCommand() *cobra.Command {
	var format, run string
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run agents' scenario tests (*.test.yaml) offline",
		Long: "Run the scenario tests in *.test.yaml files (or under directories; default .):\n" +
			"scripted models, mocked tools, no network. Exit status: 0 all passed, 1 a case\n" +
			"failed, 2 usage or I/O errors.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			var filter *regexp.Regexp
			if run != "" {
				var err error
				if filter, err = regexp.Compile(run); err != nil {
					return fmt.Errorf("--run: %v", err)
				}
			}
			if format != "text" && format != "json" && format != "junit" {
				return fmt.Errorf("unknown --format %q: use text, json or junit", format)
			}
			files, walked, err := spec.TestFiles(args)
			if err != nil {
				return err
			}
			// The results' formats have no place for what the directory walk skipped
			// or could not read, so it goes to stderr, like other I/O problems.
			fmt.Fprint(cmd.ErrOrStderr(), formatDiagnostics(walked))
			loader, err := agentrun.NewLoader()
			if err != nil {
				return err
			}
			// Each file's agent gets a fresh index of its collections, built with the
			// local embedder in a directory removed at the end: tests are offline and
			// repeatable, and never touch the index exec uses.
			tmp, err := os.MkdirTemp("", "agentrun-test-index-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			var indexes atomic.Int64
			openKnowledge := func(ctx context.Context, s *spec.Spec) (knowledge.Knowledge, func() error, error) {
				path := filepath.Join(tmp, fmt.Sprintf("%d.db", indexes.Add(1)))
				return agentrun.OpenKnowledge(ctx, s, agentrun.KnowledgeOptions{Index: path, Offline: true})
			}
			opts := scenario.Options{Loader: loader, Registry: agentrun.Registry, Run: filter, Knowledge: openKnowledge}
			var results []scenario.File
			for _, f := range files {
				results = append(results, scenario.RunFile(cmd.Context(), f, opts))
			}
			out := cmd.OutOrStdout()
			switch format {
			case "json":
				err = scenario.WriteJSON(out, results)
			case "junit":
				err = scenario.WriteJUnit(out, results)
			default:
				scenario.WriteText(out, results)
			}
			if err != nil {
				return err
			}
			if walked.HasErrors() {
				return exitError{2}
			}
			if passed, failed := scenario.Counts(results); failed > 0 || passed == 0 && filter != nil {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, json or junit (JUnit XML)")
	cmd.Flags().StringVar(&run, "run", "", "run only the cases whose \"file › name\" or name matches this regular expression")
	return cmd
}
