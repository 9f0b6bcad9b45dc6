// Package index is the knowledge index apart from its storage: what a collection's
// chunks, vectors and learned FAQ-cache entries mean and how they are searched,
// whichever database holds them. Its storages live beneath it — sqlite (one file)
// and postgres (tables of a schema) — and hold only SQL, schemas and transactions.
//
// It owns the types both storages share (Stats, Hit, UpdateOptions, the learned
// entries' keys, filters and hits, EmbedderMismatchError), the in-process vector
// engine (Vectors: an int8 first pass rescored in float32, FAQ questions inverted
// when sparse; VectorCache per collection and generation), the full-text terms
// (words lower-cased and plural-folded, CJK runs as bigrams), reciprocal rank
// fusion of the vector and BM25 rankings over a storage's Snapshot (Fuse, BestFAQ),
// the learned entries' cache grouped by user (LearnedCache), the incremental
// Update over a storage's UpdateTx, and the knowledge.Knowledge adapter over any
// Backend (NewKnowledge). Both storages thus rank alike and score bit for bit
// equally.
package index
