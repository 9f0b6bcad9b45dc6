package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/sqlite"
)

// component names the index's migrations in pgdb's agentrun_migrations.
const component = "knowledge"

// migrations bring the index's tables from version i to i+1; append-only. Table
// names start with knowledge_: the schema may hold the memory store's tables too.
var migrations = []string{
	// 1: the tables of the SQLite index's schema version 2. generation grows with
	// every Update (and a learned key's with every change to its entries), so a
	// process's cached vectors notice another process's writes. Vectors are keyed by
	// content hash, so a chunk that moves keeps its vectors. terms holds the chunk's
	// full-text terms as the SQLite index computes them (sqlite.SearchTerms), written
	// as a tsvector literal: no text search configuration is involved.
	`CREATE TABLE knowledge_collections (
		name       TEXT PRIMARY KEY,
		embedder   TEXT NOT NULL,
		dimensions INTEGER NOT NULL,
		generation BIGINT NOT NULL,
		chunks     INTEGER NOT NULL,
		manifest   TEXT NOT NULL DEFAULT '',
		updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
	);

	CREATE TABLE knowledge_chunks (
		id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		collection TEXT NOT NULL REFERENCES knowledge_collections(name) ON DELETE CASCADE,
		hash       TEXT NOT NULL,
		kind       TEXT NOT NULL,
		source     TEXT NOT NULL,
		heading    TEXT NOT NULL,
		start_line INTEGER NOT NULL,
		end_line   INTEGER NOT NULL,
		text       TEXT NOT NULL,
		questions  TEXT[] NOT NULL,
		terms      TSVECTOR NOT NULL
	);
	CREATE INDEX knowledge_chunks_hash ON knowledge_chunks(collection, hash);
	CREATE INDEX knowledge_chunks_terms ON knowledge_chunks USING GIN (terms);

	CREATE TABLE knowledge_vectors (
		collection TEXT NOT NULL REFERENCES knowledge_collections(name) ON DELETE CASCADE,
		hash       TEXT NOT NULL,
		seq        INTEGER NOT NULL,
		embedder   TEXT NOT NULL,
		dimensions INTEGER NOT NULL,
		vector     BYTEA NOT NULL, -- float32 little-endian
		PRIMARY KEY (collection, hash, seq)
	);

	CREATE TABLE knowledge_learned (
		id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		agent      TEXT NOT NULL,
		intent     TEXT NOT NULL,
		version    TEXT NOT NULL,
		embedder   TEXT NOT NULL,
		dimensions INTEGER NOT NULL,
		user_id    TEXT NOT NULL, -- '' = shared
		question   TEXT NOT NULL,
		answer     TEXT NOT NULL,
		vector     BYTEA NOT NULL, -- float32 little-endian
		created_at BIGINT NOT NULL, -- Unix nanoseconds
		expires_at BIGINT NOT NULL  -- Unix nanoseconds; 0 never
	);
	CREATE INDEX knowledge_learned_key ON knowledge_learned(agent, intent, version, embedder, user_id, question);
	CREATE INDEX knowledge_learned_user ON knowledge_learned(user_id, agent, intent);
	CREATE INDEX knowledge_learned_expires ON knowledge_learned(expires_at) WHERE expires_at > 0;

	CREATE TABLE knowledge_learned_keys (
		agent      TEXT NOT NULL,
		intent     TEXT NOT NULL,
		version    TEXT NOT NULL,
		embedder   TEXT NOT NULL,
		generation BIGINT NOT NULL,
		PRIMARY KEY (agent, intent, version, embedder)
	);`,

	// 2: each chunk's number of terms, which BM25 weighs a match by (FTS5 counts
	// them itself); chunks stored before it get it from their tsvector.
	`ALTER TABLE knowledge_chunks ADD COLUMN terms_length INTEGER NOT NULL DEFAULT 0;
	UPDATE knowledge_chunks SET terms_length = (SELECT coalesce(sum(array_length(positions, 1)), 0) FROM unnest(terms));`,
}

// Index is a knowledge index in a PostgreSQL schema. It is safe for concurrent use.
type Index struct {
	db       *pgdb.DB
	pgvector bool
	// vectorNS is the vector extension's schema (quoted) when the index scores
	// with pgvector; "" when it scores in process.
	vectorNS string

	mu      sync.Mutex
	cache   map[cacheKey]*sqlite.Vectors
	learned map[learnedID]*learnedVectors
}

type cacheKey struct{ collection, embedder string }

var _ sqlite.Backend = (*Index)(nil)

// IsURL reports whether an index location is a PostgreSQL URL rather than a file.
func IsURL(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}

// Migrate brings the index's tables at the postgres:// URL up to date, as Open does:
// `agentrun store migrate` runs it beside the store's. It returns the tables'
// version and how many migrations it applied.
func Migrate(ctx context.Context, url string) (version, applied int, err error) {
	db, err := pgdb.Open(ctx, url)
	if err != nil {
		return 0, 0, fmt.Errorf("knowledge index: %w", err)
	}
	defer db.Close()
	if applied, err = db.Migrate(ctx, component, migrations); err != nil {
		return 0, 0, fmt.Errorf("knowledge index: %w", err)
	}
	return len(migrations), applied, nil
}

// Open connects to the database a postgres:// URL names (see pgdb.Open: the schema
// parameter, default agentrun, holds the tables) and brings the index's tables up
// to date.
func Open(ctx context.Context, url string) (*Index, error) {
	url, mode, err := splitVectorSearch(url)
	if err != nil {
		return nil, fmt.Errorf("knowledge index: %w", err)
	}
	db, err := pgdb.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("knowledge index: %w", err)
	}
	if _, err := db.Migrate(ctx, component, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("knowledge index: %w", err)
	}
	x := &Index{db: db, cache: map[cacheKey]*sqlite.Vectors{}, learned: map[learnedID]*learnedVectors{}}
	if err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&x.pgvector); err != nil {
		db.Close()
		return nil, fmt.Errorf("knowledge index: %w", err)
	}
	if mode == string(VectorsPgvector) || mode != string(VectorsInProcess) && x.pgvector {
		ns, err := x.enablePgvector(ctx)
		switch {
		case err == nil:
			x.vectorNS = ns
		case mode == string(VectorsPgvector):
			db.Close()
			return nil, fmt.Errorf("knowledge index: %s=pgvector: %w", vectorSearchParam, err)
		}
		// auto: a server that offers the extension but will not let this role use it
		// is searched in process, as one without it.
	}
	return x, nil
}

// VectorSearch says where the index scores vectors.
func (x *Index) VectorSearch() VectorSearch {
	if x.vectorNS != "" {
		return VectorsPgvector
	}
	return VectorsInProcess
}

// Close closes the connections.
func (x *Index) Close() error {
	x.db.Close()
	return nil
}

// Schema is the schema the index's tables live in.
func (x *Index) Schema() string { return x.db.Schema }

// VectorExtensionAvailable reports whether the server offers the pgvector
// extension ("vector"); VectorSearch says whether the index uses it.
func (x *Index) VectorExtensionAvailable() bool { return x.pgvector }

// Knowledge adapts the index to runtime.Knowledge for one agent using emb, as
// sqlite.Index.Knowledge does (the same adapter).
func (x *Index) Knowledge(emb knowledge.Embedder, collections map[string]string) runtime.Knowledge {
	return sqlite.NewKnowledge(x, emb, collections)
}

// Manifest returns the fingerprint and the embedder ID collection was last indexed
// with; ok is false when it was never indexed.
func (x *Index) Manifest(ctx context.Context, collection string) (manifest, embedder string, ok bool, err error) {
	err = x.db.Pool.QueryRow(ctx, `SELECT manifest, embedder FROM knowledge_collections WHERE name = $1`, collection).Scan(&manifest, &embedder)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("knowledge index: collection %s: %w", collection, err)
	}
	return manifest, embedder, true, nil
}

// Update makes collection hold exactly chunks; UpdateWith with no options.
func (x *Index) Update(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder) (sqlite.Stats, error) {
	return x.UpdateWith(ctx, collection, chunks, emb, sqlite.UpdateOptions{})
}

// UpdateWith makes collection hold exactly chunks, embedding only contents the
// index lacks (all of them with opts.Rebuild), and records opts.Manifest, exactly
// as sqlite.Index.UpdateWith does: a collection built by another embedder gives
// *sqlite.EmbedderMismatchError unless opts.Rebuild, and everything happens in one
// transaction (updates of one collection by several processes queue on an
// advisory lock).
func (x *Index) UpdateWith(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts sqlite.UpdateOptions) (sqlite.Stats, error) {
	if collection == "" {
		return sqlite.Stats{}, errors.New("knowledge index: no collection name")
	}
	if emb == nil {
		return sqlite.Stats{}, fmt.Errorf("knowledge index: collection %s: no embedder", collection)
	}
	for i, c := range chunks {
		if c.Hash == "" {
			return sqlite.Stats{}, fmt.Errorf("knowledge index: collection %s: chunk %d (%s:%d) has no hash", collection, i, c.Source, c.StartLine)
		}
	}
	var st sqlite.Stats
	err := pgx.BeginTxFunc(ctx, x.db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		st, err = x.updateTx(ctx, tx, collection, chunks, emb, opts)
		return err
	})
	if err != nil {
		var mismatch *sqlite.EmbedderMismatchError
		if errors.As(err, &mismatch) {
			return sqlite.Stats{}, err
		}
		return sqlite.Stats{}, fmt.Errorf("knowledge index: collection %s: %w", collection, err)
	}
	x.invalidate(collection)
	return st, nil
}

// updateTx is UpdateWith's transaction: the collection held and its row written
// first, then its vectors, then its chunk rows.
func (x *Index) updateTx(ctx context.Context, tx pgx.Tx, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts sqlite.UpdateOptions) (sqlite.Stats, error) {
	if err := x.holdCollection(ctx, tx, collection); err != nil {
		return sqlite.Stats{}, err
	}
	dims, err := writeCollection(ctx, tx, collection, len(chunks), emb, opts)
	if err != nil {
		return sqlite.Stats{}, err
	}
	have, stored, err := storedContents(ctx, tx, collection)
	if err != nil {
		return sqlite.Stats{}, err
	}
	st, err := x.updateVectors(ctx, tx, collection, chunks, have, emb, dims, opts.Progress)
	if err != nil {
		return sqlite.Stats{}, err
	}
	if err := updateChunkRows(ctx, tx, collection, knowledge.ChangeChunkRows(chunks, stored)); err != nil {
		return sqlite.Stats{}, err
	}
	return st, nil
}

// holdCollection takes the collection's advisory lock for the transaction.
func (x *Index) holdCollection(ctx context.Context, tx pgx.Tx, collection string) error {
	// An update embeds while it holds the collection: one of the same collection
	// waits for it however long that takes, rather than time out.
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "agentrun:"+x.db.Schema+":knowledge:"+collection)
	return err
}

// writeCollection records the update in the collection's row (embedder,
// dimension, chunk count, manifest, next generation) and drops the vectors it
// replaces: all of them with opts.Rebuild, otherwise another embedder's. It
// returns the dimension of the vectors, 0 while not known yet.
func writeCollection(ctx context.Context, tx pgx.Tx, collection string, n int, emb knowledge.Embedder, opts sqlite.UpdateOptions) (int, error) {
	rebuild := opts.Rebuild
	id := emb.ID()
	var stored string
	var storedDims int
	var generation int64
	err := tx.QueryRow(ctx, `SELECT embedder, dimensions, generation FROM knowledge_collections WHERE name = $1`, collection).Scan(&stored, &storedDims, &generation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return 0, err
	case stored != id && !rebuild:
		return 0, &sqlite.EmbedderMismatchError{Collection: collection, Index: stored, Agent: id}
	}
	dims := emb.Dimensions()
	if dims == 0 && stored == id && !rebuild {
		dims = storedDims
	}
	if _, err := tx.Exec(ctx, `INSERT INTO knowledge_collections(name, embedder, dimensions, generation, chunks, manifest, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (name) DO UPDATE SET embedder = EXCLUDED.embedder,
		dimensions = EXCLUDED.dimensions, generation = EXCLUDED.generation, chunks = EXCLUDED.chunks,
		manifest = EXCLUDED.manifest, updated_at = EXCLUDED.updated_at`,
		collection, id, dims, generation+1, n, opts.Manifest); err != nil {
		return 0, err
	}
	if rebuild {
		if _, err := tx.Exec(ctx, `DELETE FROM knowledge_vectors WHERE collection = $1`, collection); err != nil {
			return 0, err
		}
	} else if _, err := tx.Exec(ctx, `DELETE FROM knowledge_vectors WHERE collection = $1 AND embedder <> $2`, collection, id); err != nil {
		return 0, err
	}
	return dims, nil
}

// storedContents is what the index has of collection: the contents (hashes) with
// vectors, and the chunk rows by content in id order.
func storedContents(ctx context.Context, tx pgx.Tx, collection string) (map[string]bool, map[string][]knowledge.StoredChunk, error) {
	have := map[string]bool{}
	hashes, err := queryAll(ctx, tx, `SELECT DISTINCT hash FROM knowledge_vectors WHERE collection = $1`, []any{collection}, func(r pgx.Rows) (string, error) {
		var h string
		return h, r.Scan(&h)
	})
	if err != nil {
		return nil, nil, err
	}
	for _, h := range hashes {
		have[h] = true
	}
	stored := map[string][]knowledge.StoredChunk{}
	if _, err := queryAll(ctx, tx, `SELECT id, hash, source, start_line, end_line FROM knowledge_chunks WHERE collection = $1 ORDER BY id`, []any{collection}, func(r pgx.Rows) (struct{}, error) {
		var c knowledge.StoredChunk
		var h string
		if err := r.Scan(&c.ID, &h, &c.Source, &c.StartLine, &c.EndLine); err != nil {
			return struct{}{}, err
		}
		stored[h] = append(stored[h], c)
		return struct{}{}, nil
	}); err != nil {
		return nil, nil, err
	}
	return have, stored, nil
}

// updateVectors embeds the contents the index lacks (have), fills pgvector's
// column when the index scores with it, and deletes the vectors of contents no
// chunk has any more; a dimension learned from the first vector is recorded in the
// collection's row.
func (x *Index) updateVectors(ctx context.Context, tx pgx.Tx, collection string, chunks []knowledge.Chunk, have map[string]bool,
	emb knowledge.Embedder, dims int, progress func(done, total int)) (sqlite.Stats, error) {
	var st sqlite.Stats
	missing, wanted := sqlite.MissingChunks(chunks, have)
	st.Kept = len(wanted) - len(missing)
	n, got, err := embedAndStore(ctx, tx, collection, missing, emb, dims, progress)
	if err != nil {
		return sqlite.Stats{}, err
	}
	if x.vectorNS != "" {
		if err := fillEmbeddings(ctx, tx, x.vectorNS, collection); err != nil {
			return sqlite.Stats{}, err
		}
	}
	if got != dims {
		if _, err := tx.Exec(ctx, `UPDATE knowledge_collections SET dimensions = $1 WHERE name = $2`, got, collection); err != nil {
			return sqlite.Stats{}, err
		}
	}
	st.Embedded, st.Vectors = len(missing), n
	var gone []string
	for h := range have {
		if !wanted[h] {
			gone = append(gone, h)
		}
	}
	if len(gone) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM knowledge_vectors WHERE collection = $1 AND hash = ANY($2)`, collection, gone); err != nil {
			return sqlite.Stats{}, err
		}
	}
	st.Deleted = len(gone)
	return st, nil
}

// updateChunkRows applies ch in one batch: a reused row is updated where its chunk
// now sits, the other chunks are inserted (in order, so ids follow the chunks'
// order as in the SQLite index), and the rows left over are deleted.
func updateChunkRows(ctx context.Context, tx pgx.Tx, collection string, ch knowledge.ChunkRowChanges) error {
	batch := &pgx.Batch{}
	for _, m := range ch.Moved {
		c := m.Chunk
		batch.Queue(`UPDATE knowledge_chunks SET source = $1, start_line = $2, end_line = $3 WHERE id = $4`,
			c.Source, c.StartLine, c.EndLine, m.ID)
	}
	for _, c := range ch.Added {
		qs := c.Questions
		if qs == nil {
			qs = []string{}
		}
		terms := sqlite.SearchTerms(c)
		batch.Queue(`INSERT INTO knowledge_chunks(collection, hash, kind, source, heading, start_line, end_line, text, questions, terms, terms_length)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::tsvector, $11)`,
			collection, c.Hash, string(c.Kind), c.Source, c.Heading, c.StartLine, c.EndLine, c.Text, qs, tsvector(terms), len(terms))
	}
	if len(ch.Removed) > 0 {
		batch.Queue(`DELETE FROM knowledge_chunks WHERE id = ANY($1)`, ch.Removed)
	}
	if batch.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, batch).Close()
}

// embedAndStore embeds the chunks' texts and copies their vectors in (see
// sqlite.EmbedChunks).
func embedAndStore(ctx context.Context, tx pgx.Tx, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, dims int, progress func(done, total int)) (int, int, error) {
	return sqlite.EmbedChunks(ctx, chunks, emb, dims, progress, func(batch []sqlite.ChunkVector, dims int) error {
		rows := make([][]any, len(batch))
		for i, v := range batch {
			rows[i] = []any{collection, v.Hash, int32(v.Seq), emb.ID(), int32(dims), sqlite.EncodeVector(v.Vector)}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge_vectors"},
			[]string{"collection", "hash", "seq", "embedder", "dimensions", "vector"}, pgx.CopyFromRows(rows))
		return err
	})
}

// tsvector limits (PostgreSQL's): positions run to 16383, a lexeme keeps at most
// 256 of them and is at most 2047 bytes long.
const (
	maxPosition     = 16383
	maxPositions    = 256
	maxLexemeLength = 2046
)

// tsvector is the tsvector literal of terms, each a lexeme taken verbatim (no text
// search configuration, so no stemming or stop words beyond the terms' own) at its
// 1-based position: what FTS5 is given in the SQLite index.
func tsvector(terms []string) string {
	positions := map[string][]int{}
	var order []string
	for i, t := range terms {
		if t == "" || len(t) > maxLexemeLength {
			continue
		}
		ps, seen := positions[t]
		if !seen {
			order = append(order, t)
		}
		if len(ps) < maxPositions {
			positions[t] = append(ps, min(i+1, maxPosition))
		}
	}
	var b strings.Builder
	for k, t := range order {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteLexeme(t))
		b.WriteByte(':')
		for j, p := range slices.Compact(positions[t]) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
		}
	}
	return b.String()
}

// tsquery is the tsquery literal matching any of terms; "" when there are none.
func tsquery(terms []string) string {
	quoted := make([]string, 0, len(terms))
	for _, t := range terms {
		if t != "" && len(t) <= maxLexemeLength {
			quoted = append(quoted, quoteLexeme(t))
		}
	}
	return strings.Join(quoted, " | ")
}

func quoteLexeme(t string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(t) + "'"
}

func queryAll[T any](ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args []any, each func(pgx.Rows) (T, error)) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := each(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
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
func (x *Index) vectorsFor(ctx context.Context, tx pgx.Tx, collection, embedder string, dims int, generation int64) (*sqlite.Vectors, error) {
	key := cacheKey{collection, embedder}
	x.mu.Lock()
	v := x.cache[key]
	x.mu.Unlock()
	if v != nil && v.Generation() == generation {
		return v, nil
	}
	v = sqlite.NewVectors(generation, dims)
	rows, err := tx.Query(ctx, `SELECT c.id, c.kind, v.vector FROM knowledge_chunks c
		JOIN knowledge_vectors v ON v.collection = c.collection AND v.hash = c.hash
		WHERE c.collection = $1 AND v.embedder = $2 ORDER BY c.id, v.seq`, collection, embedder)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var kind string
		var blob []byte
		if err := rows.Scan(&id, &kind, &blob); err != nil {
			return nil, err
		}
		if err := v.Add(id, kind == string(knowledge.ChunkFAQ), blob); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	v.Done()
	x.mu.Lock()
	if cur := x.cache[key]; cur == nil || cur.Generation() < generation {
		x.cache[key] = v
	}
	x.mu.Unlock()
	return v, nil
}

// snapshot opens a read-only repeatable-read transaction and checks the
// collection's embedder and that its vectors have the query's dimension qdims.
func (x *Index) snapshot(ctx context.Context, collection string, emb knowledge.Embedder, q []float32) (pgx.Tx, scorer, error) {
	qdims := len(q)
	tx, err := x.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	var stored string
	var dims int
	var generation int64
	err = tx.QueryRow(ctx, `SELECT embedder, dimensions, generation FROM knowledge_collections WHERE name = $1`, collection).
		Scan(&stored, &dims, &generation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = fmt.Errorf("collection %s: %w: run agentrun index", collection, sqlite.ErrNotIndexed)
	case err != nil:
	case stored != emb.ID():
		err = &sqlite.EmbedderMismatchError{Collection: collection, Index: stored, Agent: emb.ID()}
	case dims != qdims && dims != 0:
		err = fmt.Errorf("embedder %s: query vector of %d dimensions, the index has %d", stored, qdims, dims)
	}
	if err != nil {
		tx.Rollback(ctx)
		return nil, nil, err
	}
	if x.vectorNS != "" {
		return tx, inServer{tx: tx, ns: x.vectorNS, collection: collection, embedder: stored, q: vectorLiteral(q)}, nil
	}
	v, err := x.vectorsFor(ctx, tx, collection, stored, dims, generation)
	if err != nil {
		tx.Rollback(ctx)
		return nil, nil, err
	}
	return tx, inProcess{v: v, q: sqlite.NewQuery(q)}, nil
}

func wrapSearchErr(op, collection string, err error) error {
	var mismatch *sqlite.EmbedderMismatchError
	if errors.As(err, &mismatch) {
		return err
	}
	return fmt.Errorf("knowledge index: %s %s: %w", op, collection, err)
}

// Search returns up to k chunks of collection for query, best first: the vector
// ranking and the full-text ranking (BM25) fused by reciprocal rank fusion.
func (x *Index) Search(ctx context.Context, collection, query string, emb knowledge.Embedder, k int) ([]sqlite.Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	q, err := sqlite.EmbedQuery(ctx, emb, query)
	if err != nil {
		return nil, wrapSearchErr("search", collection, err)
	}
	hits, err := x.SearchVector(ctx, collection, query, q, emb, k)
	if err != nil {
		return nil, wrapSearchErr("search", collection, err)
	}
	return hits, nil
}

// SearchVector is Search with query's vector q (sqlite.Backend). Hit.BM25 holds
// the text match's BM25 score (higher is better; 0 when the text did not match).
func (x *Index) SearchVector(ctx context.Context, collection, query string, q []float32, emb knowledge.Embedder, k int) ([]sqlite.Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	tx, v, err := x.snapshot(ctx, collection, emb, q)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)

	n := max(4*k, sqlite.MinCandidates)
	type fused struct {
		rrf  float64
		vec  float32
		rank float64
	}
	byID := map[int64]*fused{}
	top, err := v.top(ctx, n)
	if err != nil {
		return nil, err
	}
	for rank, s := range top {
		byID[s.ID] = &fused{rrf: 1 / float64(sqlite.RRFK+rank+1), vec: s.Score}
	}
	matches, err := bm25(ctx, tx, collection, sqlite.QueryTerms(query), n)
	if err != nil {
		return nil, err
	}
	for rank, m := range matches {
		f := byID[m.id]
		if f == nil {
			f = &fused{vec: float32(math.NaN())}
			byID[m.id] = f
		}
		f.rrf += 1 / float64(sqlite.RRFK+rank+1)
		f.rank = m.score
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
	hits := make([]sqlite.Hit, 0, len(ids))
	for _, id := range ids {
		f := byID[id]
		c, ok := chunks[id]
		if !ok {
			continue
		}
		h := sqlite.Hit{Chunk: c, Score: f.rrf, VectorScore: f.vec, BM25: f.rank}
		row := -1
		s, r, ok, err := v.best(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			h.VectorScore, row = s, r
		} else if math.IsNaN(float64(h.VectorScore)) {
			h.VectorScore = 0
		}
		if c.Kind == knowledge.ChunkFAQ && row >= 0 && row < len(c.Questions) {
			h.Question = c.Questions[row]
		}
		hits = append(hits, h)
	}
	return hits, tx.Commit(ctx)
}

// FAQ returns the FAQ entry of collection whose question (or variant) is closest
// to query by vector score alone, as sqlite.Index.FAQ does.
func (x *Index) FAQ(ctx context.Context, collection, query string, emb knowledge.Embedder) (sqlite.Hit, bool, error) {
	q, err := sqlite.EmbedQuery(ctx, emb, query)
	if err != nil {
		return sqlite.Hit{}, false, wrapSearchErr("faq", collection, err)
	}
	h, ok, err := x.FAQVector(ctx, collection, q, emb)
	if err != nil {
		return sqlite.Hit{}, false, wrapSearchErr("faq", collection, err)
	}
	return h, ok, nil
}

// FAQVector is FAQ with the query's vector q (sqlite.Backend).
func (x *Index) FAQVector(ctx context.Context, collection string, q []float32, emb knowledge.Embedder) (sqlite.Hit, bool, error) {
	tx, v, err := x.snapshot(ctx, collection, emb, q)
	if err != nil {
		return sqlite.Hit{}, false, err
	}
	defer tx.Rollback(ctx)
	id, score, row, ok, err := v.bestFAQ(ctx)
	if err != nil {
		return sqlite.Hit{}, false, err
	}
	if !ok {
		return sqlite.Hit{}, false, tx.Commit(ctx)
	}
	chunks, err := loadChunks(ctx, tx, []int64{id})
	if err != nil {
		return sqlite.Hit{}, false, err
	}
	c, ok := chunks[id]
	if !ok {
		return sqlite.Hit{}, false, fmt.Errorf("chunk %d vanished", id)
	}
	h := sqlite.Hit{Chunk: c, Score: float64(score), VectorScore: score}
	if row >= 0 && row < len(c.Questions) {
		h.Question = c.Questions[row]
	}
	return h, true, tx.Commit(ctx)
}

func loadChunks(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]knowledge.Chunk, error) {
	out := make(map[int64]knowledge.Chunk, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	_, err := queryAll(ctx, tx, `SELECT id, hash, kind, source, heading, start_line, end_line, text, questions
		FROM knowledge_chunks WHERE id = ANY($1)`, []any{ids}, func(r pgx.Rows) (struct{}, error) {
		var id int64
		var c knowledge.Chunk
		var kind string
		if err := r.Scan(&id, &c.Hash, &kind, &c.Source, &c.Heading, &c.StartLine, &c.EndLine, &c.Text, &c.Questions); err != nil {
			return struct{}{}, err
		}
		c.Kind = knowledge.ChunkKind(kind)
		if len(c.Questions) == 0 {
			c.Questions = nil
		}
		out[id] = c
		return struct{}{}, nil
	})
	return out, err
}
