package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
)

// LearnedKey is the key of learned FAQ-cache entries: the agent, the intent and the
// spec's content version. The index adds the embedder's ID, so entries are only
// ever compared with questions embedded alike, and editing the spec starts afresh.
type LearnedKey struct{ Agent, Intent, Version string }

// LearnedEntry is a learned FAQ-cache entry: the accepted answer of an earlier run.
type LearnedEntry struct {
	ID                               int64
	Agent, Intent, Version, Embedder string
	User                             string // "" = shared: served to everyone
	Question, Answer                 string
	Created                          time.Time
	Expires                          time.Time // the zero Time: never
}

// LearnedFilter selects learned entries. An empty Agent or Intent matches any.
// With AllUsers every user's entries match; otherwise only User's own, and User ""
// selects the shared entries only.
type LearnedFilter struct {
	Agent, Intent string
	User          string
	AllUsers      bool
}

// learnedID is a LearnedKey with the embedder's ID: the key of a cache.
type learnedID struct{ agent, intent, version, embedder string }

// learnedVectors are a key's unexpired entries as of one generation, grouped by user
// ("" the shared ones), so a lookup only ever scans the shared group and the asking
// user's own: another user's entries are not within reach.
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

// LearnedHit is the best learned entry for a question.
type LearnedHit struct {
	ID               int64
	User             string // "" = a shared entry
	Question, Answer string
	Score            float32
}

// Learn stores answer as a learned entry of key for question (trimmed) and returns
// its id: for user only, or for everyone when user is "". It replaces an entry of
// the same key, embedder, user and question. The entry expires after ttl; ttl <= 0
// is never.
func (x *Index) Learn(ctx context.Context, key LearnedKey, emb knowledge.Embedder, user, question, answer string, ttl time.Duration) (int64, error) {
	question = strings.TrimSpace(question)
	if err := CheckLearn(question, answer); err != nil {
		return 0, err
	}
	q, err := embedQuery(ctx, emb, question)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	return x.learn(ctx, learnedID{key.Agent, key.Intent, key.Version, emb.ID()}, q, user, question, answer, ttl)
}

// CheckLearn checks a learned entry's question (trimmed) and answer.
func CheckLearn(question, answer string) error {
	switch {
	case question == "":
		return errors.New("knowledge index: learn: empty question")
	case strings.TrimSpace(answer) == "":
		return errors.New("knowledge index: learn: empty answer")
	}
	return nil
}

// learn is Learn with the question's vector q; question is trimmed already.
func (x *Index) learn(ctx context.Context, key learnedID, q []float32, user, question, answer string, ttl time.Duration) (int64, error) {
	ch, err := x.learnTx(ctx, key, q, user, question, answer, ttl)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	x.applyLearned(key, ch)
	return ch.id, nil
}

// learnedChange is what one Learn did to a key, for updating a cache of the
// generation before it without reloading.
type learnedChange struct {
	generation       int64 // the key's generation before; 0 when it had none
	replaced         []int64
	id               int64
	user             string
	question, answer string
	vector           []float32
	expires          int64
}

func (x *Index) learnTx(ctx context.Context, key learnedID, q []float32, user, question, answer string, ttl time.Duration) (learnedChange, error) {
	ch := learnedChange{user: user, question: question, answer: answer, vector: q}
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return ch, err
	}
	defer tx.Rollback()
	now := time.Now()
	if err := deleteExpired(ctx, tx, now); err != nil {
		return ch, err
	}
	if ch.generation, _, err = learnedGeneration(ctx, tx, key); err != nil {
		return ch, err
	}
	err = queryEach(ctx, tx, `DELETE FROM learned WHERE agent = ? AND intent = ? AND version = ? AND embedder = ?
		AND user = ? AND question = ? RETURNING id`, []any{key.agent, key.intent, key.version, key.embedder, user, question}, func(rows *sql.Rows) error {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ch.replaced = append(ch.replaced, id)
		return nil
	})
	if err != nil {
		return ch, err
	}
	if ttl > 0 {
		ch.expires = now.Add(ttl).UnixNano()
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO learned(agent, intent, version, embedder, dimensions, user, question, answer, vector, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		key.agent, key.intent, key.version, key.embedder, len(q), user, question, answer, encode(q), now.UnixNano(), ch.expires)
	if err != nil {
		return ch, err
	}
	if ch.id, err = res.LastInsertId(); err != nil {
		return ch, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO learned_keys(agent, intent, version, embedder, generation) VALUES (?, ?, ?, ?, 1)
		ON CONFLICT DO UPDATE SET generation = generation + 1`, key.agent, key.intent, key.version, key.embedder); err != nil {
		return ch, err
	}
	return ch, tx.Commit()
}

// applyLearned brings key's cache up to date with ch when it holds the generation
// just before: a copy of the user's group without the replaced entries and with the
// new one, instead of reloading every entry of the key. Otherwise the next lookup
// reloads.
func (x *Index) applyLearned(key learnedID, ch learnedChange) {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := x.learned[key]
	if v == nil || v.generation != ch.generation || v.dims != len(ch.vector) {
		return
	}
	old := v.groups[ch.user]
	if old == nil {
		old = &learnedGroup{}
	}
	g := &learnedGroup{
		ids:       make([]int64, 0, len(old.ids)+1),
		expires:   make([]int64, 0, len(old.ids)+1),
		questions: make([]string, 0, len(old.ids)+1),
		answers:   make([]string, 0, len(old.ids)+1),
		data:      make([]float32, 0, len(old.data)+v.dims),
	}
	for i, id := range old.ids {
		if slices.Contains(ch.replaced, id) {
			continue
		}
		g.ids = append(g.ids, id)
		g.expires = append(g.expires, old.expires[i])
		g.questions = append(g.questions, old.questions[i])
		g.answers = append(g.answers, old.answers[i])
		g.data = append(g.data, old.data[i*v.dims:(i+1)*v.dims]...)
	}
	g.ids = append(g.ids, ch.id)
	g.expires = append(g.expires, ch.expires)
	g.questions = append(g.questions, ch.question)
	g.answers = append(g.answers, ch.answer)
	g.data = append(g.data, ch.vector...)
	nv := &learnedVectors{generation: ch.generation + 1, dims: v.dims, groups: maps.Clone(v.groups)}
	nv.groups[ch.user] = g
	x.learned[key] = nv
}

// deleteExpired deletes the entries expired at now, of every key. It leaves the
// keys' generations alone: a cache never serves an expired entry anyway.
func deleteExpired(ctx context.Context, tx *sql.Tx, now time.Time) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM learned WHERE expires_at > 0 AND expires_at <= ?`, now.UnixNano())
	return err
}

// where is the SQL condition and arguments of f, for unexpired entries at now.
func (f LearnedFilter) where(now time.Time) (string, []any) {
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
func (x *Index) ListLearned(ctx context.Context, f LearnedFilter) ([]LearnedEntry, error) {
	cond, args := f.where(time.Now())
	var out []LearnedEntry
	err := queryEach(ctx, x.read, `SELECT id, agent, intent, version, embedder, user, question, answer, created_at, expires_at
		FROM learned WHERE `+cond+` ORDER BY created_at DESC, id DESC`, args, func(rows *sql.Rows) error {
		var e LearnedEntry
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
func (x *Index) ClearLearned(ctx context.Context, f LearnedFilter) (int, error) {
	n, err := x.clearLearned(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: clear learned entries: %w", err)
	}
	return n, nil
}

func (x *Index) clearLearned(ctx context.Context, f LearnedFilter) (int, error) {
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := time.Now()
	if err := deleteExpired(ctx, tx, now); err != nil {
		return 0, err
	}
	cond, args := f.where(now)
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

// lookupLearned returns the learned entry of key closest to q among the shared
// ones and user's own (the shared ones only when user is ""), or nil when there is
// none.
func (x *Index) lookupLearned(ctx context.Context, key learnedID, q []float32, user string) (*LearnedHit, error) {
	v, err := x.learnedFor(ctx, key, len(q))
	if err != nil || v == nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	qv := newQueryVector(q)
	var best *LearnedHit
	scan := func(owner string) {
		g := v.groups[owner]
		if g == nil {
			return
		}
		bestI, bestScore := g.best(qv, v.dims, now)
		if bestI >= 0 && (best == nil || bestScore > best.Score) {
			best = &LearnedHit{ID: g.ids[bestI], User: owner, Question: g.questions[bestI], Answer: g.answers[bestI], Score: bestScore}
		}
	}
	scan("")
	if user != "" {
		scan(user)
	}
	return best, nil
}

// learnedParallelRows is the group size above which a scan is split across CPUs:
// the scan is nearly all dot products, and a hit's latency is what counts.
const learnedParallelRows = 2048

// best returns the unexpired entry (at now) closest to q and its score; -1 when
// there is none. The lowest index wins a tie, however the scan is split.
func (g *learnedGroup) best(q *queryVector, dims int, now int64) (int, float32) {
	scan := func(lo, hi int) (int, float32) {
		bestI, bestScore := -1, float32(math.Inf(-1))
		for i := lo; i < hi; i++ {
			if e := g.expires[i]; e != 0 && e <= now {
				continue
			}
			if s := q.dot(g.data[i*dims : (i+1)*dims]); s > bestScore {
				bestI, bestScore = i, s
			}
		}
		return bestI, bestScore
	}
	n := len(g.ids)
	workers := min(goruntime.GOMAXPROCS(0), n/(learnedParallelRows/2))
	if n <= learnedParallelRows || workers < 2 {
		return scan(0, n)
	}
	type part struct {
		i     int
		score float32
	}
	parts := make([]part, workers)
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() {
			i, s := scan(n*w/workers, n*(w+1)/workers)
			parts[w] = part{i, s}
		})
	}
	i, s := scan(0, n/workers)
	parts[0] = part{i, s}
	wg.Wait()
	best := part{-1, float32(math.Inf(-1))}
	for _, p := range parts {
		if p.i >= 0 && p.score > best.score {
			best = p
		}
	}
	return best.i, best.score
}

// learnedFor returns key's entries of dimension dims, loading them when the cache
// has none of the key's current generation; nil when the key has no entries.
func (x *Index) learnedFor(ctx context.Context, key learnedID, dims int) (*learnedVectors, error) {
	generation, ok, err := learnedGeneration(ctx, x.generationStmt, key)
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
	tx, err := x.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if generation, ok, err = learnedGeneration(ctx, tx, key); err != nil || !ok {
		return nil, err
	}
	v = &learnedVectors{generation: generation, dims: dims, groups: map[string]*learnedGroup{}}
	err = queryEach(ctx, tx, `SELECT id, user, question, answer, vector, expires_at FROM learned
		WHERE agent = ? AND intent = ? AND version = ? AND embedder = ? AND dimensions = ?
		AND (expires_at = 0 OR expires_at > ?) ORDER BY id`,
		[]any{key.agent, key.intent, key.version, key.embedder, dims, time.Now().UnixNano()}, func(rows *sql.Rows) error {
			var id, expires int64
			var user, question, answer string
			var blob []byte
			if err := rows.Scan(&id, &user, &question, &answer, &blob, &expires); err != nil {
				return err
			}
			g := v.groups[user]
			if g == nil {
				g = &learnedGroup{}
				v.groups[user] = g
			}
			n := len(g.data)
			g.data = append(g.data, make([]float32, dims)...)
			if err := decodeInto(g.data[n:], blob); err != nil {
				return fmt.Errorf("learned entry %d: %w", id, err)
			}
			g.ids = append(g.ids, id)
			g.expires = append(g.expires, expires)
			g.questions = append(g.questions, question)
			g.answers = append(g.answers, answer)
			return nil
		})
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	x.mu.Lock()
	if cur := x.learned[key]; cur == nil || cur.generation < generation || cur.dims != dims {
		x.learned[key] = v
	}
	x.mu.Unlock()
	return v, nil
}

const learnedGenerationQuery = `SELECT generation FROM learned_keys WHERE agent = ? AND intent = ? AND version = ? AND embedder = ?`

// learnedGeneration reads key's generation through q: a transaction, or the
// prepared learnedGenerationQuery (a hit's hot path).
func learnedGeneration(ctx context.Context, q any, key learnedID) (int64, bool, error) {
	var row *sql.Row
	switch q := q.(type) {
	case *sql.Stmt:
		row = q.QueryRowContext(ctx, key.agent, key.intent, key.version, key.embedder)
	case *sql.Tx:
		row = q.QueryRowContext(ctx, learnedGenerationQuery, key.agent, key.intent, key.version, key.embedder)
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

// cacheHit is h as the runtime sees it.
func (h *LearnedHit) cacheHit() *runtime.CacheHit {
	return &runtime.CacheHit{
		Kind:     runtime.CacheEntryLearned,
		Entry:    strconv.FormatInt(h.ID, 10),
		Question: h.Question,
		Score:    float64(h.Score),
		PerUser:  h.User != "",
		Answer:   h.Answer,
	}
}
