package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// Store is a store.Store in a PostgreSQL schema.
type Store struct {
	db  *pgdb.DB
	ttl time.Duration
	// swept, analyzed, blobsSwept and keysSwept are when expired conversations were
	// last deleted, seen's statistics last refreshed, expired blobs last deleted and
	// old commit keys last deleted (Unix nanoseconds); upkeep counts the background
	// goroutines doing any, which Close waits for.
	swept, analyzed, blobsSwept, keysSwept atomic.Int64
	upkeep                                 sync.WaitGroup
	// upkeepCtx ends when the store closes: upkeep in flight gives up.
	upkeepCtx  context.Context
	stopUpkeep context.CancelFunc
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.PausedRuns = (*Store)(nil)
	_ store.Blobs      = (*Store)(nil)
)

// Upkeep: at most once per upkeepEvery in a process, a commit starts deleting the
// conversations expired under the TTL (between sweeps the reads skip them) and,
// after a large commit, refreshing seen's statistics — in the background, within
// upkeepBudget, expired conversations sweepBatch at a time.
const (
	upkeepEvery  = time.Minute
	upkeepBudget = 5 * time.Minute
	sweepBatch   = 500
)

// Open connects to the database a postgres:// or postgresql:// URL names (see
// pgdb.Open for its parameters: schema, pool_max_conns, statement_timeout, sslmode,
// …) and applies the migrations the schema lacks. With ttl > 0 a conversation is
// kept that long after its last commit (memory.ttl): reads skip it once expired and
// commits delete expired conversations from time to time; facts and paused runs
// never expire.
func Open(ctx context.Context, url string, ttl time.Duration) (*Store, error) {
	db, err := pgdb.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx, component, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Store{db: db, ttl: ttl, upkeepCtx: ctx, stopUpkeep: stop}, nil
}

// Schema is the schema the store's tables live in.
func (s *Store) Schema() string { return s.db.Schema }

// Close closes the pool.
func (s *Store) Close() error {
	s.stopUpkeep()
	s.upkeep.Wait()
	s.db.Close()
	return nil
}

// cutoff is the oldest last commit a live conversation may have; the zero time
// without a TTL, which every conversation passes.
func (s *Store) cutoff(now time.Time) time.Time {
	if s.ttl <= 0 {
		return time.Time{}
	}
	return now.Add(-s.ttl)
}

// Facts returns the user's facts sorted by key.
func (s *Store) Facts(ctx context.Context, userID string) ([]store.Fact, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT key, value, source, updated_at FROM facts WHERE user_id = $1 ORDER BY key`, userID)
	if err != nil {
		return nil, fmt.Errorf("postgres store: facts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Fact, error) {
		var f store.Fact
		err := row.Scan(&f.Key, &f.Value, &f.Source, &f.Updated)
		f.Updated = f.Updated.UTC()
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres store: facts: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Conversation reads the conversation's row and its last turns in one statement, so
// from one snapshot.
func (s *Store) Conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT c.user_id, c.turns, m.role, m.content, m.tool_calls, m.tool_call_id, m.reasoning
		FROM conversations c
		LEFT JOIN messages m ON m.conversation_id = c.id AND $2 > 0 AND m.turn > c.turns - $2
		WHERE c.id = $1 AND c.updated_at >= $3
		ORDER BY m.turn, m.seq`, id, turns, s.cutoff(time.Now()))
	if err != nil {
		return store.Conversation{}, fmt.Errorf("postgres store: conversation %q: %w", id, err)
	}
	defer rows.Close()
	var out store.Conversation
	for rows.Next() {
		var role, content, callID *string
		var calls, reasoning []byte
		if err := rows.Scan(&out.User, &out.Turns, &role, &content, &calls, &callID, &reasoning); err != nil {
			return store.Conversation{}, fmt.Errorf("postgres store: conversation %q: %w", id, err)
		}
		if role == nil {
			continue // the conversation without messages in the window
		}
		m := model.Message{Role: model.Role(*role), Content: *content, ToolCallID: *callID}
		if calls != nil {
			if err := json.Unmarshal(calls, &m.ToolCalls); err != nil {
				return store.Conversation{}, fmt.Errorf("postgres store: conversation %q: tool calls: %w", id, err)
			}
		}
		if reasoning != nil {
			if err := json.Unmarshal(reasoning, &m.Reasoning); err != nil {
				return store.Conversation{}, fmt.Errorf("postgres store: conversation %q: reasoning: %w", id, err)
			}
		}
		out.Messages = append(out.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return store.Conversation{}, fmt.Errorf("postgres store: conversation %q: %w", id, err)
	}
	return out, nil
}

// Seen looks the entity up by the unique index seen_entity.
func (s *Store) Seen(ctx context.Context, conversation, kind, id string) (bool, error) {
	query := `SELECT EXISTS (SELECT 1 FROM seen WHERE conversation_id = $1 AND kind = $2 AND value = $3)`
	args := []any{conversation, storable(kind), storable(id)}
	if s.ttl > 0 {
		query = `SELECT EXISTS (SELECT 1 FROM seen JOIN conversations c ON c.id = seen.conversation_id
			WHERE seen.conversation_id = $1 AND kind = $2 AND value = $3 AND c.updated_at >= $4)`
		args = append(args, s.cutoff(time.Now()))
	}
	var found bool
	if err := s.db.Pool.QueryRow(ctx, query, args...).Scan(&found); err != nil {
		return false, fmt.Errorf("postgres store: seen %s %q in conversation %q: %w", kind, id, conversation, err)
	}
	return found, nil
}

// SeenEntities reads the kinds' entities, oldest first, in one statement: by
// seen_order, kind after kind.
func (s *Store) SeenEntities(ctx context.Context, conversation string, kinds ...string) (map[string][]string, error) {
	query := `SELECT kind, value FROM seen WHERE conversation_id = $1 AND ($2::text[] IS NULL OR kind = ANY($2))`
	args := []any{conversation, kinds}
	if len(kinds) == 0 {
		args[1] = nil
	}
	if s.ttl > 0 {
		query += ` AND EXISTS (SELECT 1 FROM conversations c WHERE c.id = $1 AND c.updated_at >= $3)`
		args = append(args, s.cutoff(time.Now()))
	}
	rows, err := s.db.Pool.Query(ctx, query+` ORDER BY kind, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres store: seen entities of conversation %q: %w", conversation, err)
	}
	defer rows.Close()
	out := map[string][]string{}
	var kind, value string
	for rows.Next() {
		if err := rows.Scan(&kind, &value); err != nil {
			return nil, fmt.Errorf("postgres store: seen entities of conversation %q: %w", conversation, err)
		}
		out[kind] = append(out[kind], value)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres store: seen entities of conversation %q: %w", conversation, err)
	}
	return out, nil
}

// Commit writes the record in one READ COMMITTED transaction, run again when the
// server aborts it for a deadlock. A record with a Key first inserts it into
// commits: a key there already ends the commit, having written nothing. It then
// takes the conversation's row lock (creating the row if need be) and checks its
// owner, so commits to one conversation run one after the other; then facts in
// order, each under its row lock; the paused run it ends and the one it writes,
// guarded by their versions; then the new turn and the seen entities.
func (s *Store) Commit(ctx context.Context, rec store.Record) error {
	var added int
	err := s.db.InTx(ctx, pgx.ReadCommitted, func(tx pgx.Tx) (err error) {
		added, err = s.commit(ctx, tx, rec, time.Now().UTC())
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres store: commit: %w", err)
	}
	if added >= analyzeAfter && s.due(&s.analyzed, time.Now()) {
		// Until autovacuum analyzes seen, the planner does not know that one
		// conversation may hold most of its rows, and may look an entity up by
		// seen_order, reading the whole kind, instead of seen_entity. A best effort,
		// in the background: autovacuum does it later anyway.
		s.background(func(ctx context.Context) { s.db.Pool.Exec(ctx, `ANALYZE seen`) })
	}
	if s.ttl > 0 && s.due(&s.swept, time.Now()) {
		s.background(s.sweep)
	}
	if rec.Key != "" && s.due(&s.keysSwept, time.Now()) {
		s.background(s.sweepKeys)
	}
	return nil
}

// commitKeyTTL is how long a commit's key is kept at least: the sweep deletes it
// after that, and a retry later still is made again.
const commitKeyTTL = 7 * 24 * time.Hour

// claimKey records a commit's key and reports whether it was there already: a
// commit made before. The insert waits for a concurrent transaction inserting the
// same key, then does nothing if that one committed: of two commits with one key,
// one is made. A commit that fails rolls its key back.
func claimKey(ctx context.Context, tx pgx.Tx, key string) (applied bool, err error) {
	tag, err := tx.Exec(ctx, `INSERT INTO commits(key, at) VALUES($1, now()) ON CONFLICT (key) DO NOTHING`, key)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 0, nil
}

// sweepKeys deletes the commit keys older than commitKeyTTL by the server's clock,
// found by commits_at, sweepBatch at a time; a failure, or the end of ctx, leaves
// the rest to the next sweep.
func (s *Store) sweepKeys(ctx context.Context) {
	for {
		tag, err := s.db.Pool.Exec(ctx, `DELETE FROM commits WHERE key IN (
			SELECT key FROM commits WHERE at < now() - $1::bigint * interval '1 millisecond' LIMIT $2)`,
			commitKeyTTL.Milliseconds(), sweepBatch)
		if err != nil || tag.RowsAffected() < sweepBatch {
			return
		}
	}
}

// due reports whether upkeep last done at *last (Unix nanoseconds) is due again,
// claiming it for the caller: once per upkeepEvery in a process.
func (s *Store) due(last *atomic.Int64, now time.Time) bool {
	at := last.Load()
	return now.UnixNano()-at >= int64(upkeepEvery) && last.CompareAndSwap(at, now.UnixNano())
}

// background runs upkeep off the commit that found it due, so no run waits for
// it, within upkeepBudget.
func (s *Store) background(f func(ctx context.Context)) {
	s.upkeep.Go(func() {
		ctx, cancel := context.WithTimeout(s.upkeepCtx, upkeepBudget)
		defer cancel()
		f(ctx)
	})
}

// analyzeAfter is how many entities one commit adds before it refreshes seen's
// statistics.
const analyzeAfter = 1000

// commit writes the record and returns how many entities it added.
func (s *Store) commit(ctx context.Context, tx pgx.Tx, rec store.Record, now time.Time) (int, error) {
	rec = storableRecord(rec)
	// Shared with other commits of the user, exclusive in Forget: a user forgotten
	// is forgotten whole, never beside a commit half seen.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`, "agentrun-user:"+rec.UserID); err != nil {
		return 0, err
	}
	if rec.Key != "" {
		if applied, err := claimKey(ctx, tx, rec.Key); err != nil || applied {
			return 0, err
		}
	}
	turn := 0
	if rec.Conversation != "" {
		var err error
		if turn, err = s.lockConversation(ctx, tx, rec, now); err != nil {
			return 0, err
		}
	}
	for _, ch := range rec.Facts {
		if err := commitFact(ctx, tx, rec.UserID, ch, now); err != nil {
			return 0, err
		}
	}
	if err := commitPaused(ctx, tx, rec); err != nil {
		return 0, err
	}
	if rec.Conversation == "" {
		return 0, nil
	}
	if len(rec.Messages) > 0 {
		if err := commitMessages(ctx, tx, rec, turn); err != nil {
			return 0, err
		}
	}
	return commitSeen(ctx, tx, rec)
}

// lockConversation creates the conversation if it is new, locks its row, checks
// its owner and counts the record's turn; it returns the turn's number (the
// conversation's turn count, with this one).
func (s *Store) lockConversation(ctx context.Context, tx pgx.Tx, rec store.Record, now time.Time) (int, error) {
	newTurns := 0
	if len(rec.Messages) > 0 {
		newTurns = 1
	}
	for range 3 {
		// A row that is not there yet is inserted, or waited for if another
		// transaction is inserting it; then locked.
		if _, err := tx.Exec(ctx, `INSERT INTO conversations(id, user_id, turns, updated_at) VALUES($1, $2, 0, $3)
			ON CONFLICT (id) DO NOTHING`, rec.Conversation, rec.UserID, now); err != nil {
			return 0, err
		}
		var owner string
		var turns int
		var updated time.Time
		err := tx.QueryRow(ctx, `SELECT user_id, turns, updated_at FROM conversations WHERE id = $1 FOR UPDATE`,
			rec.Conversation).Scan(&owner, &turns, &updated)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // deleted between the two statements: insert it again
		}
		if err != nil {
			return 0, err
		}
		if s.ttl > 0 && updated.Before(s.cutoff(now)) {
			// Expired: it is gone for the reads, so it starts again, maybe with
			// another owner, as an expired Redis conversation does.
			if _, err := tx.Exec(ctx, `DELETE FROM conversations WHERE id = $1`, rec.Conversation); err != nil {
				return 0, err
			}
			continue
		}
		if owner != rec.UserID {
			return 0, store.ErrForeignConversation
		}
		turns += newTurns
		if _, err := tx.Exec(ctx, `UPDATE conversations SET turns = $2, updated_at = GREATEST(updated_at, $3) WHERE id = $1`,
			rec.Conversation, turns, now); err != nil {
			return 0, err
		}
		return turns, nil
	}
	return 0, errors.New("the conversation was deleted again and again while committing")
}

// commitFact applies one change under the fact's row lock, so appends of
// concurrent commits each see the one before.
func commitFact(ctx context.Context, tx pgx.Tx, userID string, ch store.FactChange, now time.Time) error {
	if ch.Op == store.FactDelete {
		_, err := tx.Exec(ctx, `DELETE FROM facts WHERE user_id = $1 AND key = $2`, userID, ch.Key)
		return err
	}
	for range 3 {
		var old string
		err := tx.QueryRow(ctx, `SELECT value FROM facts WHERE user_id = $1 AND key = $2 FOR UPDATE`, userID, ch.Key).Scan(&old)
		switch {
		case err == nil:
			_, err := tx.Exec(ctx, `UPDATE facts SET value = $3, source = $4, updated_at = $5 WHERE user_id = $1 AND key = $2`,
				userID, ch.Key, store.ApplyFact(old, ch), ch.Source, now)
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		// No fact yet: insert it, unless a concurrent commit did first — then lock
		// and change that one.
		tag, err := tx.Exec(ctx, `INSERT INTO facts(user_id, key, value, source, updated_at) VALUES($1, $2, $3, $4, $5)
			ON CONFLICT (user_id, key) DO NOTHING`, userID, ch.Key, store.ApplyFact("", ch), ch.Source, now)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
	}
	return errors.New("the fact changed again and again while committing")
}

// commitPaused deletes the paused run the record ends and writes the one it
// pauses, each only over the version it expects; ErrPausedConflict rolls the whole
// commit back. Resumed goes first: a run resumed under its id may pause again.
func commitPaused(ctx context.Context, tx pgx.Tx, rec store.Record) error {
	if rec.Resumed != "" {
		tag, err := tx.Exec(ctx, `DELETE FROM paused_runs WHERE id = $1 AND version = $2`, rec.Resumed, rec.ResumedVersion)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return store.ErrPausedConflict
		}
	}
	p := rec.Pause
	if p == nil {
		return nil
	}
	ca, cn := splitTime(p.Created)
	ea, en := splitTime(p.Expires)
	args := []any{p.ID, p.UserID, p.Agent, string(p.Status), p.Version, ca, cn, ea, en, pausedState(p.State)}
	const insert = `INSERT INTO paused_runs(id, user_id, agent, status, version, created_at, created_nanos, expires_at, expires_nanos, state)
		VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	var query string
	switch {
	case p.ID == rec.Resumed:
		// Its record was just deleted: written whatever its version.
		query = insert
	case p.Version == 1:
		// A new record; a record already there (which would be at version 0) is
		// replaced like any other.
		query = insert + ` ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id, agent = EXCLUDED.agent,
			status = EXCLUDED.status, version = EXCLUDED.version, created_at = EXCLUDED.created_at,
			created_nanos = EXCLUDED.created_nanos, expires_at = EXCLUDED.expires_at,
			expires_nanos = EXCLUDED.expires_nanos, state = EXCLUDED.state
			WHERE paused_runs.version = 0`
	default:
		query = `UPDATE paused_runs SET user_id = $2, agent = $3, status = $4, version = $5, created_at = $6,
			created_nanos = $7, expires_at = $8, expires_nanos = $9, state = $10 WHERE id = $1 AND version = $5 - 1`
	}
	tag, err := tx.Exec(ctx, query, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return store.ErrPausedConflict
	}
	return nil
}

// commitMessages appends the record's messages as turn number turn, numbered on
// from the conversation's last: the row lock keeps another commit from taking the
// same numbers. They go in one round trip.
func commitMessages(ctx context.Context, tx pgx.Tx, rec store.Record, turn int) error {
	var seq int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM messages WHERE conversation_id = $1`,
		rec.Conversation).Scan(&seq); err != nil {
		return err
	}
	batch := &pgx.Batch{}
	for _, m := range rec.Messages {
		seq++
		var calls, reasoning []byte
		var err error
		if len(m.ToolCalls) > 0 {
			if calls, err = json.Marshal(m.ToolCalls); err != nil {
				return err
			}
		}
		if m.Reasoning != nil {
			if reasoning, err = json.Marshal(m.Reasoning); err != nil {
				return err
			}
		}
		batch.Queue(`INSERT INTO messages(conversation_id, seq, turn, role, content, tool_calls, tool_call_id, reasoning)
			VALUES($1, $2, $3, $4, $5, $6::json, $7, $8::json)`,
			rec.Conversation, seq, turn, string(m.Role), m.Content, jsonText(calls), m.ToolCallID, jsonText(reasoning))
	}
	return tx.SendBatch(ctx, batch).Close()
}

// storable is text as PostgreSQL's text can hold it: a NUL byte or bytes that are
// not UTF-8 (a tool's output may carry either: a page in Latin-1) become U+FFFD,
// rather than failing the commit and losing the run's exchange.
func storable(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// storableRecord is rec with its free text storable: messages, facts and the seen
// entities' ids (Seen looks them up the same way). The record's own ids are the
// caller's and kept as they are.
func storableRecord(rec store.Record) store.Record {
	msgs := make([]model.Message, len(rec.Messages))
	for i, m := range rec.Messages {
		m.Content, m.ToolCallID = storable(m.Content), storable(m.ToolCallID)
		msgs[i] = m
	}
	rec.Messages = msgs
	facts := make([]store.FactChange, len(rec.Facts))
	for i, f := range rec.Facts {
		f.Key, f.Value, f.Source = storable(f.Key), storable(f.Value), storable(f.Source)
		facts[i] = f
	}
	rec.Facts = facts
	if rec.Seen != nil {
		seen := make(map[string][]string, len(rec.Seen))
		for kind, ids := range rec.Seen {
			clean := make([]string, len(ids))
			for i, id := range ids {
				clean[i] = storable(id)
			}
			seen[storable(kind)] = clean
		}
		rec.Seen = seen
	}
	return rec
}

// jsonText is JSON as a text parameter, nil (NULL) for none.
func jsonText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// commitSeen merges the entities the run revealed, a kind at a time, in the order of
// their last revelation in the record: each takes the next seq, new or revealed
// before; seen_kinds counts them, and the oldest
// beyond rec.MaxSeen go. The cost is that of the entities written, not of those kept.
func commitSeen(ctx context.Context, tx pgx.Tx, rec store.Record) (int, error) {
	added := 0
	// Sorted kinds keep the order of seq, and so the database, deterministic.
	for _, kind := range slices.Sorted(maps.Keys(rec.Seen)) {
		values := lastOccurrences(rec.Seen[kind])
		if len(values) == 0 {
			continue
		}
		// One statement: new entities are inserted and those revealed before take
		// the next seq, in the record's order, found by the unique index seen_entity
		// (ON CONFLICT arbitrates by it, whatever the planner's statistics say);
		// xmax = 0 tells an inserted row from an updated one, and seen_kinds counts
		// the inserted.
		var count, inserted int
		if err := tx.QueryRow(ctx, `WITH merged AS (
				INSERT INTO seen(conversation_id, kind, value)
				SELECT $1, $2, v FROM unnest($3::text[]) WITH ORDINALITY AS t(v, i) ORDER BY i
				ON CONFLICT (conversation_id, kind, value) DO UPDATE SET seq = nextval(pg_get_serial_sequence('seen', 'seq'))
				RETURNING xmax = 0 AS inserted),
			added AS (SELECT count(*) FILTER (WHERE inserted) AS n FROM merged),
			counted AS (
				INSERT INTO seen_kinds(conversation_id, kind, entities) SELECT $1, $2, n FROM added
				ON CONFLICT (conversation_id, kind) DO UPDATE SET entities = seen_kinds.entities + EXCLUDED.entities
				RETURNING entities)
			SELECT counted.entities, added.n FROM counted, added`, rec.Conversation, kind, values).Scan(&count, &inserted); err != nil {
			return 0, err
		}
		added += inserted
		if rec.MaxSeen <= 0 || count <= rec.MaxSeen {
			continue
		}
		if _, err := tx.Exec(ctx, `DELETE FROM seen WHERE seq IN (
			SELECT seq FROM seen WHERE conversation_id = $1 AND kind = $2 ORDER BY seq LIMIT $3)`,
			rec.Conversation, kind, count-rec.MaxSeen); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `UPDATE seen_kinds SET entities = $3 WHERE conversation_id = $1 AND kind = $2`,
			rec.Conversation, kind, rec.MaxSeen); err != nil {
			return 0, err
		}
	}
	return added, nil
}

// lastOccurrences keeps each value once, where it last occurs: a value revealed
// twice by one run is as new as its last revelation.
func lastOccurrences(values []string) []string {
	last := make(map[string]int, len(values))
	for i, v := range values {
		last[v] = i
	}
	if len(last) == len(values) {
		return values
	}
	out := make([]string, 0, len(last))
	for i, v := range values {
		if last[v] == i {
			out = append(out, v)
		}
	}
	return out
}

// sweep deletes the conversations expired under the TTL (their messages and
// entities cascade), sweepBatch at a time so no statement runs long or locks
// much; a failure, or the end of ctx, leaves the rest to the next sweep.
func (s *Store) sweep(ctx context.Context) {
	cutoff := s.cutoff(time.Now())
	for {
		tag, err := s.db.Pool.Exec(ctx, `DELETE FROM conversations WHERE id IN (
			SELECT id FROM conversations WHERE updated_at < $1 LIMIT $2)`, cutoff, sweepBatch)
		if err != nil || tag.RowsAffected() < sweepBatch {
			return
		}
	}
}

// Conversations lists the user's conversation ids, the latest committed to first,
// by the index conversations_user.
func (s *Store) Conversations(ctx context.Context, userID string) ([]string, error) {
	rows, err := s.db.Pool.Query(ctx, `SELECT id FROM conversations WHERE user_id = $1 AND updated_at >= $2
		ORDER BY updated_at DESC, id`, userID, s.cutoff(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("postgres store: conversations: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres store: conversations: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return ids, nil
}

// DeleteConversation deletes the conversation when it is the user's; the foreign
// keys cascade to its messages and seen entities.
func (s *Store) DeleteConversation(ctx context.Context, userID, id string) error {
	var updated time.Time
	err := s.db.Pool.QueryRow(ctx, `DELETE FROM conversations WHERE id = $1 AND user_id = $2 RETURNING updated_at`,
		id, userID).Scan(&updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrConversationNotFound
	case err != nil:
		return fmt.Errorf("postgres store: delete conversation %q: %w", id, err)
	case updated.Before(s.cutoff(time.Now())):
		return store.ErrConversationNotFound // it had expired: gone already
	}
	return nil
}

// Forget deletes the user's facts, conversations and paused runs in one
// transaction; the foreign keys cascade to the conversations' messages and seen
// entities.
func (s *Store) Forget(ctx context.Context, userID string) error {
	err := s.db.InTx(ctx, pgx.ReadCommitted, func(tx pgx.Tx) error {
		// Waits for the user's commits in flight, and keeps new ones out until done.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "agentrun-user:"+userID); err != nil {
			return err
		}
		for _, del := range []string{
			`DELETE FROM conversations WHERE user_id = $1`,
			`DELETE FROM facts WHERE user_id = $1`,
			`DELETE FROM paused_runs WHERE user_id = $1`,
		} {
			if _, err := tx.Exec(ctx, del, userID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres store: forget: %w", err)
	}
	return nil
}

// splitTime is t as a timestamptz, which keeps microseconds, and the nanoseconds
// below them.
func splitTime(t time.Time) (time.Time, int) {
	at := t.UTC().Truncate(time.Microsecond)
	return at, int(t.Sub(at))
}

func joinTime(at time.Time, nanos int) time.Time {
	return at.UTC().Add(time.Duration(nanos))
}

// pausedState is the state to store: a run without one stores an empty bytea, not
// NULL, so it reads back as it was written.
func pausedState(state []byte) []byte {
	if state == nil {
		return []byte{}
	}
	return state
}

// pausedColumns are the columns scanPaused reads, in its order.
const pausedColumns = `id, user_id, agent, status, version, created_at, created_nanos, expires_at, expires_nanos, state`

func scanPaused(row pgx.Row) (store.PausedRun, error) {
	var p store.PausedRun
	var created, expires time.Time
	var cn, en int
	if err := row.Scan(&p.ID, &p.UserID, &p.Agent, &p.Status, &p.Version, &created, &cn, &expires, &en, &p.State); err != nil {
		return store.PausedRun{}, err
	}
	p.Created, p.Expires = joinTime(created, cn), joinTime(expires, en)
	return p, nil
}

// PausedRun reads one paused run.
func (s *Store) PausedRun(ctx context.Context, id string) (store.PausedRun, error) {
	p, err := scanPaused(s.db.Pool.QueryRow(ctx, `SELECT `+pausedColumns+` FROM paused_runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.PausedRun{}, store.ErrRunNotFound
	}
	if err != nil {
		return store.PausedRun{}, fmt.Errorf("postgres store: paused run %q: %w", id, err)
	}
	return p, nil
}

// UpdatePaused writes over the version before p's only: the UPDATE waits for a
// concurrent change's row lock and then checks the version again. When no row
// matches, a second look tells a run that is gone from one changed meanwhile.
func (s *Store) UpdatePaused(ctx context.Context, p store.PausedRun) error {
	ca, cn := splitTime(p.Created)
	ea, en := splitTime(p.Expires)
	err := s.db.InTx(ctx, pgx.ReadCommitted, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE paused_runs SET user_id = $2, agent = $3, status = $4, version = $5,
			created_at = $6, created_nanos = $7, expires_at = $8, expires_nanos = $9, state = $10
			WHERE id = $1 AND version = $5 - 1`,
			p.ID, p.UserID, p.Agent, string(p.Status), p.Version, ca, cn, ea, en, pausedState(p.State))
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM paused_runs WHERE id = $1)`, p.ID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return store.ErrRunNotFound
		}
		return store.ErrPausedConflict
	})
	if err != nil && !errors.Is(err, store.ErrRunNotFound) && !errors.Is(err, store.ErrPausedConflict) {
		return fmt.Errorf("postgres store: update paused run %q: %w", p.ID, err)
	}
	return err
}

// PausedRuns reads the runs in the order of an index: paused_runs_user for a user's,
// newest first, paused_runs_expires for those about to expire, soonest first.
func (s *Store) PausedRuns(ctx context.Context, q store.PausedQuery) ([]store.PausedRun, error) {
	var where []string
	var args []any
	if q.UserID != "" {
		args = append(args, q.UserID)
		where = append(where, fmt.Sprintf(`user_id = $%d`, len(args)))
	}
	if !q.ExpiresBefore.IsZero() {
		at, nanos := splitTime(q.ExpiresBefore)
		args = append(args, at, nanos)
		where = append(where, fmt.Sprintf(`(expires_at, expires_nanos) < ($%d, $%d)`, len(args)-1, len(args)))
	}
	query := `SELECT ` + pausedColumns + ` FROM paused_runs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if q.UserID != "" {
		query += ` ORDER BY created_at DESC, created_nanos DESC, id`
	} else {
		query += ` ORDER BY expires_at, expires_nanos, id`
	}
	if q.Limit > 0 {
		args = append(args, q.Limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.db.Pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres store: paused runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.PausedRun, error) { return scanPaused(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres store: paused runs: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// PutBlob upserts the key's row. Its expiry is reckoned by the server's clock, as
// Blob's check is, so processes with skewed clocks agree on it. At most once per
// upkeepEvery in a process it starts deleting the expired blobs in the background.
func (s *Store) PutBlob(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	if data == nil {
		data = []byte{} // NOT NULL: an empty blob, as it was given
	}
	var ms *int64
	if ttl > 0 {
		ms = new(ttl.Milliseconds())
		if *ms == 0 {
			*ms = 1 // a ttl under a millisecond still expires
		}
	}
	_, err := s.db.Pool.Exec(ctx, `INSERT INTO blobs(key, data, expires)
		VALUES($1, $2, now() + $3::bigint * interval '1 millisecond')
		ON CONFLICT(key) DO UPDATE SET data = excluded.data, expires = excluded.expires`, key, data, ms)
	if err != nil {
		return fmt.Errorf("postgres store: put blob %q: %w", key, err)
	}
	if s.due(&s.blobsSwept, time.Now()) {
		s.background(s.sweepBlobs)
	}
	return nil
}

// sweepBlobs deletes the expired blobs, found by blobs_expires, sweepBatch at a
// time; a failure, or the end of ctx, leaves the rest to the next sweep.
func (s *Store) sweepBlobs(ctx context.Context) {
	for {
		tag, err := s.db.Pool.Exec(ctx, `DELETE FROM blobs WHERE key IN (
			SELECT key FROM blobs WHERE expires <= now() LIMIT $1)`, sweepBatch)
		if err != nil || tag.RowsAffected() < sweepBatch {
			return
		}
	}
}

// Blob reads the key's row unless it expired; the sweep deletes it later.
func (s *Store) Blob(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := s.db.Pool.QueryRow(ctx, `SELECT data FROM blobs WHERE key = $1 AND (expires IS NULL OR expires > now())`,
		key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: blob %q: %w", key, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
