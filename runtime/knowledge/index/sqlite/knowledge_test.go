package sqlite

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

func TestCacheLookup(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &counting{Embedder: &knowledge.Local{}}
	if _, err := x.Update(ctx, "shop/help", readChunks(t, sourcesDir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	k := x.Knowledge(emb, map[string]string{"help": "shop/help"})
	q := knowledge.CacheQuery{Collection: "help", Agent: "shop", Intent: "faq", Version: "v1", Question: "How long does the refund take?"}

	h, err := k.CacheLookup(ctx, q)
	if err != nil || h == nil {
		t.Fatalf("%+v, %v", h, err)
	}
	want := knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Entry: "faq.yaml:3", Question: "How long does a refund take?",
		Score: h.Score, Answer: "Refunds reach your card in 3-5 working days.",
		Questions: []string{"How long does a refund take?", "When will I get my money back?", "refund timing"}}
	if !reflect.DeepEqual(*h, want) || h.Score < float64(knowledge.DefaultCacheThreshold) {
		t.Errorf("FAQ hit %+v, want %+v above the threshold", *h, want)
	}

	// Learned entries: a better one wins; another version, agent or intent is never seen.
	if err := k.CacheLearn(ctx, q, "Three to five days.", false, 0); err != nil {
		t.Fatal(err)
	}
	h, err = k.CacheLookup(ctx, q)
	if err != nil || h == nil || h.Kind != knowledge.CacheEntryLearned || h.Answer != "Three to five days." || h.PerUser ||
		h.Question != q.Question || h.Score < 0.999 {
		t.Errorf("learned hit %+v, %v", h, err)
	}
	for _, edit := range []func(*knowledge.CacheQuery){
		func(q *knowledge.CacheQuery) { q.Version = "v2" },
		func(q *knowledge.CacheQuery) { q.Agent = "bank" },
		func(q *knowledge.CacheQuery) { q.Intent = "orders" },
	} {
		other := q
		edit(&other)
		if h, err := k.CacheLookup(ctx, other); err != nil || h == nil || h.Kind != knowledge.CacheEntryFAQ {
			t.Errorf("%+v: %+v, %v; want the FAQ entry", other, h, err)
		}
	}
	// Per-user entries.
	alice := q
	alice.User, alice.Question = "alice", "Where is my order 42?"
	if err := k.CacheLearn(ctx, alice, "Out for delivery.", true, 0); err != nil {
		t.Fatal(err)
	}
	if h, err := k.CacheLookup(ctx, alice); err != nil || h == nil || !h.PerUser || h.Answer != "Out for delivery." {
		t.Errorf("alice's own entry: %+v, %v", h, err)
	}
	for _, user := range []string{"", "bob"} {
		other := alice
		other.User = user
		if h, err := k.CacheLookup(ctx, other); err != nil || h == nil || h.PerUser {
			t.Errorf("user %q: %+v, %v; want a shared entry", user, h, err)
		}
	}
	anon := alice
	anon.User = ""
	if err := k.CacheLearn(ctx, anon, "x", true, 0); err == nil {
		t.Error("a per-user entry without a user: no error")
	}

	// Learned entries only: no collection.
	learnedOnly := q
	learnedOnly.Collection = ""
	if h, err := k.CacheLookup(ctx, learnedOnly); err != nil || h == nil || h.Kind != knowledge.CacheEntryLearned {
		t.Errorf("learned only: %+v, %v", h, err)
	}
	learnedOnly.Agent = "nobody"
	if h, err := k.CacheLookup(ctx, learnedOnly); err != nil || h != nil {
		t.Errorf("nothing to find: %+v, %v; want nil, nil", h, err)
	}

	// Errors.
	bad := q
	bad.Collection = "unknown"
	if _, err := k.CacheLookup(ctx, bad); err == nil || !strings.Contains(err.Error(), `no collection "unknown"`) {
		t.Errorf("unknown collection: %v", err)
	}
	other, _ := knowledge.NewLocal(128)
	var mismatch *index.EmbedderMismatchError
	if _, err := x.Knowledge(other, map[string]string{"help": "shop/help"}).CacheLookup(ctx, q); !errors.As(err, &mismatch) ||
		!strings.Contains(err.Error(), "run agentrun index") {
		t.Errorf("another embedder: %v", err)
	}
	if _, err := x.Knowledge(emb, map[string]string{"help": "never"}).CacheLookup(ctx, q); !errors.Is(err, index.ErrNotIndexed) {
		t.Errorf("a collection never indexed: %v", err)
	}
}

// A question is embedded once for the lookup, the retrieval and the learning.
func TestQuestionEmbeddedOnce(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &counting{Embedder: &knowledge.Local{}}
	if _, err := x.Update(ctx, "help", readChunks(t, sourcesDir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	k := x.Knowledge(emb, nil)
	for i := range index.MemoSize + 2 {
		emb.reset()
		q := knowledge.CacheQuery{Collection: "help", Agent: "shop", Intent: "faq", Question: fmt.Sprintf("refund question %d ", i)}
		if _, err := k.CacheLookup(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Retrieve(ctx, "help", q.Question, 3, 0.1); err != nil {
			t.Fatal(err)
		}
		if err := k.CacheLearn(ctx, q, "answer", false, 0); err != nil {
			t.Fatal(err)
		}
		if emb.texts != 1 {
			t.Errorf("question %d embedded %d times", i, emb.texts)
		}
	}
	// The oldest questions have left the memo.
	emb.reset()
	if _, err := k.Retrieve(ctx, "help", "refund question 0", 3, 0.1); err != nil || emb.texts != 1 {
		t.Errorf("an old question: %v, %d texts embedded", err, emb.texts)
	}
}

func TestRetrieve(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	if _, err := x.Update(ctx, "shop/help", readChunks(t, sourcesDir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	k := x.Knowledge(emb, map[string]string{"help": "shop/help"})
	ps, err := k.Retrieve(ctx, "help", "can I get a refund for only some of the items", 3, 0.2)
	if err != nil || len(ps) == 0 {
		t.Fatalf("%v, %v", ps, err)
	}
	if ps[0].Source != "help/refunds.md" || ps[0].Heading != "Refunds › How to ask › Partial refunds" || ps[0].StartLine == 0 || ps[0].Text == "" {
		t.Errorf("top passage %+v", ps[0])
	}
	for i, p := range ps {
		if p.ID != fmt.Sprintf("S%d", i+1) {
			t.Errorf("passage %d has ID %q", i, p.ID)
		}
		if p.Score < 0.1 {
			t.Errorf("passage %s scores %.3f, below even half the minimum", p.ID, p.Score)
		}
	}
	if len(ps) > 3 {
		t.Errorf("%d passages, want at most 3", len(ps))
	}

	// The rule: vector score ≥ minScore, or BM25 matched and vector score ≥ minScore/2.
	const query = "opening hours"
	hits, err := x.Search(ctx, "shop/help", query, emb, index.RetrieveOverfetch*10)
	if err != nil {
		t.Fatal(err)
	}
	for _, minScore := range []float64{0, 0.2, 0.4, 0.6, 0.99} {
		var want []string
		for _, h := range hits {
			v := float64(h.VectorScore)
			if (v >= minScore || h.BM25 > 0 && v >= minScore/2) && len(want) < 10 {
				want = append(want, fmt.Sprintf("%s:%d", h.Source, h.StartLine))
			}
		}
		ps, err := k.Retrieve(ctx, "help", query, 10, minScore)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%s:%d", p.Source, p.StartLine))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("min score %.2f: %v, want %v", minScore, got, want)
		}
	}
	if ps, err := k.Retrieve(ctx, "help", query, 0, 0); err != nil || ps != nil {
		t.Errorf("k=0: %v, %v", ps, err)
	}
	if _, err := k.Retrieve(ctx, "nope", query, 3, 0); err == nil {
		t.Error("unknown collection: no error")
	}
	other, _ := knowledge.NewLocal(128)
	var mismatch *index.EmbedderMismatchError
	if _, err := x.Knowledge(other, map[string]string{"help": "shop/help"}).Retrieve(ctx, "help", query, 3, 0); !errors.As(err, &mismatch) {
		t.Errorf("another embedder: %v", err)
	}
	if _, err := x.Knowledge(emb, map[string]string{"help": "never"}).Retrieve(ctx, "help", query, 3, 0); !errors.Is(err, index.ErrNotIndexed) ||
		!strings.Contains(err.Error(), "run agentrun index") {
		t.Errorf("a collection never indexed: %v", err)
	}
}
