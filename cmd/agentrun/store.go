package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun"
	kpostgres "github.com/agentrun/agentrun/runtime/knowledge/index/postgres"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/postgres"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
	"github.com/agentrun/agentrun/spec"
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
			url, out := args[0], cmd.OutOrStdout()
			kind, err := spec.StoreKindOf(url)
			if err != nil {
				return err
			}
			switch kind {
			case spec.StorePostgres:
				m, err := postgres.Migrate(cmd.Context(), url)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "postgres: schema %s at version %d (applied %d)\n", m.Schema, m.Version, m.Applied)
				// The knowledge index may share the database: its tables are brought
				// up to date too, so a roll-out migrates everything at once.
				version, applied, err := kpostgres.Migrate(cmd.Context(), url)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "postgres: knowledge tables in schema %s at version %d (applied %d)\n", m.Schema, version, applied)
			case spec.StoreSQLite:
				path, err := store.SQLitePath(url)
				if err != nil {
					return err
				}
				s, err := sqlite.Open(path)
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return err
				}
				fmt.Fprintf(out, "sqlite: %s at version %d\n", path, sqlite.Version)
			default:
				fmt.Fprintf(out, "%s: no schema, nothing to migrate\n", kind)
			}
			return nil
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

// placeOf shows a store URL or index location: a file's path, relative to the
// working directory when it is below it; only the kind for a server, whose URL may
// carry a password.
func placeOf(location string) string {
	kind, err := spec.StoreKindOf(location)
	switch {
	case err == nil && kind == spec.StoreMemory:
		return "in this process"
	case err == nil && kind != spec.StoreSQLite:
		return "on " + string(kind)
	}
	file, err := store.SQLitePath(location)
	if err != nil {
		return location
	}
	if cwd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(cwd, file); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	return file
}
