package sqlite

import (
	"context"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// This file exports the index's in-process search engine — the vector matrix and
// its scans, the FTS terms, the vector encoding — for another storage of the same
// index (runtime/knowledge/postgres), so both rank alike and score bit-for-bit
// equally. None of it changes how *Index works.

var _ Backend = (*Index)(nil)

// SearchVector is Search with query's vector q (Backend).
func (x *Index) SearchVector(ctx context.Context, collection, query string, q []float32, emb knowledge.Embedder, k int) ([]Hit, error) {
	return x.search(ctx, collection, query, q, emb, k)
}

// FAQVector is FAQ with the query's vector q (Backend).
func (x *Index) FAQVector(ctx context.Context, collection string, q []float32, emb knowledge.Embedder) (Hit, bool, error) {
	return x.faq(ctx, collection, q, emb)
}

// LookupLearnedVector returns the learned entry of key closest to q (Backend).
func (x *Index) LookupLearnedVector(ctx context.Context, key LearnedKey, embedder string, q []float32, user string) (*LearnedHit, error) {
	return x.lookupLearned(ctx, learnedID{key.Agent, key.Intent, key.Version, embedder}, q, user)
}

// LearnVector is Learn with the question's vector q (Backend).
func (x *Index) LearnVector(ctx context.Context, key LearnedKey, embedder string, q []float32, user, question, answer string, ttl time.Duration) (int64, error) {
	return x.learn(ctx, learnedID{key.Agent, key.Intent, key.Version, embedder}, q, user, question, answer, ttl)
}

// Tuning shared with other storages of the index.
const (
	// RRFK is reciprocal rank fusion's constant.
	RRFK = rrfK
	// MinCandidates is how many hits each ranking contributes at least to the fusion.
	MinCandidates = minCandidates
	// EmbedBatch is how many texts go to the embedder per call.
	EmbedBatch = embedBatch
)

// EmbedQuery embeds one query and checks the vector.
func EmbedQuery(ctx context.Context, emb knowledge.Embedder, query string) ([]float32, error) {
	return embedQuery(ctx, emb, query)
}

// EncodeVector is how the index stores a vector: little-endian float32.
func EncodeVector(v []float32) []byte { return encode(v) }

// DecodeVector decodes an EncodeVector blob into dst, whose length it must fit.
func DecodeVector(dst []float32, b []byte) error { return decodeInto(dst, b) }

// SearchTerms are the full-text terms the index holds for a chunk, in order: its
// heading, questions and text split into lower-cased, plural-folded words, and
// runs of CJK characters as overlapping bigrams.
func SearchTerms(c knowledge.Chunk) []string { return terms(searchText(c)) }

// QueryTerms are a query's distinct full-text terms, at most 32.
func QueryTerms(query string) []string { return queryTerms(query) }

// Query is a query's vector prepared for scans.
type Query struct{ q *queryVector }

// NewQuery prepares q.
func NewQuery(q []float32) *Query { return &Query{newQueryVector(q)} }

// Dot is the query's dot product with v, summed as every scan sums it.
func (q *Query) Dot(v []float32) float32 { return q.q.dot(v) }

// Vectors is a collection's vectors in memory, as the index scans them. Build it
// with NewVectors, Add (every vector of a chunk in turn, the chunks in id order)
// and Done; it is then safe for concurrent use.
type Vectors struct {
	v    *vectors
	last int64
}

// NewVectors starts an empty matrix of dims-dimensional vectors.
func NewVectors(generation int64, dims int) *Vectors {
	return &Vectors{v: &vectors{generation: generation, dims: dims, index: map[int64]int32{}}, last: -1}
}

// Add appends a vector of chunk id (an FAQ chunk when faq), given as an
// EncodeVector blob.
func (s *Vectors) Add(id int64, faq bool, blob []byte) error {
	v := s.v
	if id != s.last {
		i := int32(len(v.ids))
		v.ids = append(v.ids, id)
		v.start = append(v.start, int32(len(v.data)/max(v.dims, 1)))
		v.index[id] = i
		if faq {
			v.faq = append(v.faq, i)
		}
		s.last = id
	}
	n := len(v.data)
	v.data = append(v.data, make([]float32, v.dims)...)
	return decodeInto(v.data[n:], blob)
}

// Done finishes the matrix: it quantizes it and inverts the FAQ vectors.
func (s *Vectors) Done() {
	v := s.v
	v.start = append(v.start, int32(len(v.data)/max(v.dims, 1)))
	v.quantize()
	v.invertFAQ()
}

// Generation is the generation NewVectors was given.
func (s *Vectors) Generation() int64 { return s.v.generation }

// Len is the number of chunks.
func (s *Vectors) Len() int { return len(s.v.ids) }

// Scored is a chunk's vector score.
type Scored struct {
	ID    int64
	Score float32
}

// Top returns the n chunks of best vector score, best first (ties by id).
func (s *Vectors) Top(q *Query, n int) []Scored {
	top := s.v.top(q.q, n)
	out := make([]Scored, len(top))
	for k, t := range top {
		out[k] = Scored{s.v.ids[t.i], t.score}
	}
	return out
}

// Best is chunk id's best vector score and the vector (row) that gave it; ok is
// false when the chunk has no vectors.
func (s *Vectors) Best(q *Query, id int64) (score float32, row int, ok bool) {
	i, ok := s.v.index[id]
	if !ok {
		return 0, -1, false
	}
	score, row = s.v.best(q.q, i)
	return score, row, true
}

// BestFAQ returns the FAQ chunk whose question is closest to q, its score and the
// question's row; ok is false when there are no FAQ chunks.
func (s *Vectors) BestFAQ(q *Query) (id int64, score float32, row int, ok bool) {
	i, score, row := s.v.bestFAQ(q.q)
	if i < 0 {
		return 0, 0, -1, false
	}
	return s.v.ids[i], score, row, true
}
