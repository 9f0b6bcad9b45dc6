// Package sqlite stores knowledge collections in one SQLite file: chunks with their
// citations, their vectors (float32 little-endian blobs, each row recording the
// embedder's ID and dimension) and an FTS5 table over chunk text and FAQ questions.
//
// Update refreshes a collection incrementally in one transaction: chunks whose
// content hash is already stored are not embedded again, and an embedder error
// leaves the index as it was. Search is hybrid: a brute-force dot product over the
// collection's vectors (held in memory per collection and embedder, reloaded after
// any Update, in this process or another) fused with FTS5 BM25 by reciprocal rank
// fusion. FAQ is the FAQ cache's lookup: the best question by vector score alone.
//
// Vectors of different embedders never mix: a collection records the embedder that
// built it, and Update or Search with another one returns *EmbedderMismatchError
// until Rebuild re-embeds the collection.
//
// The same file holds the FAQ cache's learned entries (Learn, ListLearned,
// ClearLearned): accepted answers of earlier runs, keyed by agent, intent, spec
// version and embedder, shared or one user's own, with an expiry. Their vectors are
// cached in memory per key and grouped by user, so a lookup scans only the shared
// entries and the asking user's; a generation per key makes a process notice
// another's Learn. Knowledge adapts the index to runtime.Knowledge for one agent.
//
// The index is its own file (its schema version is the file's user_version), not the
// conversation store's.
package sqlite
