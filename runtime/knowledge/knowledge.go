package knowledge

import (
	"context"
	"time"
)

// Knowledge answers a run's knowledge stages: the FAQ semantic cache before the
// model and retrieval (RAG) into its context. The runtime owns the interface;
// runtime/knowledge/index (with its storages beneath it) implements it over an index and an embedder.
type Knowledge interface {
	// CacheLookup returns the best entry for q.Question among the FAQ entries of
	// q.Collection and the learned entries of q's key that q.User may see (shared
	// ones, and q.User's own), or nil when there is none. The caller compares the
	// score with its threshold. An error with a hit says that part of the cache
	// (the FAQ entries) could not be read: the hit is the best of the rest.
	CacheLookup(ctx context.Context, q CacheQuery) (*CacheHit, error)
	// CacheLearn stores answer as a learned entry for q.Question: for q.User only
	// when perUser, else for everyone; it expires after ttl.
	CacheLearn(ctx context.Context, q CacheQuery, answer string, perUser bool, ttl time.Duration) error
	// Retrieve returns up to k passages of collection for query, best first, whose
	// vector score is at least minScore.
	Retrieve(ctx context.Context, collection, query string, k int, minScore float64) ([]Passage, error)
}

// CacheQuery is a question put to the FAQ cache, with the key of its learned
// entries: the agent, the intent and the spec's content version (the
// implementation adds its embedder), so editing the spec starts a new cache.
type CacheQuery struct {
	Collection string // the FAQ entries' collection; "" for learned entries only
	Agent      string
	Intent     string
	Version    string
	User       string // "" sees shared entries only
	Question   string
}

// CacheHit is the cache entry that answers, or would answer, a question.
type CacheHit struct {
	Kind     CacheEntryKind `json:"kind"`
	Entry    string         `json:"entry"`    // faq: source:line; learned: the entry's id
	Question string         `json:"question"` // the question (or variant) that matched
	Score    float64        `json:"score"`    // cosine similarity to the asked question
	PerUser  bool           `json:"per_user,omitempty"`
	Answer   string         `json:"-"`
	// Questions are all of an FAQ entry's questions (its question and variants),
	// what the precision gates (CheckHit) compare with; nil for a learned entry.
	Questions []string `json:"-"`
	// Verdict is the precision gates' decision, once they were asked.
	Verdict *Verdict `json:"verdict,omitempty"`
}

// CacheEntryKind says where a cache entry came from.
type CacheEntryKind string

const (
	CacheEntryFAQ     CacheEntryKind = "faq"     // a collection's FAQ source
	CacheEntryLearned CacheEntryKind = "learned" // an accepted answer of an earlier run
)

// Passage is one retrieved chunk, as the model sees it and --json shows it.
type Passage struct {
	ID        string  `json:"id"` // S1, S2, … in the order the model sees them
	Source    string  `json:"source"`
	Heading   string  `json:"heading,omitempty"`
	StartLine int     `json:"start_line"`
	EndLine   int     `json:"end_line"`
	Score     float64 `json:"score"` // vector score
	Text      string  `json:"text"`
	// Instructions marks a passage that reads like instructions to the model
	// (LooksLikeInstructions): it is labelled so, and its run's answer is never
	// learned.
	Instructions bool `json:"instructions,omitempty"`
}

// Shown is the hit as results and events show it: a learned entry's question is
// another run's input, perhaps another user's words, so only its id is shown.
func (h *CacheHit) Shown() *CacheHit {
	c := *h
	if c.Kind == CacheEntryLearned {
		c.Question = ""
	}
	return &c
}
