package index

import "github.com/agentrun/agentrun/runtime/knowledge"

// queryVector is a query's vector prepared for a scan. A short question embedded by
// the local embedder has about 30 non-zero components of 256, so multiplying only
// those gives the same dot product for an eighth of the work; a dense vector (an
// API embedder's) is multiplied in full.
type queryVector struct {
	dense  []float32
	idx    []int32 // the non-zero components
	val    []float32
	sparse bool // few enough non-zero components for dot to use idx and val
}

// sparseShare is the share of non-zero components below which the sparse product
// wins: it reads the row out of order, so each of its steps costs more.
const sparseShare = 4

func newQueryVector(q []float32) *queryVector {
	qv := &queryVector{dense: q}
	for i, x := range q {
		if x != 0 {
			qv.idx = append(qv.idx, int32(i))
			qv.val = append(qv.val, x)
		}
	}
	qv.sparse = len(qv.idx)*sparseShare <= len(q)
	return qv
}

// dot is the dot product of the query with v, a vector of the same length.
func (q *queryVector) dot(v []float32) float32 {
	if !q.sparse {
		return knowledge.Dot(q.dense, v)
	}
	v = v[:len(q.dense)]
	var s0, s1, s2, s3 float32
	idx, val := q.idx, q.val[:len(q.idx)]
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		s0 += val[k] * v[idx[k]]
		s1 += val[k+1] * v[idx[k+1]]
		s2 += val[k+2] * v[idx[k+2]]
		s3 += val[k+3] * v[idx[k+3]]
	}
	for ; k < len(idx); k++ {
		s0 += val[k] * v[idx[k]]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot8 is the dot product of the query with an int8 row (before the row's scale).
func (q *queryVector) dot8(v []int8) float32 {
	v = v[:len(q.dense)]
	var s0, s1, s2, s3 float32
	if !q.sparse {
		d := q.dense
		i := 0
		for ; i+4 <= len(d); i += 4 {
			s0 += d[i] * float32(v[i])
			s1 += d[i+1] * float32(v[i+1])
			s2 += d[i+2] * float32(v[i+2])
			s3 += d[i+3] * float32(v[i+3])
		}
		for ; i < len(d); i++ {
			s0 += d[i] * float32(v[i])
		}
		return (s0 + s1) + (s2 + s3)
	}
	idx, val := q.idx, q.val[:len(q.idx)]
	k := 0
	for ; k+4 <= len(idx); k += 4 {
		s0 += val[k] * float32(v[idx[k]])
		s1 += val[k+1] * float32(v[idx[k+1]])
		s2 += val[k+2] * float32(v[idx[k+2]])
		s3 += val[k+3] * float32(v[idx[k+3]])
	}
	for ; k < len(idx); k++ {
		s0 += val[k] * float32(v[idx[k]])
	}
	return (s0 + s1) + (s2 + s3)
}
