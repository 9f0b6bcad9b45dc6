// Package postgres is the knowledge index's storage on PostgreSQL: the same
// collections, chunks, vectors, manifests and learned FAQ-cache entries as the
// SQLite storage's file (runtime/knowledge/index/sqlite), in tables of a schema
// (see internal/pgdb), so replicas of a service share one index. It holds the
// schema, the SQL and the transactions; ranking, fusion and the caches are the
// index package's.
//
// Vectors are stored portably, as bytea (little-endian float32, as the SQLite
// storage stores them), and searched in process with the index package's engine
// (index.Vectors, cached per collection until its generation changes: any Update,
// by any process), so the vector ranking and its scores are the SQLite storage's,
// bit for bit. Full text is a tsvector column (GIN index) holding the very terms
// the SQLite storage gives FTS5 (index.SearchTerms), ranked by FTS5's BM25 computed
// in SQL over the same statistics; the two rankings are fused alike (index.Fuse).
// With the pgvector extension the vectors are scored in the server instead (see
// docs/knowledge.md).
package postgres
