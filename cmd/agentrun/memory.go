package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrun/agentrun"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newMemoryCommand() *cobra.Command {
	var storeFlag, user, conversation string
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Show or forget what agents remember about a user",
		Long: "Show or forget what agents remember: a user's facts and conversations. The store is\n" +
			"--store URL, else AGENTRUN_STORE, else " + agentrun.DefaultStoreURL + "\n" +
			"(URLs: sqlite:path.db, sqlite:///abs/path.db, redis://host:6379/0, postgres://host:5432/db, memory:).",
	}
	open := func() (store.Store, error) {
		if user == "" {
			return nil, errors.New("--user is required")
		}
		url, err := agentrun.StoreURL(storeFlag, spec.Memory{}, "", nil)
		if err != nil {
			return nil, err
		}
		return agentrun.OpenStore(url, 0)
	}
	show := &cobra.Command{
		Use:   "show --user U [--conversation C]",
		Short: "Print a user's facts and conversations, or one conversation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if conversation != "" {
				conv, err := st.Conversation(ctx, conversation, 1<<20)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "conversation %s: %s\n", conversation, count(conv.Turns, "turn"))
				for _, m := range conv.Messages {
					writeMessage(out, m)
				}
				seen, err := st.SeenEntities(ctx, conversation)
				if err != nil {
					return err
				}
				for _, kind := range slices.Sorted(maps.Keys(seen)) {
					fmt.Fprintf(out, "seen %s: %s\n", kind, strings.Join(seen[kind], ", "))
				}
				return nil
			}
			facts, ids, err := userMemory(ctx, st, user)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "user %s: %s, %s\n", user, count(len(facts), "fact"), count(len(ids), "conversation"))
			if len(facts) > 0 {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tUPDATED")
				for _, f := range facts {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Key, clip(f.Value, 80), f.Source, f.Updated.Local().Format(time.DateTime))
				}
				tw.Flush()
			}
			for _, id := range ids {
				fmt.Fprintf(out, "conversation %s\n", id)
			}
			return nil
		},
	}
	var index string
	forget := &cobra.Command{
		Use:   "forget --user U [--index LOCATION]",
		Short: "Delete everything stored about a user: facts, conversations and their learned answers",
		Long: "Delete everything stored about a user: facts, conversations, paused runs, and the answers\n" +
			"the FAQ cache learned for that user only (in the knowledge index: --index, else\n" +
			"AGENTRUN_INDEX, else " + spec.DefaultIndexPath + " when it exists).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			defer st.Close()
			ctx := cmd.Context()
			facts, ids, err := userMemory(ctx, st, user)
			if err != nil {
				return err
			}
			learned, err := forgetLearned(ctx, index, user)
			if err != nil {
				return err
			}
			if err := st.Forget(ctx, user); err != nil {
				return err
			}
			line := fmt.Sprintf("forgot user %s: %s, %s", user, count(len(facts), "fact"), count(len(ids), "conversation"))
			if learned >= 0 {
				line += ", " + count(learned, "learned answer")
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	forget.Flags().StringVar(&index, "index", "", "the knowledge index whose answers learned for the user go too (default: AGENTRUN_INDEX, else "+spec.DefaultIndexPath+" if it exists)")
	for _, c := range []*cobra.Command{show, forget} {
		c.Flags().StringVar(&storeFlag, "store", "", "the store's URL")
		c.Flags().StringVar(&user, "user", "", "the user's id")
	}
	show.Flags().StringVar(&conversation, "conversation", "", "print this conversation's messages")
	cmd.AddCommand(show, forget)
	return cmd
}

// count says "1 turn", "2 turns".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// userMemory is what a store keeps of a user: facts and conversation ids.
func userMemory(ctx context.Context, st store.Store, user string) ([]store.Fact, []string, error) {
	facts, err := st.Facts(ctx, user)
	if err != nil {
		return nil, nil, err
	}
	ids, err := st.Conversations(ctx, user)
	return facts, ids, err
}

func writeMessage(w interface{ Write([]byte) (int, error) }, m model.Message) {
	switch {
	case len(m.ToolCalls) > 0:
		for _, c := range m.ToolCalls {
			fmt.Fprintf(w, "  %-9s → %s %s\n", m.Role, c.Name, clip(c.Arguments, 100))
		}
		if m.Content != "" {
			fmt.Fprintf(w, "  %-9s %s\n", m.Role, clip(m.Content, 160))
		}
	case m.Role == model.RoleTool:
		fmt.Fprintf(w, "  %-9s ← %s\n", m.Role, clip(m.Content, 160))
	default:
		fmt.Fprintf(w, "  %-9s %s\n", m.Role, clip(m.Content, 160))
	}
}

// forgetLearned deletes the FAQ cache's answers learned for the user alone, from
// the index at location (else AGENTRUN_INDEX, else the default file when it
// exists), and returns how many; -1 when there is no index to look in.
func forgetLearned(ctx context.Context, location, user string) (int, error) {
	if location == "" {
		location = os.Getenv("AGENTRUN_INDEX")
	}
	if location == "" {
		location = filepath.Join(agentrun.ProjectDir(""), spec.DefaultIndexPath)
		if _, err := os.Stat(location); err != nil {
			return -1, nil
		}
	}
	idx, err := agentrun.OpenIndex(ctx, location)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: %w", err)
	}
	defer idx.Close()
	return idx.ClearLearned(ctx, kindex.LearnedFilter{User: user})
}
