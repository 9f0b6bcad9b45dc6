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
