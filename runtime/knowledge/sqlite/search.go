package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

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
