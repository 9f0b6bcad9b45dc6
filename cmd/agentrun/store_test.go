package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store/postgres"
)

// postgresSchemaURL is DATABASE_URL with a fresh schema (see pgtest).
func postgresSchemaURL(t *testing.T) string {
	u, _ := pgtest.Schema(t)
	return u
}

// `store migrate` creates the schema, then finds nothing to do; `memory show` and
// `memory forget` work on a postgres:// store.
func TestStoreMigrateAndMemoryOnPostgres(t *testing.T) {
	u := postgresSchemaURL(t)
	schema := strings.TrimPrefix(u[strings.Index(u, "schema="):], "schema=")
	schema, _, _ = strings.Cut(schema, "&")
	code, out, errOut := runCLI(t, "store", "migrate", u)
	if want := fmt.Sprintf("postgres: schema %s at version %d (applied %d)\n", schema, postgres.Version, postgres.Version); code != 0 || out != want {
		t.Fatalf("store migrate: %d %q %q, want %q", code, out, errOut, want)
	}
	code, out, _ = runCLI(t, "store", "migrate", u)
	if want := fmt.Sprintf("postgres: schema %s at version %d (applied 0)\n", schema, postgres.Version); code != 0 || out != want {
		t.Fatalf("store migrate again: %d %q, want %q", code, out, want)
	}

	st, err := agentrun.OpenStore(u, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := runtime.Record{UserID: "u-42", Conversation: "c-7",
		Messages: []runtime.Message{{Role: runtime.RoleUser, Content: "cancel A1001"}, {Role: runtime.RoleAssistant, Content: "cancelled"}},
		Seen:     map[string][]string{"orders": {"A1001"}},
		Facts:    []runtime.FactChange{{Op: runtime.FactSet, Key: "tier", Value: "gold", Source: "tool"}}}
	if err := st.Commit(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, out, errOut = runCLI(t, "memory", "show", "--store", u, "--user", "u-42")
	if code != 0 || !strings.Contains(out, "user u-42: 1 fact, 1 conversation") || !strings.Contains(out, "tier") || !strings.Contains(out, "conversation c-7") {
		t.Fatalf("memory show: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "memory", "show", "--store", u, "--user", "u-42", "--conversation", "c-7")
	if code != 0 || !strings.Contains(out, "conversation c-7: 1 turn") || !strings.Contains(out, "cancel A1001") || !strings.Contains(out, "seen orders: A1001") {
		t.Fatalf("memory show --conversation: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "memory", "forget", "--store", u, "--user", "u-42")
	if code != 0 || out != "forgot user u-42: 1 fact, 1 conversation\n" {
		t.Fatalf("memory forget: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "memory", "show", "--store", u, "--user", "u-42")
	if code != 0 || !strings.Contains(out, "user u-42: 0 facts, 0 conversations") {
		t.Fatalf("memory show after forget: %d %q", code, out)
	}
}

func TestStoreMigrateOtherStores(t *testing.T) {
	path := t.TempDir() + "/s.db"
	code, out, errOut := runCLI(t, "store", "migrate", "sqlite:"+path)
	if code != 0 || !strings.HasPrefix(out, "sqlite: "+path+" at version ") {
		t.Errorf("sqlite: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "store", "migrate", "memory:")
	if code != 0 || out != "memory: no schema, nothing to migrate\n" {
		t.Errorf("memory: %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, "store", "migrate", "ftp://x"); code == 0 || !strings.Contains(errOut, "store URL") {
		t.Errorf("bad URL: %d %q", code, errOut)
	}
}
