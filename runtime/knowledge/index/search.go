package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// Snapshot is one consistent read of a collection (its embedder checked) with the
// query's vector: what a storage gives Fuse and BestFAQ. Scoring may be in process
// (InProcess) or in the database server.
type Snapshot interface {
	// Top is the n passages (chunks but FAQ entries) of best vector score, best
	// first (ties by id).
	Top(ctx context.Context, n int) ([]Scored, error)
	// Best is chunk id's best vector score and the row (the chunk's vector) that
	// gave it; ok is false when the chunk has no vectors.
	Best(ctx context.Context, id int64) (score float32, row int, ok bool, err error)
	// BestFAQ is the FAQ chunk whose question is closest to the query, its score and
	// the question's row; ok is false when there are no FAQ chunks.
	BestFAQ(ctx context.Context) (id int64, score float32, row int, ok bool, err error)
	// TextMatches ranks the chunks matching query's terms (QueryTerms, the most
	// common left out as DroppedTerms says) by BM25, best first (ties by id), at
	// most n.
	TextMatches(ctx context.Context, query string, n int) ([]TextMatch, error)
	// Chunks loads the chunks of ids; a missing id is left out.
	Chunks(ctx context.Context, ids []int64) (map[int64]knowledge.Chunk, error)
}

// TextMatch is a chunk the full-text search found.
type TextMatch struct {
	ID    int64
	Score float64 // BM25, higher is better
}

// Fuse returns up to k chunks for query, best first: the vector ranking and the
// full-text ranking fused by reciprocal rank fusion (ties by id). FAQ entries are
// found by their words alone: their vectors are their questions', which match a
// short question closer than any article can whatever they answer, so in the
// vector ranking they would crowd out the passages that do (the cache, which
// compares questions with questions, is where their vectors count).
func Fuse(ctx context.Context, s Snapshot, query string, k int) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	n := max(4*k, MinCandidates)
	type fused struct {
		rrf  float64
		vec  float32
		bm25 float64
	}
	byID := map[int64]*fused{}
	top, err := s.Top(ctx, n)
	if err != nil {
		return nil, err
	}
	for rank, sc := range top {
		byID[sc.ID] = &fused{rrf: 1 / float64(RRFK+rank+1), vec: sc.Score}
	}
	matches, err := s.TextMatches(ctx, query, n)
	if err != nil {
		return nil, err
	}
	for rank, m := range matches {
		f := byID[m.ID]
		if f == nil {
			f = &fused{vec: float32(math.NaN())}
			byID[m.ID] = f
		}
		f.rrf += 1 / float64(RRFK+rank+1)
		f.bm25 = m.Score
	}
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int64) int {
		return cmp.Or(cmp.Compare(byID[b].rrf, byID[a].rrf), cmp.Compare(a, b))
	})
	ids = ids[:min(k, len(ids))]
	chunks, err := s.Chunks(ctx, ids)
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
		score, row, ok, err := s.Best(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			h.VectorScore = score
		} else if math.IsNaN(float64(h.VectorScore)) {
			h.VectorScore = 0 // a chunk without vectors: cannot happen after Update
		}
		if ok && c.Kind == knowledge.ChunkFAQ {
			h.Question = question(c, row)
		}
		hits = append(hits, h)
	}
	return hits, nil
}

// question is c's row-th question, "" when it has none there.
func question(c knowledge.Chunk, row int) string {
	if row >= 0 && row < len(c.Questions) {
		return c.Questions[row]
	}
	return ""
}

// BestFAQ returns the FAQ entry whose question (or variant) is closest to the
// query by vector score alone, with that score as Hit.Score and Hit.VectorScore;
// false when there are no FAQ entries.
func BestFAQ(ctx context.Context, s Snapshot) (Hit, bool, error) {
	id, score, row, ok, err := s.BestFAQ(ctx)
	if err != nil || !ok {
		return Hit{}, false, err
	}
	chunks, err := s.Chunks(ctx, []int64{id})
	if err != nil {
		return Hit{}, false, err
	}
	c, ok := chunks[id]
	if !ok {
		return Hit{}, false, fmt.Errorf("chunk %d vanished", id)
	}
	return Hit{Chunk: c, Score: float64(score), VectorScore: score, Question: question(c, row)}, true, nil
}

// Search returns up to k chunks of collection for query, best first (see Fuse):
// the query embedded by emb, then b's SearchVector.
func Search(ctx context.Context, b Backend, collection, query string, emb knowledge.Embedder, k int) ([]Hit, error) {
	if k <= 0 {
		return nil, nil
	}
	q, err := EmbedQuery(ctx, emb, query)
	if err != nil {
		return nil, wrapSearchErr("search", collection, err)
	}
	hits, err := b.SearchVector(ctx, collection, query, q, emb, k)
	if err != nil {
		return nil, wrapSearchErr("search", collection, err)
	}
	return hits, nil
}

// FAQ returns the FAQ entry of collection whose question (or variant) is closest to
// query (see BestFAQ): the query embedded by emb, then b's FAQVector. Comparing the
// score with a threshold is the caller's.
func FAQ(ctx context.Context, b Backend, collection, query string, emb knowledge.Embedder) (Hit, bool, error) {
	q, err := EmbedQuery(ctx, emb, query)
	if err != nil {
		return Hit{}, false, wrapSearchErr("faq", collection, err)
	}
	h, ok, err := b.FAQVector(ctx, collection, q, emb)
	if err != nil {
		return Hit{}, false, wrapSearchErr("faq", collection, err)
	}
	return h, ok, nil
}
