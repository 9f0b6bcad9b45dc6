package knowledge

import "context"

// An Embedder turns texts into vectors of Dimensions() float32s, one per text and in
// order. Vectors are L2-normalised, so cosine similarity is their dot product.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// ID names the embedder and everything that changes its vectors (for example
	// "local:v1:dim=512"); every stored vector records it, so vectors of different
	// embedders are never compared.
	ID() string
	Dimensions() int
}

// Dot is the dot product of two vectors of the same length; for L2-normalised vectors
// it is their cosine similarity. It panics if the lengths differ, since comparing
// vectors of different embedders is a bug, not a low score.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic("knowledge.Dot: vectors of different lengths")
	}
	// Independent accumulators let the CPU overlap the additions, and reslicing b to
	// a's length lets the compiler drop the bounds checks; brute-force search spends
	// nearly all its time here.
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		a8, b8 := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += a8[0] * b8[0]
		s1 += a8[1] * b8[1]
		s2 += a8[2] * b8[2]
		s3 += a8[3] * b8[3]
		s4 += a8[4] * b8[4]
		s5 += a8[5] * b8[5]
		s6 += a8[6] * b8[6]
		s7 += a8[7] * b8[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}
