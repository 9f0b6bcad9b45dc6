// Package sqlite is the default store.Store: conversations and user facts in one
// SQLite file, on the pure-Go driver modernc.org/sqlite (no cgo). Several goroutines
// and several agentrun processes may share the file: the database runs in WAL mode,
// every write is one IMMEDIATE transaction and waits up to five seconds for the lock.
//
// The file holds eight tables (PRAGMA user_version is the schema version; Open applies
// the missing migrations and refuses a file written by a newer agentrun):
//
//	conversations(id, user_id, turns, updated_at)           one row per conversation
//	messages(conversation_id, seq, turn, role, content,     a conversation's messages in
//	         tool_calls JSON, tool_call_id)                  order, each tagged with its turn
//	seen(seq, conversation_id, kind, value)                 entities revealed, seq in the order
//	                                                         of their last revelation
//	seen_kinds(conversation_id, kind, entities)             how many entities of a kind are kept
//	facts(user_id, key, value, source, updated_at)          long-term facts about users
//	paused_runs(id, user_id, agent, status, version,        runs paused for approvals
//	            created_at, expires_at, state)               (store.PausedRuns)
//	blobs(key, data, expires)                               large values kept by key for a
//	                                                         while (store.Blobs)
//	commits(key, at)                                        the keys of commits made
//	                                                         (Record.Key), kept a week
//
// A commit writes only the entities its run revealed and drops the oldest of a kind
// beyond Record.MaxSeen, so its cost does not grow with the conversation. Seen looks
// one entity up by the unique index seen_entity(conversation_id, kind, value), with a
// statement prepared once; SeenEntities reads a kind in order by seen_order.
// Conversation reads neither. Deleting a conversation cascades to its messages and
// seen rows.
//
// A paused run is written and deleted by the commits of its executions (Record.Pause,
// Record.Resumed), in their transactions, each guarded by the version it expects;
// UpdatePaused is an UPDATE guarded by the version before. Its times are fixed-width RFC 3339, so paused_runs_user(user_id,
// created_at) and paused_runs_expires(expires_at) give PausedRuns' orders. Forget
// deletes the user's paused runs; deleting a conversation leaves them.
//
// A blob's expires is Unix milliseconds, NULL when it never expires. Blob skips an
// expired row; PutBlob upserts its row and deletes the expired ones in one
// transaction, found by the partial index blobs_expires. Forget leaves blobs: they
// belong to no user.
//
// A commit with a Key first inserts it into commits in its transaction, after
// deleting the keys older than a week (found by commits_at): a key already there
// ends the commit with nothing written, and a commit that fails rolls its key back.
// Forget leaves keys: they hold no user's data.
//
// sqlite imports runtime only; it must not import cmd.
package sqlite
