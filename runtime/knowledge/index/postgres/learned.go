package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// Learn stores answer as a learned entry of key for question (trimmed) and returns
// its id (see index.Learn).
func (x *Index) Learn(ctx context.Context, key index.LearnedKey, emb knowledge.Embedder, user, question, answer string, ttl time.Duration) (int64, error) {
	return index.Learn(ctx, x, key, emb, user, question, answer, ttl)
}

// LearnVector is Learn with the question's vector q (index.Backend). It replaces
// an entry of the same key, embedder, user and question.
func (x *Index) LearnVector(ctx context.Context, key index.LearnedKey, embedder string, q []float32, user, question, answer string, ttl time.Duration) (int64, error) {
	id := key.With(embedder)
	var entry int64
	err := x.db.InTx(ctx, pgx.ReadCommitted, func(tx pgx.Tx) error {
		now := time.Now()
		if err := deleteExpired(ctx, tx, now); err != nil {
			return err
		}
		// The key's row first: its lock makes learners of one key take turns, so
		// two learning one question leave one entry, as the SQLite index does.
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge_learned_keys(agent, intent, version, embedder, generation) VALUES ($1, $2, $3, $4, 1)
			ON CONFLICT (agent, intent, version, embedder) DO UPDATE SET generation = knowledge_learned_keys.generation + 1`,
			id.Agent, id.Intent, id.Version, id.Embedder); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM knowledge_learned WHERE agent = $1 AND intent = $2 AND version = $3
			AND embedder = $4 AND user_id = $5 AND question = $6`, id.Agent, id.Intent, id.Version, id.Embedder, user, question); err != nil {
			return err
		}
		var expires int64
		if ttl > 0 {
			expires = now.Add(ttl).UnixNano()
		}
		return tx.QueryRow(ctx, `INSERT INTO knowledge_learned(agent, intent, version, embedder, dimensions, user_id, question, answer, vector, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
			id.Agent, id.Intent, id.Version, id.Embedder, len(q), user, question, answer, index.EncodeVector(q), now.UnixNano(), expires).Scan(&entry)
	})
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	x.learned.Forget(id) // the next lookup loads the new generation
	return entry, nil
}

// deleteExpired deletes the entries expired at now, of every key. It leaves the
// keys' generations alone: a cache never serves an expired entry anyway.
func deleteExpired(ctx context.Context, tx pgx.Tx, now time.Time) error {
	_, err := tx.Exec(ctx, `DELETE FROM knowledge_learned WHERE expires_at > 0 AND expires_at <= $1`, now.UnixNano())
	return err
}

// where is the SQL condition and arguments of f, for unexpired entries at now.
func where(f index.LearnedFilter, now time.Time) (string, []any) {
	args := []any{now.UnixNano()}
	conds := []string{"(expires_at = 0 OR expires_at > $1)"}
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, cond+" = $"+strconv.Itoa(len(args)))
	}
	if f.Agent != "" {
		add("agent", f.Agent)
	}
	if f.Intent != "" {
		add("intent", f.Intent)
	}
	if !f.AllUsers {
		add("user_id", f.User)
	}
	return strings.Join(conds, " AND "), args
}

// ListLearned returns the unexpired entries f selects, newest first.
func (x *Index) ListLearned(ctx context.Context, f index.LearnedFilter) ([]index.LearnedEntry, error) {
	cond, args := where(f, time.Now())
	out, err := queryAll(ctx, x.db.Pool, `SELECT id, agent, intent, version, embedder, user_id, question, answer, created_at, expires_at
		FROM knowledge_learned WHERE `+cond+` ORDER BY created_at DESC, id DESC`, args, func(r pgx.Rows) (index.LearnedEntry, error) {
		var e index.LearnedEntry
		var created, expires int64
		if err := r.Scan(&e.ID, &e.Agent, &e.Intent, &e.Version, &e.Embedder, &e.User, &e.Question, &e.Answer, &created, &expires); err != nil {
			return e, err
		}
		e.Created = time.Unix(0, created)
		if expires > 0 {
			e.Expires = time.Unix(0, expires)
		}
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("knowledge index: list learned entries: %w", err)
	}
	return out, nil
}

// ClearLearned deletes the entries f selects and returns how many there were
// (expired entries, deleted too, are not counted).
func (x *Index) ClearLearned(ctx context.Context, f index.LearnedFilter) (int, error) {
	var n int64
	err := x.db.InTx(ctx, pgx.ReadCommitted, func(tx pgx.Tx) error {
		now := time.Now()
		if err := deleteExpired(ctx, tx, now); err != nil {
			return err
		}
		cond, args := where(f, now)
		// One statement, so the keys bumped are exactly those of the entries deleted
		// (two would see two snapshots under READ COMMITTED).
		return tx.QueryRow(ctx, `WITH d AS (DELETE FROM knowledge_learned WHERE `+cond+` RETURNING agent, intent, version, embedder),
			bumped AS (UPDATE knowledge_learned_keys k SET generation = k.generation + 1
				FROM (SELECT DISTINCT agent, intent, version, embedder FROM d) x
				WHERE (k.agent, k.intent, k.version, k.embedder) = (x.agent, x.intent, x.version, x.embedder))
			SELECT count(*) FROM d`, args...).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("knowledge index: clear learned entries: %w", err)
	}
	x.learned.Clear()
	return int(n), nil
}

// LookupLearnedVector returns the learned entry of key (and embedder) closest to q
// among the shared ones and user's own (the shared ones only when user is ""), or
// nil when there is none (index.Backend).
func (x *Index) LookupLearnedVector(ctx context.Context, key index.LearnedKey, embedder string, q []float32, user string) (*index.LearnedHit, error) {
	return x.learned.Lookup(ctx, learnedStore{x}, key.With(embedder), q, user)
}

// learnedStore is the index as index.LearnedCache reads it.
type learnedStore struct{ x *Index }

func (s learnedStore) LearnedGeneration(ctx context.Context, key index.LearnedID) (int64, bool, error) {
	return learnedGeneration(ctx, s.x.db.Pool, key)
}

// LoadLearned loads the generation and the rows from one snapshot.
func (s learnedStore) LoadLearned(ctx context.Context, key index.LearnedID, dims int, now int64, add func(index.LearnedRow) error) (int64, bool, error) {
	tx, err := s.x.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback(ctx)
	generation, ok, err := learnedGeneration(ctx, tx, key)
	if err != nil || !ok {
		return 0, false, err
	}
	if _, err := queryAll(ctx, tx, `SELECT id, user_id, question, answer, vector, expires_at FROM knowledge_learned
		WHERE agent = $1 AND intent = $2 AND version = $3 AND embedder = $4 AND dimensions = $5
		AND (expires_at = 0 OR expires_at > $6) ORDER BY id`,
		[]any{key.Agent, key.Intent, key.Version, key.Embedder, dims, now}, func(r pgx.Rows) (struct{}, error) {
			var row index.LearnedRow
			if err := r.Scan(&row.ID, &row.User, &row.Question, &row.Answer, &row.Vector, &row.Expires); err != nil {
				return struct{}{}, err
			}
			return struct{}{}, add(row)
		}); err != nil {
		return 0, false, err
	}
	return generation, true, tx.Commit(ctx)
}

func learnedGeneration(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key index.LearnedID) (int64, bool, error) {
	var generation int64
	err := q.QueryRow(ctx, `SELECT generation FROM knowledge_learned_keys WHERE agent = $1 AND intent = $2 AND version = $3 AND embedder = $4`,
		key.Agent, key.Intent, key.Version, key.Embedder).Scan(&generation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return generation, true, nil
}
