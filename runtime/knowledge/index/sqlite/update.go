package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// Update makes collection hold exactly chunks, embedding only contents the index
// lacks; it is UpdateWith with no options.
func (x *Index) Update(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder) (index.Stats, error) {
	return x.UpdateWith(ctx, collection, chunks, emb, index.UpdateOptions{})
}

// Rebuild is UpdateWith with Rebuild set: every chunk is embedded again by emb.
func (x *Index) Rebuild(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder) (index.Stats, error) {
	return x.UpdateWith(ctx, collection, chunks, emb, index.UpdateOptions{Rebuild: true})
}

// UpdateWith makes collection hold exactly chunks, as index.Update says, in one
// IMMEDIATE transaction.
func (x *Index) UpdateWith(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts index.UpdateOptions) (index.Stats, error) {
	st, err := index.Update(ctx, x, collection, chunks, emb, opts)
	if err == nil {
		x.vectors.Invalidate(collection)
	}
	return st, err
}

// UpdateTx runs fn in a write transaction (index.UpdateStore): the write lock,
// taken at BEGIN, holds off every other writer.
func (x *Index) UpdateTx(ctx context.Context, collection string, fn func(index.UpdateTx) error) error {
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	u := &updateTx{tx: tx, collection: collection}
	defer u.close()
	if err := fn(u); err != nil {
		return err
	}
	return tx.Commit()
}

// updateTx is one collection's rows in an update's transaction (index.UpdateTx).
type updateTx struct {
	tx         *sql.Tx
	collection string
	insert     *sql.Stmt // of vectors, prepared at the first batch
}

func (u *updateTx) close() {
	if u.insert != nil {
		u.insert.Close()
	}
}

func (u *updateTx) Collection(ctx context.Context) (embedder string, dims int, generation int64, ok bool, err error) {
	err = u.tx.QueryRowContext(ctx, `SELECT embedder, dimensions, generation FROM collections WHERE name = ?`, u.collection).Scan(&embedder, &dims, &generation)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, 0, false, nil
	}
	return embedder, dims, generation, err == nil, err
}

func (u *updateTx) WriteCollection(ctx context.Context, embedder string, dims int, generation int64, chunks int, manifest string) error {
	_, err := u.tx.ExecContext(ctx, `INSERT INTO collections(name, embedder, dimensions, generation, chunks, updated_at, manifest)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET embedder = excluded.embedder,
		dimensions = excluded.dimensions, generation = excluded.generation, chunks = excluded.chunks,
		updated_at = excluded.updated_at, manifest = excluded.manifest`,
		u.collection, embedder, dims, generation, chunks, time.Now().UTC().Format(time.RFC3339Nano), manifest)
	return err
}

func (u *updateTx) DropVectors(ctx context.Context, keep string) error {
	if keep == "" {
		_, err := u.tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ?`, u.collection)
		return err
	}
	_, err := u.tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ? AND embedder <> ?`, u.collection, keep)
	return err
}

func (u *updateTx) StoredContents(ctx context.Context) (map[string]bool, map[string][]knowledge.StoredChunk, error) {
	have := map[string]bool{}
	if err := queryEach(ctx, u.tx, `SELECT DISTINCT hash FROM vectors WHERE collection = ?`, []any{u.collection}, func(rows *sql.Rows) error {
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
	if err := queryEach(ctx, u.tx, `SELECT id, hash, source, start_line, end_line FROM chunks WHERE collection = ? ORDER BY id`, []any{u.collection}, func(rows *sql.Rows) error {
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

func (u *updateTx) StoreVectors(ctx context.Context, embedder string, dims int, batch []index.ChunkVector) error {
	if u.insert == nil {
		var err error
		if u.insert, err = u.tx.PrepareContext(ctx, `INSERT INTO vectors(collection, hash, seq, embedder, dimensions, vector) VALUES (?, ?, ?, ?, ?, ?)`); err != nil {
			return err
		}
	}
	for _, v := range batch {
		if _, err := u.insert.ExecContext(ctx, u.collection, v.Hash, v.Seq, embedder, dims, index.EncodeVector(v.Vector)); err != nil {
			return err
		}
	}
	return nil
}

func (u *updateTx) VectorsStored(ctx context.Context, dims int, learned bool) error {
	if !learned {
		return nil
	}
	_, err := u.tx.ExecContext(ctx, `UPDATE collections SET dimensions = ? WHERE name = ?`, dims, u.collection)
	return err
}

func (u *updateTx) DeleteContents(ctx context.Context, hashes []string) error {
	for _, h := range hashes {
		if _, err := u.tx.ExecContext(ctx, `DELETE FROM vectors WHERE collection = ? AND hash = ?`, u.collection, h); err != nil {
			return err
		}
	}
	return nil
}

// ApplyChunkRows applies ch: a reused row is updated where its chunk now sits,
// the other chunks are inserted with their full-text rows, and the rows left over
// are deleted with theirs.
func (u *updateTx) ApplyChunkRows(ctx context.Context, ch knowledge.ChunkRowChanges) error {
	for _, m := range ch.Moved {
		c := m.Chunk
		if _, err := u.tx.ExecContext(ctx, `UPDATE chunks SET source = ?, start_line = ?, end_line = ? WHERE id = ?`,
			c.Source, c.StartLine, c.EndLine, m.ID); err != nil {
			return err
		}
	}
	for _, c := range ch.Added {
		if err := insertChunk(ctx, u.tx, u.collection, c); err != nil {
			return err
		}
	}
	for _, id := range ch.Removed {
		if _, err := u.tx.ExecContext(ctx, `DELETE FROM chunks_fts WHERE rowid = ?`, id); err != nil {
			return err
		}
		if _, err := u.tx.ExecContext(ctx, `DELETE FROM chunks WHERE id = ?`, id); err != nil {
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
	_, err = tx.ExecContext(ctx, `INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)`, rowID, ftsText(index.SearchText(c)))
	return err
}
