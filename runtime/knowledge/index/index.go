package index

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// Tuning of retrieval, shared by the storages.
const (
	// RRFK is reciprocal rank fusion's constant (Cormack et al. 2009): a hit ranked
	// r-th (from 1) in a list adds 1/(RRFK+r) to its score.
	RRFK = 60
	// MinCandidates is how many hits each list (vector, BM25) contributes at least to
	// the fusion; a chunk found by both near the top beats one found by one only.
	MinCandidates = 50
	// MaxQueryTerms bounds the full-text query built from a user's question.
	MaxQueryTerms = 32
	// MaxTextMatches bounds the rows a full-text query may match: every matching row
	// is scored, so the most common terms of a query are left out until the rest
	// match at most this many rows (see DroppedTerms). Such terms carry little BM25
	// weight anyway, and the vector side still sees the whole query; a small
	// collection never reaches the bound.
	MaxTextMatches = 1500
	// EmbedBatch is how many texts go to the embedder per call.
	EmbedBatch = 64
	// minRescored is how many chunks of a scan's int8 pass at least are rescored
	// with their float32 vectors.
	minRescored = 256
	// parallelRows is the number of vectors above which a scan is split across CPUs.
	parallelRows = 8192
)

// Stats counts an Update's work in distinct chunk contents (content hashes): a
// passage repeated verbatim in two files is stored twice but embedded once.
type Stats struct {
	Kept     int // already embedded by this embedder: not embedded again
	Embedded int // new or changed: embedded and stored
	Deleted  int // no longer present: removed
	Vectors  int // texts embedded (an FAQ chunk has one per question)
}

// Hit is one retrieved chunk.
type Hit struct {
	knowledge.Chunk
	// Score is the reciprocal-rank-fusion score for Search; the vector score for FAQ.
	Score float64
	// VectorScore is the best cosine similarity of the query to the chunk's vectors
	// (for an FAQ chunk, to its best question).
	VectorScore float32
	// BM25 is the text match's relevance (higher is better), 0 when the text did not
	// match.
	BM25 float64
	// Question is the FAQ question (or variant) that matched best; empty for text.
	Question string
}

// EmbedderMismatchError is a collection indexed by another embedder than the one in use.
type EmbedderMismatchError struct {
	Collection string
	Index      string // the embedder ID the collection was built by
	Agent      string // the embedder ID in use
}

func (e *EmbedderMismatchError) Error() string {
	return fmt.Sprintf("the index of collection %s was built by %s; this agent uses %s: run agentrun index to rebuild it",
		e.Collection, e.Index, e.Agent)
}

// ErrNotIndexed is a collection that has never been indexed.
var ErrNotIndexed = errors.New("not indexed")

// CheckCollection checks a collection's row as a search reads it (ok false when
// there is none) against the embedder in use and the query's dimension qdims.
func CheckCollection(collection string, ok bool, stored string, dims int, emb knowledge.Embedder, qdims int) error {
	switch {
	case !ok:
		return fmt.Errorf("collection %s: %w: run agentrun index", collection, ErrNotIndexed)
	case stored != emb.ID():
		return &EmbedderMismatchError{Collection: collection, Index: stored, Agent: emb.ID()}
	case dims != qdims && dims != 0:
		return fmt.Errorf("embedder %s: query vector of %d dimensions, the index has %d", stored, qdims, dims)
	}
	return nil
}

// EmbedQuery embeds one query and checks the vector.
func EmbedQuery(ctx context.Context, emb knowledge.Embedder, query string) ([]float32, error) {
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

func checkVector(v []float32, dims int) error {
	if len(v) != dims {
		return fmt.Errorf("vector of %d dimensions, want %d", len(v), dims)
	}
	for _, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return errors.New("vector with NaN or infinite values")
		}
	}
	return nil
}

// wrapSearchErr names the operation and collection of err, but leaves an
// *EmbedderMismatchError as it is: its message says it all.
func wrapSearchErr(op, collection string, err error) error {
	var mismatch *EmbedderMismatchError
	if errors.As(err, &mismatch) {
		return err
	}
	return fmt.Errorf("knowledge index: %s %s: %w", op, collection, err)
}
