package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

func learnOK(t *testing.T, x *Index, key index.LearnedKey, emb knowledge.Embedder, user, q, a string, ttl time.Duration) int64 {
	t.Helper()
	id, err := x.Learn(t.Context(), key, emb, user, q, a, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func listIDs(t *testing.T, x *Index, f index.LearnedFilter) []int64 {
	t.Helper()
	es, err := x.ListLearned(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func TestLearnListClear(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	shop := index.LearnedKey{Agent: "shop", Intent: "faq", Version: "v1"}
	a := learnOK(t, x, shop, emb, "", "  How do I reset my password? ", "Use the link on the login page.", 0)
	b := learnOK(t, x, shop, emb, "alice", "Where is my order 42?", "On its way.", time.Hour)
	c := learnOK(t, x, index.LearnedKey{Agent: "shop", Intent: "orders", Version: "v1"}, emb, "bob", "Where is my order 7?", "Delivered.", 0)
	d := learnOK(t, x, index.LearnedKey{Agent: "bank", Intent: "faq", Version: "v3"}, emb, "", "What are your opening hours?", "9 to 5.", 0)

	es, err := x.ListLearned(ctx, index.LearnedFilter{AllUsers: true})
	if err != nil || len(es) != 4 {
		t.Fatalf("ListLearned: %v, %v", es, err)
	}
	if es[0].ID != d || es[3].ID != a {
		t.Errorf("not newest first: %v", listIDs(t, x, index.LearnedFilter{AllUsers: true}))
	}
	e := es[3]
	if e.Agent != "shop" || e.Intent != "faq" || e.Version != "v1" || e.Embedder != emb.ID() || e.User != "" ||
		e.Question != "How do I reset my password?" || e.Answer != "Use the link on the login page." ||
		time.Since(e.Created) > time.Minute || !e.Expires.IsZero() {
		t.Errorf("entry %+v", e)
	}
	if exp := es[2].Expires; exp.Sub(es[2].Created) != time.Hour {
		t.Errorf("expires %v, created %v: want an hour later", exp, es[2].Created)
	}
	tests := []struct {
		f    index.LearnedFilter
		want []int64
	}{
		{index.LearnedFilter{}, []int64{d, a}}, // shared only
		{index.LearnedFilter{User: "alice"}, []int64{b}},
		{index.LearnedFilter{Agent: "shop", AllUsers: true}, []int64{c, b, a}},
		{index.LearnedFilter{Intent: "faq", AllUsers: true}, []int64{d, b, a}},
		{index.LearnedFilter{Agent: "shop", Intent: "orders", AllUsers: true}, []int64{c}},
		{index.LearnedFilter{Agent: "nobody", AllUsers: true}, []int64{}},
	}
	for _, tt := range tests {
		if got := listIDs(t, x, tt.f); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("ListLearned(%+v) = %v, want %v", tt.f, got, tt.want)
		}
	}

	// The same question again (after trimming) replaces the entry; another user's
	// or the shared one of the same question is another entry.
	a2 := learnOK(t, x, shop, emb, "", "How do I reset my password?", "Click 'Forgot password'.", 0)
	learnOK(t, x, shop, emb, "alice", "How do I reset my password?", "Alice, use the app.", 0)
	if got := listIDs(t, x, index.LearnedFilter{Agent: "shop", Intent: "faq"}); fmt.Sprint(got) != fmt.Sprint([]int64{a2}) {
		t.Errorf("after relearning: shared entries %v, want [%d]", got, a2)
	}
	if n := len(listIDs(t, x, index.LearnedFilter{AllUsers: true})); n != 5 {
		t.Errorf("%d entries, want 5", n)
	}

	for _, bad := range [][2]string{{"", "answer"}, {"  ", "answer"}, {"question", " "}} {
		if _, err := x.Learn(ctx, shop, emb, "", bad[0], bad[1], 0); err == nil {
			t.Errorf("Learn(%q, %q): no error", bad[0], bad[1])
		}
	}

	n, err := x.ClearLearned(ctx, index.LearnedFilter{User: "alice"})
	if err != nil || n != 2 {
		t.Errorf("ClearLearned(alice) = %d, %v; want 2", n, err)
	}
	n, err = x.ClearLearned(ctx, index.LearnedFilter{Agent: "shop", AllUsers: true})
	if err != nil || n != 2 {
		t.Errorf("ClearLearned(shop, all users) = %d, %v; want 2", n, err)
	}
	if got := listIDs(t, x, index.LearnedFilter{AllUsers: true}); fmt.Sprint(got) != fmt.Sprint([]int64{d}) {
		t.Errorf("left %v, want [%d]", got, d)
	}
}

func TestLearnedExpiry(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	key := index.LearnedKey{Agent: "shop", Intent: "faq", Version: "v1"}
	k := x.Knowledge(emb, nil)
	learnOK(t, x, key, emb, "", "How do I reset my password?", "Use the link.", 50*time.Millisecond)
	q := knowledge.CacheQuery{Agent: "shop", Intent: "faq", Version: "v1", Question: "How do I reset my password?"}
	if h, err := k.CacheLookup(ctx, q); err != nil || h == nil {
		t.Fatalf("before expiry: %v, %v", h, err)
	}
	time.Sleep(80 * time.Millisecond)
	if h, err := k.CacheLookup(ctx, q); err != nil || h != nil {
		t.Errorf("after expiry: %+v, %v; want nothing", h, err)
	}
	if ids := listIDs(t, x, index.LearnedFilter{AllUsers: true}); len(ids) != 0 {
		t.Errorf("ListLearned lists an expired entry: %v", ids)
	}
	if n := count(t, x, "learned"); n != 1 {
		t.Errorf("%d rows before the next Learn, want 1 (deleted lazily)", n)
	}
	learnOK(t, x, index.LearnedKey{Agent: "other", Intent: "faq", Version: "v1"}, emb, "", "Anything else?", "No.", 0)
	if n := count(t, x, "learned"); n != 1 {
		t.Errorf("%d rows after the next Learn, want 1: the expired one deleted", n)
	}
}

func TestLearnReplacesInCache(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	k := x.Knowledge(&knowledge.Local{}, nil)
	q := knowledge.CacheQuery{Agent: "shop", Intent: "faq", Version: "v1", User: "alice", Question: "Where is my order 42?"}
	var last string
	for i := range 3 {
		last = fmt.Sprint("answer ", i)
		if err := k.CacheLearn(ctx, q, last, true, 0); err != nil {
			t.Fatal(err)
		}
		h, err := k.CacheLookup(ctx, q)
		if err != nil || h == nil || h.Answer != last {
			t.Fatalf("after learning %q: %+v, %v", last, h, err)
		}
	}
	if n := count(t, x, "learned"); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
}

func TestLearnedSeenByOtherProcess(t *testing.T) {
	x, path := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	key := index.LearnedKey{Agent: "shop", Intent: "faq", Version: "v1"}
	learnOK(t, x, key, emb, "", "What are your opening hours?", "9 to 5.", 0)
	y, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	ky := y.Knowledge(emb, nil)
	q := knowledge.CacheQuery{Agent: "shop", Intent: "faq", Version: "v1", Question: "Do you deliver on Sundays?"}
	if h, err := ky.CacheLookup(ctx, q); err != nil || h == nil || h.Answer != "9 to 5." { // fills y's cache
		t.Fatalf("%+v, %v", h, err)
	}
	learnOK(t, x, key, emb, "", "Do you deliver on Sundays?", "Yes.", 0)
	if h, err := ky.CacheLookup(ctx, q); err != nil || h == nil || h.Answer != "Yes." || h.Score < 0.999 {
		t.Errorf("after another process learned: %+v, %v", h, err)
	}
	if _, err := x.ClearLearned(ctx, index.LearnedFilter{AllUsers: true}); err != nil {
		t.Fatal(err)
	}
	if h, err := ky.CacheLookup(ctx, q); err != nil || h != nil {
		t.Errorf("after another process cleared: %+v, %v", h, err)
	}
}

// TestLearnedNeverServesAnotherUser learns and looks up at random, with questions
// that are near-duplicates across users, and checks every hit against a model of
// who owns which entry.
func TestLearnedNeverServesAnotherUser(t *testing.T) {
	x, path := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	k := x.Knowledge(emb, nil)
	r := rand.New(rand.NewPCG(15, 1))
	users := []string{"", "", "alice", "bob", "carol", "dave", "Alice", "alice ", "u-1", "u-10"}
	var pool []string
	for _, base := range []string{
		"where is my order %d", "cancel order %d please", "my order %d never arrived",
		"我的订单%d到哪了", "订单%d怎么取消", "refund for order %d",
	} {
		for n := range 4 {
			q := fmt.Sprintf(base, 100+n)
			pool = append(pool, q, q+"?", strings.ToUpper(q[:1])+q[1:]+"!")
		}
	}
	pool = append(pool, "What is my account balance?", "what is my account balance", "What's my account balance?",
		"Show my address", "show my address.", "我的地址是什么", "我的地址是什么？")

	owner := map[int64]string{} // entry id → user ("" shared)
	has := map[[2]string]bool{} // (user, trimmed question) → an entry exists
	refresh := func() {
		es, err := x.ListLearned(ctx, index.LearnedFilter{AllUsers: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			owner[e.ID] = e.User
		}
	}
	served, exact := 0, 0
	for trial := range 1000 {
		user := users[r.IntN(len(users))]
		question := pool[r.IntN(len(pool))]
		q := knowledge.CacheQuery{Agent: "shop", Intent: "orders", Version: "v1", User: user, Question: question}
		if r.IntN(2) == 0 {
			perUser := user != "" && r.IntN(3) > 0
			answer := fmt.Sprintf("answer %d for %q", trial, user)
			if err := k.CacheLearn(ctx, q, answer, perUser, 0); err != nil {
				t.Fatal(err)
			}
			entryUser := ""
			if perUser {
				entryUser = user
			}
			has[[2]string{entryUser, strings.TrimSpace(question)}] = true
			continue
		}
		h, err := k.CacheLookup(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			// Nothing is found only while nothing is visible to the user.
			for key := range has {
				if key[0] == "" || key[0] == user {
					t.Fatalf("trial %d: %q asked %q and got nothing, but %v exists", trial, user, question, key)
				}
			}
			continue
		}
		id, err := strconv.ParseInt(h.Entry, 10, 64)
		if err != nil || h.Kind != knowledge.CacheEntryLearned {
			t.Fatalf("trial %d: hit %+v", trial, h)
		}
		if _, ok := owner[id]; !ok {
			refresh()
		}
		o, ok := owner[id]
		if !ok {
			t.Fatalf("trial %d: hit of unknown entry %d", trial, id)
		}
		if o != "" && o != user {
			t.Fatalf("trial %d: user %q was served %q's entry %d (%q → %q)", trial, user, o, id, h.Question, h.Answer)
		}
		if h.PerUser != (o != "") {
			t.Errorf("trial %d: PerUser %v for an entry of %q", trial, h.PerUser, o)
		}
		served++
		if has[[2]string{user, strings.TrimSpace(question)}] || has[[2]string{"", strings.TrimSpace(question)}] {
			exact++
			if h.Score < 0.999 {
				t.Fatalf("trial %d: %q asked %q, which it may see an entry of, but got %q (%.3f)", trial, user, question, h.Question, h.Score)
			}
		}
	}
	refresh()
	t.Logf("%d entries, %d lookups served (%d of an exact question), none of another user", len(owner), served, exact)

	// The cache kept up to date Learn by Learn answers as one loaded afresh.
	y, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	ky := y.Knowledge(emb, nil)
	for _, user := range users {
		for _, question := range pool {
			q := knowledge.CacheQuery{Agent: "shop", Intent: "orders", Version: "v1", User: user, Question: question}
			h1, err1 := k.CacheLookup(ctx, q)
			h2, err2 := ky.CacheLookup(ctx, q)
			if err1 != nil || err2 != nil || (h1 == nil) != (h2 == nil) || h1 != nil && (h1.Entry != h2.Entry || h1.Answer != h2.Answer) {
				t.Fatalf("%q asks %q: %+v, %v from the updated cache; %+v, %v from a fresh one", user, question, h1, err1, h2, err2)
			}
		}
	}
	if exact < 100 {
		t.Errorf("only %d exact lookups: the test exercises too little", exact)
	}
}

func TestLearnedConcurrent(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	k := x.Knowledge(&knowledge.Local{}, nil)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20 {
				q := knowledge.CacheQuery{Agent: "a", Intent: "i", Version: "v", User: fmt.Sprint("u", w), Question: fmt.Sprint("question ", i)}
				if err := k.CacheLearn(ctx, q, "answer", w%2 == 0, 0); err != nil {
					t.Error(err)
					return
				}
				if _, err := k.CacheLookup(context.Background(), q); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
