package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/agentrun/agentrun/runtime/knowledge"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	kpostgres "github.com/agentrun/agentrun/runtime/knowledge/index/postgres"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/postgres"
	"github.com/agentrun/agentrun/spec"
	"github.com/jackc/pgx/v5"
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
	want := regexp.MustCompile(fmt.Sprintf(`^postgres: schema %s at version %d \(applied %d\)\n`+
		`postgres: knowledge tables in schema %s at version ([1-9]\d*) \(applied ([1-9]\d*)\)\n$`, schema, postgres.Version, postgres.Version, schema))
	if m := want.FindStringSubmatch(out); code != 0 || m == nil || m[1] != m[2] {
		t.Fatalf("store migrate: %d %q %q, want %s", code, out, errOut, want)
	}
	code, out, _ = runCLI(t, "store", "migrate", u)
	want = regexp.MustCompile(fmt.Sprintf(`^postgres: schema %s at version %d \(applied 0\)\n`+
		`postgres: knowledge tables in schema %s at version [1-9]\d* \(applied 0\)\n$`, schema, postgres.Version, schema))
	if code != 0 || !want.MatchString(out) {
		t.Fatalf("store migrate again: %d %q, want %s", code, out, want)
	}

	st, err := agentrun.OpenStore(u, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := store.Record{UserID: "u-42", Conversation: "c-7",
		Messages: []model.Message{{Role: model.RoleUser, Content: "cancel A1001"}, {Role: model.RoleAssistant, Content: "cancelled"}},
		Seen:     map[string][]string{"orders": {"A1001"}},
		Facts:    []store.FactChange{{Op: store.FactSet, Key: "tier", Value: "gold", Source: "tool"}}}
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
	// The knowledge index in the same schema: an answer learned for u-42 alone, one
	// for everyone and one for another user.
	idx, err := kpostgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := knowledge.NewLocal(spec.DefaultLocalDimensions)
	if err != nil {
		t.Fatal(err)
	}
	key := kindex.LearnedKey{Agent: "shop", Intent: "faq", Version: "v1"}
	for _, who := range []string{"u-42", "", "u-7"} {
		if _, err := idx.Learn(context.Background(), key, emb, who, "Is there a coupon?", "Yes.", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	idx.Close()
	code, out, errOut = runCLI(t, "memory", "forget", "--store", u, "--index", u, "--user", "u-42")
	if code != 0 || out != "forgot user u-42: 1 fact, 1 conversation, 1 learned answer\n" {
		t.Fatalf("memory forget: %d %q %q", code, out, errOut)
	}
	// No row of the user is left in any table of the schema, the store's or the index's.
	db, err := pgdb.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Pool.Query(context.Background(), `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = $1 AND column_name IN ('user_id', 'user')`, db.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var tables [][2]string
	for rows.Next() {
		var table, column string
		rows.Scan(&table, &column)
		tables = append(tables, [2]string{table, column})
	}
	rows.Close()
	if len(tables) < 4 {
		t.Fatalf("only %v have a user column", tables)
	}
	for _, tc := range tables {
		var n int
		q := `SELECT count(*) FROM ` + pgx.Identifier{tc[0]}.Sanitize() + ` WHERE ` + pgx.Identifier{tc[1]}.Sanitize() + ` = 'u-42'`
		if err := db.Pool.QueryRow(context.Background(), q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows of the forgotten user (%v)", tc[0], n, err)
		}
	}
	var others int
	db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM knowledge_learned WHERE user_id IN ('', 'u-7')`).Scan(&others)
	if others != 2 {
		t.Errorf("%d answers of others left, want 2", others)
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
