package index

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// Memo of recent question vectors: a run looks a question up in the FAQ cache, then
// retrieves passages for it, then may learn its answer; the question is embedded
// once (a remote embedder's call costs tens of milliseconds).
const (
	MemoSize = 8
	memoTTL  = time.Minute
)

// Retrieval over-fetches this many times k before filtering by score, so a few
// low-scoring fused hits do not leave fewer than k passages when better-than-
// minScore ones ranked just below them.
const RetrieveOverfetch = 3

// Backend is what the runtime adapter needs of an index, the query's vector
// embedded already (the adapter embeds a question once for the FAQ cache, retrieval
// and learning). Each storage's *Index is one.
// Errors of SearchVector and FAQVector come unwrapped (the adapter names the
// operation and collection); LearnVector's are complete.
type Backend interface {
	// SearchVector is Search with query's vector q.
	SearchVector(ctx context.Context, collection, query string, q []float32, emb knowledge.Embedder, k int) ([]Hit, error)
	// FAQVector is FAQ with the query's vector q.
	FAQVector(ctx context.Context, collection string, q []float32, emb knowledge.Embedder) (Hit, bool, error)
	// LookupLearnedVector returns the learned entry of key (and embedder) closest to
	// q among the shared ones and user's own, or nil when there is none.
	LookupLearnedVector(ctx context.Context, key LearnedKey, embedder string, q []float32, user string) (*LearnedHit, error)
	// LearnVector is Learn with the question's (trimmed, checked) vector q.
	LearnVector(ctx context.Context, key LearnedKey, embedder string, q []float32, user, question, answer string, ttl time.Duration) (int64, error)
}

// NewKnowledge adapts b to knowledge.Knowledge for one agent using emb.
// collections maps the spec's collection names to the index's collection keys; a
// name it lacks is an error (a nil map takes names as keys). The result is safe for
// concurrent use.
func NewKnowledge(b Backend, emb knowledge.Embedder, collections map[string]string) knowledge.Knowledge {
	return &indexKnowledge{x: b, emb: emb, collections: collections}
}

type indexKnowledge struct {
	x           Backend
	emb         knowledge.Embedder
	collections map[string]string

	mu   sync.Mutex
	memo [MemoSize]memoEntry
	next int
}

type memoEntry struct {
	text string
	vec  []float32 // never modified once stored
	at   time.Time
}

var _ knowledge.Knowledge = (*indexKnowledge)(nil)

// embed returns text's vector, from the memo when it was embedded within memoTTL.
func (k *indexKnowledge) embed(ctx context.Context, text string) ([]float32, error) {
	now := time.Now()
	k.mu.Lock()
	for _, e := range k.memo {
		if e.vec != nil && e.text == text && now.Sub(e.at) < memoTTL {
			k.mu.Unlock()
			return e.vec, nil
		}
	}
	k.mu.Unlock()
	vec, err := EmbedQuery(ctx, k.emb, text)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.memo[k.next] = memoEntry{text: text, vec: vec, at: now}
	k.next = (k.next + 1) % MemoSize
	k.mu.Unlock()
	return vec, nil
}

func (k *indexKnowledge) collection(name string) (string, error) {
	if k.collections == nil {
		return name, nil
	}
	key, ok := k.collections[name]
	if !ok {
		return "", fmt.Errorf("knowledge: no collection %q", name)
	}
	return key, nil
}

// CacheLookup returns the best of the closest FAQ entry of q.Collection and the
// closest learned entry of q's key that q.User may see; an FAQ entry wins a tie.
func (k *indexKnowledge) CacheLookup(ctx context.Context, q knowledge.CacheQuery) (*knowledge.CacheHit, error) {
	question := strings.TrimSpace(q.Question)
	vec, err := k.embed(ctx, question)
	if err != nil {
		return nil, fmt.Errorf("knowledge: cache lookup: %w", err)
	}
	var best *knowledge.CacheHit
	var faqErr error // the learned entries still answer when the FAQ cannot
	if q.Collection != "" {
		name, err := k.collection(q.Collection)
		var h Hit
		var ok bool
		if err == nil {
			if h, ok, err = k.x.FAQVector(ctx, name, vec, k.emb); err != nil {
				err = wrapSearchErr("faq", name, err)
			}
		}
		faqErr = err
		if ok {
			best = &knowledge.CacheHit{
				Kind:      knowledge.CacheEntryFAQ,
				Entry:     fmt.Sprintf("%s:%d", h.Source, h.StartLine),
				Question:  h.Question,
				Questions: h.Questions,
				Score:     float64(h.VectorScore),
				Answer:    h.Text,
			}
		}
	}
	lh, err := k.x.LookupLearnedVector(ctx, LearnedKey{q.Agent, q.Intent, q.Version}, k.emb.ID(), vec, q.User)
	if err != nil {
		return nil, fmt.Errorf("knowledge index: learned lookup: %w", err)
	}
	if lh != nil && (best == nil || float64(lh.Score) > best.Score) {
		best = lh.cacheHit()
	}
	return best, faqErr
}

// CacheLearn stores answer for q.Question under q's key: for q.User when perUser
// (an error when q.User is "": an anonymous answer is never shared by mistake),
// else for everyone.
func (k *indexKnowledge) CacheLearn(ctx context.Context, q knowledge.CacheQuery, answer string, perUser bool, ttl time.Duration) error {
	user := ""
	if perUser {
		if q.User == "" {
			return errors.New("knowledge index: learn: a per-user entry needs a user")
		}
		user = q.User
	}
	question := strings.TrimSpace(q.Question)
	if err := CheckLearn(question, answer); err != nil {
		return err
	}
	vec, err := k.embed(ctx, question)
	if err != nil {
		return fmt.Errorf("knowledge index: learn: %w", err)
	}
	_, err = k.x.LearnVector(ctx, LearnedKey{q.Agent, q.Intent, q.Version}, k.emb.ID(), vec, user, question, answer, ttl)
	return err
}

// Retrieve returns up to k passages of collection for query in the hybrid search's
// order (vector and BM25 rankings fused), keeping a hit when its vector score is at
// least minScore, or when BM25 matched it and its vector score is at least
// minScore/2: an exact term (an order number, a product name) vouches for a passage
// the vector alone finds only fairly similar, but never for an unrelated one.
func (k *indexKnowledge) Retrieve(ctx context.Context, collection, query string, n int, minScore float64) ([]knowledge.Passage, error) {
	if n <= 0 {
		return nil, nil
	}
	name, err := k.collection(collection)
	if err != nil {
		return nil, err
	}
	vec, err := k.embed(ctx, strings.TrimSpace(query))
	if err != nil {
		return nil, wrapSearchErr("search", name, err)
	}
	hits, err := k.x.SearchVector(ctx, name, query, vec, k.emb, RetrieveOverfetch*n)
	if err != nil {
		return nil, wrapSearchErr("search", name, err)
	}
	var out []knowledge.Passage
	for _, h := range hits {
		if len(out) == n {
			break
		}
		vs := float64(h.VectorScore)
		if vs < minScore && (h.BM25 <= 0 || vs < minScore/2) {
			continue
		}
		out = append(out, knowledge.Passage{
			ID:        fmt.Sprintf("S%d", len(out)+1),
			Source:    h.Source,
			Heading:   h.Heading,
			StartLine: h.StartLine,
			EndLine:   h.EndLine,
			Score:     vs,
			Text:      h.Text,
		})
	}
	return out, nil
}
