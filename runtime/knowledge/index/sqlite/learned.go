package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// Learn stores answer as a learned entry of key for question (trimmed) and returns
// its id: for user only, or for everyone when user is "". It replaces an entry of
// the same key, embedder, user and question. The entry expires after ttl; ttl <= 0
// is never.
func (x *Index) Learn(ctx context.Context, key index.LearnedKey, emb knowledge.Embedder, user, question, answer string, ttl time.Duration) (int64, error) {
	return index.Learn(ctx, x, key, emb, user, question, answer, ttl)
}

// LearnVector is Learn with the question's (trimmed, checked) vector q
// (index.Backend). It updates this process's cache of the key in place.
func (x *Index) LearnVector(ctx context.Context, key index.LearnedKey, embedder string, q []float32, user, question, answer string, ttl time.Duration) (int64, error) {
	id := key.With(embedder)
	ch, err := x.learnTx(ctx, id, q, user, question, answer, ttl)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	x.learned.Apply(id, ch)
	return ch.ID, nil
}

func (x *Index) learnTx(ctx context.Context, key index.LearnedID, q []float32, user, question, answer string, ttl time.Duration) (index.LearnedChange, error) {
	ch := index.LearnedChange{User: user, Question: question, Answer: answer, Vector: q}
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return ch, err
	}
	defer tx.Rollback()
	now := time.Now()
	if err := deleteExpired(ctx, tx, now); err != nil {
		return ch, err
	}
	if ch.Generation, _, err = learnedGeneration(ctx, tx, key); err != nil {
		return ch, err
	}
	err = queryEach(ctx, tx, `DELETE FROM learned WHERE agent = ? AND intent = ? AND version = ? AND embedder = ?
		AND user = ? AND question = ? RETURNING id`, []any{key.Agent, key.Intent, key.Version, key.Embedder, user, question}, func(rows *sql.Rows) error {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ch.Replaced = append(ch.Replaced, id)
		return nil
	})
	if err != nil {
		return ch, err
	}
	if ttl > 0 {
		ch.Expires = now.Add(ttl).UnixNano()
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO learned(agent, intent, version, embedder, dimensions, user, question, answer, vector, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		key.Agent, key.Intent, key.Version, key.Embedder, len(q), user, question, answer, index.EncodeVector(q), now.UnixNano(), ch.Expires)
	if err != nil {
		return ch, err
	}
	if ch.ID, err = res.LastInsertId(); err != nil {
		return ch, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO learned_keys(agent, intent, version, embedder, generation) VALUES (?, ?, ?, ?, 1)
		ON CONFLICT DO UPDATE SET generation = generation + 1`, key.Agent, key.Intent, key.Version, key.Embedder); err != nil {
		return ch, err
	}
	return ch, tx.Commit()
}

// deleteExpired deletes the entries expired at now, of every key. It leaves the
// keys' generations alone: a cache never serves an expired entry anyway.
func deleteExpired(ctx context.Context, tx *sql.Tx, now time.Time) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM learned WHERE expires_at > 0 AND expires_at <= ?`, now.UnixNano())
	return err
}

// where is the SQL condition and arguments of f, for unexpired entries at now.
func where(f index.LearnedFilter, now time.Time) (string, []any) {
	conds := []string{"(expires_at = 0 OR expires_at > ?)"}
	args := []any{now.UnixNano()}
	if f.Agent != "" {
		conds = append(conds, "agent = ?")
		args = append(args, f.Agent)
	}
	if f.Intent != "" {
		conds = append(conds, "intent = ?")
		args = append(args, f.Intent)
	}
	if !f.AllUsers {
		conds = append(conds, "user = ?")
		args = append(args, f.User)
	}
	return strings.Join(conds, " AND "), args
}

// ListLearned returns the unexpired entries f selects, newest first.
func (x *Index) ListLearned(ctx context.Context, f index.LearnedFilter) ([]index.LearnedEntry, error) {
	cond, args := where(f, time.Now())
	var out []index.LearnedEntry
	err := queryEach(ctx, x.read, `SELECT id, agent, intent, version, embedder, user, question, answer, created_at, expires_at
		FROM learned WHERE `+cond+` ORDER BY created_at DESC, id DESC`, args, func(rows *sql.Rows) error {
		var e index.LearnedEntry
		var created, expires int64
		if err := rows.Scan(&e.ID, &e.Agent, &e.Intent, &e.Version, &e.Embedder, &e.User, &e.Question, &e.Answer, &created, &expires); err != nil {
			return err
		}
		e.Created = time.Unix(0, created)
		if expires > 0 {
			e.Expires = time.Unix(0, expires)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("knowledge index: list learned entries: %w", err)
	}
	return out, nil
}

// ClearLearned deletes the entries f selects and returns how many there were
// (expired entries, deleted too, are not counted).
func (x *Index) ClearLearned(ctx context.Context, f index.LearnedFilter) (int, error) {
	n, err := x.clearLearned(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: clear learned entries: %w", err)
	}
	return n, nil
}

func (x *Index) clearLearned(ctx context.Context, f index.LearnedFilter) (int, error) {
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := time.Now()
	if err := deleteExpired(ctx, tx, now); err != nil {
		return 0, err
	}
	cond, args := where(f, now)
	if _, err := tx.ExecContext(ctx, `UPDATE learned_keys SET generation = generation + 1
		WHERE (agent, intent, version, embedder) IN (SELECT agent, intent, version, embedder FROM learned WHERE `+cond+`)`, args...); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM learned WHERE `+cond, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}

// LookupLearnedVector returns the learned entry of key closest to q among the
// shared ones and user's own (index.Backend).
func (x *Index) LookupLearnedVector(ctx context.Context, key index.LearnedKey, embedder string, q []float32, user string) (*index.LearnedHit, error) {
	return x.learned.Lookup(ctx, learnedStore{x}, key.With(embedder), q, user)
}

// learnedStore is the index as index.LearnedCache reads it.
type learnedStore struct{ x *Index }

// LearnedGeneration reads key's generation with the prepared statement: a hit's
// hot path.
func (s learnedStore) LearnedGeneration(ctx context.Context, key index.LearnedID) (int64, bool, error) {
	return learnedGeneration(ctx, s.x.generationStmt, key)
}

// LoadLearned loads the generation and the rows from one snapshot.
func (s learnedStore) LoadLearned(ctx context.Context, key index.LearnedID, dims int, now int64, add func(index.LearnedRow) error) (int64, bool, error) {
	tx, err := s.x.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	generation, ok, err := learnedGeneration(ctx, tx, key)
	if err != nil || !ok {
		return 0, false, err
	}
	err = queryEach(ctx, tx, `SELECT id, user, question, answer, vector, expires_at FROM learned
		WHERE agent = ? AND intent = ? AND version = ? AND embedder = ? AND dimensions = ?
		AND (expires_at = 0 OR expires_at > ?) ORDER BY id`,
		[]any{key.Agent, key.Intent, key.Version, key.Embedder, dims, now}, func(rows *sql.Rows) error {
			var r index.LearnedRow
			if err := rows.Scan(&r.ID, &r.User, &r.Question, &r.Answer, &r.Vector, &r.Expires); err != nil {
				return err
			}
			return add(r)
		})
	if err != nil {
		return 0, false, err
	}
	return generation, true, tx.Commit()
}

const learnedGenerationQuery = `SELECT generation FROM learned_keys WHERE agent = ? AND intent = ? AND version = ? AND embedder = ?`

// learnedGeneration reads key's generation through q: a transaction, or the
// prepared learnedGenerationQuery (a hit's hot path).
func learnedGeneration(ctx context.Context, q any, key index.LearnedID) (int64, bool, error) {
	var row *sql.Row
	switch q := q.(type) {
	case *sql.Stmt:
		row = q.QueryRowContext(ctx, key.Agent, key.Intent, key.Version, key.Embedder)
	case *sql.Tx:
		row = q.QueryRowContext(ctx, learnedGenerationQuery, key.Agent, key.Intent, key.Version, key.Embedder)
	default:
		panic("learnedGeneration: not a statement or a transaction")
	}
	var generation int64
	err := row.Scan(&generation)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return generation, true, nil
}
