package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun"
)

func newStoreCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Manage the memory store",
	}
	migrate := &cobra.Command{
		Use:   "migrate URL",
		Short: "Bring a store's schema up to date (on PostgreSQL, the knowledge index's tables too)",
		Long: "Apply the migrations a store's schema lacks, as opening it with --store does on first use:\n" +
			"for deployments that migrate before they roll out. Safe to run while agents use the store and\n" +
			"from several processes at once (PostgreSQL takes an advisory lock, SQLite its write lock).\n\n" +
			"  agentrun store migrate 'postgres://agentrun@db.internal:5432/agentrun?schema=agentrun&sslmode=require'\n" +
			"  agentrun store migrate sqlite:.agentrun/state.db\n\n" +
			"memory: and redis:// stores have no schema: there is nothing to migrate.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lines, err := agentrun.MigrateStore(cmd.Context(), args[0])
			for _, l := range lines {
				fmt.Fprintln(cmd.OutOrStdout(), l)
			}
			return err
		},
	}
	cmd.AddCommand(migrate)
	return cmd
}

// statePlaces says, for exec's header line, where the run's memory and knowledge
// index are, so state found missing can be found where it is.
func statePlaces(agent *agentrun.Agent) string {
	var b strings.Builder
	if store := agent.StoreLocation(); store != "" {
		b.WriteString(" · memory " + placeOf(store))
	}
	if index := agent.IndexLocation(); index != "" {
		b.WriteString(" · index " + placeOf(index))
	}
	return b.String()
}

// placeOf shows a store URL or index location (see agentrun.StatePlace).
func placeOf(location string) string { return agentrun.StatePlace(location) }
