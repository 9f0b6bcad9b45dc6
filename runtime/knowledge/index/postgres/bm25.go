package postgres

import (
	"context"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// FTS5's BM25 parameters, as the SQLite index has them, so both rank a question's
// keyword matches alike.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// bm25 ranks the chunks of collection that contain any of terms by FTS5's BM25,
// best first (ties by id), at most n: the statistics — chunks, average length, and
// how many chunks hold a term — are over the whole index, as FTS5's are over its one
// table. As in the SQLite index, the most common terms are left out until the rest
// match at most index.MaxTextMatches chunks (index.DroppedTerms).
func bm25(ctx context.Context, tx pgx.Tx, collection string, terms []string, n int) ([]index.TextMatch, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	batch := &pgx.Batch{}
	for _, t := range terms {
		batch.Queue(`SELECT count(*) FROM knowledge_chunks WHERE terms @@ $1::tsquery`, tsquery([]string{t}))
	}
	results := tx.SendBatch(ctx, batch)
	docs := make([]int, len(terms))
	for i := range terms {
		if err := results.QueryRow().Scan(&docs[i]); err != nil {
			results.Close()
			return nil, err
		}
	}
	if err := results.Close(); err != nil {
		return nil, err
	}
	drop := index.DroppedTerms(docs)
	var chunks int
	var avgLength float64
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(avg(terms_length), 0) FROM knowledge_chunks`).Scan(&chunks, &avgLength); err != nil {
		return nil, err
	}
	var kept []string
	var idf []float64
	for i, t := range terms {
		if drop[i] {
			continue
		}
		w := math.Log((float64(chunks) - float64(docs[i]) + 0.5) / (float64(docs[i]) + 0.5))
		if w <= 0 {
			w = 1e-6 // FTS5's floor for terms in more than half the rows
		}
		kept = append(kept, t)
		idf = append(idf, w)
	}
	if len(kept) == 0 || avgLength == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT c.id, sum(q.idf * (tf.n * $5::float8) / (tf.n + $6::float8 * (1 - $7::float8 + $7::float8 * c.terms_length / $8::float8))) AS score
		FROM knowledge_chunks c
		CROSS JOIN LATERAL unnest(c.terms) u
		JOIN unnest($2::text[], $3::float8[]) AS q(term, idf) ON q.term = u.lexeme
		CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS n) tf
		WHERE c.collection = $1 AND c.terms @@ $4::tsquery
		GROUP BY c.id ORDER BY score DESC, c.id LIMIT $9`,
		collection, kept, idf, tsquery(kept), bm25K1+1, bm25K1, bm25B, avgLength, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (index.TextMatch, error) {
		var m index.TextMatch
		err := r.Scan(&m.ID, &m.Score)
		return m, err
	})
}
