package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/agentrun/agentrun"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newCacheCommand() *cobra.Command {
	var intent, user string
	var shared, asJSON bool
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "List or clear the answers an agent's FAQ cache learned",
		Long: "List or clear the learned entries of an agent's FAQ cache: accepted answers of\n" +
			"earlier runs of intents with cache.learn, in the agent's knowledge index\n" +
			"(AGENTRUN_INDEX, else knowledge.index, else " + spec.DefaultIndexPath + ").\n" +
			"By default every entry: the shared ones (served to everyone) and each user's own;\n" +
			"--user U selects U's own entries, --shared the shared ones. Entries of earlier\n" +
			"versions of the spec are included: they are never served, but they stay until\n" +
			"they expire or are cleared.",
	}
	// open loads the spec and opens its index, with the filter the flags say.
	open := func(cmd *cobra.Command, path string) (agentrun.KnowledgeIndex, kindex.LearnedFilter, error) {
		if user != "" && shared {
			return nil, kindex.LearnedFilter{}, errors.New("give --user or --shared, not both")
		}
		s, err := loadSpec(cmd, path)
		if err != nil {
			return nil, kindex.LearnedFilter{}, err
		}
		if err := agentrun.CheckIntent(s, intent); err != nil {
			return nil, kindex.LearnedFilter{}, fmt.Errorf("--%w", err)
		}
		idx, err := agentrun.OpenIndex(cmd.Context(), agentrun.IndexPath(s, nil))
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: %v\n", err)
			return nil, kindex.LearnedFilter{}, exitError{1}
		}
		return idx, kindex.LearnedFilter{Agent: s.Name, Intent: intent, User: user, AllUsers: user == "" && !shared}, nil
	}
	list := &cobra.Command{
		Use:   "list SPEC [--intent I] [--user U | --shared] [--json]",
		Short: "Print the learned entries: id, intent, scope, question, answer, expiry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			entries, err := onIndex(cmd, args[0], open, agentrun.KnowledgeIndex.ListLearned)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeLearnedJSON(out, entries)
			}
			if len(entries) == 0 {
				fmt.Fprintln(out, "no learned entries")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tINTENT\tSCOPE\tQUESTION\tANSWER\tEXPIRES")
			for _, e := range entries {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Intent, scope(e.User), clip(e.Question, 50), clip(e.Answer, 60), expires(e.Expires))
			}
			return tw.Flush()
		},
	}
	clear := &cobra.Command{
		Use:   "clear SPEC [--intent I] [--user U | --shared]",
		Short: "Delete the learned entries the flags select",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := onIndex(cmd, args[0], open, agentrun.KnowledgeIndex.ClearLearned)
			if err != nil {
				return err
			}
			noun := "learned entries"
			if n == 1 {
				noun = "learned entry"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d %s\n", n, noun)
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, clear} {
		c.Flags().StringVar(&intent, "intent", "", "only this intent's entries")
		c.Flags().StringVar(&user, "user", "", "only this user's own entries")
		c.Flags().BoolVar(&shared, "shared", false, "only the shared entries, served to everyone")
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the entries as JSON")
	cmd.AddCommand(list, clear)
	return cmd
}

// indexOpener opens the index of the spec at path, with the filter the flags say.
type indexOpener func(cmd *cobra.Command, path string) (agentrun.KnowledgeIndex, kindex.LearnedFilter, error)

// onIndex runs op, a method of the index such as ListLearned, on the index open
// opens for the spec at path, and closes it again. op's error is the index's own,
// not a usage error: it is shown on stderr, exit status 1.
func onIndex[T any](cmd *cobra.Command, path string, open indexOpener, op func(agentrun.KnowledgeIndex, context.Context, kindex.LearnedFilter) (T, error)) (T, error) {
	var zero T
	idx, f, err := open(cmd, path)
	if err != nil {
		return zero, err
	}
	defer idx.Close()
	v, err := op(idx, cmd.Context(), f)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: %v\n", err)
		return zero, exitError{1}
	}
	return v, nil
}

// scope says who is served an entry.
func scope(user string) string {
	if user == "" {
		return "shared"
	}
	return "user " + user
}

func expires(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format(time.DateTime)
}

func writeLearnedJSON(w interface{ Write([]byte) (int, error) }, entries []kindex.LearnedEntry) error {
	type entry struct {
		ID       int64      `json:"id"`
		Intent   string     `json:"intent"`
		Version  string     `json:"version"`
		Embedder string     `json:"embedder"`
		User     string     `json:"user,omitempty"`
		Question string     `json:"question"`
		Answer   string     `json:"answer"`
		Created  time.Time  `json:"created"`
		Expires  *time.Time `json:"expires,omitempty"`
	}
	out := make([]entry, 0, len(entries))
	for _, e := range entries {
		j := entry{ID: e.ID, Intent: e.Intent, Version: e.Version, Embedder: e.Embedder, User: e.User, Question: e.Question, Answer: e.Answer, Created: e.Created}
		if !e.Expires.IsZero() {
			j.Expires = &e.Expires
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
