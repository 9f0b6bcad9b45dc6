package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/knowledge/index/sqlite"
)

// freshSchema is a schema of the test's own (see pgtest).
func freshSchema(tb testing.TB) (string, *pgdb.DB) { return pgtest.Schema(tb) }

// openIndex opens an index that scores in process, whether or not the server has
// pgvector: the tests that compare it with the SQLite index bit for bit need that
// (pgvector_test.go tests the other way).
func openIndex(tb testing.TB) (*Index, *pgdb.DB, string) {
	tb.Helper()
	u, db := freshSchema(tb)
	u += "&" + vectorSearchParam + "=" + string(VectorsInProcess)
	x, err := Open(context.Background(), u)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { x.Close() })
	return x, db, u
}

// counting wraps an Embedder and counts the texts it embeds.
type counting struct {
	knowledge.Embedder
	id string // overrides ID when set

	mu    sync.Mutex
	texts int
}

func (c *counting) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vs, err := c.Embedder.Embed(ctx, texts)
	if err == nil {
		c.mu.Lock()
		c.texts += len(texts)
		c.mu.Unlock()
	}
	return vs, err
}

func (c *counting) ID() string {
	if c.id != "" {
		return c.id
	}
	return c.Embedder.ID()
}

func (c *counting) reset() { c.mu.Lock(); c.texts = 0; c.mu.Unlock() }

const sourcesDir = "../../testdata/sources"

var patterns = []string{"faq.yaml", "help/*.md", "notes.txt"}

func readChunks(t testing.TB, dir string, pats []string) []knowledge.Chunk {
	t.Helper()
	cs, _, err := knowledge.ReadSources(dir, pats, knowledge.ChunkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// copySources copies the testdata sources to a temporary directory tests may edit.
func copySources(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(sourcesDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(sourcesDir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func distinct(cs []knowledge.Chunk) int {
	seen := map[string]bool{}
	for _, c := range cs {
		seen[c.Hash] = true
	}
	return len(seen)
}

func count(t *testing.T, db *pgdb.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenMigratesOnceAndNotesPgvector(t *testing.T) {
	x, db, u := openIndex(t)
	var version int
	if err := db.Pool.QueryRow(t.Context(), `SELECT version FROM agentrun_migrations WHERE component = 'knowledge'`).Scan(&version); err != nil || version != len(migrations) {
		t.Fatalf("migration version %d, %v; want %d", version, err, len(migrations))
	}
	var available bool
	if err := db.Pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if x.VectorExtensionAvailable() != available {
		t.Errorf("VectorExtensionAvailable() = %v, the server says %v", x.VectorExtensionAvailable(), available)
	}
	y, err := Open(t.Context(), u) // a second process: nothing to migrate
	if err != nil {
		t.Fatal(err)
	}
	y.Close()
	if x.Schema() == "" || !strings.HasPrefix(x.Schema(), "t_") {
		t.Errorf("schema %q", x.Schema())
	}
}

func TestUpdateIncremental(t *testing.T) {
	x, db, _ := openIndex(t)
	ctx := t.Context()
	emb := &counting{Embedder: &knowledge.Local{}}
	dir := copySources(t)
	chunks := readChunks(t, dir, patterns)
	n := distinct(chunks)

	st, err := x.UpdateWith(ctx, "help", chunks, emb, index.UpdateOptions{Manifest: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if st != (index.Stats{Embedded: n, Vectors: emb.texts}) || emb.texts < n {
		t.Errorf("first update: %+v (%d texts embedded), want %d embedded", st, emb.texts, n)
	}
	if got := count(t, db, "knowledge_chunks"); got != len(chunks) {
		t.Errorf("%d chunk rows, want %d", got, len(chunks))
	}
	if m, e, ok, err := x.Manifest(ctx, "help"); m != "m1" || e != emb.ID() || !ok || err != nil {
		t.Errorf("Manifest = %q, %q, %v, %v", m, e, ok, err)
	}
	if _, _, ok, err := x.Manifest(ctx, "other"); ok || err != nil {
		t.Errorf("Manifest of a missing collection: %v, %v", ok, err)
	}

	emb.reset()
	st, err = x.Update(ctx, "help", chunks, emb)
	if err != nil {
		t.Fatal(err)
	}
	if st != (index.Stats{Kept: n}) || emb.texts != 0 {
		t.Errorf("second update: %+v (%d texts embedded), want all %d kept, none embedded", st, emb.texts, n)
	}

	// Edit one section: only its chunk is embedded again.
	path := filepath.Join(dir, "help", "refunds.md")
	data, _ := os.ReadFile(path)
	edited := strings.Replace(string(data), "3-5 working days", "2-4 working days", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	emb.reset()
	chunks = readChunks(t, dir, patterns)
	st, err = x.Update(ctx, "help", chunks, emb)
	if err != nil {
		t.Fatal(err)
	}
	if st != (index.Stats{Kept: n - 1, Embedded: 1, Deleted: 1, Vectors: 1}) || emb.texts != 1 {
		t.Errorf("after one edit: %+v (%d texts), want 1 embedded, 1 deleted", st, emb.texts)
	}
	hits, err := x.Search(ctx, "help", "refund working days", emb, 1)
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Text, "2-4 working days") {
		t.Errorf("search after the edit: %+v, %v", hits, err)
	}

	// Remove a source: its chunks go.
	zh := readChunks(t, dir, []string{"help/shipping_zh.md"})
	emb.reset()
	st, err = x.Update(ctx, "help", readChunks(t, dir, []string{"faq.yaml", "help/refunds.md", "notes.txt"}), emb)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != distinct(zh) || st.Embedded != 0 || emb.texts != 0 {
		t.Errorf("after removing a source: %+v, want %d deleted, none embedded", st, distinct(zh))
	}
	if got, want := count(t, db, "knowledge_chunks"), len(chunks)-len(zh); got != want {
		t.Errorf("%d chunk rows, want %d", got, want)
	}
	hits, err = x.Search(ctx, "help", "运费", emb, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Source == "help/shipping_zh.md" {
			t.Errorf("a removed source is still found: %+v", h)
		}
	}
}

// Another process's Update is seen by a cached collection: generations, not the
// process, invalidate the cache.
func TestSearchSeesOtherProcessUpdate(t *testing.T) {
	x, _, u := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	dir := copySources(t)
	if _, err := x.Update(ctx, "help", readChunks(t, dir, []string{"help/refunds.md"}), emb); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Search(ctx, "help", "运费", emb, 3); err != nil { // caches the vectors
		t.Fatal(err)
	}
	y, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if _, err := y.Update(ctx, "help", readChunks(t, dir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	hits, err := x.Search(ctx, "help", "满多少免配送费", emb, 3)
	if err != nil || len(hits) == 0 || hits[0].Source != "help/shipping_zh.md" {
		t.Errorf("after another process's update: %+v, %v", hits, err)
	}
}

func TestEmbedderMismatch(t *testing.T) {
	x, _, _ := openIndex(t)
	ctx := t.Context()
	chunks := readChunks(t, sourcesDir, patterns)
	if _, err := x.Update(ctx, "help", chunks, &knowledge.Local{}); err != nil {
		t.Fatal(err)
	}
	other := &counting{Embedder: &knowledge.Local{}, id: "other-model"}
	_, err := x.Update(ctx, "help", chunks, other)
	var mismatch *index.EmbedderMismatchError
	if !errors.As(err, &mismatch) || mismatch.Index != (&knowledge.Local{}).ID() || mismatch.Agent != "other-model" {
		t.Fatalf("update by another embedder: %v", err)
	}
	if _, err := x.Search(ctx, "help", "refund", other, 3); !errors.As(err, &mismatch) {
		t.Errorf("search by another embedder: %v", err)
	}
	if _, _, err := x.FAQ(ctx, "help", "refund", other); !errors.As(err, &mismatch) {
		t.Errorf("faq by another embedder: %v", err)
	}
	// A rebuild moves the collection to the new embedder.
	st, err := x.UpdateWith(ctx, "help", chunks, other, index.UpdateOptions{Rebuild: true})
	if err != nil || st.Embedded != distinct(chunks) || st.Kept != 0 {
		t.Fatalf("rebuild: %+v, %v", st, err)
	}
	if _, e, _, _ := x.Manifest(ctx, "help"); e != "other-model" {
		t.Errorf("embedder after the rebuild: %q", e)
	}
	if _, err := x.Search(ctx, "never", "refund", other, 3); !errors.Is(err, index.ErrNotIndexed) {
		t.Errorf("search of a collection never indexed: %v", err)
	}
}

// failing is an embedder that fails on its second call.
type failing struct {
	knowledge.Local
	calls int
}

func (f *failing) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls++
	if f.calls == 2 {
		return nil, errors.New("embeddings server: 500")
	}
	return f.Local.Embed(ctx, texts)
}

// An embedder's failure leaves the index exactly as it was.
func TestUpdateFailureLeavesIndex(t *testing.T) {
	x, db, _ := openIndex(t)
	ctx := t.Context()
	small := readChunks(t, sourcesDir, []string{"help/refunds.md"})
	if _, err := x.Update(ctx, "help", small, &knowledge.Local{}); err != nil {
		t.Fatal(err)
	}
	before := count(t, db, "knowledge_vectors")
	var many []knowledge.Chunk
	for i := range 3 * index.EmbedBatch {
		c := small[0]
		c.Text = fmt.Sprintf("passage %d", i)
		c.Hash = fmt.Sprintf("h%d", i)
		many = append(many, c)
	}
	if _, err := x.Update(ctx, "help", many, &failing{}); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("update with a failing embedder: %v", err)
	}
	if got := count(t, db, "knowledge_vectors"); got != before {
		t.Errorf("%d vectors after a failed update, want %d", got, before)
	}
	if got := count(t, db, "knowledge_chunks"); got != len(small) {
		t.Errorf("%d chunks after a failed update, want %d", got, len(small))
	}
}

func TestTSVectorLiteral(t *testing.T) {
	if got, want := tsvector([]string{"refund", "it's", `a\b`, "refund", "退款"}), `'refund':1,4 'it''s':2 'a\\b':3 '退款':5`; got != want {
		t.Errorf("tsvector = %s, want %s", got, want)
	}
	if got, want := tsquery([]string{"refund", "退款"}), `'refund' | '退款'`; got != want {
		t.Errorf("tsquery = %s, want %s", got, want)
	}
	_, db := freshSchema(t)
	var back string
	if err := db.Pool.QueryRow(t.Context(), `SELECT $1::tsvector::text`, tsvector([]string{"it's", `a\b`, "退款"})).Scan(&back); err != nil {
		t.Fatal(err)
	}
	var matched bool
	if err := db.Pool.QueryRow(t.Context(), `SELECT $1::tsvector @@ $2::tsquery`, tsvector(index.SearchTerms(knowledge.Chunk{Text: "满99元免配送费"})), tsquery(index.QueryTerms("配送费多少"))).Scan(&matched); err != nil || !matched {
		t.Errorf("CJK bigrams do not match: %v, %v", matched, err)
	}
}

// helpCentre reads examples/agents/help-center as the example agent indexes it.
func helpCentre(t testing.TB) []knowledge.Chunk {
	return readChunks(t, "../../../../examples/agents/help-center", []string{"*.md", "faq.yaml"})
}

// questions are the distinct user questions and FAQ questions of faq_pairs.yaml.
func questions(t testing.TB) []string {
	data, err := os.ReadFile("../../testdata/faq_pairs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Pairs []struct{ FAQ, Question string }
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, p := range f.Pairs {
		qs = append(qs, p.FAQ, p.Question)
	}
	slices.Sort(qs)
	return slices.Compact(qs)
}

// chunkKey names a chunk alike in both indexes (their row ids are their own).
func chunkKey(h index.Hit) string { return fmt.Sprintf("%s:%d:%s", h.Source, h.StartLine, h.Hash) }

// The help centre indexed into both indexes ranks alike: every chunk's vector score
// is bit-for-bit the SQLite index's, the FAQ lookup returns the same entry and
// score, the CacheLookups of the shared adapter agree exactly, and the hybrid top 5
// — vector ranking fused with FTS5's BM25, computed in SQL here — is the same chunks
// in the same order with the same BM25 scores.
func TestMatchesSQLite(t *testing.T) {
	pg, _, _ := openIndex(t)
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "knowledge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	ctx := t.Context()
	emb := &knowledge.Local{}
	chunks := helpCentre(t)
	for _, x := range []interface {
		Update(context.Context, string, []knowledge.Chunk, knowledge.Embedder) (index.Stats, error)
	}{lite, pg} {
		if _, err := x.Update(ctx, "help", chunks, emb); err != nil {
			t.Fatal(err)
		}
	}
	qs := questions(t)
	all := len(chunks)
	sameTop, sameTop5 := 0, 0
	var pgTook, liteTook time.Duration
	for _, q := range qs {
		// Every chunk, with its vector score: the vector side, strictly.
		a, err := lite.Search(ctx, "help", q, emb, all)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pg.Search(ctx, "help", q, emb, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Fatalf("%q: %d hits from SQLite, %d from Postgres", q, len(a), len(b))
		}
		want := map[string]index.Hit{}
		for _, h := range a {
			want[chunkKey(h)] = h
		}
		for _, h := range b {
			w, ok := want[chunkKey(h)]
			if !ok {
				t.Fatalf("%q: %s only in Postgres", q, chunkKey(h))
			}
			if h.VectorScore != w.VectorScore || h.Question != w.Question || h.Text != w.Text || h.Heading != w.Heading || !slices.Equal(h.Questions, w.Questions) {
				t.Errorf("%q: %s: vector score %v (question %q), SQLite %v (%q)", q, chunkKey(h), h.VectorScore, h.Question, w.VectorScore, w.Question)
			}
			if (h.BM25 > 0) != (w.BM25 > 0) {
				t.Errorf("%q: %s: full text matched %v, FTS5 %v", q, chunkKey(h), h.BM25 > 0, w.BM25 > 0)
			}
		}

		// The FAQ lookup: strictly.
		fa, oka, err := lite.FAQ(ctx, "help", q, emb)
		if err != nil {
			t.Fatal(err)
		}
		fb, okb, err := pg.FAQ(ctx, "help", q, emb)
		if err != nil {
			t.Fatal(err)
		}
		if oka != okb || chunkKey(fa) != chunkKey(fb) || fa.VectorScore != fb.VectorScore || fa.Question != fb.Question {
			t.Errorf("%q: FAQ %s %q %v; SQLite %s %q %v", q, chunkKey(fb), fb.Question, fb.VectorScore, chunkKey(fa), fa.Question, fa.VectorScore)
		}

		// The hybrid top 5: loosely.
		start := time.Now()
		a5, _ := lite.Search(ctx, "help", q, emb, 5)
		liteTook += time.Since(start)
		start = time.Now()
		b5, _ := pg.Search(ctx, "help", q, emb, 5)
		pgTook += time.Since(start)
		if len(a5) > 0 && len(b5) > 0 && chunkKey(a5[0]) == chunkKey(b5[0]) {
			sameTop++
		}
		if len(a5) != len(b5) {
			t.Errorf("%q: %d hits from SQLite, %d from Postgres", q, len(a5), len(b5))
		}
		for i := range min(len(a5), len(b5)) {
			if chunkKey(a5[i]) != chunkKey(b5[i]) || math.Abs(a5[i].BM25-b5[i].BM25) > 1e-9 {
				t.Errorf("%q hit %d: SQLite %s (BM25 %.9f), Postgres %s (BM25 %.9f)", q, i, chunkKey(a5[i]), a5[i].BM25, chunkKey(b5[i]), b5[i].BM25)
			}
		}
		ka, kb := make([]string, len(a5)), make([]string, len(b5))
		for i := range a5 {
			ka[i] = chunkKey(a5[i])
		}
		for i := range b5 {
			kb[i] = chunkKey(b5[i])
		}
		slices.Sort(ka)
		slices.Sort(kb)
		if slices.Equal(ka, kb) {
			sameTop5++
		}
	}
	t.Logf("%d questions, %d chunks: hybrid top hit equal for %d, top-5 set equal for %d; Search(k=5) took %v per query on Postgres, %v on SQLite",
		len(qs), all, sameTop, sameTop5, pgTook/time.Duration(len(qs)), liteTook/time.Duration(len(qs)))
	if sameTop != len(qs) || sameTop5 != len(qs) {
		t.Errorf("the hybrid top hit differs from SQLite's for %d of %d questions, the top 5 for %d", len(qs)-sameTop, len(qs), len(qs)-sameTop5)
	}

	// The shared runtime adapter over both.
	ka := lite.Knowledge(emb, nil)
	kb := pg.Knowledge(emb, nil)
	for _, q := range qs {
		cq := knowledge.CacheQuery{Collection: "help", Agent: "shop", Intent: "faq", Version: "v1", Question: q}
		ha, err := ka.CacheLookup(ctx, cq)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := kb.CacheLookup(ctx, cq)
		if err != nil {
			t.Fatal(err)
		}
		if (ha == nil) != (hb == nil) || (ha != nil && !reflect.DeepEqual(*ha, *hb)) {
			t.Errorf("%q: CacheLookup %+v, SQLite %+v", q, hb, ha)
		}
		pa, err := ka.Retrieve(ctx, "help", q, 3, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := kb.Retrieve(ctx, "help", q, 3, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		if len(pa) != len(pb) || len(pa) > 0 && (pa[0].Source != pb[0].Source || pa[0].StartLine != pb[0].StartLine) {
			t.Errorf("%q: Retrieve %+v, SQLite %+v", q, pb, pa)
		}
	}
}

func TestLearned(t *testing.T) {
	x, _, u := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	key := index.LearnedKey{Agent: "shop", Intent: "faq", Version: "v1"}
	k := x.Knowledge(emb, nil)
	q := func(user, question string) knowledge.CacheQuery {
		return knowledge.CacheQuery{Agent: key.Agent, Intent: key.Intent, Version: key.Version, User: user, Question: question}
	}
	if h, err := k.CacheLookup(ctx, q("", "how long do refunds take")); h != nil || err != nil {
		t.Fatalf("empty cache: %+v, %v", h, err)
	}
	if err := k.CacheLearn(ctx, q("", "how long do refunds take"), "3-5 days", false, 0); err != nil {
		t.Fatal(err)
	}
	if err := k.CacheLearn(ctx, q("alice", "where is my parcel"), "at your door", true, 0); err != nil {
		t.Fatal(err)
	}
	if err := k.CacheLearn(ctx, q("", "who is it for"), "x", true, 0); err == nil {
		t.Error("a per-user entry without a user was learned")
	}
	h, err := k.CacheLookup(ctx, q("bob", "how long do refunds take?"))
	if err != nil || h == nil || h.Kind != knowledge.CacheEntryLearned || h.Answer != "3-5 days" || h.PerUser || h.Score < 0.99 {
		t.Errorf("shared entry for bob: %+v, %v", h, err)
	}
	h, err = k.CacheLookup(ctx, q("alice", "where is my parcel"))
	if err != nil || h == nil || h.Answer != "at your door" || !h.PerUser {
		t.Errorf("alice's own entry: %+v, %v", h, err)
	}
	h, err = k.CacheLookup(ctx, q("bob", "where is my parcel"))
	if err != nil || (h != nil && h.Answer == "at your door") {
		t.Errorf("bob sees alice's entry: %+v, %v", h, err)
	}
	// Another version of the spec starts afresh.
	h, err = k.CacheLookup(ctx, knowledge.CacheQuery{Agent: "shop", Intent: "faq", Version: "v2", Question: "how long do refunds take"})
	if h != nil || err != nil {
		t.Errorf("another version: %+v, %v", h, err)
	}
	// Relearning replaces; another process sees it.
	if err := k.CacheLearn(ctx, q("", "how long do refunds take"), "2-4 days", false, 0); err != nil {
		t.Fatal(err)
	}
	y, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	h, err = y.Knowledge(emb, nil).CacheLookup(ctx, q("", "how long do refunds take"))
	if err != nil || h == nil || h.Answer != "2-4 days" {
		t.Errorf("after relearning, in another process: %+v, %v", h, err)
	}
	es, err := x.ListLearned(ctx, index.LearnedFilter{AllUsers: true})
	if err != nil || len(es) != 2 {
		t.Fatalf("ListLearned: %+v, %v", es, err)
	}
	if es[0].Question != "how long do refunds take" || es[0].Answer != "2-4 days" || es[1].User != "alice" || es[0].Embedder != emb.ID() {
		t.Errorf("ListLearned: %+v", es)
	}
	if es, _ := x.ListLearned(ctx, index.LearnedFilter{User: "alice"}); len(es) != 1 || es[0].User != "alice" {
		t.Errorf("alice's entries: %+v", es)
	}

	// TTL: an expired entry is never served, and is gone at the next write.
	if _, err := x.Learn(ctx, key, emb, "", "do you sell gift cards", "yes", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if h, _ := k.CacheLookup(ctx, q("", "do you sell gift cards")); h == nil || h.Answer != "yes" {
		t.Errorf("fresh entry: %+v", h)
	}
	time.Sleep(80 * time.Millisecond)
	if h, _ := k.CacheLookup(ctx, q("", "do you sell gift cards")); h != nil && h.Answer == "yes" {
		t.Errorf("an expired entry is served: %+v", h)
	}
	if es, _ := x.ListLearned(ctx, index.LearnedFilter{AllUsers: true}); len(es) != 2 {
		t.Errorf("ListLearned lists an expired entry: %+v", es)
	}

	n, err := x.ClearLearned(ctx, index.LearnedFilter{Agent: "shop"}) // the shared ones
	if err != nil || n != 1 {
		t.Errorf("ClearLearned: %d, %v", n, err)
	}
	if h, _ := y.Knowledge(emb, nil).CacheLookup(ctx, q("", "how long do refunds take")); h != nil {
		t.Errorf("a cleared entry is served by another process: %+v", h)
	}
	if h, _ := k.CacheLookup(ctx, q("alice", "where is my parcel")); h == nil {
		t.Error("clearing the shared entries cleared alice's")
	}
}
