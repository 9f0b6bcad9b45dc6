package sqlite

import "github.com/agentrun/agentrun/internal/sqlitedb"

// migrations bring the schema from version i to i+1. They are append-only: a
// released migration never changes, a new one is added at the end.
var migrations = []string{
	// 1: the initial schema. Times are RFC 3339 text in UTC, readable in the sqlite3
	// shell. tool_calls is JSON, NULL when the message calls no tool.
	`CREATE TABLE conversations (
		id         TEXT PRIMARY KEY,
		user_id    TEXT NOT NULL,
		turns      INTEGER NOT NULL,
		updated_at TEXT NOT NULL
	);
	CREATE INDEX conversations_user ON conversations(user_id, id);

	CREATE TABLE messages (
		conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
		seq             INTEGER NOT NULL,
		turn            INTEGER NOT NULL,
		role            TEXT NOT NULL,
		content         TEXT NOT NULL,
		tool_calls      TEXT,
		tool_call_id    TEXT NOT NULL,
		PRIMARY KEY (conversation_id, seq)
	) WITHOUT ROWID;
	CREATE INDEX messages_turn ON messages(conversation_id, turn);

	-- A rowid table, so ORDER BY rowid gives the order entities were revealed in.
	CREATE TABLE seen (
		conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
		kind            TEXT NOT NULL,
		value           TEXT NOT NULL,
		PRIMARY KEY (conversation_id, kind, value)
	);

	CREATE TABLE facts (
		user_id    TEXT NOT NULL,
		key        TEXT NOT NULL,
		value      TEXT NOT NULL,
		source     TEXT NOT NULL,
		updated_at TEXT NOT NULL,
		PRIMARY KEY (user_id, key)
	) WITHOUT ROWID;`,

	// 2: seen entities in the order of their last revelation, by seq — an INTEGER
	// PRIMARY KEY, which VACUUM keeps, unlike version 1's implicit rowid — so the
	// oldest of a kind can be dropped beyond memory.max_seen; seen_kinds counts each
	// kind's entities, so a commit need not count them. Version 1's rows keep their order.
	`CREATE TABLE seen_v2 (
		seq             INTEGER PRIMARY KEY,
		conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
		kind            TEXT NOT NULL,
		value           TEXT NOT NULL
	);
	INSERT INTO seen_v2(conversation_id, kind, value) SELECT conversation_id, kind, value FROM seen ORDER BY rowid;
	DROP TABLE seen;
	ALTER TABLE seen_v2 RENAME TO seen;
	CREATE UNIQUE INDEX seen_entity ON seen(conversation_id, kind, value);
	CREATE INDEX seen_order ON seen(conversation_id, kind, seq);

	CREATE TABLE seen_kinds (
		conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
		kind            TEXT NOT NULL,
		entities        INTEGER NOT NULL,
		PRIMARY KEY (conversation_id, kind)
	) WITHOUT ROWID;
	INSERT INTO seen_kinds SELECT conversation_id, kind, count(*) FROM seen GROUP BY conversation_id, kind;`,

	// 3: an assistant message's reasoning (JSON of model.Reasoning, NULL without),
	// which providers such as DeepSeek require back with the messages that called tools.
	`ALTER TABLE messages ADD COLUMN reasoning TEXT;`,

	// 4: runs paused for approvals (store.PausedRun), state its JSON kept as given.
	// Their times are RFC 3339 in UTC with all nine fractional digits (pausedTime), so
	// that the text sorts as the times do and the indexes serve PausedRuns' order and
	// its expiry bound.
	`CREATE TABLE paused_runs (
		id         TEXT PRIMARY KEY,
		user_id    TEXT NOT NULL,
		agent      TEXT NOT NULL,
		status     TEXT NOT NULL,
		version    INTEGER NOT NULL,
		created_at TEXT NOT NULL,
		expires_at TEXT NOT NULL,
		state      BLOB NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX paused_runs_user ON paused_runs(user_id, created_at);
	CREATE INDEX paused_runs_expires ON paused_runs(expires_at);`,

	// 5: blobs (store.Blobs), the values a durable engine's history holds by
	// reference. expires is Unix milliseconds, NULL for a blob that never expires;
	// the partial index finds the expired ones for PutBlob's sweep. A rowid table:
	// its rows may be megabytes, which WITHOUT ROWID handles poorly.
	`CREATE TABLE blobs (
		key     TEXT PRIMARY KEY,
		data    BLOB NOT NULL,
		expires INTEGER
	);
	CREATE INDEX blobs_expires ON blobs(expires) WHERE expires IS NOT NULL;`,

	// 6: the keys of the commits made (store.Record.Key), so that a commit retried
	// is made once. at is when, in Unix milliseconds; commits_at finds the keys old
	// enough for a commit's sweep.
	`CREATE TABLE commits (
		key TEXT PRIMARY KEY,
		at  INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX commits_at ON commits(at);`,
}

// ErrNewerSchema reports a database written by a newer agentrun, whose schema this
// one does not know.
var ErrNewerSchema = sqlitedb.ErrNewerSchema

// Version is the schema version this agentrun writes: Open brings a file up to it.
var Version = len(migrations)
