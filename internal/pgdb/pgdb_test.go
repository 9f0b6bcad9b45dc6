package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// freshURL is a schema of the test's own (see pgtest) and its name.
func freshURL(t *testing.T) (string, string) {
	u, db := pgtest.Schema(t)
	return u, db.Schema
}

var migrations = []string{
	`CREATE TABLE notes (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, text TEXT NOT NULL)`,
	`ALTER TABLE notes ADD COLUMN author TEXT NOT NULL DEFAULT ''`,
}

// Processes that start at once all migrate: one applies the migrations, the others
// find them applied; the tables land in the URL's schema.
func TestMigrateConcurrently(t *testing.T) {
	u, schema := freshURL(t)
	ctx := context.Background()
	const n = 6
	applied := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			db, err := pgdb.Open(ctx, u) // a pool each: separate sessions, like separate processes
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			applied[i], errs[i] = db.Migrate(ctx, "notes", migrations)
		})
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	if total != len(migrations) {
		t.Fatalf("%d migrations applied in all, want %d once", total, len(migrations))
	}
	db, err := pgdb.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Schema != schema {
		t.Fatalf("schema %q, want %q", db.Schema, schema)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO notes (text, author) VALUES ('hi', 'me')`); err != nil {
		t.Fatalf("the migrated table is not on the search path: %v", err)
	}
	var tables int
	db.Pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'notes'`, schema).Scan(&tables)
	if tables != 1 {
		t.Fatalf("notes is in %d tables of schema %s", tables, schema)
	}
	if n, err := db.Migrate(ctx, "notes", migrations); n != 0 || err != nil {
		t.Fatalf("migrating again applied %d: %v", n, err)
	}
	if _, err := db.Migrate(ctx, "notes", migrations[:1]); !errors.Is(err, pgdb.ErrNewerSchema) {
		t.Fatalf("an older agentrun migrating: %v", err)
	}
}

func TestOpenRejects(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:6379", "postgres://127.0.0.1/test?schema=Bad-Name", "postgres://127.0.0.1/test?schema=x;drop"} {
		if db, err := pgdb.Open(context.Background(), u); err == nil {
			db.Close()
			t.Errorf("%s opened", u)
		}
	}
}

// A transaction the server aborts for serialization runs again.
func TestInTxRetriesSerializationFailures(t *testing.T) {
	u, _ := freshURL(t)
	ctx := context.Background()
	db, err := pgdb.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx, "notes", migrations); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE counter (n INT NOT NULL); INSERT INTO counter VALUES (0)`); err != nil {
		t.Fatal(err)
	}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			errs <- db.InTx(ctx, pgx.Serializable, func(tx pgx.Tx) error {
				var n int
				if err := tx.QueryRow(ctx, `SELECT n FROM counter`).Scan(&n); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE counter SET n = $1`, n+1)
				return err
			})
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if !pgdb.Retryable(err) {
				t.Fatal(err)
			}
			failed++ // still conflicting after every retry: allowed, but then it did not count
		}
	}
	var n int
	db.Pool.QueryRow(ctx, `SELECT n FROM counter`).Scan(&n)
	if n != workers-failed || n == 0 {
		t.Fatalf("counter %d after %d successful increments", n, workers-failed)
	}
}

// Two components starting at once on a fresh schema (the store and the knowledge
// index) both create it and the versions table: they take turns.
func TestComponentsMigrateAtOnce(t *testing.T) {
	u, _ := freshURL(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			db, err := pgdb.Open(ctx, u)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			_, errs[i] = db.Migrate(ctx, fmt.Sprintf("c%d", i), []string{fmt.Sprintf(`CREATE TABLE t%d (x INT)`, i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("component %d: %v", i, err)
		}
	}
}

// A role with only the tables' privileges uses a schema migrated beforehand: an
// up-to-date schema needs no DDL.
func TestMigratedSchemaNeedsNoDDL(t *testing.T) {
	u, schema := freshURL(t)
	ctx := context.Background()
	admin, err := pgdb.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Migrate(ctx, "notes", migrations); err != nil {
		t.Fatal(err)
	}
	role := schema + "_rt"
	q := pgx.Identifier{role}.Sanitize()
	s := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		`CREATE ROLE ` + q + ` LOGIN NOSUPERUSER NOCREATEDB`,
		`GRANT USAGE ON SCHEMA ` + s + ` TO ` + q,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + s + ` TO ` + q,
	} {
		if _, err := admin.Pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		admin.Pool.Exec(ctx, `DROP OWNED BY `+q)
		admin.Pool.Exec(ctx, `DROP ROLE `+q)
	})
	ru, _ := url.Parse(u)
	ru.User = url.User(role)
	db, err := pgdb.Open(ctx, ru.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.Migrate(ctx, "notes", migrations); n != 0 || err != nil {
		t.Fatalf("the runtime role migrating an up-to-date schema: %d, %v", n, err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO notes (text) VALUES ('hi')`); err != nil {
		t.Fatal(err)
	}
}
