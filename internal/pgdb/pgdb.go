// Package pgdb opens PostgreSQL for agentrun's stores (the memory store and the
// knowledge index): a connection pool with agentrun's defaults, the schema the
// store's tables live in, versioned migrations run under an advisory lock, and
// retries of transactions the server aborted for serialization.
//
// It imports pgx only; it must not import the runtime.
package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema agentrun's tables live in unless the URL's schema
// parameter names another.
const DefaultSchema = "agentrun"

// DefaultStatementTimeout bounds every statement unless the URL's
// statement_timeout says otherwise: a stuck query must not hold a run forever.
const DefaultStatementTimeout = "30s"

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// DB is an open pool and the schema its tables live in.
type DB struct {
	Pool   *pgxpool.Pool
	Schema string
}

// Open connects to the database a postgres:// (or postgresql://) URL names. Besides
// libpq's and pgx's parameters (pool_max_conns, connect_timeout, sslmode, …) the URL
// may carry schema=NAME; statement_timeout defaults to DefaultStatementTimeout. The
// schema is the connections' search_path, so statements name tables unqualified.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("not a postgres:// URL")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: its parameters: %w", err)
	}
	schema := DefaultSchema
	if s := q.Get("schema"); s != "" {
		schema = s
	}
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("schema %q: use lower-case letters, digits and _ (at most 63)", schema)
	}
	q.Del("schema")
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err) // pgx leaves the password out
	}
	params := cfg.ConnConfig.RuntimeParams
	params["search_path"] = schema
	if params["statement_timeout"] == "" {
		params["statement_timeout"] = DefaultStatementTimeout
	}
	if params["application_name"] == "" {
		params["application_name"] = "agentrun"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &DB{Pool: pool, Schema: schema}, nil
}

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// ErrNewerSchema is a schema written by a newer agentrun.
var ErrNewerSchema = errors.New("the database was written by a newer agentrun")

// Migrate brings component's tables (migrations[i] takes version i to i+1) up to
// date in one transaction, under an advisory lock on the schema: two
// processes starting at once both succeed, one after the other, and neither sees
// half a schema. Versions are kept in the schema's agentrun_migrations table. It
// returns how many migrations it applied.
func (db *DB) Migrate(ctx context.Context, component string, migrations []string) (int, error) {
	schema := pgx.Identifier{db.Schema}.Sanitize()
	// Up to date already: no lock and no DDL, so a role with only the tables'
	// privileges can use a schema that `agentrun store migrate` prepared.
	var current int
	err := db.Pool.QueryRow(ctx, `SELECT version FROM `+schema+`.agentrun_migrations WHERE component = $1`, component).Scan(&current)
	if err == nil && current == len(migrations) {
		return 0, nil
	}
	tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	// One lock for the whole schema: the store and the knowledge index migrate
	// one after the other, as both create the schema and the versions table. The
	// wait for it is not a statement that may time out.
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "agentrun:"+db.Schema); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+schema+`.agentrun_migrations (
		component TEXT PRIMARY KEY,
		version   INTEGER NOT NULL,
		updated_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return 0, err
	}
	var version int
	err = tx.QueryRow(ctx, `SELECT version FROM `+schema+`.agentrun_migrations WHERE component = $1`, component).Scan(&version)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	if version > len(migrations) {
		return 0, fmt.Errorf("%w: %s schema version %d, this agentrun knows up to %d; upgrade agentrun", ErrNewerSchema, component, version, len(migrations))
	}
	if version == len(migrations) {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+schema); err != nil {
		return 0, err
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.Exec(ctx, migrations[i]); err != nil {
			return 0, fmt.Errorf("%s migration %d: %w", component, i+1, err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.agentrun_migrations (component, version) VALUES ($1, $2)
		ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, updated_at = now()`, component, len(migrations)); err != nil {
		return 0, err
	}
	return len(migrations) - version, tx.Commit(ctx)
}

// InTx runs fn in a transaction at the given isolation, again (up to 5 tries, with
// a short backoff) when the server aborts it for a serialization failure or a
// deadlock: those say "try again", not "you are wrong".
func (db *DB) InTx(ctx context.Context, iso pgx.TxIsoLevel, fn func(pgx.Tx) error) error {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
			}
		}
		err = pgx.BeginTxFunc(ctx, db.Pool, pgx.TxOptions{IsoLevel: iso}, fn)
		if !Retryable(err) {
			return err
		}
	}
	return err
}

// Retryable reports whether err is a serialization failure or a deadlock.
func Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}
