package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/sqlitedb"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// Store is a store.Store in one SQLite file.
type Store struct {
	// write has a single connection, so this process's writers queue in database/sql
	// instead of spinning in SQLite's busy handler; other processes are held off by
	// busy_timeout and the IMMEDIATE transactions.
	write *sql.DB
	// read serves readers, which WAL lets run alongside the writer.
	read *sql.DB
	// seen is Seen's query, prepared once: a run may look up several entities, and
	// preparing costs as much as the lookup.
	seen *sql.Stmt
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.PausedRuns = (*Store)(nil)
	_ store.Blobs      = (*Store)(nil)
)

// readParams are the readers' connection settings (the writer's are sqlitedb's).
const readParams = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=query_only(1)"

// Open opens the database at path, creating the file and its parent directories
// when missing, and brings its schema up to date.
func Open(path string) (*Store, error) {
	db, err := sqlitedb.Open(path, sqlitedb.Config{What: "sqlite store", ReadParams: readParams, Readers: 4, Migrations: migrations})
	if err != nil {
		return nil, err
	}
	s := &Store{write: db.Write, read: db.Read}
	if s.seen, err = s.read.Prepare(`SELECT 1 FROM seen WHERE conversation_id = ? AND kind = ? AND value = ?`); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	var err error
	if s.seen != nil {
		err = s.seen.Close()
	}
	return errors.Join(err, s.read.Close(), s.write.Close())
}

// Facts returns the user's facts sorted by key.
func (s *Store) Facts(ctx context.Context, userID string) ([]store.Fact, error) {
	rows, err := s.read.QueryContext(ctx,
		`SELECT key, value, source, updated_at FROM facts WHERE user_id = ? ORDER BY key`, userID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: facts: %w", err)
	}
	defer rows.Close()
	var out []store.Fact
	for rows.Next() {
		var f store.Fact
		var updated string
		if err := rows.Scan(&f.Key, &f.Value, &f.Source, &updated); err != nil {
			return nil, fmt.Errorf("sqlite store: facts: %w", err)
		}
		if f.Updated, err = time.Parse(time.RFC3339Nano, updated); err != nil {
			return nil, fmt.Errorf("sqlite store: fact %q: %w", f.Key, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: facts: %w", err)
	}
	return out, nil
}

// Conversation returns the last turns of a conversation and its total number of
// turns, read from one snapshot.
func (s *Store) Conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	out, err := s.conversation(ctx, id, turns)
	if err != nil {
		return store.Conversation{}, fmt.Errorf("sqlite store: conversation %q: %w", id, err)
	}
	return out, nil
}

func (s *Store) conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Conversation{}, err
	}
	defer tx.Rollback()

	var out store.Conversation
	err = tx.QueryRowContext(ctx, `SELECT user_id, turns FROM conversations WHERE id = ?`, id).Scan(&out.User, &out.Turns)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Conversation{}, nil
	}
	if err != nil {
		return store.Conversation{}, err
	}
	if turns > 0 {
		// Turns are numbered from 1, so the last n are those above Turns-n.
		rows, err := tx.QueryContext(ctx, `SELECT role, content, tool_calls, tool_call_id, reasoning FROM messages
			WHERE conversation_id = ? AND turn > ? ORDER BY turn, seq`, id, out.Turns-turns)
		if err != nil {
			return store.Conversation{}, err
		}
		defer rows.Close()
		for rows.Next() {
			var m model.Message
			var calls, reasoning sql.NullString
			if err := rows.Scan(&m.Role, &m.Content, &calls, &m.ToolCallID, &reasoning); err != nil {
				return store.Conversation{}, err
			}
			if calls.Valid {
				if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
					return store.Conversation{}, fmt.Errorf("tool calls: %w", err)
				}
			}
			if reasoning.Valid {
				if err := json.Unmarshal([]byte(reasoning.String), &m.Reasoning); err != nil {
					return store.Conversation{}, fmt.Errorf("reasoning: %w", err)
				}
			}
			out.Messages = append(out.Messages, m)
		}
		if err := rows.Err(); err != nil {
			return store.Conversation{}, err
		}
	}
	return out, nil
}

// Seen looks the entity up by the unique index seen_entity: one B-tree search,
// whatever the number of entities kept.
func (s *Store) Seen(ctx context.Context, conversation, kind, id string) (bool, error) {
	var one int
	err := s.seen.QueryRowContext(ctx, conversation, kind, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqlite store: seen %s %q in conversation %q: %w", kind, id, conversation, err)
	}
	return true, nil
}

// SeenEntities reads the kinds' entities, oldest first, from one snapshot.
func (s *Store) SeenEntities(ctx context.Context, conversation string, kinds ...string) (map[string][]string, error) {
	out, err := s.seenEntities(ctx, conversation, kinds)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: seen entities of conversation %q: %w", conversation, err)
	}
	return out, nil
}

func (s *Store) seenEntities(ctx context.Context, conversation string, kinds []string) (map[string][]string, error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	out := map[string][]string{}
	read := func(query string, args ...any) error {
		// seen_order gives each kind's entities oldest first without sorting.
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var kind, value string // outside the loop: Scan's pointers would move them to the heap per row
		for rows.Next() {
			if err := rows.Scan(&kind, &value); err != nil {
				return err
			}
			out[kind] = append(out[kind], value)
		}
		return rows.Err()
	}
	if len(kinds) == 0 {
		return out, read(`SELECT kind, value FROM seen WHERE conversation_id = ? ORDER BY kind, seq`, conversation)
	}
	for _, kind := range kinds {
		if err := read(`SELECT kind, value FROM seen WHERE conversation_id = ? AND kind = ? ORDER BY seq`, conversation, kind); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Commit writes the record in one IMMEDIATE transaction: its key, facts in order, the
// paused run it ends and the one it writes, then the conversation's new turn and seen
// entities. A key already in commits ends it there, having written nothing.
func (s *Store) Commit(ctx context.Context, rec store.Record) error {
	if err := s.inTx(ctx, func(tx *sql.Tx) error { return commit(ctx, tx, rec, time.Now().UTC()) }); err != nil {
		return fmt.Errorf("sqlite store: commit: %w", err)
	}
	return nil
}

func commit(ctx context.Context, tx *sql.Tx, rec store.Record, now time.Time) error {
	if rec.Key != "" {
		if applied, err := claimKey(ctx, tx, rec.Key, now); err != nil || applied {
			return err
		}
	}
	stamp := now.Format(time.RFC3339Nano)
	for _, ch := range rec.Facts {
		if err := commitFact(ctx, tx, rec.UserID, ch, stamp); err != nil {
			return err
		}
	}
	if err := commitPaused(ctx, tx, rec); err != nil {
		return err
	}
	if rec.Conversation == "" {
		return nil
	}
	turn, err := commitTurn(ctx, tx, rec, stamp)
	if err != nil {
		return err
	}
	if len(rec.Messages) > 0 {
		if err := commitMessages(ctx, tx, rec, turn); err != nil {
			return err
		}
	}
	return commitSeen(ctx, tx, rec)
}

// commitFact applies one change to the user's facts; the transaction holds the
// write lock, so an append sees the commit before it.
func commitFact(ctx context.Context, tx *sql.Tx, userID string, ch store.FactChange, stamp string) error {
	if ch.Op == store.FactDelete {
		_, err := tx.ExecContext(ctx, `DELETE FROM facts WHERE user_id = ? AND key = ?`, userID, ch.Key)
		return err
	}
	var old string
	err := tx.QueryRowContext(ctx, `SELECT value FROM facts WHERE user_id = ? AND key = ?`, userID, ch.Key).Scan(&old)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO facts(user_id, key, value, source, updated_at) VALUES(?, ?, ?, ?, ?)
			ON CONFLICT(user_id, key) DO UPDATE SET value = excluded.value, source = excluded.source, updated_at = excluded.updated_at`,
		userID, ch.Key, store.ApplyFact(old, ch), ch.Source, stamp)
	return err
}

// commitPaused deletes the paused run the record ends and writes the one it
// pauses. Resumed goes first: a run resumed under its id may pause again in the
// same commit. Each is written only over the version it expects, checked in the
// transaction (which holds the write lock); ErrPausedConflict rolls the whole
// commit back.
func commitPaused(ctx context.Context, tx *sql.Tx, rec store.Record) error {
	if rec.Resumed != "" {
		res, err := tx.ExecContext(ctx, `DELETE FROM paused_runs WHERE id = ? AND version = ?`, rec.Resumed, rec.ResumedVersion)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return store.ErrPausedConflict
		}
	}
	p := rec.Pause
	if p == nil {
		return nil
	}
	if p.ID != rec.Resumed {
		var version int
		err := tx.QueryRowContext(ctx, `SELECT version FROM paused_runs WHERE id = ?`, p.ID).Scan(&version)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if p.Version != 1 {
				return store.ErrPausedConflict
			}
		case err != nil:
			return err
		case version != p.Version-1:
			return store.ErrPausedConflict
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO paused_runs(id, user_id, agent, status, version, created_at, expires_at, state)
			VALUES(?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, p.UserID, p.Agent, string(p.Status), p.Version,
		pausedTime(p.Created), pausedTime(p.Expires), pausedState(p.State))
	return err
}

// commitTurn creates the conversation if it is new and counts the record's turn;
// it returns the turn's number (the conversation's turn count, with this one). The
// conversation keeps the user who started it, as the memory store does.
func commitTurn(ctx context.Context, tx *sql.Tx, rec store.Record, stamp string) (int, error) {
	newTurns := 0
	if len(rec.Messages) > 0 {
		newTurns = 1
	}
	var turn int
	// The update applies only to the same user's conversation: no row comes back for
	// another user's, and the transaction rolls back.
	err := tx.QueryRowContext(ctx, `INSERT INTO conversations(id, user_id, turns, updated_at) VALUES(?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET turns = turns + excluded.turns, updated_at = excluded.updated_at
		WHERE conversations.user_id = excluded.user_id
		RETURNING turns`, rec.Conversation, rec.UserID, newTurns, stamp).Scan(&turn)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrForeignConversation
	}
	return turn, err
}

// commitMessages appends the record's messages as turn number turn, numbered on
// from the conversation's last.
func commitMessages(ctx context.Context, tx *sql.Tx, rec store.Record, turn int) error {
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM messages WHERE conversation_id = ?`,
		rec.Conversation).Scan(&seq); err != nil {
		return err
	}
	insert, err := tx.PrepareContext(ctx, `INSERT INTO messages(conversation_id, seq, turn, role, content, tool_calls, tool_call_id, reasoning)
			VALUES(?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer insert.Close()
	for _, m := range rec.Messages {
		seq++
		calls, err := nullJSON(len(m.ToolCalls) > 0, m.ToolCalls)
		if err != nil {
			return err
		}
		reasoning, err := nullJSON(m.Reasoning != nil, m.Reasoning)
		if err != nil {
			return err
		}
		if _, err := insert.ExecContext(ctx, rec.Conversation, seq, turn, string(m.Role), m.Content, calls, m.ToolCallID, reasoning); err != nil {
			return err
		}
	}
	return nil
}

// commitKeyTTL is how long a commit's key is kept: a retry later than that is made again.
const commitKeyTTL = 7 * 24 * time.Hour

// claimKey records a commit's key and reports whether it was there already: a commit
// made before. It first deletes the keys past commitKeyTTL, which commits_at finds,
// so the sweep costs once per key. The transaction holds the write lock, so two
// commits with one key cannot both claim it; one that fails rolls its key back.
func claimKey(ctx context.Context, tx *sql.Tx, key string, now time.Time) (applied bool, err error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM commits WHERE at < ?`, now.Add(-commitKeyTTL).UnixMilli()); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO commits(key, at) VALUES(?, ?) ON CONFLICT(key) DO NOTHING`, key, now.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 0, err
}

// nullJSON is v as JSON text, or NULL when there is nothing to store.
func nullJSON(present bool, v any) (sql.NullString, error) {
	if !present {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	return sql.NullString{String: string(b), Valid: err == nil}, err
}

// commitSeen merges the entities the run revealed: each becomes the newest of its
// kind (deleted and inserted again, so it takes the next seq), then the oldest
// beyond rec.MaxSeen go. seen_kinds keeps the count, so the cost is that of the
// entities written, not of those kept.
func commitSeen(ctx context.Context, tx *sql.Tx, rec store.Record) error {
	if len(rec.Seen) == 0 {
		return nil
	}
	del, err := tx.PrepareContext(ctx, `DELETE FROM seen WHERE conversation_id = ? AND kind = ? AND value = ?`)
	if err != nil {
		return err
	}
	defer del.Close()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO seen(conversation_id, kind, value) VALUES(?, ?, ?)`)
	if err != nil {
		return err
	}
	defer ins.Close()
	// Sorted kinds keep the order of seq, and so the database, deterministic.
	for _, kind := range slices.Sorted(maps.Keys(rec.Seen)) {
		if len(rec.Seen[kind]) == 0 {
			continue
		}
		added := int64(0)
		for _, v := range rec.Seen[kind] {
			res, err := del.ExecContext(ctx, rec.Conversation, kind, v)
			if err != nil {
				return err
			}
			renewed, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if _, err := ins.ExecContext(ctx, rec.Conversation, kind, v); err != nil {
				return err
			}
			added += 1 - renewed
		}
		var count int
		if err := tx.QueryRowContext(ctx, `INSERT INTO seen_kinds(conversation_id, kind, entities) VALUES(?, ?, ?)
			ON CONFLICT(conversation_id, kind) DO UPDATE SET entities = entities + excluded.entities
			RETURNING entities`, rec.Conversation, kind, added).Scan(&count); err != nil {
			return err
		}
		if rec.MaxSeen <= 0 || count <= rec.MaxSeen {
			continue
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM seen WHERE seq IN (
			SELECT seq FROM seen WHERE conversation_id = ? AND kind = ? ORDER BY seq LIMIT ?)`,
			rec.Conversation, kind, count-rec.MaxSeen); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE seen_kinds SET entities = ? WHERE conversation_id = ? AND kind = ?`,
			rec.MaxSeen, rec.Conversation, kind); err != nil {
			return err
		}
	}
	return nil
}

// Conversations lists the user's conversation ids, the latest committed to first.
// They are sorted here, on the parsed time: RFC 3339 text of varying length does not
// sort as the times do.
func (s *Store) Conversations(ctx context.Context, userID string) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, updated_at FROM conversations WHERE user_id = ?`, userID)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: conversations: %w", err)
	}
	defer rows.Close()
	var convs []store.Activity
	for rows.Next() {
		var c store.Activity
		var updated string
		if err := rows.Scan(&c.ID, &updated); err != nil {
			return nil, fmt.Errorf("sqlite store: conversations: %w", err)
		}
		if c.Updated, err = time.Parse(time.RFC3339Nano, updated); err != nil {
			return nil, fmt.Errorf("sqlite store: conversation %q: %w", c.ID, err)
		}
		convs = append(convs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: conversations: %w", err)
	}
	return store.NewestFirst(convs), nil
}

// DeleteConversation deletes the conversation in one transaction when it is the
// user's; the foreign keys cascade to its messages and seen entities.
func (s *Store) DeleteConversation(ctx context.Context, userID, id string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = ? AND user_id = ?`, id, userID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrConversationNotFound
		}
		return nil
	})
	if errors.Is(err, store.ErrConversationNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("sqlite store: delete conversation %q: %w", id, err)
	}
	return nil
}

// Forget deletes the user's facts, conversations and paused runs in one
// transaction; the foreign keys cascade to the conversations' messages and seen
// entities.
func (s *Store) Forget(ctx context.Context, userID string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, del := range []string{
			`DELETE FROM facts WHERE user_id = ?`,
			`DELETE FROM conversations WHERE user_id = ?`,
			`DELETE FROM paused_runs WHERE user_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, del, userID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite store: forget: %w", err)
	}
	return nil
}

// pausedLayout is RFC 3339 with a fixed number of fractional digits: in UTC its text
// sorts as the times do, which time.RFC3339Nano's, dropping trailing zeros, does not.
// time.RFC3339Nano parses it.
const pausedLayout = "2006-01-02T15:04:05.000000000Z07:00"

func pausedTime(t time.Time) string { return t.UTC().Format(pausedLayout) }

// pausedState is the state to store: a run without one stores an empty blob, not
// NULL, so it reads back as it was written, and the column needs no NULL case.
func pausedState(state []byte) []byte {
	if state == nil {
		return []byte{}
	}
	return state
}

// pausedColumns are the columns scanPaused reads, in its order.
const pausedColumns = `id, user_id, agent, status, version, created_at, expires_at, state`

func scanPaused(row interface{ Scan(...any) error }) (store.PausedRun, error) {
	var p store.PausedRun
	var created, expires string
	if err := row.Scan(&p.ID, &p.UserID, &p.Agent, &p.Status, &p.Version, &created, &expires, &p.State); err != nil {
		return store.PausedRun{}, err
	}
	var err error
	if p.Created, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return store.PausedRun{}, fmt.Errorf("created: %w", err)
	}
	if p.Expires, err = time.Parse(time.RFC3339Nano, expires); err != nil {
		return store.PausedRun{}, fmt.Errorf("expires: %w", err)
	}
	return p, nil
}

func (s *Store) PausedRun(ctx context.Context, id string) (store.PausedRun, error) {
	p, err := scanPaused(s.read.QueryRowContext(ctx, `SELECT `+pausedColumns+` FROM paused_runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.PausedRun{}, store.ErrRunNotFound
	}
	if err != nil {
		return store.PausedRun{}, fmt.Errorf("sqlite store: paused run %q: %w", id, err)
	}
	return p, nil
}

// UpdatePaused writes over the version before p's only. When no row matches, a second
// look in the same transaction tells a run that is gone from one changed meanwhile.
func (s *Store) UpdatePaused(ctx context.Context, p store.PausedRun) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE paused_runs SET user_id = ?, agent = ?, status = ?, version = ?,
			created_at = ?, expires_at = ?, state = ? WHERE id = ? AND version = ?`,
			p.UserID, p.Agent, string(p.Status), p.Version, pausedTime(p.Created), pausedTime(p.Expires),
			pausedState(p.State), p.ID, p.Version-1)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM paused_runs WHERE id = ?`, p.ID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrRunNotFound
		case err != nil:
			return err
		}
		return store.ErrPausedConflict
	})
	if err != nil && !errors.Is(err, store.ErrRunNotFound) && !errors.Is(err, store.ErrPausedConflict) {
		return fmt.Errorf("sqlite store: update paused run %q: %w", p.ID, err)
	}
	return err
}

// PausedRuns reads the runs in the order of an index: paused_runs_user for a user's,
// newest first, paused_runs_expires for those about to expire, soonest first.
func (s *Store) PausedRuns(ctx context.Context, q store.PausedQuery) ([]store.PausedRun, error) {
	var where []string
	var args []any
	if q.UserID != "" {
		where, args = append(where, `user_id = ?`), append(args, q.UserID)
	}
	if !q.ExpiresBefore.IsZero() {
		where, args = append(where, `expires_at < ?`), append(args, pausedTime(q.ExpiresBefore))
	}
	query := `SELECT ` + pausedColumns + ` FROM paused_runs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if q.UserID != "" {
		query += ` ORDER BY created_at DESC, id`
	} else {
		query += ` ORDER BY expires_at, id`
	}
	if q.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, q.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: paused runs: %w", err)
	}
	defer rows.Close()
	var out []store.PausedRun
	for rows.Next() {
		p, err := scanPaused(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: paused runs: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: paused runs: %w", err)
	}
	return out, nil
}

// blobExpiry is when a blob written now with ttl expires, in Unix milliseconds; nil
// (NULL) for one that never does.
func blobExpiry(now time.Time, ttl time.Duration) *int64 {
	if ttl <= 0 {
		return nil
	}
	ms := now.Add(ttl).UnixMilli()
	return &ms
}

// PutBlob replaces the key's row and, in the same transaction, deletes the expired
// blobs, which the partial index blobs_expires finds: nothing else sweeps them, and
// the cost is paid once per expired blob.
func (s *Store) PutBlob(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	if data == nil {
		data = []byte{} // NOT NULL: an empty blob, as it was given
	}
	now := time.Now()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE expires <= ?`, now.UnixMilli()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs(key, data, expires) VALUES(?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET data = excluded.data, expires = excluded.expires`,
			key, data, blobExpiry(now, ttl))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite store: put blob %q: %w", key, err)
	}
	return nil
}

// Blob reads the key's row unless it expired; the read connection cannot delete
// it, PutBlob's sweep does.
func (s *Store) Blob(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := s.read.QueryRowContext(ctx, `SELECT data FROM blobs WHERE key = ? AND (expires IS NULL OR expires > ?)`,
		key, time.Now().UnixMilli()).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite store: blob %q: %w", key, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// inTx runs fn in a write transaction and commits it unless fn fails.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
