package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// snapshot is a read transaction of one collection with the query's vectors
// scored in process: an index.Snapshot.
type snapshot struct {
	index.InProcess
	tx         *sql.Tx
	collection string
}

// snapshot opens a read transaction and checks the collection's embedder and that
// its vectors have the query's dimension.
func (x *Index) snapshot(ctx context.Context, collection string, emb knowledge.Embedder, q []float32) (*snapshot, error) {
	tx, err := x.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	var stored string
	var dims int
	var generation int64
	err = tx.QueryRowContext(ctx, `SELECT embedder, dimensions, generation FROM collections WHERE name = ?`, collection).
		Scan(&stored, &dims, &generation)
	if errors.Is(err, sql.ErrNoRows) || err == nil {
		err = index.CheckCollection(collection, err == nil, stored, dims, emb, len(q))
	}
	var v *index.Vectors
	if err == nil {
		v, err = x.vectors.Get(collection, stored, dims, generation, func(v *index.Vectors) error {
			return queryEach(ctx, tx, `SELECT c.id, c.kind, v.vector FROM chunks c
				JOIN vectors v ON v.collection = c.collection AND v.hash = c.hash
				WHERE c.collection = ? AND v.embedder = ? ORDER BY c.id, v.seq`, []any{collection, stored}, func(rows *sql.Rows) error {
				var id int64
				var kind string
				var blob []byte
				if err := rows.Scan(&id, &kind, &blob); err != nil {
					return err
				}
				return v.Add(id, kind == string(knowledge.ChunkFAQ), blob)
			})
		})
	}
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	return &snapshot{InProcess: index.InProcess{V: v, Q: index.NewQuery(q)}, tx: tx, collection: collection}, nil
}

// Search returns up to k chunks of collection for query, best first: the vector
// ranking and the FTS5 BM25 ranking fused by reciprocal rank fusion.
func (x *Index) Search(ctx context.Context, collection, query string, emb knowledge.Embedder, k int) ([]index.Hit, error) {
	return index.Search(ctx, x, collection, query, emb, k)
}

// SearchVector is Search with query's vector q (index.Backend).
func (x *Index) SearchVector(ctx context.Context, collection, query string, q []float32, emb knowledge.Embedder, k int) ([]index.Hit, error) {
	s, err := x.snapshot(ctx, collection, emb, q)
	if err != nil {
		return nil, err
	}
	defer s.tx.Rollback()
	hits, err := index.Fuse(ctx, s, query, k)
	if err != nil {
		return nil, err
	}
	return hits, s.tx.Commit()
}

// FAQ returns the FAQ entry of collection whose question (or variant) is closest to
// query by vector score alone, with that score as Hit.Score and Hit.VectorScore;
// false when the collection has no FAQ entries. Comparing the score with a
// threshold is the caller's.
func (x *Index) FAQ(ctx context.Context, collection, query string, emb knowledge.Embedder) (index.Hit, bool, error) {
	return index.FAQ(ctx, x, collection, query, emb)
}

// FAQVector is FAQ with the query's vector q (index.Backend).
func (x *Index) FAQVector(ctx context.Context, collection string, q []float32, emb knowledge.Embedder) (index.Hit, bool, error) {
	s, err := x.snapshot(ctx, collection, emb, q)
	if err != nil {
		return index.Hit{}, false, err
	}
	defer s.tx.Rollback()
	h, ok, err := index.BestFAQ(ctx, s)
	if err != nil {
		return index.Hit{}, false, err
	}
	return h, ok, s.tx.Commit()
}

// TextMatches ranks the collection's chunks by FTS5's BM25 (index.Snapshot).
func (s *snapshot) TextMatches(ctx context.Context, query string, n int) ([]index.TextMatch, error) {
	match, err := textQuery(ctx, s.tx, query)
	if err != nil || match == "" {
		return nil, err
	}
	var out []index.TextMatch
	err = queryEach(ctx, s.tx, `SELECT chunks_fts.rowid, bm25(chunks_fts) AS r FROM chunks_fts
		JOIN chunks c ON c.id = chunks_fts.rowid
		WHERE chunks_fts MATCH ? AND c.collection = ? ORDER BY r LIMIT ?`, []any{match, s.collection, n}, func(rows *sql.Rows) error {
		var m index.TextMatch
		if err := rows.Scan(&m.ID, &m.Score); err != nil {
			return err
		}
		m.Score = -m.Score // FTS5's bm25 is lower-is-better
		out = append(out, m)
		return nil
	})
	return out, err
}

// Chunks loads chunks by id (index.Snapshot).
func (s *snapshot) Chunks(ctx context.Context, ids []int64) (map[int64]knowledge.Chunk, error) {
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
	err := queryEach(ctx, s.tx, query, args, func(rows *sql.Rows) error {
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

// ftsText is what chunks_fts stores for a text: its terms separated by spaces.
func ftsText(text string) string { return strings.Join(index.Terms(text), " ") }

// ftsQuery is an FTS5 query matching any of the terms, each quoted (so no term is
// read as an operator); "" when there are none.
func ftsQuery(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// textQuery is the FTS5 query for query: its terms, without those index.DroppedTerms
// leaves out (counted over the whole file, from the FTS vocabulary).
func textQuery(ctx context.Context, tx *sql.Tx, query string) (string, error) {
	ts := index.QueryTerms(query)
	if len(ts) == 0 {
		return "", nil
	}
	docs := make([]int, len(ts))
	for i, t := range ts {
		err := tx.QueryRowContext(ctx, `SELECT doc FROM chunks_terms WHERE term = ?`, t).Scan(&docs[i])
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", err
		}
	}
	drop := index.DroppedTerms(docs)
	kept := ts[:0:0]
	for i, t := range ts {
		if !drop[i] {
			kept = append(kept, t)
		}
	}
	return ftsQuery(kept), nil
}
