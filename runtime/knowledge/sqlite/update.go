package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

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

// updateTx is Update's transaction: the collection's row first, then its vectors,
// then its chunk rows.
func (x *Index) updateTx(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts UpdateOptions) (Stats, error) {
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return Stats{}, err
	}
	defer tx.Rollback()
	dims, err := writeCollection(ctx, tx, collection, len(chunks), emb, opts)
	if err != nil {
		return Stats{}, err
	}
	have, stored, err := storedContents(ctx, tx, collection)
	if err != nil {
		return Stats{}, err
	}
	st, err := updateVectors(ctx, tx, collection, chunks, have, emb, dims, opts.Progress)
	if err != nil {
		return Stats{}, err
	}
	if err := updateChunkRows(ctx, tx, collection, knowledge.ChangeChunkRows(chunks, stored)); err != nil {
		return Stats{}, err
	}
	if err := tx.Commit(); err != nil {
		return Stats{}, err
	}
	return st, nil
}

// writeCollection records the update in the collection's row (embedder,
// dimension, chunk count, manifest, next generation) and drops the vectors it
// replaces: all of them with opts.Rebuild, otherwise another embedder's. It
// returns the dimension of the vectors, 0 while not known yet.
func writeCollection(ctx context.Context, tx *sql.Tx, collection string, n int, emb knowledge.Embedder, opts UpdateOptions) (int, error) {
	rebuild := opts.Rebuild
	id := emb.ID()
	var stored string
	var storedDims int
	var generation int64
	err := tx.QueryRowContext(ctx, `SELECT embedder, dimensions, generation FROM collections WHERE name = ?`, collection).Scan(&stored, &storedDims, &generation)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, err
	case stored != id && !rebuild:
		return 0, &EmbedderMismatchError{Collection: collection, Index: stored, Agent: id}
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
		collection, id, dims, generation+1, n, time.Now().UTC().Format(time.RFC3339Nano), opts.Manifest); err != nil {
		return 0, err
	}
	if rebuild {
		if _, err := tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ?`, collection); err != nil {
			return 0, err
		}
	} else if _, err := tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ? AND embedder <> ?`, collection, id); err != nil {
		return 0, err // none unless the file was edited by hand
	}
	return dims, nil
}

// storedContents is what the index has of collection: the contents (hashes) with
// vectors, and the chunk rows by content in id order.
func storedContents(ctx context.Context, tx *sql.Tx, collection string) (map[string]bool, map[string][]knowledge.StoredChunk, error) {
	have := map[string]bool{}
	if err := queryEach(ctx, tx, `SELECT DISTINCT hash FROM vectors WHERE collection = ?`, []any{collection}, func(rows *sql.Rows) error {
		var h string
		if err := rows.Scan(&h); err != nil {
			return err
		}
		have[h] = true
		return nil
	}); err != nil {
		return nil, nil, err
	}
	stored := map[string][]knowledge.StoredChunk{}
	if err := queryEach(ctx, tx, `SELECT id, hash, source, start_line, end_line FROM chunks WHERE collection = ? ORDER BY id`, []any{collection}, func(rows *sql.Rows) error {
		var r knowledge.StoredChunk
		var h string
		if err := rows.Scan(&r.ID, &h, &r.Source, &r.StartLine, &r.EndLine); err != nil {
			return err
		}
		stored[h] = append(stored[h], r)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return have, stored, nil
}

// updateVectors embeds the contents the index lacks (have) and deletes the
// vectors of contents no chunk has any more; a dimension learned from the first
// vector is recorded in the collection's row.
func updateVectors(ctx context.Context, tx *sql.Tx, collection string, chunks []knowledge.Chunk, have map[string]bool,
	emb knowledge.Embedder, dims int, progress func(done, total int)) (Stats, error) {
	var st Stats
	missing, wanted := MissingChunks(chunks, have)
	st.Kept = len(wanted) - len(missing)
	n, got, err := embedAndStore(ctx, tx, collection, missing, emb, dims, progress)
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
	return st, nil
}

// updateChunkRows applies ch: a reused row is updated where its chunk now sits,
// the other chunks are inserted with their full-text rows, and the rows left over
// are deleted with theirs.
func updateChunkRows(ctx context.Context, tx *sql.Tx, collection string, ch knowledge.ChunkRowChanges) error {
	for _, m := range ch.Moved {
		c := m.Chunk
		if _, err := tx.ExecContext(ctx, `UPDATE chunks SET source = ?, start_line = ?, end_line = ? WHERE id = ?`,
			c.Source, c.StartLine, c.EndLine, m.ID); err != nil {
			return err
		}
	}
	for _, c := range ch.Added {
		if err := insertChunk(ctx, tx, collection, c); err != nil {
			return err
		}
	}
	for _, id := range ch.Removed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM chunks_fts WHERE rowid = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM chunks WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// insertChunk inserts a chunk's row and its full-text row.
func insertChunk(ctx context.Context, tx *sql.Tx, collection string, c knowledge.Chunk) error {
	qs := c.Questions
	if qs == nil {
		qs = []string{}
	}
	questions, err := json.Marshal(qs)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO chunks(collection, hash, kind, source, heading, start_line, end_line, text, questions)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		collection, c.Hash, string(c.Kind), c.Source, c.Heading, c.StartLine, c.EndLine, c.Text, string(questions))
	if err != nil {
		return err
	}
	rowID, err := res.LastInsertId()
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)`, rowID, ftsText(searchText(c)))
	return err
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
