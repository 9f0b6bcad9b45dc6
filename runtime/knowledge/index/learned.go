package index

import (
	"context"
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

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// LearnedKey is the key of learned FAQ-cache entries: the agent, the intent and the
// spec's content version. The index adds the embedder's ID, so entries are only
// ever compared with questions embedded alike, and editing the spec starts afresh.
type LearnedKey struct{ Agent, Intent, Version string }

// LearnedID is a LearnedKey with the embedder's ID: the key of a cache.
type LearnedID struct{ Agent, Intent, Version, Embedder string }

// With is k with the embedder's ID.
func (k LearnedKey) With(embedder string) LearnedID {
	return LearnedID{k.Agent, k.Intent, k.Version, embedder}
}

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

// LearnedHit is the best learned entry for a question.
type LearnedHit struct {
	ID               int64
	User             string // "" = a shared entry
	Question, Answer string
	Score            float32
}

// cacheHit is h as the runtime sees it.
func (h *LearnedHit) cacheHit() *knowledge.CacheHit {
	return &knowledge.CacheHit{
		Kind:     knowledge.CacheEntryLearned,
		Entry:    strconv.FormatInt(h.ID, 10),
		Question: h.Question,
		Score:    float64(h.Score),
		PerUser:  h.User != "",
		Answer:   h.Answer,
	}
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

// Learn stores answer as a learned entry of key for question (trimmed) in b and
// returns its id: for user only, or for everyone when user is "". It replaces an
// entry of the same key, embedder, user and question. The entry expires after ttl;
// ttl <= 0 is never.
func Learn(ctx context.Context, b Backend, key LearnedKey, emb knowledge.Embedder, user, question, answer string, ttl time.Duration) (int64, error) {
	question = strings.TrimSpace(question)
	if err := CheckLearn(question, answer); err != nil {
		return 0, err
	}
	q, err := EmbedQuery(ctx, emb, question)
	if err != nil {
		return 0, fmt.Errorf("knowledge index: learn: %w", err)
	}
	return b.LearnVector(ctx, key, emb.ID(), q, user, question, answer, ttl)
}

// LearnedRow is a stored learned entry as LearnedCache loads it.
type LearnedRow struct {
	ID                     int64
	User, Question, Answer string
	Vector                 []byte // EncodeVector's
	Expires                int64  // Unix nanoseconds; 0 never
}

// LearnedStore is what LearnedCache reads of a storage.
type LearnedStore interface {
	// LearnedGeneration is key's generation (it grows with every change to the key's
	// entries, by any process); ok is false when the key has none. A hit's hot path.
	LearnedGeneration(ctx context.Context, key LearnedID) (generation int64, ok bool, err error)
	// LoadLearned reads key's generation and its entries of dims dimensions
	// unexpired at now (Unix nanoseconds) from one snapshot, handing each to add in
	// id order; ok is false when the key has no generation.
	LoadLearned(ctx context.Context, key LearnedID, dims int, now int64, add func(LearnedRow) error) (generation int64, ok bool, err error)
}

// LearnedCache holds each key's unexpired entries as of one generation, grouped by
// user ("" the shared ones), so a lookup only ever scans the shared group and the
// asking user's own: another user's entries are not within reach. The zero
// LearnedCache is empty and ready; it is safe for concurrent use.
type LearnedCache struct {
	mu sync.Mutex
	m  map[LearnedID]*learnedVectors
}

// learnedVectors are a key's entries as of one generation.
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

func (g *learnedGroup) add(id, expires int64, question, answer string, vector []float32) {
	g.ids = append(g.ids, id)
	g.expires = append(g.expires, expires)
	g.questions = append(g.questions, question)
	g.answers = append(g.answers, answer)
	g.data = append(g.data, vector...)
}

// Lookup returns the learned entry of key closest to q among the shared ones and
// user's own (the shared ones only when user is ""), or nil when there is none.
func (c *LearnedCache) Lookup(ctx context.Context, s LearnedStore, key LearnedID, q []float32, user string) (*LearnedHit, error) {
	v, err := c.vectors(ctx, s, key, len(q))
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

// vectors returns key's entries of dimension dims, loading them when the cache
// has none of the key's current generation; nil when the key has no entries.
func (c *LearnedCache) vectors(ctx context.Context, s LearnedStore, key LearnedID, dims int) (*learnedVectors, error) {
	generation, ok, err := s.LearnedGeneration(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	c.mu.Lock()
	v := c.m[key]
	c.mu.Unlock()
	if v != nil && v.generation == generation && v.dims == dims {
		return v, nil
	}
	v = &learnedVectors{dims: dims, groups: map[string]*learnedGroup{}}
	generation, ok, err = s.LoadLearned(ctx, key, dims, time.Now().UnixNano(), func(r LearnedRow) error {
		g := v.groups[r.User]
		if g == nil {
			g = &learnedGroup{}
			v.groups[r.User] = g
		}
		n := len(g.data)
		g.data = append(g.data, make([]float32, dims)...)
		if err := decodeInto(g.data[n:], r.Vector); err != nil {
			return fmt.Errorf("learned entry %d: %w", r.ID, err)
		}
		g.add(r.ID, r.Expires, r.Question, r.Answer, nil)
		return nil
	})
	if err != nil || !ok {
		return nil, err
	}
	v.generation = generation
	c.mu.Lock()
	if cur := c.m[key]; cur == nil || cur.generation < generation || cur.dims != dims {
		if c.m == nil {
			c.m = map[LearnedID]*learnedVectors{}
		}
		c.m[key] = v
	}
	c.mu.Unlock()
	return v, nil
}

// LearnedChange is what one Learn did to a key, for updating a cache of the
// generation before it without reloading.
type LearnedChange struct {
	Generation       int64 // the key's generation before; 0 when it had none
	Replaced         []int64
	ID               int64
	User             string
	Question, Answer string
	Vector           []float32
	Expires          int64
}

// Apply brings key's entries up to date with ch when the cache holds the
// generation just before: a copy of the user's group without the replaced entries
// and with the new one, instead of reloading every entry of the key. Otherwise the
// next lookup reloads.
func (c *LearnedCache) Apply(key LearnedID, ch LearnedChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.m[key]
	if v == nil || v.generation != ch.Generation || v.dims != len(ch.Vector) {
		return
	}
	old := v.groups[ch.User]
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
		if !slices.Contains(ch.Replaced, id) {
			g.add(id, old.expires[i], old.questions[i], old.answers[i], old.data[i*v.dims:(i+1)*v.dims])
		}
	}
	g.add(ch.ID, ch.Expires, ch.Question, ch.Answer, ch.Vector)
	nv := &learnedVectors{generation: ch.Generation + 1, dims: v.dims, groups: maps.Clone(v.groups)}
	nv.groups[ch.User] = g
	c.m[key] = nv
}

// Forget drops key's entries: the next lookup loads them.
func (c *LearnedCache) Forget(key LearnedID) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}

// Clear drops every key's entries.
func (c *LearnedCache) Clear() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
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
