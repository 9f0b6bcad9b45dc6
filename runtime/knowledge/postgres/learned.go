package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/sqlite"
)

// learnedID is a sqlite.LearnedKey with the embedder's ID: the key of a cache.
type learnedID struct{ agent, intent, version, embedder string }

// learnedVectors are a key's unexpired entries as of one generation, grouped by
// user ("" the shared ones): a lookup scans the shared group and the asking user's.
type learnedVectors struct {
	generation int64
	dims       int
	groups     map[string]*learnedGroup
}

// learnedGroup is one user's entries; entry i's vector is data[i*dims:(i+1)*dims].
type learnedGroup struct {
	ids       []int64
	expires   []int64 // Unix nanoseconds; 0 never
	questions []string
	answers   []string
	data      []float32
}

// Learn stores answer as a learned entry of key for question (trimmed) and returns
// its id, as sqlite.Index.Learn does.
func (x *Index) Learn(ctx context.Context, key sqlite.LearnedKey, emb knowledge.Embedder, user, question, answer string, ttl time.Duration) (int64, error) {
	question = strings.TrimSpace(question)
	if err := sqlite.CheckLearn(question, answer); err != nil {
		return 0, err
	}
	q, err := sqlite.EmbedQuery(ctx, emb, question)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	return x.LearnVector(ctx, key, emb.ID(), q, user, question, answer, ttl)
}

// LearnVector is Learn with the question's vector q (sqlite.Backend). It replaces
// an entry of the same key, embedder, user and question.
func (x *Index) LearnVector(ctx context.Context, key sqlite.LearnedKey, embedder string, q []float32, user, question, answer string, ttl time.Duration) (int64, error) {
	id := learnedID{key.Agent, key.Intent, key.Version, embedder}
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
			id.agent, id.intent, id.version, id.embedder); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM knowledge_learned WHERE agent = $1 AND intent = $2 AND version = $3
			AND embedder = $4 AND user_id = $5 AND question = $6`, id.agent, id.intent, id.version, id.embedder, user, question); err != nil {
			return err
		}
		var expires int64
		if ttl > 0 {
			expires = now.Add(ttl).UnixNano()
		}
		return tx.QueryRow(ctx, `INSERT INTO knowledge_learned(agent, intent, version, embedder, dimensions, user_id, question, answer, vector, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
			id.agent, id.intent, id.version, id.embedder, len(q), user, question, answer, sqlite.EncodeVector(q), now.UnixNano(), expires).Scan(&entry)
	})
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	x.mu.Lock()
	delete(x.learned, id) // the next lookup loads the new generation
	x.mu.Unlock()
	return entry, nil
}

// deleteExpired deletes the entries expired at now, of every key. It leaves the
// keys' generations alone: a cache never serves an expired entry anyway.
func deleteExpired(ctx context.Context, tx pgx.Tx, now time.Time) error {
	_, err := tx.Exec(ctx, `DELETE FROM knowledge_learned WHERE expires_at > 0 AND expires_at <= $1`, now.UnixNano())
	return err
}

// where is the SQL condition and arguments of f, for unexpired entries at now.
func where(f sqlite.LearnedFilter, now time.Time) (string, []any) {
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
func (x *Index) ListLearned(ctx context.Context, f sqlite.LearnedFilter) ([]sqlite.LearnedEntry, error) {
	cond, args := where(f, time.Now())
	out, err := queryAll(ctx, x.db.Pool, `SELECT id, agent, intent, version, embedder, user_id, question, answer, created_at, expires_at
		FROM knowledge_learned WHERE `+cond+` ORDER BY created_at DESC, id DESC`, args, func(r pgx.Rows) (sqlite.LearnedEntry, error) {
		var e sqlite.LearnedEntry
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
func (x *Index) ClearLearned(ctx context.Context, f sqlite.LearnedFilter) (int, error) {
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
	x.mu.Lock()
	clear(x.learned)
	x.mu.Unlock()
	return int(n), nil
}

// LookupLearnedVector returns the learned entry of key (and embedder) closest to q
// among the shared ones and user's own (the shared ones only when user is ""), or
// nil when there is none (sqlite.Backend).
func (x *Index) LookupLearnedVector(ctx context.Context, key sqlite.LearnedKey, embedder string, q []float32, user string) (*sqlite.LearnedHit, error) {
	v, err := x.learnedFor(ctx, learnedID{key.Agent, key.Intent, key.Version, embedder}, len(q))
	if err != nil || v == nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	qv := sqlite.NewQuery(q)
	var best *sqlite.LearnedHit
	scan := func(owner string) {
		g := v.groups[owner]
		if g == nil {
			return
		}
		bestI, bestScore := -1, float32(math.Inf(-1))
		for i := range g.ids {
			if e := g.expires[i]; e != 0 && e <= now {
				continue
			}
			if s := qv.Dot(g.data[i*v.dims : (i+1)*v.dims]); s > bestScore {
				bestI, bestScore = i, s
			}
		}
		if bestI >= 0 && (best == nil || bestScore > best.Score) {
			best = &sqlite.LearnedHit{ID: g.ids[bestI], User: owner, Question: g.questions[bestI], Answer: g.answers[bestI], Score: bestScore}
		}
	}
	scan("")
	if user != "" {
		scan(user)
	}
	return best, nil
}

// learnedFor returns key's entries of dimension dims, loading them when the cache
// has none of the key's current generation; nil when the key has no entries.
func (x *Index) learnedFor(ctx context.Context, key learnedID, dims int) (*learnedVectors, error) {
	generation, ok, err := learnedGeneration(ctx, x.db.Pool, key)
	if err != nil || !ok {
		return nil, err
	}
	x.mu.Lock()
	v := x.learned[key]
	x.mu.Unlock()
	if v != nil && v.generation == generation && v.dims == dims {
		return v, nil
	}
	// Load the generation and the rows from one snapshot.
	tx, err := x.db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	if generation, ok, err = learnedGeneration(ctx, tx, key); err != nil || !ok {
		return nil, err
	}
	v = &learnedVectors{generation: generation, dims: dims, groups: map[string]*learnedGroup{}}
	if _, err := queryAll(ctx, tx, `SELECT id, user_id, question, answer, vector, expires_at FROM knowledge_learned
		WHERE agent = $1 AND intent = $2 AND version = $3 AND embedder = $4 AND dimensions = $5
		AND (expires_at = 0 OR expires_at > $6) ORDER BY id`,
		[]any{key.agent, key.intent, key.version, key.embedder, dims, time.Now().UnixNano()}, func(r pgx.Rows) (struct{}, error) {
			var id, expires int64
			var user, question, answer string
			var blob []byte
			if err := r.Scan(&id, &user, &question, &answer, &blob, &expires); err != nil {
				return struct{}{}, err
			}
			g := v.groups[user]
			if g == nil {
				g = &learnedGroup{}
				v.groups[user] = g
			}
			n := len(g.data)
			g.data = append(g.data, make([]float32, dims)...)
			if err := sqlite.DecodeVector(g.data[n:], blob); err != nil {
				return struct{}{}, fmt.Errorf("learned entry %d: %w", id, err)
			}
			g.ids = append(g.ids, id)
			g.expires = append(g.expires, expires)
			g.questions = append(g.questions, question)
			g.answers = append(g.answers, answer)
			return struct{}{}, nil
		}); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	x.mu.Lock()
	if cur := x.learned[key]; cur == nil || cur.generation < generation || cur.dims != dims {
		x.learned[key] = v
	}
	x.mu.Unlock()
	return v, nil
}

func learnedGeneration(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, key learnedID) (int64, bool, error) {
	var generation int64
	err := q.QueryRow(ctx, `SELECT generation FROM knowledge_learned_keys WHERE agent = $1 AND intent = $2 AND version = $3 AND embedder = $4`,
		key.agent, key.intent, key.version, key.embedder).Scan(&generation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return generation, true, nil
}
