// Package sqlite is the knowledge index's storage in one SQLite file: chunks with
// their citations, their vectors (float32 little-endian blobs, each row recording
// the embedder's ID and dimension), an FTS5 table over chunk text and FAQ questions,
// and the FAQ cache's learned entries. What they mean and how they are ranked is the
// index package's; this package holds the schema, the SQL and the transactions
// (index.UpdateStore, index.Snapshot, index.LearnedStore), and opens the file with
// internal/sqlitedb.
//
// Update refreshes a collection incrementally in one IMMEDIATE transaction (see
// index.Update). Search fuses the in-process vector scan (the collection's vectors
// held in index.VectorCache, reloaded after any Update, in this process or another)
// with FTS5 BM25 (see index.Fuse); FAQ is the FAQ cache's lookup by vector score
// alone. Learned entries (Learn, ListLearned, ClearLearned) are keyed by agent,
// intent, spec version and embedder, shared or one user's own, with an expiry; a
// generation per key makes a process notice another's Learn.
//
// The index is its own file (its schema version is the file's user_version, its
// application_id marks it), not the conversation store's.
package sqlite
