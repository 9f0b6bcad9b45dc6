package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentrun/agentrun/internal/sqlitedb"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// Index is a knowledge index in one SQLite file. It is safe for concurrent use.
type Index struct {
	// write has a single connection, so this process's writers queue in database/sql;
	// other processes are held off by busy_timeout and IMMEDIATE transactions.
	write *sql.DB
	// read serves searches, which WAL lets run alongside a writer.
	read *sql.DB
	// generationStmt is learnedGenerationQuery prepared on read.
	generationStmt *sql.Stmt

	vectors index.VectorCache
	learned index.LearnedCache
}

var _ index.Backend = (*Index)(nil)

// ErrNewerSchema reports an index written by a newer agentrun.
var ErrNewerSchema = sqlitedb.ErrNewerSchema

// readParams are the readers' connection settings (the writer's are sqlitedb's):
// a larger page cache and memory-mapped reads, for the scans of chunks and terms.
const readParams = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=query_only(1)&_pragma=cache_size(-32000)&_pragma=mmap_size(268435456)"

// applicationID marks a file as an agentrun knowledge index ("agKI"), so the index
// is never opened on another SQLite file, such as the conversation store, whose
// user_version means something else.
const applicationID = 0x61674b49

// migrations bring the schema from version i to i+1; append-only.
var migrations = []string{
	// 1: the initial schema. generation grows with every Update, so a process's
	// cached vectors notice an Update by another process. Vectors are keyed by
	// content hash, not by chunk row, so a chunk that moves keeps its vectors.
	`CREATE TABLE collections (
		name       TEXT PRIMARY KEY,
		embedder   TEXT NOT NULL,
		dimensions INTEGER NOT NULL,
		generation INTEGER NOT NULL,
		chunks     INTEGER NOT NULL,
		updated_at TEXT NOT NULL
	) WITHOUT ROWID;

	CREATE TABLE chunks (
		id         INTEGER PRIMARY KEY,
		collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
		hash       TEXT NOT NULL,
		kind       TEXT NOT NULL,
		source     TEXT NOT NULL,
		heading    TEXT NOT NULL,
		start_line INTEGER NOT NULL,
		end_line   INTEGER NOT NULL,
		text       TEXT NOT NULL,
		questions  TEXT NOT NULL -- JSON array
	);
	CREATE INDEX chunks_hash ON chunks(collection, hash);

	CREATE TABLE vectors (
		collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
		hash       TEXT NOT NULL,
		seq        INTEGER NOT NULL,
		embedder   TEXT NOT NULL,
		dimensions INTEGER NOT NULL,
		vector     BLOB NOT NULL, -- float32 little-endian
		PRIMARY KEY (collection, hash, seq)
	);

	-- Contentless: the text is in chunks. ftsText has split, lower-cased and stemmed
	-- it (CJK runs as bigrams), so the terms the vocabulary counts are a query's terms.
	CREATE VIRTUAL TABLE chunks_fts USING fts5(body, content='', contentless_delete=1,
		tokenize='unicode61 remove_diacritics 0');
	CREATE VIRTUAL TABLE chunks_terms USING fts5vocab(chunks_fts, 'row');`,

	// 2: a collection's source manifest (what agentrun index compares to tell whether
	// the sources changed), and the FAQ cache's learned entries: accepted answers of
	// earlier runs, keyed by agent, intent, spec version and embedder. user is ""
	// for an entry everyone may be served. Times are Unix nanoseconds; expires_at 0
	// is never. learned_keys.generation grows with every change to a key's entries,
	// so a process's cached vectors notice another process's Learn.
	`ALTER TABLE collections ADD COLUMN manifest TEXT NOT NULL DEFAULT '';

	CREATE TABLE learned (
		id         INTEGER PRIMARY KEY,
		agent      TEXT NOT NULL,
		intent     TEXT NOT NULL,
		version    TEXT NOT NULL,
		embedder   TEXT NOT NULL,
		dimensions INTEGER NOT NULL,
		user       TEXT NOT NULL,
		question   TEXT NOT NULL,
		answer     TEXT NOT NULL,
		vector     BLOB NOT NULL, -- float32 little-endian
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	);
	CREATE INDEX learned_key ON learned(agent, intent, version, embedder, user, question);
	CREATE INDEX learned_user ON learned(user, agent, intent);
	CREATE INDEX learned_expires ON learned(expires_at) WHERE expires_at > 0;

	CREATE TABLE learned_keys (
		agent      TEXT NOT NULL,
		intent     TEXT NOT NULL,
		version    TEXT NOT NULL,
		embedder   TEXT NOT NULL,
		generation INTEGER NOT NULL,
		PRIMARY KEY (agent, intent, version, embedder)
	) WITHOUT ROWID;`,
}

// Open opens the index at path, creating the file (mode 0600) and its parent
// directories when missing, and brings its schema up to date.
func Open(path string) (*Index, error) {
	db, err := sqlitedb.Open(path, sqlitedb.Config{
		What: "knowledge index", ReadParams: readParams, Readers: 4, Migrations: migrations, AppID: applicationID,
		OtherDatabase: errors.New("not a knowledge index (another SQLite database?)"),
	})
	if err != nil {
		return nil, err
	}
	x := &Index{write: db.Write, read: db.Read}
	if x.generationStmt, err = x.read.Prepare(learnedGenerationQuery); err != nil {
		x.Close()
		return nil, fmt.Errorf("knowledge index %s: %w", path, err)
	}
	return x, nil
}

// Close closes the index.
func (x *Index) Close() error {
	var err error
	if x.generationStmt != nil {
		err = x.generationStmt.Close()
	}
	return errors.Join(err, x.read.Close(), x.write.Close())
}

// Knowledge adapts the index to knowledge.Knowledge for one agent using emb (see
// index.NewKnowledge).
func (x *Index) Knowledge(emb knowledge.Embedder, collections map[string]string) knowledge.Knowledge {
	return index.NewKnowledge(x, emb, collections)
}

// Manifest returns the fingerprint and the embedder ID collection was last indexed
// with; ok is false when it was never indexed.
func (x *Index) Manifest(ctx context.Context, collection string) (manifest, embedder string, ok bool, err error) {
	err = x.read.QueryRowContext(ctx, `SELECT manifest, embedder FROM collections WHERE name = ?`, collection).Scan(&manifest, &embedder)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("knowledge index: collection %s: %w", collection, err)
	}
	return manifest, embedder, true, nil
}

func queryEach(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args []any, each func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
