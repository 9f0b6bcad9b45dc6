package sqlite

import (
	"cmp"
	"container/heap"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

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

// UpdateOptions tune UpdateWith.
type UpdateOptions struct {
	// Rebuild drops the collection's vectors first, so every chunk is embedded again;
	// it is how a collection moves to another embedder.
	Rebuild bool
	// Manifest is an opaque fingerprint of the sources (paths, sizes, modification
	// times, chunk options), stored with the collection for Manifest to return.
	Manifest string
	// Progress, when set, is called with the texts embedded so far and the number to
	// embed: once with (0, total) before the first batch and after each batch. It is
	// called from the goroutine calling UpdateWith.
	Progress func(done, total int)
}

// Update makes collection hold exactly chunks, embedding only contents the index
// lacks; it is UpdateWith with no options.
func (x *Index) Update(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder) (Stats, error) {
	return x.UpdateWith(ctx, collection, chunks, emb, UpdateOptions{})
}

// Rebuild is UpdateWith with Rebuild set: every chunk is embedded again by emb.
func (x *Index) Rebuild(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder) (Stats, error) {
	return x.UpdateWith(ctx, collection, chunks, emb, UpdateOptions{Rebuild: true})
}

// UpdateWith makes collection hold exactly chunks, embedding only contents the
// index lacks (all of them with opts.Rebuild), and records opts.Manifest. A
// collection built by another embedder gives *EmbedderMismatchError unless
// opts.Rebuild. Everything happens in one transaction: an error, including an
// embedder's failure or a malformed vector (wrong count, wrong dimension, NaN or
// infinite values), leaves the index exactly as it was.
func (x *Index) UpdateWith(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts UpdateOptions) (Stats, error) {
	return x.update(ctx, collection, chunks, emb, opts)
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

type chunkRow struct {
	id                 int64
	source             string
	startLine, endLine int
}

func (x *Index) update(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts UpdateOptions) (Stats, error) {
	if collection == "" {
		return Stats{}, errors.New("knowledge index: no collection name")
	}
	if emb == nil {
		return Stats{}, fmt.Errorf("knowledge index: collection %s: no embedder", collection)
	}
	for i, c := range chunks {
		if c.Hash == "" {
			return Stats{}, fmt.Errorf("knowledge index: collection %s: chunk %d (%s:%d) has no hash", collection, i, c.Source, c.StartLine)
		}
	}
	st, err := x.updateTx(ctx, collection, chunks, emb, opts)
	if err != nil {
		var mismatch *EmbedderMismatchError
		if errors.As(err, &mismatch) {
			return Stats{}, err
		}
		return Stats{}, fmt.Errorf("knowledge index: collection %s: %w", collection, err)
	}
	x.invalidate(collection)
	return st, nil
}

func (x *Index) updateTx(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts UpdateOptions) (Stats, error) {
	rebuild := opts.Rebuild
	id := emb.ID()
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return Stats{}, err
	}
	defer tx.Rollback()

	var stored string
	var storedDims int
	var generation int64
	err = tx.QueryRowContext(ctx, `SELECT embedder, dimensions, generation FROM collections WHERE name = ?`, collection).Scan(&stored, &storedDims, &generation)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Stats{}, err
	case stored != id && !rebuild:
		return Stats{}, &EmbedderMismatchError{Collection: collection, Index: stored, Agent: id}
	}
	// An embedder that learns its dimension from its first answer (an OpenAI model's
	// native size) reports 0 until then: the collection's recorded dimension, or the
	// first vector embedded below, stands in (see embedAndStore).
	dims := emb.Dimensions()
	if dims == 0 && stored == id && !rebuild {
		dims = storedDims
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO collections(name, embedder, dimensions, generation, chunks, updated_at, manifest)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET embedder = excluded.embedder,
		dimensions = excluded.dimensions, generation = excluded.generation, chunks = excluded.chunks,
		updated_at = excluded.updated_at, manifest = excluded.manifest`,
		collection, id, dims, generation+1, len(chunks), time.Now().UTC().Format(time.RFC3339Nano), opts.Manifest); err != nil {
		return Stats{}, err
	}
	if rebuild {
		if _, err := tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ?`, collection); err != nil {
			return Stats{}, err
		}
	} else if _, err := tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ? AND embedder <> ?`, collection, id); err != nil {
		return Stats{}, err // none unless the file was edited by hand
	}

	// What the index has.
	have := map[string]bool{}
	if err := queryEach(ctx, tx, `SELECT DISTINCT hash FROM vectors WHERE collection = ?`, []any{collection}, func(rows *sql.Rows) error {
		var h string
		if err := rows.Scan(&h); err != nil {
			return err
		}
		have[h] = true
		return nil
	}); err != nil {
		return Stats{}, err
	}
	existing := map[string][]chunkRow{}
	if err := queryEach(ctx, tx, `SELECT id, hash, source, start_line, end_line FROM chunks WHERE collection = ? ORDER BY id`, []any{collection}, func(rows *sql.Rows) error {
		var r chunkRow
		var h string
		if err := rows.Scan(&r.id, &h, &r.source, &r.startLine, &r.endLine); err != nil {
			return err
		}
		existing[h] = append(existing[h], r)
		return nil
	}); err != nil {
		return Stats{}, err
	}

	// Vectors: embed what is missing, delete what is gone.
	var st Stats
	missing, wanted := MissingChunks(chunks, have)
	st.Kept = len(wanted) - len(missing)
	n, got, err := embedAndStore(ctx, tx, collection, missing, emb, dims, opts.Progress)
	if err != nil {
		return Stats{}, err
	}
	if got != dims { // learned from the first vector
		if _, err := tx.ExecContext(ctx, `UPDATE collections SET dimensions = ? WHERE name = ?`, got, collection); err != nil {
			return Stats{}, err
		}
	}
	st.Embedded, st.Vectors = len(missing), n
	for h := range have {
		if wanted[h] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ? AND hash = ?`, collection, h); err != nil {
			return Stats{}, err
		}
		st.Deleted++
	}

	// Chunk rows: reuse a row of the same content (updating where it now sits),
	// insert the rest, delete the rows left over.
	for _, c := range chunks {
		if rs := existing[c.Hash]; len(rs) > 0 {
			r := rs[0]
			existing[c.Hash] = rs[1:]
			if r.source != c.Source || r.startLine != c.StartLine || r.endLine != c.EndLine {
				if _, err := tx.ExecContext(ctx, `UPDATE chunks SET source = ?, start_line = ?, end_line = ? WHERE id = ?`,
					c.Source, c.StartLine, c.EndLine, r.id); err != nil {
					return Stats{}, err
				}
			}
			continue
		}
		qs := c.Questions
		if qs == nil {
			qs = []string{}
		}
		questions, err := json.Marshal(qs)
		if err != nil {
			return Stats{}, err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO chunks(collection, hash, kind, source, heading, start_line, end_line, text, questions)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			collection, c.Hash, string(c.Kind), c.Source, c.Heading, c.StartLine, c.EndLine, c.Text, string(questions))
		if err != nil {
			return Stats{}, err
		}
		rowID, err := res.LastInsertId()
		if err != nil {
			return Stats{}, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)`, rowID, ftsText(searchText(c))); err != nil {
			return Stats{}, err
		}
	}
	for _, rs := range existing {
		for _, r := range rs {
			if _, err := tx.ExecContext(ctx, `DELETE FROM chunks_fts WHERE rowid = ?`, r.id); err != nil {
				return Stats{}, err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM chunks WHERE id = ?`, r.id); err != nil {
				return Stats{}, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return Stats{}, err
	}
	return st, nil
}

// embedTexts are what gets embedded for a chunk: each question of an FAQ entry
// separately (the FAQ cache matches questions, not answers); a passage with its
// heading, which is what makes "Refunds › Timing" findable.
func embedTexts(c knowledge.Chunk) []string {
	if c.Kind == knowledge.ChunkFAQ && len(c.Questions) > 0 {
		return c.Questions
	}
	if c.Heading != "" {
		return []string{c.Heading + "\n\n" + c.Text}
	}
	return []string{c.Text}
}

// searchText is what FTS5 indexes for a chunk.
func searchText(c knowledge.Chunk) string {
	parts := append([]string{c.Heading}, c.Questions...)
	return strings.Join(append(parts, c.Text), "\n")
}

type pending struct {
	hash string
	seq  int
}

// embedAndStore embeds the chunks' texts and inserts their vectors (see
// EmbedChunks).
func embedAndStore(ctx context.Context, tx *sql.Tx, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, dims int, progress func(done, total int)) (int, int, error) {
	var stmt *sql.Stmt
	defer func() {
		if stmt != nil {
			stmt.Close()
		}
	}()
	return EmbedChunks(ctx, chunks, emb, dims, progress, func(batch []ChunkVector, dims int) error {
		if stmt == nil {
			var err error
			if stmt, err = tx.PrepareContext(ctx, `INSERT INTO vectors(collection, hash, seq, embedder, dimensions, vector) VALUES (?, ?, ?, ?, ?, ?)`); err != nil {
				return err
			}
		}
		for _, v := range batch {
			if _, err := stmt.ExecContext(ctx, collection, v.Hash, v.Seq, emb.ID(), dims, encode(v.Vector)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ChunkVector is one embedded text of a chunk: its Seq-th (see EmbedTexts).
type ChunkVector struct {
	Hash   string
	Seq    int
	Vector []float32
}

// EmbedChunks embeds the chunks' texts in batches of EmbedBatch and hands each
// batch's checked vectors to store, calling progress (when set) before the first
// batch and after each; it returns the number of vectors and their dimension. dims
// 0 (not known yet) takes the first vector's length, which every other vector must
// then have. Both indexes store what it embeds.
func EmbedChunks(ctx context.Context, chunks []knowledge.Chunk, emb knowledge.Embedder, dims int, progress func(done, total int),
	store func(batch []ChunkVector, dims int) error) (int, int, error) {
	id := emb.ID()
	var texts []string
	var keys []pending
	for _, c := range chunks {
		for i, t := range embedTexts(c) {
			texts = append(texts, t)
			keys = append(keys, pending{c.Hash, i})
		}
	}
	if progress != nil {
		progress(0, len(texts))
	}
	if len(texts) == 0 {
		return 0, dims, nil
	}
	for start := 0; start < len(texts); start += embedBatch {
		end := min(start+embedBatch, len(texts))
		vecs, err := emb.Embed(ctx, texts[start:end])
		if err != nil {
			return 0, 0, fmt.Errorf("embedder %s: %w", id, err)
		}
		if len(vecs) != end-start {
			return 0, 0, fmt.Errorf("embedder %s: %d vectors for %d texts", id, len(vecs), end-start)
		}
		if dims == 0 {
			dims = cmp.Or(emb.Dimensions(), len(vecs[0]))
			if dims == 0 {
				return 0, 0, fmt.Errorf("embedder %s: text %d: empty vector", id, start)
			}
		}
		batch := make([]ChunkVector, len(vecs))
		for i, v := range vecs {
			if err := checkVector(v, dims); err != nil {
				return 0, 0, fmt.Errorf("embedder %s: text %d: %w", id, start+i, err)
			}
			k := keys[start+i]
			batch[i] = ChunkVector{Hash: k.hash, Seq: k.seq, Vector: v}
		}
		if err := store(batch, dims); err != nil {
			return 0, 0, err
		}
		if progress != nil {
			progress(end, len(texts))
		}
	}
	return len(texts), dims, nil
}

// MissingChunks returns the contents (hashes) chunks want and, each once, the
// chunks whose vectors are not stored yet (have): those to embed. The rest are kept.
func MissingChunks(chunks []knowledge.Chunk, have map[string]bool) (missing []knowledge.Chunk, wanted map[string]bool) {
	wanted = map[string]bool{}
	for _, c := range chunks {
		if wanted[c.Hash] {
			continue
		}
		wanted[c.Hash] = true
		if !have[c.Hash] {
			missing = append(missing, c)
		}
	}
	return missing, wanted
}

func checkVector(v []float32, dims int) error {
	if len(v) != dims {
		return fmt.Errorf("vector of %d dimensions, want %d", len(v), dims)
	}
	for _, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return errors.New("vector with NaN or infinite values")
		}
	}
	return nil
}

func encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeInto(dst []float32, b []byte) error {
	if len(b) != 4*len(dst) {
		return fmt.Errorf("stored vector of %d bytes, want %d", len(b), 4*len(dst))
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return nil
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

// vectors is a collection's vectors for one embedder, in one contiguous matrix:
// chunk i's vectors are rows start[i] to start[i+1].
type vectors struct {
	generation int64
	dims       int
	ids        []int64 // chunk row ids
	start      []int32 // len(ids)+1
	data       []float32
	// coarse holds every row of data in int8, scaled by scale[row]: a quarter of
	// the memory a scan must stream, for a first pass whose best are rescored
	// exactly (see top).
	coarse []int8
	scale  []float32
	index  map[int64]int32 // chunk id → i
	faq    []int32         // the i of FAQ chunks
	// faqPostings inverts the FAQ questions' vectors when they are sparse (a
	// question of the local embedder has about 30 non-zero components of 256):
	// per component, the rows that have it, so a sparse query touches only the
	// rows that share a component with it. nil when not worth it.
	faqPostings [][]posting
	rowChunk    []int32   // with faqPostings: each FAQ row's chunk i, -1 for other rows
	scorePool   sync.Pool // of *[]float32 with a score per row: lookups make no garbage
}

type posting struct {
	row int32
	val float32
}

// minInvertedRows is the number of FAQ rows from which they are inverted.
const minInvertedRows = 1024

// invertFAQ builds faqPostings when the FAQ rows are many and sparse.
func (v *vectors) invertFAQ() {
	rows, nnz := 0, 0
	for _, i := range v.faq {
		for r := v.start[i]; r < v.start[i+1]; r++ {
			rows++
			for _, x := range v.data[int(r)*v.dims : int(r+1)*v.dims] {
				if x != 0 {
					nnz++
				}
			}
		}
	}
	if rows < minInvertedRows || nnz*sparseShare > rows*v.dims {
		return
	}
	v.faqPostings = make([][]posting, v.dims)
	v.rowChunk = make([]int32, len(v.data)/v.dims)
	for r := range v.rowChunk {
		v.rowChunk[r] = -1
	}
	for _, i := range v.faq {
		for r := v.start[i]; r < v.start[i+1]; r++ {
			v.rowChunk[r] = i
			for d, x := range v.data[int(r)*v.dims : int(r+1)*v.dims] {
				if x != 0 {
					v.faqPostings[d] = append(v.faqPostings[d], posting{r, x})
				}
			}
		}
	}
}

// bestFAQ returns the FAQ chunk whose question is closest to q, its score and the
// question's row within the chunk; i is -1 when there are no FAQ chunks.
func (v *vectors) bestFAQ(q *queryVector) (i int32, score float32, row int) {
	if len(v.faq) == 0 {
		return -1, 0, -1
	}
	if v.faqPostings == nil || 2*len(q.idx) > v.dims { // a dense query: postings would read most rows' components

		top := v.topOf(q, 1, v.faq)
		score, row = v.best(q, top[0].i)
		return top[0].i, score, row
	}
	buf, _ := v.scorePool.Get().(*[]float32)
	if buf == nil {
		buf = &[]float32{}
		*buf = make([]float32, len(v.rowChunk))
	}
	defer v.scorePool.Put(buf)
	scores := *buf
	clear(scores)
	for k, d := range q.idx {
		w := q.val[k]
		for _, p := range v.faqPostings[d] {
			scores[p.row] += w * p.val
		}
	}
	// A row that shares no component scores 0, as the full product would; the
	// first FAQ row stands for all of them when nothing scores more.
	best := v.start[v.faq[0]]
	for r, s := range scores {
		if s > scores[best] && v.rowChunk[r] >= 0 {
			best = int32(r)
		}
	}
	i = v.rowChunk[best]
	score, row = v.best(q, i) // the exact score, summed as every other scan sums it
	return i, score, row
}

func (x *Index) invalidate(collection string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.cache {
		if k.collection == collection {
			delete(x.cache, k)
		}
	}
}

// vectorsFor returns the collection's vectors, loading them within tx when the
// cache has none of this generation.
func (x *Index) vectorsFor(ctx context.Context, tx *sql.Tx, collection, embedder string, dims int, generation int64) (*vectors, error) {
	key := cacheKey{collection, embedder}
	x.mu.Lock()
	v := x.cache[key]
	x.mu.Unlock()
	if v != nil && v.generation == generation {
		return v, nil
	}
	v = &vectors{generation: generation, dims: dims, index: map[int64]int32{}}
	var last int64 = -1
	err := queryEach(ctx, tx, `SELECT c.id, c.kind, v.vector FROM chunks c
		JOIN vectors v ON v.collection = c.collection AND v.hash = c.hash
		WHERE c.collection = ? AND v.embedder = ? ORDER BY c.id, v.seq`, []any{collection, embedder}, func(rows *sql.Rows) error {
		var id int64
		var kind string
		var blob []byte
		if err := rows.Scan(&id, &kind, &blob); err != nil {
			return err
		}
		if id != last {
			i := int32(len(v.ids))
			v.ids = append(v.ids, id)
			v.start = append(v.start, int32(len(v.data)/max(dims, 1)))
			v.index[id] = i
			if kind == string(knowledge.ChunkFAQ) {
				v.faq = append(v.faq, i)
			}
			last = id
		}
		n := len(v.data)
		v.data = slices.Grow(v.data, dims)[:n+dims]
		return decodeInto(v.data[n:], blob)
	})
	if err != nil {
		return nil, err
	}
	v.start = append(v.start, int32(len(v.data)/max(dims, 1)))
	v.quantize()
	v.invertFAQ()
	x.mu.Lock()
	if cur := x.cache[key]; cur == nil || cur.generation < generation {
		x.cache[key] = v
	}
	x.mu.Unlock()
	return v, nil
}

// quantize fills coarse and scale from data: each row's components over its
// largest magnitude, times 127.
func (v *vectors) quantize() {
	rows := len(v.data) / max(v.dims, 1)
	v.coarse, v.scale = make([]int8, len(v.data)), make([]float32, rows)
	for r := range rows {
		row := v.data[r*v.dims : (r+1)*v.dims]
		var m float32
		for _, x := range row {
			m = max(m, x, -x)
		}
		if m == 0 {
			continue
		}
		v.scale[r] = m / 127
		for i, x := range row {
			v.coarse[r*v.dims+i] = int8(math.Round(float64(x / m * 127)))
		}
	}
}

// coarseBest is chunk i's best score by the int8 rows.
func (v *vectors) coarseBest(q *queryVector, i int32) float32 {
	score := float32(math.Inf(-1))
	for r := v.start[i]; r < v.start[i+1]; r++ {
		off := int(r) * v.dims
		score = max(score, q.dot8(v.coarse[off:off+v.dims])*v.scale[r])
	}
	return score
}

// best is chunk i's best vector score and the row that gave it.
func (v *vectors) best(q *queryVector, i int32) (float32, int) {
	score, row := float32(math.Inf(-1)), -1
	for r := v.start[i]; r < v.start[i+1]; r++ {
		off := int(r) * v.dims
		if s := q.dot(v.data[off : off+v.dims]); s > score {
			score, row = s, int(r-v.start[i])
		}
	}
	return score, row
}

type scored struct {
	score float32
	i     int32
}

// minHeap keeps the n best scores seen, worst on top.
type minHeap []scored

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(a, b int) bool { return h[a].score < h[b].score }
func (h minHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// top returns the n chunks of best vector score, best first. The scan is bound by
// the memory it streams, so it runs over the int8 rows, split across CPUs for a
// large collection, and rescores its best candidates — many more than n, so int8's
// rounding cannot push a true top-n chunk out — with the float32 rows.
func (v *vectors) top(q *queryVector, n int) []scored { return v.topOf(q, n, nil) }

// topOf is top among the chunks of subset (nil: every chunk).
func (v *vectors) topOf(q *queryVector, n int, subset []int32) []scored {
	total := len(v.ids)
	if subset != nil {
		total = len(subset)
	}
	candidates := min(total, max(4*n, minRescored))
	workers := 1
	if total > parallelRows {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := make([][]scored, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := total*w/workers, total*(w+1)/workers
		wg.Go(func() {
			h := make(minHeap, 0, candidates+1)
			for k := lo; k < hi; k++ {
				i := int32(k)
				if subset != nil {
					i = subset[k]
				}
				s := v.coarseBest(q, i)
				if len(h) < candidates {
					heap.Push(&h, scored{s, i})
				} else if s > h[0].score {
					h[0] = scored{s, i}
					heap.Fix(&h, 0)
				}
			}
			parts[w] = h
		})
	}
	wg.Wait()
	all := slices.Concat(parts...)
	for k := range all {
		all[k].score, _ = v.best(q, all[k].i)
	}
	slices.SortFunc(all, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(v.ids[a.i], v.ids[b.i]))
	})
	return all[:min(n, len(all))]
}

// embedQuery embeds one query and checks the vector.
func embedQuery(ctx context.Context, emb knowledge.Embedder, query string) ([]float32, error) {
	vecs, err := emb.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embedder %s: %w", emb.ID(), err)
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("embedder %s: %d vectors for 1 text", emb.ID(), len(vecs))
	}
	if err := checkVector(vecs[0], emb.Dimensions()); err != nil {
		return nil, fmt.Errorf("embedder %s: %w", emb.ID(), err)
	}
	return vecs[0], nil
}

// snapshot opens a read transaction and checks the collection's embedder and that
// its vectors have the query's dimension qdims.
func (x *Index) snapshot(ctx context.Context, collection string, emb knowledge.Embedder, qdims int) (*sql.Tx, *vectors, error) {
	tx, err := x.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	var stored string
	var dims int
	var generation int64
	err = tx.QueryRowContext(ctx, `SELECT embedder, dimensions, generation FROM collections WHERE name = ?`, collection).
		Scan(&stored, &dims, &generation)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		tx.Rollback()
		return nil, nil, fmt.Errorf("collection %s: %w: run agentrun index", collection, ErrNotIndexed)
	case err != nil:
		tx.Rollback()
		return nil, nil, err
	case stored != emb.ID():
		tx.Rollback()
		return nil, nil, &EmbedderMismatchError{Collection: collection, Index: stored, Agent: emb.ID()}
	case dims != qdims && dims != 0:
		tx.Rollback()
		return nil, nil, fmt.Errorf("embedder %s: query vector of %d dimensions, the index has %d", stored, qdims, dims)
	}
	v, err := x.vectorsFor(ctx, tx, collection, stored, dims, generation)
	if err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	return tx, v, nil
}

func wrapSearchErr(op, collection string, err error) error {
	var mismatch *EmbedderMismatchError
	if errors.As(err, &mismatch) {
		return err
	}
	return fmt.Errorf("knowledge index: %s %s: %w", op, collection, err)
}

// Search returns up to k chunks of collection for query, best first: the vector
// ranking and the FTS5 BM25 ranking fused by reciprocal rank fusion.
func (x *Index) Search(ctx context.Context, collection, query string, emb knowledge.Embedder, k int) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	q, err := embedQuery(ctx, emb, query)
	if err != nil {
		return nil, wrapSearchErr("search", collection, err)
	}
	hits, err := x.search(ctx, collection, query, q, emb, k)
	if err != nil {
		return nil, wrapSearchErr("search", collection, err)
	}
	return hits, nil
}

// search is Search with query's vector q.
func (x *Index) search(ctx context.Context, collection, query string, q []float32, emb knowledge.Embedder, k int) ([]Hit, error) {
	tx, v, err := x.snapshot(ctx, collection, emb, len(q))
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()

	n := max(4*k, minCandidates)
	type fused struct {
		rrf  float64
		vec  float32
		row  int
		bm25 float64
	}
	byID := map[int64]*fused{}
	qv := newQueryVector(q)
	for rank, s := range v.top(qv, n) {
		byID[v.ids[s.i]] = &fused{rrf: 1 / float64(rrfK+rank+1), vec: s.score, row: -1}
	}
	match, err := textQuery(ctx, tx, query)
	if err != nil {
		return nil, err
	}
	if match != "" {
		rank := 0
		err := queryEach(ctx, tx, `SELECT chunks_fts.rowid, bm25(chunks_fts) AS r FROM chunks_fts
			JOIN chunks c ON c.id = chunks_fts.rowid
			WHERE chunks_fts MATCH ? AND c.collection = ? ORDER BY r LIMIT ?`, []any{match, collection, n}, func(rows *sql.Rows) error {
			var id int64
			var bm float64
			if err := rows.Scan(&id, &bm); err != nil {
				return err
			}
			f := byID[id]
			if f == nil {
				f = &fused{vec: float32(math.NaN())}
				byID[id] = f
			}
			rank++
			f.rrf += 1 / float64(rrfK+rank)
			f.bm25 = -bm // FTS5's bm25 is lower-is-better
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int64) int {
		return cmp.Or(cmp.Compare(byID[b].rrf, byID[a].rrf), cmp.Compare(a, b))
	})
	ids = ids[:min(k, len(ids))]
	chunks, err := loadChunks(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, len(ids))
	for _, id := range ids {
		f := byID[id]
		c, ok := chunks[id]
		if !ok {
			continue
		}
		h := Hit{Chunk: c, Score: f.rrf, VectorScore: f.vec, BM25: f.bm25}
		row := -1
		if i, ok := v.index[id]; ok {
			h.VectorScore, row = v.best(qv, i)
		} else if math.IsNaN(float64(h.VectorScore)) {
			h.VectorScore = 0 // a chunk without vectors: cannot happen after Update
		}
		if c.Kind == knowledge.ChunkFAQ && row >= 0 && row < len(c.Questions) {
			h.Question = c.Questions[row]
		}
		hits = append(hits, h)
	}
	return hits, tx.Commit()
}

// FAQ returns the FAQ entry of collection whose question (or variant) is closest to
// query by vector score alone, with that score as Hit.Score and Hit.VectorScore;
// false when the collection has no FAQ entries. Comparing the score with a
// threshold is the caller's.
func (x *Index) FAQ(ctx context.Context, collection, query string, emb knowledge.Embedder) (Hit, bool, error) {
	q, err := embedQuery(ctx, emb, query)
	if err != nil {
		return Hit{}, false, wrapSearchErr("faq", collection, err)
	}
	h, ok, err := x.faq(ctx, collection, q, emb)
	if err != nil {
		return Hit{}, false, wrapSearchErr("faq", collection, err)
	}
	return h, ok, nil
}

// faq is FAQ with the query's vector q.
func (x *Index) faq(ctx context.Context, collection string, q []float32, emb knowledge.Embedder) (Hit, bool, error) {
	tx, v, err := x.snapshot(ctx, collection, emb, len(q))
	if err != nil {
		return Hit{}, false, err
	}
	defer tx.Rollback()
	bestI, bestScore, bestRow := v.bestFAQ(newQueryVector(q))
	if bestI < 0 {
		return Hit{}, false, tx.Commit()
	}
	id := v.ids[bestI]
	chunks, err := loadChunks(ctx, tx, []int64{id})
	if err != nil {
		return Hit{}, false, err
	}
	c, ok := chunks[id]
	if !ok {
		return Hit{}, false, fmt.Errorf("chunk %d vanished", id)
	}
	h := Hit{Chunk: c, Score: float64(bestScore), VectorScore: bestScore}
	if bestRow >= 0 && bestRow < len(c.Questions) {
		h.Question = c.Questions[bestRow]
	}
	return h, true, tx.Commit()
}

func loadChunks(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]knowledge.Chunk, error) {
	out := make(map[int64]knowledge.Chunk, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	query := `SELECT id, hash, kind, source, heading, start_line, end_line, text, questions FROM chunks WHERE id IN (?` +
		strings.Repeat(", ?", len(ids)-1) + `)`
	err := queryEach(ctx, tx, query, args, func(rows *sql.Rows) error {
		var id int64
		var c knowledge.Chunk
		var kind, questions string
		if err := rows.Scan(&id, &c.Hash, &kind, &c.Source, &c.Heading, &c.StartLine, &c.EndLine, &c.Text, &questions); err != nil {
			return err
		}
		c.Kind = knowledge.ChunkKind(kind)
		if err := json.Unmarshal([]byte(questions), &c.Questions); err != nil {
			return fmt.Errorf("chunk %d: questions: %w", id, err)
		}
		if len(c.Questions) == 0 {
			c.Questions = nil
		}
		out[id] = c
		return nil
	})
	return out, err
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// terms splits text into FTS terms: lower-cased words of letters and digits, and
// for runs of CJK characters (which have no spaces, and which FTS5's unicode61
// tokenizer would keep as one token) their overlapping bigrams, or the character
// itself for a run of one.
func terms(text string) []string {
	var out []string
	var word, cjk []rune
	flushWord := func() {
		if len(word) > 0 {
			out = append(out, stem(strings.ToLower(string(word))))
			word = word[:0]
		}
	}
	flushCJK := func() {
		switch len(cjk) {
		case 0:
		case 1:
			out = append(out, string(cjk))
		default:
			for i := 0; i+1 < len(cjk); i++ {
				out = append(out, string(cjk[i:i+2]))
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range text {
		switch {
		case isCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			flushCJK()
			word = append(word, r)
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

// stem folds a plural: "refunds" → "refund", "boxes" → "box", "policies" →
// "policy"; crude, but applied alike to the index and the query.
func stem(w string) string {
	switch {
	case len(w) <= 3 || !strings.HasSuffix(w, "s") || strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "sses"):
		return w[:len(w)-2]
	}
	return w[:len(w)-1]
}

// ftsText is what chunks_fts stores for a text: its terms separated by spaces.
func ftsText(text string) string { return strings.Join(terms(text), " ") }

// queryTerms are query's distinct terms, at most maxQueryTerms.
func queryTerms(query string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range terms(query) {
		if !seen[t] && len(out) < maxQueryTerms {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// ftsQuery is an FTS5 query matching any of the terms, each quoted (so no term is
// read as an operator); "" when there are none.
func ftsQuery(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// textQuery is the FTS5 query for query: its terms, without the most common ones
// while together they would match more than maxTextMatches rows (counted over the
// whole file, from the FTS vocabulary).
func textQuery(ctx context.Context, tx *sql.Tx, query string) (string, error) {
	ts := queryTerms(query)
	if len(ts) == 0 {
		return "", nil
	}
	docs := make([]int, len(ts))
	total := 0
	for i, t := range ts {
		err := tx.QueryRowContext(ctx, `SELECT doc FROM chunks_terms WHERE term = ?`, t).Scan(&docs[i])
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", err
		}
		total += docs[i]
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(docs[b], docs[a]) })
	drop := map[int]bool{}
	for _, i := range order {
		if total <= maxTextMatches {
			break
		}
		drop[i] = true
		total -= docs[i]
	}
	kept := ts[:0:0]
	for i, t := range ts {
		if !drop[i] && docs[i] > 0 {
			kept = append(kept, t)
		}
	}
	return ftsQuery(kept), nil
}
