package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
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
	// full-text terms as the SQLite index computes them (index.SearchTerms), written
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

	vectors index.VectorCache
	learned index.LearnedCache
}

var _ index.Backend = (*Index)(nil)

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
	x := &Index{db: db}
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

// Knowledge adapts the index to knowledge.Knowledge for one agent using emb (see
// index.NewKnowledge).
func (x *Index) Knowledge(emb knowledge.Embedder, collections map[string]string) knowledge.Knowledge {
	return index.NewKnowledge(x, emb, collections)
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
func (x *Index) Update(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder) (index.Stats, error) {
	return x.UpdateWith(ctx, collection, chunks, emb, index.UpdateOptions{})
}

// UpdateWith makes collection hold exactly chunks, as index.Update says, in one
// transaction (updates of one collection by several processes queue on an
// advisory lock).
func (x *Index) UpdateWith(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts index.UpdateOptions) (index.Stats, error) {
	st, err := index.Update(ctx, x, collection, chunks, emb, opts)
	if err == nil {
		x.vectors.Invalidate(collection)
	}
	return st, err
}

// UpdateTx runs fn in a transaction holding the collection's advisory lock
// (index.UpdateStore).
func (x *Index) UpdateTx(ctx context.Context, collection string, fn func(index.UpdateTx) error) error {
	return pgx.BeginTxFunc(ctx, x.db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := x.holdCollection(ctx, tx, collection); err != nil {
			return err
		}
		return fn(&updateTx{tx: tx, collection: collection, vectorNS: x.vectorNS})
	})
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

// updateTx is one collection's rows in an update's transaction (index.UpdateTx).
type updateTx struct {
	tx         pgx.Tx
	collection string
	vectorNS   string // the index's, when it scores with pgvector
}

func (u *updateTx) Collection(ctx context.Context) (embedder string, dims int, generation int64, ok bool, err error) {
	err = u.tx.QueryRow(ctx, `SELECT embedder, dimensions, generation FROM knowledge_collections WHERE name = $1`, u.collection).Scan(&embedder, &dims, &generation)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, 0, false, nil
	}
	return embedder, dims, generation, err == nil, err
}

func (u *updateTx) WriteCollection(ctx context.Context, embedder string, dims int, generation int64, chunks int, manifest string) error {
	_, err := u.tx.Exec(ctx, `INSERT INTO knowledge_collections(name, embedder, dimensions, generation, chunks, manifest, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (name) DO UPDATE SET embedder = EXCLUDED.embedder,
		dimensions = EXCLUDED.dimensions, generation = EXCLUDED.generation, chunks = EXCLUDED.chunks,
		manifest = EXCLUDED.manifest, updated_at = EXCLUDED.updated_at`,
		u.collection, embedder, dims, generation, chunks, manifest)
	return err
}

func (u *updateTx) DropVectors(ctx context.Context, keep string) error {
	if keep == "" {
		_, err := u.tx.Exec(ctx, `DELETE FROM knowledge_vectors WHERE collection = $1`, u.collection)
		return err
	}
	_, err := u.tx.Exec(ctx, `DELETE FROM knowledge_vectors WHERE collection = $1 AND embedder <> $2`, u.collection, keep)
	return err
}

func (u *updateTx) StoredContents(ctx context.Context) (map[string]bool, map[string][]knowledge.StoredChunk, error) {
	have := map[string]bool{}
	hashes, err := queryAll(ctx, u.tx, `SELECT DISTINCT hash FROM knowledge_vectors WHERE collection = $1`, []any{u.collection}, func(r pgx.Rows) (string, error) {
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
	if _, err := queryAll(ctx, u.tx, `SELECT id, hash, source, start_line, end_line FROM knowledge_chunks WHERE collection = $1 ORDER BY id`, []any{u.collection}, func(r pgx.Rows) (struct{}, error) {
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

// StoreVectors copies a batch in.
func (u *updateTx) StoreVectors(ctx context.Context, embedder string, dims int, batch []index.ChunkVector) error {
	rows := make([][]any, len(batch))
	for i, v := range batch {
		rows[i] = []any{u.collection, v.Hash, int32(v.Seq), embedder, int32(dims), index.EncodeVector(v.Vector)}
	}
	_, err := u.tx.CopyFrom(ctx, pgx.Identifier{"knowledge_vectors"},
		[]string{"collection", "hash", "seq", "embedder", "dimensions", "vector"}, pgx.CopyFromRows(rows))
	return err
}

// VectorsStored fills pgvector's column when the index scores with it, and
// records a dimension learned from the first vector.
func (u *updateTx) VectorsStored(ctx context.Context, dims int, learned bool) error {
	if u.vectorNS != "" {
		if err := fillEmbeddings(ctx, u.tx, u.vectorNS, u.collection); err != nil {
			return err
		}
	}
	if !learned {
		return nil
	}
	_, err := u.tx.Exec(ctx, `UPDATE knowledge_collections SET dimensions = $1 WHERE name = $2`, dims, u.collection)
	return err
}

func (u *updateTx) DeleteContents(ctx context.Context, hashes []string) error {
	_, err := u.tx.Exec(ctx, `DELETE FROM knowledge_vectors WHERE collection = $1 AND hash = ANY($2)`, u.collection, hashes)
	return err
}

// ApplyChunkRows applies ch in one batch: a reused row is updated where its chunk
// now sits, the other chunks are inserted (in order, so ids follow the chunks'
// order as in the SQLite index), and the rows left over are deleted.
func (u *updateTx) ApplyChunkRows(ctx context.Context, ch knowledge.ChunkRowChanges) error {
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
		terms := index.SearchTerms(c)
		batch.Queue(`INSERT INTO knowledge_chunks(collection, hash, kind, source, heading, start_line, end_line, text, questions, terms, terms_length)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::tsvector, $11)`,
			u.collection, c.Hash, string(c.Kind), c.Source, c.Heading, c.StartLine, c.EndLine, c.Text, qs, tsvector(terms), len(terms))
	}
	if len(ch.Removed) > 0 {
		batch.Queue(`DELETE FROM knowledge_chunks WHERE id = ANY($1)`, ch.Removed)
	}
	if batch.Len() == 0 {
		return nil
	}
	return u.tx.SendBatch(ctx, batch).Close()
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

// snapshot is a read-only repeatable-read transaction of one collection with the
// query's vectors scored in process or in the server: an index.Snapshot.
type snapshot struct {
	scorer
	tx         pgx.Tx
	collection string
}

// snapshot opens the transaction and checks the collection's embedder and that
// its vectors have the query's dimension.
func (x *Index) snapshot(ctx context.Context, collection string, emb knowledge.Embedder, q []float32) (*snapshot, error) {
	tx, err := x.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	var stored string
	var dims int
	var generation int64
	err = tx.QueryRow(ctx, `SELECT embedder, dimensions, generation FROM knowledge_collections WHERE name = $1`, collection).
		Scan(&stored, &dims, &generation)
	if errors.Is(err, pgx.ErrNoRows) || err == nil {
		err = index.CheckCollection(collection, err == nil, stored, dims, emb, len(q))
	}
	s := &snapshot{tx: tx, collection: collection}
	switch {
	case err != nil:
	case x.vectorNS != "":
		s.scorer = inServer{tx: tx, ns: x.vectorNS, collection: collection, embedder: stored, q: vectorLiteral(q)}
	default:
		var v *index.Vectors
		v, err = x.vectors.Get(collection, stored, dims, generation, func(v *index.Vectors) error {
			return loadVectors(ctx, tx, collection, stored, v)
		})
		s.scorer = index.InProcess{V: v, Q: index.NewQuery(q)}
	}
	if err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	return s, nil
}

// loadVectors adds the collection's vectors by embedder to v, chunks in id order.
func loadVectors(ctx context.Context, tx pgx.Tx, collection, embedder string, v *index.Vectors) error {
	rows, err := tx.Query(ctx, `SELECT c.id, c.kind, v.vector FROM knowledge_chunks c
		JOIN knowledge_vectors v ON v.collection = c.collection AND v.hash = c.hash
		WHERE c.collection = $1 AND v.embedder = $2 ORDER BY c.id, v.seq`, collection, embedder)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var kind string
		var blob []byte
		if err := rows.Scan(&id, &kind, &blob); err != nil {
			return err
		}
		if err := v.Add(id, kind == string(knowledge.ChunkFAQ), blob); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Search returns up to k chunks of collection for query, best first: the vector
// ranking and the full-text ranking (BM25) fused by reciprocal rank fusion.
func (x *Index) Search(ctx context.Context, collection, query string, emb knowledge.Embedder, k int) ([]index.Hit, error) {
	return index.Search(ctx, x, collection, query, emb, k)
}

// SearchVector is Search with query's vector q (index.Backend). Hit.BM25 holds
// the text match's BM25 score (higher is better; 0 when the text did not match).
func (x *Index) SearchVector(ctx context.Context, collection, query string, q []float32, emb knowledge.Embedder, k int) ([]index.Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	s, err := x.snapshot(ctx, collection, emb, q)
	if err != nil {
		return nil, err
	}
	defer s.tx.Rollback(ctx)
	hits, err := index.Fuse(ctx, s, query, k)
	if err != nil {
		return nil, err
	}
	return hits, s.tx.Commit(ctx)
}

// FAQ returns the FAQ entry of collection whose question (or variant) is closest
// to query by vector score alone (see index.FAQ).
func (x *Index) FAQ(ctx context.Context, collection, query string, emb knowledge.Embedder) (index.Hit, bool, error) {
	return index.FAQ(ctx, x, collection, query, emb)
}

// FAQVector is FAQ with the query's vector q (index.Backend).
func (x *Index) FAQVector(ctx context.Context, collection string, q []float32, emb knowledge.Embedder) (index.Hit, bool, error) {
	s, err := x.snapshot(ctx, collection, emb, q)
	if err != nil {
		return index.Hit{}, false, err
	}
	defer s.tx.Rollback(ctx)
	h, ok, err := index.BestFAQ(ctx, s)
	if err != nil {
		return index.Hit{}, false, err
	}
	return h, ok, s.tx.Commit(ctx)
}

// TextMatches ranks the collection's chunks by BM25 (index.Snapshot).
func (s *snapshot) TextMatches(ctx context.Context, query string, n int) ([]index.TextMatch, error) {
	return bm25(ctx, s.tx, s.collection, index.QueryTerms(query), n)
}

// Chunks loads chunks by id (index.Snapshot).
func (s *snapshot) Chunks(ctx context.Context, ids []int64) (map[int64]knowledge.Chunk, error) {
	out := make(map[int64]knowledge.Chunk, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	_, err := queryAll(ctx, s.tx, `SELECT id, hash, kind, source, heading, start_line, end_line, text, questions
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
