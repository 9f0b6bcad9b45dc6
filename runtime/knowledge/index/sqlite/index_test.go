package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
)

// counting wraps an Embedder, counts the texts it embeds and can fail on a call.
type counting struct {
	knowledge.Embedder
	id     string // overrides ID when set
	failOn int    // the call (from 1) that fails; 0 never

	mu    sync.Mutex
	calls int
	texts int
}

func (c *counting) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	c.calls++
	call := c.calls
	c.mu.Unlock()
	if c.failOn > 0 && call == c.failOn {
		return nil, errors.New("embeddings server: 500 Internal Server Error")
	}
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

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.texts = 0, 0
}

const sourcesDir = "../../testdata/sources"

var patterns = []string{"faq.yaml", "help/*.md", "notes.txt"}

func readChunks(t *testing.T, dir string, pats []string) []knowledge.Chunk {
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

func openIndex(t testing.TB) (*Index, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sub", "knowledge.db")
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x, path
}

func distinct(cs []knowledge.Chunk) int {
	seen := map[string]bool{}
	for _, c := range cs {
		seen[c.Hash] = true
	}
	return len(seen)
}

func count(t *testing.T, x *Index, table string) int {
	t.Helper()
	var n int
	if err := x.read.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenFileModeAndReopen(t *testing.T) {
	x, path := openIndex(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	emb := &counting{Embedder: &knowledge.Local{}}
	if _, err := x.Update(t.Context(), "help", readChunks(t, sourcesDir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	x.Close()
	y, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	st, err := y.Update(t.Context(), "help", readChunks(t, sourcesDir, patterns), emb)
	if err != nil || st.Embedded != 0 {
		t.Errorf("after reopening: %+v, %v; want nothing embedded", st, err)
	}
}

func TestOpenRefusesOtherDatabase(t *testing.T) {
	x, path := openIndex(t)
	x.Close()
	if _, err := x.write.Exec(`SELECT 1`); err == nil {
		t.Fatal("closed index still usable")
	}
	other := filepath.Join(t.TempDir(), "other.db")
	y, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := y.write.Exec(`PRAGMA application_id = 7`); err != nil {
		t.Fatal(err)
	}
	y.Close()
	if _, err := Open(other); err == nil || !strings.Contains(err.Error(), "not a knowledge index") {
		t.Errorf("Open of another database: %v", err)
	}
	_ = path
}

func TestUpdateIncremental(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &counting{Embedder: &knowledge.Local{}}
	dir := copySources(t)
	chunks := readChunks(t, dir, patterns)
	n := distinct(chunks)

	st, err := x.Update(ctx, "help", chunks, emb)
	if err != nil {
		t.Fatal(err)
	}
	if st != (index.Stats{Embedded: n, Vectors: emb.texts}) || emb.texts < n {
		t.Errorf("first update: %+v (%d texts embedded), want %d embedded", st, emb.texts, n)
	}
	if got := count(t, x, "chunks"); got != len(chunks) {
		t.Errorf("%d chunk rows, want %d", got, len(chunks))
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
	if got, want := count(t, x, "chunks"), len(chunks)-len(zh); got != want {
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

func TestUpdateMovedChunkKeepsVectors(t *testing.T) {
	x, _ := openIndex(t)
	emb := &counting{Embedder: &knowledge.Local{}}
	c := knowledge.Chunk{Source: "a.md", StartLine: 1, EndLine: 1, Text: "Opening hours are nine to five.", Kind: knowledge.ChunkText, Hash: "h1"}
	if _, err := x.Update(t.Context(), "c", []knowledge.Chunk{c}, emb); err != nil {
		t.Fatal(err)
	}
	c.Source, c.StartLine, c.EndLine = "b.md", 7, 8
	emb.reset()
	st, err := x.Update(t.Context(), "c", []knowledge.Chunk{c, c}, emb)
	if err != nil || st != (index.Stats{Kept: 1}) || emb.texts != 0 {
		t.Fatalf("moved and duplicated: %+v, %v, %d texts", st, err, emb.texts)
	}
	hits, err := x.Search(t.Context(), "c", "opening hours", emb, 5)
	if err != nil || len(hits) != 2 || hits[0].Source != "b.md" || hits[0].StartLine != 7 {
		t.Errorf("hits %+v, %v; want both copies at b.md:7", hits, err)
	}
}

func TestUpdateEmbedderFailureLeavesIndex(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	good := &counting{Embedder: &knowledge.Local{}}
	chunks := readChunks(t, sourcesDir, patterns)
	if _, err := x.Update(ctx, "help", chunks, good); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, tb := range []string{"chunks", "vectors", "chunks_fts", "collections"} {
		before[tb] = count(t, x, tb)
	}
	var gen0 int64
	x.read.QueryRow(`SELECT generation FROM collections`).Scan(&gen0)
	query := "how long does a refund take"
	want, err := x.Search(ctx, "help", query, good, 5)
	if err != nil {
		t.Fatal(err)
	}

	// Enough new chunks for two batches: the first is stored, the second fails.
	more := chunks[: len(chunks)-1 : len(chunks)-1]
	for i := range index.EmbedBatch + 10 {
		more = append(more, knowledge.Chunk{Source: "extra.txt", StartLine: i + 1, EndLine: i + 1,
			Text: fmt.Sprintf("extra passage %d about refunds", i), Kind: knowledge.ChunkText, Hash: fmt.Sprintf("extra-%d", i)})
	}
	bad := &counting{Embedder: &knowledge.Local{}, failOn: 2}
	_, err = x.Update(ctx, "help", more, bad)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("update with a failing embedder: %v", err)
	}
	if bad.texts != index.EmbedBatch {
		t.Errorf("%d texts embedded before the failure, want %d", bad.texts, index.EmbedBatch)
	}
	for tb, n := range before {
		if got := count(t, x, tb); got != n {
			t.Errorf("%s: %d rows after the failed update, want %d", tb, got, n)
		}
	}
	var gen1 int64
	x.read.QueryRow(`SELECT generation FROM collections`).Scan(&gen1)
	if gen1 != gen0 {
		t.Errorf("generation %d, want %d", gen1, gen0)
	}
	got, err := x.Search(ctx, "help", query, good, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Local's vectors may differ in the last bit between calls, so scores are
	// compared with a tolerance.
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = fmt.Sprint(g.Chunk) == fmt.Sprint(w.Chunk) && math.Abs(g.Score-w.Score) < 1e-9 &&
			math.Abs(float64(g.VectorScore-w.VectorScore)) < 1e-5 && math.Abs(g.BM25-w.BM25) < 1e-9
	}
	if !same {
		t.Errorf("search after the failed update:\n%+v\nwant\n%+v", got, want)
	}
}

func TestEmbedderMismatch(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	chunks := readChunks(t, sourcesDir, patterns)
	if _, err := x.Update(ctx, "help", chunks, &knowledge.Local{}); err != nil {
		t.Fatal(err)
	}
	other, err := knowledge.NewLocal(128)
	if err != nil {
		t.Fatal(err)
	}
	const msg = "the index of collection help was built by local:v1:dim=256; this agent uses local:v1:dim=128: run agentrun index to rebuild it"
	check := func(op string, err error) {
		t.Helper()
		var mismatch *index.EmbedderMismatchError
		if !errors.As(err, &mismatch) || mismatch.Index != "local:v1:dim=256" || mismatch.Agent != "local:v1:dim=128" {
			t.Errorf("%s: %v, want *EmbedderMismatchError", op, err)
		} else if err.Error() != msg {
			t.Errorf("%s: %q\nwant %q", op, err, msg)
		}
	}
	_, err = x.Update(ctx, "help", chunks, other)
	check("Update", err)
	_, err = x.Search(ctx, "help", "refund", other, 3)
	check("Search", err)
	_, _, err = x.FAQ(ctx, "help", "refund", other)
	check("FAQ", err)

	emb := &counting{Embedder: other}
	st, err := x.Rebuild(ctx, "help", chunks, emb)
	if n := distinct(chunks); err != nil || st.Embedded != n || st.Kept != 0 {
		t.Fatalf("Rebuild: %+v, %v; want all %d embedded", st, err, n)
	}
	var mixed int
	x.read.QueryRow(`SELECT count(*) FROM vectors WHERE embedder <> ? OR dimensions <> 128`, other.ID()).Scan(&mixed)
	if mixed != 0 {
		t.Errorf("%d vectors of another embedder after Rebuild", mixed)
	}
	if hits, err := x.Search(ctx, "help", "refund", other, 3); err != nil || len(hits) == 0 {
		t.Errorf("search after Rebuild: %v, %v", hits, err)
	}
	_, err = x.Search(ctx, "help", "refund", &knowledge.Local{}, 3)
	var mismatch *index.EmbedderMismatchError
	if !errors.As(err, &mismatch) {
		t.Errorf("the old embedder after Rebuild: %v", err)
	}
}

func TestNotIndexed(t *testing.T) {
	x, _ := openIndex(t)
	_, err := x.Search(t.Context(), "nope", "refund", &knowledge.Local{}, 3)
	if !errors.Is(err, index.ErrNotIndexed) || !strings.Contains(err.Error(), "agentrun index") {
		t.Errorf("Search of a collection never indexed: %v", err)
	}
}

func TestSearch(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	if _, err := x.Update(ctx, "help", readChunks(t, sourcesDir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	// Another collection in the same file is never returned.
	if _, err := x.Update(ctx, "other", []knowledge.Chunk{{Source: "x.txt", Text: "Refunds reach your card in 3-5 working days.", Kind: knowledge.ChunkText, Hash: "x"}}, emb); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query, source, heading, text string
	}{
		{"when does the refund reach my card", "", "", "3-5 working days"}, // the article or the FAQ answer
		{"can I get a refund for only some of the items", "help/refunds.md", "Refunds › How to ask › Partial refunds", ""},
		{"what are the opening hours of the shop", "notes.txt", "", "Opening hours"},
		{"contact email", "help/refunds.md", "Contact", ""},
		{"运费多少钱", "help/shipping_zh.md", "配送 › 运费", ""},
		{"配送需要多长时间", "help/shipping_zh.md", "配送 › 配送时间", ""},
	}
	for _, tt := range tests {
		hits, err := x.Search(ctx, "help", tt.query, emb, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			t.Errorf("%q: no hits", tt.query)
			continue
		}
		h := hits[0]
		if (tt.source != "" && h.Source != tt.source) || (tt.heading != "" && h.Heading != tt.heading) || !strings.Contains(h.Text, tt.text) {
			t.Errorf("%q: top hit %s %q %q (score %.4f, vector %.3f, bm25 %.2f)", tt.query, h.Source, h.Heading, h.Text, h.Score, h.VectorScore, h.BM25)
		}
		for i, h := range hits {
			if i > 0 && h.Score > hits[i-1].Score {
				t.Errorf("%q: hits not in score order", tt.query)
			}
			if h.Hash == "" || h.Kind == "" || h.StartLine == 0 {
				t.Errorf("%q: hit without its chunk fields: %+v", tt.query, h)
			}
		}
	}
	// An FAQ entry is found by its words, beside the passages: not crowding them out
	// by its question's vector.
	hits, err := x.Search(ctx, "help", "订单怎么取消", emb, 3)
	if err != nil || !slices.ContainsFunc(hits, func(h index.Hit) bool { return h.Source == "faq.yaml" && strings.Contains(h.Text, "取消") }) {
		t.Errorf("an FAQ question's entry is not among its hits: %+v, %v", hits, err)
	}
	if hits, err := x.Search(ctx, "help", `"quoted" AND OR NEAR( * ^ -`, emb, 3); err != nil {
		t.Errorf("FTS operators in a query: %v, %v", hits, err)
	}
	if hits, err := x.Search(ctx, "help", "", emb, 3); err != nil {
		t.Errorf("empty query: %v, %v", hits, err)
	}
}

func TestFAQ(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	if _, err := x.Update(ctx, "help", readChunks(t, sourcesDir, patterns), emb); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query, question string
		hit             bool
	}{
		{"How long does the refund take?", "How long does a refund take?", true},
		{"when will i get my money back", "When will I get my money back?", true},
		{"怎样取消订单？", "", true},
		{"订单能不能取消", "", true},
		{"What is the capital of France?", "", false},
		{"明天天气怎么样", "", false},
	}
	for _, tt := range tests {
		h, ok, err := x.FAQ(ctx, "help", tt.query, emb)
		if err != nil || !ok {
			t.Fatalf("%q: %v, %v", tt.query, ok, err)
		}
		if h.Kind != knowledge.ChunkFAQ || h.Question == "" {
			t.Errorf("%q: %+v is not an FAQ entry with its question", tt.query, h)
		}
		if got := h.VectorScore >= knowledge.DefaultCacheThreshold; got != tt.hit {
			t.Errorf("%q: best %q score %.3f, want hit=%v at %.2f", tt.query, h.Question, h.VectorScore, tt.hit, knowledge.DefaultCacheThreshold)
		}
		if tt.hit && tt.question != "" && h.Question != tt.question {
			t.Errorf("%q: matched %q, want %q", tt.query, h.Question, tt.question)
		}
		if tt.hit && tt.question == "" && !strings.Contains(h.Text, "取消") {
			t.Errorf("%q: matched %q → %q", tt.query, h.Question, h.Text)
		}
		t.Logf("%q → %q %.3f", tt.query, h.Question, h.VectorScore)
	}
	// A collection without FAQ entries.
	if _, err := x.Update(ctx, "text", readChunks(t, sourcesDir, []string{"notes.txt"}), emb); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := x.FAQ(ctx, "text", "opening hours", emb); ok || err != nil {
		t.Errorf("FAQ of a collection without entries: %v, %v", ok, err)
	}
}

func TestSearchSeesOtherProcessUpdate(t *testing.T) {
	x, path := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	c := knowledge.Chunk{Source: "a.txt", StartLine: 1, EndLine: 1, Text: "Parcels go out on Mondays.", Kind: knowledge.ChunkText, Hash: "a"}
	if _, err := x.Update(ctx, "c", []knowledge.Chunk{c}, emb); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Search(ctx, "c", "parcels", emb, 1); err != nil { // fills the cache
		t.Fatal(err)
	}
	y, err := Open(path) // another process, as far as x's cache knows
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	d := knowledge.Chunk{Source: "b.txt", StartLine: 1, EndLine: 1, Text: "Refunds take three days.", Kind: knowledge.ChunkText, Hash: "b"}
	if _, err := y.Update(ctx, "c", []knowledge.Chunk{d}, emb); err != nil {
		t.Fatal(err)
	}
	hits, err := x.Search(ctx, "c", "refunds", emb, 5)
	if err != nil || len(hits) != 1 || hits[0].Source != "b.txt" || hits[0].VectorScore <= 0 {
		t.Errorf("after another writer's update: %+v, %v", hits, err)
	}
}

func TestConcurrentSearchAndUpdate(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	chunks := readChunks(t, sourcesDir, patterns)
	if _, err := x.Update(ctx, "help", chunks, emb); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 20 {
				if _, err := x.Search(ctx, "help", "refund", emb, 3); err != nil {
					t.Error(err)
					return
				}
				if i == 0 {
					if _, err := x.Update(ctx, "help", chunks[1:], emb); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestTermsAndQuery(t *testing.T) {
	if got, want := ftsText("Refunds: 3-5 days! 配送时间 Policies boxes"), "refund 3 5 day 配送 送时 时间 policy box"; got != want {
		t.Errorf("ftsText = %q, want %q", got, want)
	}
	if got, want := ftsQuery(index.QueryTerms(`a "b" a 好`)), `"a" OR "b" OR "好"`; got != want {
		t.Errorf("ftsQuery = %q, want %q", got, want)
	}
}
