// Package sqlitedb opens the SQLite files agentrun keeps (the conversation store's
// and the knowledge index's) alike, as internal/pgdb does for PostgreSQL: the file
// created private (mode 0600) with its parent directories, one writer connection
// and a pool of read-only readers in WAL mode, and the schema brought up to date by
// append-only migrations counted in PRAGMA user_version. It registers the pure-Go
// driver modernc.org/sqlite (no cgo), so no storage needs to import another's
// package for it.
package sqlitedb
