package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newKnowledgeCommand() *cobra.Command {
	var intent, user string
	var asJSON, offline, wrong bool
	cmd := &cobra.Command{
		Use:   "knowledge",
		Short: "Ask an agent's FAQ cache about a question, or evaluate its cache and retrieval",
	}
	// open assembles the agent of the spec at path for looking things up: its
	// knowledge opened (and indexed if stale), no model.
	open := func(cmd *cobra.Command, path string) (*agentrun.Agent, error) {
		s, err := loadSpec(cmd, path)
		if err != nil {
			return nil, err
		}
		opts := agentrun.Options{NoModel: true}
		if offline {
			opts.Model = "test"
		}
		return buildAgent(cmd, s, opts)
	}
	check := &cobra.Command{
		Use:   "check SPEC QUESTION [--intent I] [--user U] [--json]",
		Short: "Say whether the FAQ cache would answer a question, and why not",
		Long: "Look the question up in an intent's FAQ cache as a run would — the closest FAQ or\n" +
			"learned entry, its score against the threshold, then the precision gates — and say\n" +
			"whether the cache would answer it, and if not why. Nothing else of a run happens:\n" +
			"no routing, no filters, no model, no judge (with verify: judge, a hit would still be\n" +
			"checked by the judge, and so would a question with words its entry does not mention,\n" +
			"which a run refuses without it). --user U sees U's own learned entries besides the\n" +
			"shared ones.",
		Example: "  agentrun knowledge check examples/agents/shop-support.yaml \"春节几点营业？\"",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := open(cmd, args[0])
			if err != nil {
				return err
			}
			defer a.Close()
			in := intent
			if in == "" {
				if in, err = agentrun.CacheIntent(a, ""); err != nil {
					return fmt.Errorf("--intent: %w", err)
				}
			}
			res, err := a.CheckCache(cmd.Context(), in, args[1], user)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: %v\n", err)
				return exitError{1}
			}
			if asJSON {
				return writeJSONTo(cmd.OutOrStdout(), res)
			}
			printCheck(cmd.OutOrStdout(), res)
			return nil
		},
	}
	check.Flags().StringVar(&intent, "intent", "", "the intent whose cache to ask (default: the one with a cache)")
	check.Flags().StringVar(&user, "user", "", "ask as this user: their own learned entries count too")
	eval := &cobra.Command{
		Use:   "eval SPEC SET [--json] [--wrong]",
		Short: "Score the FAQ cache and retrieval on a labelled set of questions",
		Long: "Put every question of a labelled set (a YAML file: see docs/knowledge.md,\n" +
			"\"Evaluating the cache and retrieval\") to the agent's FAQ cache and retrieval, and\n" +
			"print the cache's precision, recall and F1 at its threshold and along a curve of\n" +
			"thresholds (with the precision gates and by score alone), and retrieval's hit@1,\n" +
			"hit@3, hit@5 and MRR beside plain BM25's over the same chunks, by language.\n" +
			"--wrong lists the questions the cache got wrong.",
		Example: "  agentrun knowledge eval examples/agents/shop-support.yaml examples/agents/help-center.eval.yaml",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := agentrun.LoadKnowledgeSet(args[1])
			var diags spec.Diagnostics
			switch {
			case errors.As(err, &diags):
				fmt.Fprint(cmd.ErrOrStderr(), formatDiagnostics(diags))
				return exitError{1}
			case err != nil:
				return err
			}
			a, err := open(cmd, args[0])
			if err != nil {
				return err
			}
			defer a.Close()
			ev, err := agentrun.EvalKnowledge(cmd.Context(), a, set)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: %v\n", err)
				return exitError{1}
			}
			if asJSON {
				return writeJSONTo(cmd.OutOrStdout(), ev)
			}
			printEval(cmd.OutOrStdout(), ev, wrong)
			return nil
		},
	}
	eval.Flags().BoolVar(&wrong, "wrong", false, "list the questions the cache got wrong")
	for _, c := range []*cobra.Command{check, eval} {
		c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
		c.Flags().BoolVar(&offline, "offline", false, "use the local embedder and the offline collections (as --model test runs do)")
	}
	cmd.AddCommand(check, eval)
	return cmd
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printCheck(w io.Writer, c *runtime.CacheCheck) {
	h := c.Closest
	if h == nil {
		fmt.Fprintf(w, "intent %s: the cache has no entries\n", c.Intent)
		return
	}
	what := fmt.Sprintf("%s entry %s", h.Kind, h.Entry)
	if h.Question != "" {
		what += fmt.Sprintf(" %q", h.Question)
	}
	if c.Answers {
		fmt.Fprintf(w, "intent %s: answered from the cache by %s, score %.2f ≥ %.2f\n", c.Intent, what, h.Score, c.Threshold)
		if c.Verify {
			fmt.Fprintln(w, "  the judge checks the hit first (verify: judge)")
		}
	} else {
		fmt.Fprintf(w, "intent %s: not answered from the cache: %s\n", c.Intent, c.Refused)
		fmt.Fprintf(w, "  closest: %s, score %.2f (threshold %.2f)\n", what, h.Score, c.Threshold)
	}
	if v := h.Verdict; v != nil {
		state := "passed"
		switch {
		case !v.Passed && c.Answers:
			state = "left to the judge (" + string(v.Gate) + "): " + v.Reason()
		case !v.Passed:
			state = "refused (" + string(v.Gate) + "): " + v.Reason()
		}
		fmt.Fprintf(w, "  gates: %s; the question has %.0f%% of the words of the entry's closest question\n", state, 100*v.Coverage)
	}
	if c.Error != "" {
		fmt.Fprintf(w, "  part of the cache could not be read: %s\n", c.Error)
	}
}

func printEval(w io.Writer, ev *agentrun.KnowledgeEval, wrong bool) {
	if ev.Intent != "" {
		c := ev.Cache
		fmt.Fprintf(w, "cache (intent %s, threshold %.2f): %d questions, %d answerable by an entry\n", ev.Intent, ev.Threshold, c.Questions, c.Positives)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tquestions\tprecision\trecall\tF1\tfalse hits")
		fmt.Fprintf(tw, "  all\t%d\t%.2f\t%.2f\t%.2f\t%d\n", c.Questions, c.Precision(), c.Recall(), c.F1(), c.False)
		for _, lang := range sortedKeys(ev.CacheLang) {
			s := ev.CacheLang[lang]
			fmt.Fprintf(tw, "  %s\t%d\t%.2f\t%.2f\t%.2f\t%d\n", lang, s.Questions, s.Precision(), s.Recall(), s.F1(), s.False)
		}
		tw.Flush()
		fmt.Fprintln(w, "threshold curve (precision / recall):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  threshold\twith the gates\tby score alone")
		for _, p := range ev.Curve {
			fmt.Fprintf(tw, "  %.2f\t%.2f / %.2f\t%.2f / %.2f\n", p.Threshold, p.Gated.Precision(), p.Gated.Recall(), p.ScoreAlone.Precision(), p.ScoreAlone.Recall())
		}
		tw.Flush()
	}
	if len(ev.Retrieval) > 0 {
		fmt.Fprintf(w, "retrieval: %d questions\n", ev.Retrieval["all"].Questions)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tranking\thit@1\thit@3\thit@5\tMRR")
		for _, lang := range sortedKeys(ev.Retrieval) {
			for _, r := range []struct {
				name string
				s    map[string]agentrun.RetrievalScores
			}{{"hybrid", ev.Retrieval}, {"bm25", ev.BM25}} {
				s := r.s[lang]
				fmt.Fprintf(tw, "  %s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\n", lang, r.name, s.HitAt1, s.HitAt3, s.HitAt5, s.MRR)
			}
		}
		tw.Flush()
	}
	if wrong {
		printWrong(w, ev.Results)
	}
}

func printWrong(w io.Writer, results []agentrun.CacheResult) {
	for _, r := range results {
		if r.Right {
			continue
		}
		c := r.Check
		switch {
		case c.Answered && r.FAQ == nil:
			fmt.Fprintf(w, "false hit  %q → %q (%.2f); %s\n", r.Q, c.Entry, c.Score, r.Why)
		case c.Answered:
			fmt.Fprintf(w, "wrong hit  %q → %q (%.2f), want %q\n", r.Q, c.Entry, c.Score, *r.FAQ)
		default:
			fmt.Fprintf(w, "miss       %q, want %q; closest %q (%.2f): %s\n", r.Q, *r.FAQ, c.Entry, c.Score, c.Refused)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
