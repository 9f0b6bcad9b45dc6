package index

import (
	"context"
	"sync"
)

// This file exports the in-process search engine — the vector matrix and its
// scans, the vector encoding — for the storages, so both rank alike and score bit
// for bit equally.

// EncodeVector is how the index stores a vector: little-endian float32.
func EncodeVector(v []float32) []byte { return encode(v) }

// DecodeVector decodes an EncodeVector blob into dst, whose length it must fit.
func DecodeVector(dst []float32, b []byte) error { return decodeInto(dst, b) }

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
	if len(v.faq) > 0 {
		v.passages = make([]int32, 0, len(v.ids)-len(v.faq))
		for i, f := 0, 0; i < len(v.ids); i++ {
			if f < len(v.faq) && v.faq[f] == int32(i) {
				f++
				continue
			}
			v.passages = append(v.passages, int32(i))
		}
	}
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

// Top returns the n passages — chunks but FAQ entries — of best vector score,
// best first (ties by id).
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

// InProcess scores a snapshot's vectors in process: V against the query Q. A
// storage's Snapshot embeds it for Top, Best and BestFAQ.
type InProcess struct {
	V *Vectors
	Q *Query
}

// Top is Vectors.Top (Snapshot).
func (s InProcess) Top(_ context.Context, n int) ([]Scored, error) { return s.V.Top(s.Q, n), nil }

// Best is Vectors.Best (Snapshot).
func (s InProcess) Best(_ context.Context, id int64) (float32, int, bool, error) {
	score, row, ok := s.V.Best(s.Q, id)
	return score, row, ok, nil
}

// BestFAQ is Vectors.BestFAQ (Snapshot).
func (s InProcess) BestFAQ(context.Context) (int64, float32, int, bool, error) {
	id, score, row, ok := s.V.BestFAQ(s.Q)
	return id, score, row, ok, nil
}

// VectorCache holds the vectors of each collection and embedder as of one
// generation (the collection's row counts its updates, by any process), so a
// search loads them only after a change. The zero VectorCache is empty and ready;
// it is safe for concurrent use.
type VectorCache struct {
	mu sync.Mutex
	m  map[vectorKey]*Vectors
}

type vectorKey struct{ collection, embedder string }

// Get returns collection's vectors by embedder of generation, building them with
// load (which Adds every vector, chunks in id order) when the cache has none of it.
func (c *VectorCache) Get(collection, embedder string, dims int, generation int64, load func(*Vectors) error) (*Vectors, error) {
	key := vectorKey{collection, embedder}
	c.mu.Lock()
	v := c.m[key]
	c.mu.Unlock()
	if v != nil && v.Generation() == generation {
		return v, nil
	}
	v = NewVectors(generation, dims)
	if err := load(v); err != nil {
		return nil, err
	}
	v.Done()
	c.mu.Lock()
	if cur := c.m[key]; cur == nil || cur.Generation() < generation {
		if c.m == nil {
			c.m = map[vectorKey]*Vectors{}
		}
		c.m[key] = v
	}
	c.mu.Unlock()
	return v, nil
}

// Invalidate forgets collection's vectors (after this process's Update).
func (c *VectorCache) Invalidate(collection string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.collection == collection {
			delete(c.m, k)
		}
	}
}
