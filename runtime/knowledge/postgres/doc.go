// Package postgres is the knowledge index on PostgreSQL: the same collections,
// chunks, vectors, manifests and learned FAQ-cache entries as
// runtime/knowledge/sqlite's file, in tables of a schema (see internal/pgdb), so
// replicas of a service share one index.
//
// Vectors are stored portably, as bytea (little-endian float32, as the SQLite index
// stores them), and searched in process with the SQLite index's own engine
// (sqlite.Vectors): a collection's vectors are loaded once and cached per
// collection until its generation changes (any Update, by any process), so the
// vector ranking and its scores are the SQLite index's, bit for bit. Full text is
// a tsvector column (GIN index) holding the very terms the SQLite index gives
// FTS5 (lower-cased words, plurals folded, CJK runs as bigrams), ranked by FTS5's
// BM25 computed in SQL over the same statistics; the two rankings are fused by the
// same reciprocal rank fusion. With the pgvector extension the vectors are scored
// in the server instead (see docs/knowledge.md).
package postgres
