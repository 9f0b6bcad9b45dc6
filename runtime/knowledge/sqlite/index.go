package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/agentrun/agentrun/runtime/knowledge"
	store "github.com/agentrun/agentrun/runtime/store/sqlite"
)

// Tuning of retrieval.
const (
	// rrfK is reciprocal rank fusion's constant (Cormack et al. 2009): a hit ranked
	// r-th (from 1) in a list adds 1/(rrfK+r) to its score.
	rrfK = 60
	// minCandidates is how many hits each list (vector, BM25) contributes at least to
	// the fusion; a chunk found by both near the top beats one found by one only.
	minCandidates = 50
	// maxQueryTerms bounds the FTS5 query built from a user's question.
	maxQueryTerms = 32
	// maxTextMatches bounds the rows an FTS5 query may match: FTS5 scores every
	// matching row (about 2 µs each here), so the most common terms of a query are
	// left out until the rest match at most this many rows. Such terms carry little
	// BM25 weight anyway, and the vector side still sees the whole query; a small
	// collection never reaches the bound.
	maxTextMatches = 1500
	// embedBatch is how many texts go to the embedder per call.
	embedBatch = 64
	// minRescored is how many chunks of a scan's int8 pass at least are rescored
	// with their float32 vectors.
	minRescored = 256
	// parallelRows is the number of vectors above which a scan is split across CPUs.
	parallelRows = 8192
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

	mu      sync.Mutex
	cache   map[cacheKey]*vectors
	learned map[learnedID]*learnedVectors
}

type cacheKey struct{ collection, embedder string }

// Stats counts an Update's work in distinct chunk contents (content hashes): a
// passage repeated verbatim in two files is stored twice but embedded once.
type Stats struct {
	Kept     int // already embedded by this embedder: not embedded again
	Embedded int // new or changed: embedded and stored
	Deleted  int // no longer present: removed
	Vectors  int // texts embedded (an FAQ chunk has one per question)
}

// Hit is one retrieved chunk.
type Hit struct {
	knowledge.Chunk
	// Score is the reciprocal-rank-fusion score for Search; the vector score for FAQ.
	Score float64
	// VectorScore is the best cosine similarity of the query to the chunk's vectors
	// (for an FAQ chunk, to its best question).
	VectorScore float32
	// BM25 is FTS5's relevance (higher is better), 0 when the text did not match.
	BM25 float64
	// Question is the FAQ question (or variant) that matched best; empty for text.
	Question string
}

// EmbedderMismatchError is a collection indexed by another embedder than the one in use.
type EmbedderMismatchError struct {
	Collection string
	Index      string // the embedder ID the collection was built by
	Agent      string // the embedder ID in use
}

func (e *EmbedderMismatchError) Error() string {
	return fmt.Sprintf("the index of collection %s was built by %s; this agent uses %s: run agentrun index to rebuild it",
		e.Collection, e.Index, e.Agent)
}

// ErrNotIndexed is a collection that has never been indexed.
var ErrNotIndexed = errors.New("not indexed")

// ErrNewerSchema reports an index written by a newer agentrun.
var ErrNewerSchema = store.ErrNewerSchema

// Connection settings, as in runtime/store/sqlite: busy_timeout first so the others
// wait for the lock too; _txlock=immediate takes the write lock at BEGIN.
const (
	writeParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	readParams  = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=query_only(1)&_pragma=cache_size(-32000)&_pragma=mmap_size(268435456)"
)

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
	if path == "" {
		return nil, errors.New("knowledge index: no file name")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("knowledge index %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("knowledge index: %w", err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("knowledge index: %w", err)
	}
	f.Close()

	x := &Index{cache: map[cacheKey]*vectors{}, learned: map[learnedID]*learnedVectors{}}
	if x.write, err = sql.Open("sqlite", store.FileURI(abs)+"?"+writeParams); err != nil {
		return nil, fmt.Errorf("knowledge index %s: %w", path, err)
	}
	x.write.SetMaxOpenConns(1)
	if x.read, err = sql.Open("sqlite", store.FileURI(abs)+"?"+readParams); err != nil {
		x.write.Close()
		return nil, fmt.Errorf("knowledge index %s: %w", path, err)
	}
	x.read.SetMaxOpenConns(4)
	if err := store.Migrate(context.Background(), x.write, migrations, applicationID); err != nil {
		x.Close()
		if errors.Is(err, store.ErrOtherDatabase) {
			err = errors.New("not a knowledge index (another SQLite database?)")
		}
		return nil, fmt.Errorf("knowledge index %s: %w", path, err)
	}
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
