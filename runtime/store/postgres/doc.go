// Package postgres is the store.Store on PostgreSQL (pgx v5, a connection pool):
// for agents served by several processes that share their memory in a database
// they already run. Open takes a postgres:// or postgresql:// URL (see
// spec.StoreKindOf and internal/pgdb: schema=NAME, pool_max_conns,
// statement_timeout — 30s by default —, sslmode, …).
//
// The tables live in one schema ("agentrun" unless the URL's schema says otherwise)
// and mirror the SQLite store's:
//
//	conversations(id, user_id, turns, updated_at)           one row per conversation
//	messages(conversation_id, seq, turn, role, content,     a conversation's messages in
//	         tool_calls JSON, tool_call_id, reasoning JSON)  order, each tagged with its turn
//	seen(seq identity, conversation_id, kind, value)        entities revealed, seq in the order
//	                                                         of their last revelation
//	seen_kinds(conversation_id, kind, entities)             how many entities of a kind are kept
//	facts(user_id, key, value, source, updated_at)          long-term facts about users
//	paused_runs(id, user_id, agent, status, version,        runs paused for approvals
//	            created_at, created_nanos, expires_at,      (store.PausedRuns); times to the
//	            expires_nanos, state BYTEA)                  nanosecond
//	blobs(key, data BYTEA, expires)                         large values kept by key for a
//	                                                         while (store.Blobs)
//	commits(key, at)                                        the keys of commits made
//	                                                         (Record.Key), kept a week
//
// Migrations (migrate.go) are versioned in the schema's agentrun_migrations table
// under the component "store" and run by pgdb.Migrate: in one transaction, under an
// advisory lock, so processes starting at once all succeed. Open runs them; Migrate
// (`agentrun store migrate URL`) runs them alone.
//
// A commit is one READ COMMITTED transaction (pgdb.InTx, which retries deadlocks and
// serialization failures). A commit with a Key first inserts it into commits (ON
// CONFLICT DO NOTHING, which waits for a concurrent insert of the same key): a key
// there already ends the commit with nothing written, and a commit that fails rolls
// its key back. It then inserts the conversation's row if missing and
// locks it (SELECT … FOR UPDATE), checks the owner — ErrForeignConversation writes
// nothing — and counts the turn: commits to one conversation run one after the
// other, so message and seen numbers never collide. Facts change under their row
// locks (a missing fact is inserted with ON CONFLICT DO NOTHING, and a lost race
// locks the winner's row), so concurrent appends keep every entry. The paused run a
// commit ends is deleted, and the one it writes inserted or updated, only at the
// version it expects, as in the SQLite store; otherwise ErrPausedConflict rolls the
// commit back. A commit writes only the entities its run revealed, a kind in one
// statement (INSERT … ON CONFLICT on seen_entity: a new entity is inserted, one
// revealed before takes the next seq), and drops the oldest of a kind beyond
// Record.MaxSeen, counted in seen_kinds, so its cost does not grow with the
// conversation.
//
// Conversation reads the conversation's row and its last turns in one statement (one
// snapshot); Seen is one lookup in the unique index seen_entity; SeenEntities reads
// the kinds by seen_order. Deleting a conversation cascades to its messages and seen
// rows; Forget deletes the user's facts, conversations and paused runs in one
// transaction.
//
// With a TTL (memory.ttl) conversations expire like Redis's: the reads skip one not
// committed to for that long, a commit to it starts it afresh (maybe for another
// user), and commits delete expired conversations at most once a minute per
// process. Facts and paused runs never expire.
//
// A blob's expiry is reckoned by the server's clock (now()), at PutBlob and at Blob,
// so processes with skewed clocks agree; Blob skips an expired row, and PutBlob
// deletes the expired ones at most once a minute per process, in the background.
// Forget leaves blobs: they belong to no user.
//
// Keyed commits delete the keys older than a week, by the server's clock, at most
// once a minute per process, in the background. Forget leaves keys: they hold no
// user's data.
//
// postgres imports runtime and internal/pgdb; it must not import cmd.
package postgres
