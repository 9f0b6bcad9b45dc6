// Package pgtest gives tests a PostgreSQL schema of their own on the server
// DATABASE_URL names. Locally the tests skip without a server; in CI (CI=true) a
// missing or silent server fails them, so the postgres code cannot go untested
// unnoticed.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/jackc/pgx/v5"
)

// Schema returns DATABASE_URL with a new, random schema, dropped when the test
// ends, and a pool on it to look at the tables.
func Schema(tb testing.TB) (string, *pgdb.DB) {
	tb.Helper()
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("DATABASE_URL is not set: CI must run the postgres tests against a server (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
		}
		tb.Skip("DATABASE_URL is not set")
	}
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	schema := fmt.Sprintf("t_%016x", rand.Uint64())
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	db, err := pgdb.Open(context.Background(), u.String())
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal(err)
		}
		tb.Skipf("postgres does not answer: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := db.Pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			tb.Errorf("cleanup: %v", err)
		}
		db.Close()
	})
	return u.String(), db
}
