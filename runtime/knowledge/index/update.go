package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// UpdateOptions tune an Update.
type UpdateOptions struct {
	// Rebuild drops the collection's vectors first, so every chunk is embedded again;
	// it is how a collection moves to another embedder.
	Rebuild bool
	// Manifest is an opaque fingerprint of the sources (paths, sizes, modification
	// times, chunk options), stored with the collection for Manifest to return.
	Manifest string
	// Progress, when set, is called with the texts embedded so far and the number to
	// embed: once with (0, total) before the first batch and after each batch. It is
	// called from the goroutine calling Update.
	Progress func(done, total int)
}

// UpdateStore is the storage Update writes.
type UpdateStore interface {
	// UpdateTx runs fn in one write transaction of collection, held against other
	// updates of it; fn's error rolls everything back and is returned as it is.
	UpdateTx(ctx context.Context, collection string, fn func(UpdateTx) error) error
}

// UpdateTx is one collection's rows within UpdateStore.UpdateTx's transaction.
type UpdateTx interface {
	// Collection reads the collection's row; ok is false when it has none.
	Collection(ctx context.Context) (embedder string, dims int, generation int64, ok bool, err error)
	// WriteCollection inserts or replaces the collection's row.
	WriteCollection(ctx context.Context, embedder string, dims int, generation int64, chunks int, manifest string) error
	// DropVectors deletes the collection's vectors: all of them when keep is "",
	// else those of other embedders than keep.
	DropVectors(ctx context.Context, keep string) error
	// StoredContents is what the storage has of the collection: the contents
	// (hashes) with vectors, and the chunk rows by content in id order.
	StoredContents(ctx context.Context) (have map[string]bool, stored map[string][]knowledge.StoredChunk, err error)
	// StoreVectors inserts a batch of embedded texts of embedder, dims long.
	StoreVectors(ctx context.Context, embedder string, dims int, batch []ChunkVector) error
	// VectorsStored follows the last StoreVectors (there may be none): dims is the
	// vectors' dimension, learned when the first vector told it, so the
	// collection's row (which said 0) must record it.
	VectorsStored(ctx context.Context, dims int, learned bool) error
	// DeleteContents deletes the vectors of contents no chunk has any more.
	DeleteContents(ctx context.Context, hashes []string) error
	// ApplyChunkRows applies ch to the chunk rows (and their full-text rows): a
	// reused row updated where its chunk now sits, the added chunks inserted in
	// order, the rows left over deleted.
	ApplyChunkRows(ctx context.Context, ch knowledge.ChunkRowChanges) error
}

// Update makes collection in s hold exactly chunks, embedding only contents the
// index lacks (all of them with opts.Rebuild), and records opts.Manifest. A
// collection built by another embedder gives *EmbedderMismatchError unless
// opts.Rebuild. Everything happens in one transaction: an error, including an
// embedder's failure or a malformed vector (wrong count, wrong dimension, NaN or
// infinite values), leaves the index exactly as it was.
func Update(ctx context.Context, s UpdateStore, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts UpdateOptions) (Stats, error) {
	if collection == "" {
		return Stats{}, errors.New("knowledge index: no collection name")
	}
	if emb == nil {
		return Stats{}, fmt.Errorf("knowledge index: collection %s: no embedder", collection)
	}
	for i, c := range chunks {
		if c.Hash == "" {
			return Stats{}, fmt.Errorf("knowledge index: collection %s: chunk %d (%s:%d) has no hash", collection, i, c.Source, c.StartLine)
		}
	}
	var st Stats
	err := s.UpdateTx(ctx, collection, func(tx UpdateTx) error {
		var err error
		st, err = update(ctx, tx, collection, chunks, emb, opts)
		return err
	})
	if err != nil {
		var mismatch *EmbedderMismatchError
		if errors.As(err, &mismatch) {
			return Stats{}, err
		}
		return Stats{}, fmt.Errorf("knowledge index: collection %s: %w", collection, err)
	}
	return st, nil
}

// update is Update's transaction: the collection's row first, then its vectors,
// then its chunk rows.
func update(ctx context.Context, tx UpdateTx, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts UpdateOptions) (Stats, error) {
	dims, err := writeCollection(ctx, tx, collection, len(chunks), emb, opts)
	if err != nil {
		return Stats{}, err
	}
	have, stored, err := tx.StoredContents(ctx)
	if err != nil {
		return Stats{}, err
	}
	st, err := updateVectors(ctx, tx, chunks, have, emb, dims, opts.Progress)
	if err != nil {
		return Stats{}, err
	}
	if err := tx.ApplyChunkRows(ctx, knowledge.ChangeChunkRows(chunks, stored)); err != nil {
		return Stats{}, err
	}
	return st, nil
}

// writeCollection records the update in the collection's row (embedder,
// dimension, chunk count, manifest, next generation) and drops the vectors it
// replaces: all of them with opts.Rebuild, otherwise another embedder's. It
// returns the dimension of the vectors, 0 while not known yet.
func writeCollection(ctx context.Context, tx UpdateTx, collection string, n int, emb knowledge.Embedder, opts UpdateOptions) (int, error) {
	id := emb.ID()
	stored, storedDims, generation, ok, err := tx.Collection(ctx)
	switch {
	case err != nil:
		return 0, err
	case ok && stored != id && !opts.Rebuild:
		return 0, &EmbedderMismatchError{Collection: collection, Index: stored, Agent: id}
	}
	// An embedder that learns its dimension from its first answer (an OpenAI model's
	// native size) reports 0 until then: the collection's recorded dimension, or the
	// first vector embedded (see EmbedChunks), stands in.
	dims := emb.Dimensions()
	if dims == 0 && stored == id && !opts.Rebuild {
		dims = storedDims
	}
	if err := tx.WriteCollection(ctx, id, dims, generation+1, n, opts.Manifest); err != nil {
		return 0, err
	}
	keep := id
	if opts.Rebuild {
		keep = ""
	}
	return dims, tx.DropVectors(ctx, keep) // another embedder's: none unless edited by hand
}

// updateVectors embeds the contents the index lacks (have) and deletes the
// vectors of contents no chunk has any more.
func updateVectors(ctx context.Context, tx UpdateTx, chunks []knowledge.Chunk, have map[string]bool,
	emb knowledge.Embedder, dims int, progress func(done, total int)) (Stats, error) {
	var st Stats
	missing, wanted := missingChunks(chunks, have)
	st.Kept = len(wanted) - len(missing)
	n, got, err := EmbedChunks(ctx, missing, emb, dims, progress, func(batch []ChunkVector, dims int) error {
		return tx.StoreVectors(ctx, emb.ID(), dims, batch)
	})
	if err != nil {
		return Stats{}, err
	}
	if err := tx.VectorsStored(ctx, got, got != dims); err != nil {
		return Stats{}, err
	}
	st.Embedded, st.Vectors = len(missing), n
	var gone []string
	for h := range have {
		if !wanted[h] {
			gone = append(gone, h)
		}
	}
	if len(gone) > 0 {
		if err := tx.DeleteContents(ctx, gone); err != nil {
			return Stats{}, err
		}
	}
	st.Deleted = len(gone)
	return st, nil
}

// embedTexts are what gets embedded for a chunk: each question of an FAQ entry
// separately (the FAQ cache matches questions, not answers); a passage with its
// heading, which is what makes "Refunds › Timing" findable.
func embedTexts(c knowledge.Chunk) []string {
	if c.Kind == knowledge.ChunkFAQ && len(c.Questions) > 0 {
		return c.Questions
	}
	if c.Heading != "" {
		return []string{c.Heading + "\n\n" + c.Text}
	}
	return []string{c.Text}
}

type pending struct {
	hash string
	seq  int
}

// ChunkVector is one embedded text of a chunk: its Seq-th.
type ChunkVector struct {
	Hash   string
	Seq    int
	Vector []float32
}

// EmbedChunks embeds the chunks' texts in batches of EmbedBatch and hands each
// batch's checked vectors to store, calling progress (when set) before the first
// batch and after each; it returns the number of vectors and their dimension. dims
// 0 (not known yet) takes the first vector's length, which every other vector must
// then have.
func EmbedChunks(ctx context.Context, chunks []knowledge.Chunk, emb knowledge.Embedder, dims int, progress func(done, total int),
	store func(batch []ChunkVector, dims int) error) (int, int, error) {
	id := emb.ID()
	var texts []string
	var keys []pending
	for _, c := range chunks {
		for i, t := range embedTexts(c) {
			texts = append(texts, t)
			keys = append(keys, pending{c.Hash, i})
		}
	}
	if progress != nil {
		progress(0, len(texts))
	}
	if len(texts) == 0 {
		return 0, dims, nil
	}
	for start := 0; start < len(texts); start += EmbedBatch {
		end := min(start+EmbedBatch, len(texts))
		vecs, err := emb.Embed(ctx, texts[start:end])
		if err != nil {
			return 0, 0, fmt.Errorf("embedder %s: %w", id, err)
		}
		if len(vecs) != end-start {
			return 0, 0, fmt.Errorf("embedder %s: %d vectors for %d texts", id, len(vecs), end-start)
		}
		if dims == 0 {
			dims = cmp.Or(emb.Dimensions(), len(vecs[0]))
			if dims == 0 {
				return 0, 0, fmt.Errorf("embedder %s: text %d: empty vector", id, start)
			}
		}
		batch := make([]ChunkVector, len(vecs))
		for i, v := range vecs {
			if err := checkVector(v, dims); err != nil {
				return 0, 0, fmt.Errorf("embedder %s: text %d: %w", id, start+i, err)
			}
			k := keys[start+i]
			batch[i] = ChunkVector{Hash: k.hash, Seq: k.seq, Vector: v}
		}
		if err := store(batch, dims); err != nil {
			return 0, 0, err
		}
		if progress != nil {
			progress(end, len(texts))
		}
	}
	return len(texts), dims, nil
}

// missingChunks returns the contents (hashes) chunks want and, each once, the
// chunks whose vectors are not stored yet (have): those to embed. The rest are kept.
func missingChunks(chunks []knowledge.Chunk, have map[string]bool) (missing []knowledge.Chunk, wanted map[string]bool) {
	wanted = map[string]bool{}
	for _, c := range chunks {
		if wanted[c.Hash] {
			continue
		}
		wanted[c.Hash] = true
		if !have[c.Hash] {
			missing = append(missing, c)
		}
	}
	return missing, wanted
}
