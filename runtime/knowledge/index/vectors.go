package index

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// vectors is a collection's vectors for one embedder, in one contiguous matrix:
// chunk i's vectors are rows start[i] to start[i+1].
type vectors struct {
	generation int64
	dims       int
	ids        []int64 // chunk row ids
	start      []int32 // len(ids)+1
	data       []float32
	// coarse holds every row of data in int8, scaled by scale[row]: a quarter of
	// the memory a scan must stream, for a first pass whose best are rescored
	// exactly (see top).
	coarse []int8
	scale  []float32
	index  map[int64]int32 // chunk id → i
	faq    []int32         // the i of FAQ chunks
	// passages are the i of the other chunks: what the vector ranking of a search
	// ranks (see Snapshot.Top); nil when every chunk is one.
	passages []int32
	// faqPostings inverts the FAQ questions' vectors when they are sparse (a
	// question of the local embedder has about 30 non-zero components of 256):
	// per component, the rows that have it, so a sparse query touches only the
	// rows that share a component with it. nil when not worth it.
	faqPostings [][]posting
	rowChunk    []int32   // with faqPostings: each FAQ row's chunk i, -1 for other rows
	scorePool   sync.Pool // of *[]float32 with a score per row: lookups make no garbage
}

type posting struct {
	row int32
	val float32
}

// minInvertedRows is the number of FAQ rows from which they are inverted.
const minInvertedRows = 1024

// invertFAQ builds faqPostings when the FAQ rows are many and sparse.
func (v *vectors) invertFAQ() {
	rows, nnz := 0, 0
	for _, i := range v.faq {
		for r := v.start[i]; r < v.start[i+1]; r++ {
			rows++
			for _, x := range v.data[int(r)*v.dims : int(r+1)*v.dims] {
				if x != 0 {
					nnz++
				}
			}
		}
	}
	if rows < minInvertedRows || nnz*sparseShare > rows*v.dims {
		return
	}
	v.faqPostings = make([][]posting, v.dims)
	v.rowChunk = make([]int32, len(v.data)/v.dims)
	for r := range v.rowChunk {
		v.rowChunk[r] = -1
	}
	for _, i := range v.faq {
		for r := v.start[i]; r < v.start[i+1]; r++ {
			v.rowChunk[r] = i
			for d, x := range v.data[int(r)*v.dims : int(r+1)*v.dims] {
				if x != 0 {
					v.faqPostings[d] = append(v.faqPostings[d], posting{r, x})
				}
			}
		}
	}
}

// bestFAQ returns the FAQ chunk whose question is closest to q, its score and the
// question's row within the chunk; i is -1 when there are no FAQ chunks.
func (v *vectors) bestFAQ(q *queryVector) (i int32, score float32, row int) {
	if len(v.faq) == 0 {
		return -1, 0, -1
	}
	if v.faqPostings == nil || 2*len(q.idx) > v.dims { // a dense query: postings would read most rows' components

		top := v.topOf(q, 1, v.faq)
		score, row = v.best(q, top[0].i)
		return top[0].i, score, row
	}
	buf, _ := v.scorePool.Get().(*[]float32)
	if buf == nil {
		buf = &[]float32{}
		*buf = make([]float32, len(v.rowChunk))
	}
	defer v.scorePool.Put(buf)
	scores := *buf
	clear(scores)
	for k, d := range q.idx {
		w := q.val[k]
		for _, p := range v.faqPostings[d] {
			scores[p.row] += w * p.val
		}
	}
	// A row that shares no component scores 0, as the full product would; the
	// first FAQ row stands for all of them when nothing scores more.
	best := v.start[v.faq[0]]
	for r, s := range scores {
		if s > scores[best] && v.rowChunk[r] >= 0 {
			best = int32(r)
		}
	}
	i = v.rowChunk[best]
	score, row = v.best(q, i) // the exact score, summed as every other scan sums it
	return i, score, row
}

// quantize fills coarse and scale from data: each row's components over its
// largest magnitude, times 127.
func (v *vectors) quantize() {
	rows := len(v.data) / max(v.dims, 1)
	v.coarse, v.scale = make([]int8, len(v.data)), make([]float32, rows)
	for r := range rows {
		row := v.data[r*v.dims : (r+1)*v.dims]
		var m float32
		for _, x := range row {
			m = max(m, x, -x)
		}
		if m == 0 {
			continue
		}
		v.scale[r] = m / 127
		for i, x := range row {
			v.coarse[r*v.dims+i] = int8(math.Round(float64(x / m * 127)))
		}
	}
}

// coarseBest is chunk i's best score by the int8 rows.
func (v *vectors) coarseBest(q *queryVector, i int32) float32 {
	score := float32(math.Inf(-1))
	for r := v.start[i]; r < v.start[i+1]; r++ {
		off := int(r) * v.dims
		score = max(score, q.dot8(v.coarse[off:off+v.dims])*v.scale[r])
	}
	return score
}

// best is chunk i's best vector score and the row that gave it.
func (v *vectors) best(q *queryVector, i int32) (float32, int) {
	score, row := float32(math.Inf(-1)), -1
	for r := v.start[i]; r < v.start[i+1]; r++ {
		off := int(r) * v.dims
		if s := q.dot(v.data[off : off+v.dims]); s > score {
			score, row = s, int(r-v.start[i])
		}
	}
	return score, row
}

type scored struct {
	score float32
	i     int32
}

// minHeap keeps the n best scores seen, worst on top.
type minHeap []scored

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(a, b int) bool { return h[a].score < h[b].score }
func (h minHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// top returns the n chunks of best vector score, best first. The scan is bound by
// the memory it streams, so it runs over the int8 rows, split across CPUs for a
// large collection, and rescores its best candidates — many more than n, so int8's
// rounding cannot push a true top-n chunk out — with the float32 rows.
func (v *vectors) top(q *queryVector, n int) []scored { return v.topOf(q, n, v.passages) }

// topOf is top among the chunks of subset (nil: every chunk).
func (v *vectors) topOf(q *queryVector, n int, subset []int32) []scored {
	total := len(v.ids)
	if subset != nil {
		total = len(subset)
	}
	candidates := min(total, max(4*n, minRescored))
	workers := 1
	if total > parallelRows {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := make([][]scored, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := total*w/workers, total*(w+1)/workers
		wg.Go(func() {
			h := make(minHeap, 0, candidates+1)
			for k := lo; k < hi; k++ {
				i := int32(k)
				if subset != nil {
					i = subset[k]
				}
				s := v.coarseBest(q, i)
				if len(h) < candidates {
					heap.Push(&h, scored{s, i})
				} else if s > h[0].score {
					h[0] = scored{s, i}
					heap.Fix(&h, 0)
				}
			}
			parts[w] = h
		})
	}
	wg.Wait()
	all := slices.Concat(parts...)
	for k := range all {
		all[k].score, _ = v.best(q, all[k].i)
	}
	slices.SortFunc(all, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(v.ids[a.i], v.ids[b.i]))
	})
	return all[:min(n, len(all))]
}

func encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeInto(dst []float32, b []byte) error {
	if len(b) != 4*len(dst) {
		return fmt.Errorf("stored vector of %d bytes, want %d", len(b), 4*len(dst))
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return nil
}
