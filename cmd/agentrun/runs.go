package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newRunsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Look at runs that wait for approval",
	}
	var storeFlag, specPath, user string
	var all, asJSON bool
	list := &cobra.Command{
		Use:   "list [--user U | --all]",
		Short: "List the paused runs of a user, or of every user",
		Long: "List the runs that wait for a person's approval of some of their tool calls: the\n" +
			"run's id, its agent and user, the calls it waits on (decided ones marked), when its\n" +
			"approvals expire and its status (waiting, or resuming while a process goes on with\n" +
			"it). Decide with `agentrun resume RUN_ID --approve CALL_ID` or --reject.\n\n" +
			"The store is --store URL, else AGENTRUN_STORE, else the memory settings of --spec,\n" +
			"else " + agentrun.DefaultStoreURL + " in the spec's project folder (the working\n" +
			"directory's without --spec; `agentrun version --paths` shows where).",
		Example: "  agentrun runs list\n" +
			"  agentrun runs list --user u-42 --json\n" +
			"  agentrun runs list --all --store redis://127.0.0.1:6379/0",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all && cmd.Flags().Changed("user") {
				return errors.New("--all lists every user's runs: give --user or --all, not both")
			}
			memory := spec.Memory{}
			if specPath != "" {
				s, err := loadSpec(cmd, specPath)
				if err != nil {
					return err
				}
				memory = s.Memory
			}
			url, err := agentrun.StoreURL(storeFlag, memory, specPath, nil)
			if err != nil {
				return err
			}
			st, err := agentrun.OpenStore(url, 0)
			if err != nil {
				return fmt.Errorf("store: %w", err)
			}
			defer st.Close()
			db, ok := st.(store.PausedRuns)
			if !ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: the store %s cannot keep paused runs\n", url)
				return exitError{1}
			}
			q := store.PausedQuery{UserID: user}
			if all {
				q = store.PausedQuery{ExpiresBefore: time.Now().AddDate(1000, 0, 0)}
			}
			runs, err := runtime.ListPaused(cmd.Context(), db, q)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentrun: %v\n", err)
				return exitError{1}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(runs)
			}
			writeRuns(out, runs, time.Now())
			return nil
		},
	}
	f := list.Flags()
	f.StringVar(&user, "user", "cli-user", "whose runs")
	f.BoolVar(&all, "all", false, "list the runs of every user")
	f.StringVar(&storeFlag, "store", "", "the store's URL (default: AGENTRUN_STORE, --spec's memory.url, "+agentrun.DefaultStoreURL+")")
	f.StringVar(&specPath, "spec", "", "an agent's spec file, whose memory settings name the store")
	f.BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.AddCommand(list)
	return cmd
}

// writeRuns prints paused runs as a table.
func writeRuns(w io.Writer, runs []*runtime.Paused, now time.Time) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no paused runs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tAGENT\tUSER\tWAITING\tEXPIRES\tSTATUS")
	for _, p := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.RunID, p.Agent, p.User, waitingList(p), expiresIn(p.Expires, now), p.Status)
	}
	tw.Flush()
}

// waitingList names a run's calls: those undecided as tool(call), decided ones
// marked: "cancel_order(call_1) refund(call_2 ✓)".
func waitingList(p *runtime.Paused) string {
	parts := make([]string, len(p.Approvals))
	for i, a := range p.Approvals {
		mark := ""
		if d := a.Decision; d != nil {
			mark = " ✗"
			if d.Approved {
				mark = " ✓"
			}
		}
		parts[i] = a.Tool + "(" + a.CallID + mark + ")"
	}
	return strings.Join(parts, " ")
}

// expiresIn says when approvals expire, relative to now: "in 23h59m", "expired".
func expiresIn(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return "in " + d.Round(time.Second).String()
	case d < time.Hour:
		return "in " + strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	return "in " + strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s")
}
