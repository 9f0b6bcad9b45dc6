package sqlite

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/knowledge/index/indextest"
)

// The synthetic corpus of every storage's benchmarks (same seed, same chunks).
var (
	synthetic     = indextest.Synthetic
	benchQueries  = indextest.Queries
	benchQuestion = indextest.Question
	benchWords    = indextest.Words
)

// BenchmarkSearch100k is Search (embedding the query with Local, the vector scan, the
// FTS5 query and the fusion) over a collection of 100k chunks, vectors cached.
func BenchmarkSearch100k(b *testing.B) {
	const n = 100_000
	x, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	ctx := b.Context()
	emb := &knowledge.Local{}
	start := time.Now()
	if _, err := x.Update(ctx, "bench", synthetic(n), emb); err != nil {
		b.Fatal(err)
	}
	b.Logf("index of %d chunks built in %v", n, time.Since(start).Round(time.Millisecond))
	if _, err := x.Search(ctx, "bench", benchQueries[0], emb, 5); err != nil { // loads the vectors
		b.Fatal(err)
	}

	timings := make([]time.Duration, 0, 1024)
	perQuery := make([]time.Duration, len(benchQueries))
	i := 0
	for b.Loop() {
		t0 := time.Now()
		hits, err := x.Search(ctx, "bench", benchQueries[i%len(benchQueries)], emb, 5)
		if err != nil || len(hits) != 5 {
			b.Fatalf("%v, %v", hits, err)
		}
		timings = append(timings, time.Since(t0))
		perQuery[i%len(benchQueries)] += time.Since(t0)
		i++
	}
	for j, q := range benchQueries {
		if runs := (i - j + len(benchQueries) - 1) / len(benchQueries); runs > 0 {
			b.Logf("%-45q mean %v", q, (perQuery[j] / time.Duration(runs)).Round(time.Microsecond))
		}
	}
	slices.Sort(timings)
	at := func(q float64) float64 { return float64(timings[int(q*float64(len(timings)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

// learnMany stores n learned entries of key in one transaction (Learn commits each
// one): a third shared, the rest spread over 500 users. It returns the questions
// and their users.
func learnMany(b *testing.B, x *Index, key index.LearnedKey, emb knowledge.Embedder, n int) (questions, users []string) {
	ctx := b.Context()
	r := rand.New(rand.NewPCG(3, 4))
	questions, users = make([]string, n), make([]string, n)
	for i := range n {
		questions[i] = benchQuestion(r, i)
		if i%3 != 0 {
			users[i] = fmt.Sprintf("user-%d", r.IntN(500))
		}
	}
	vecs, err := emb.Embed(ctx, questions)
	if err != nil {
		b.Fatal(err)
	}
	tx, err := x.write.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	now := time.Now().UnixNano()
	for i := range n {
		if _, err := tx.ExecContext(ctx, `INSERT INTO learned(agent, intent, version, embedder, dimensions, user, question, answer, vector, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, key.Agent, key.Intent, key.Version, emb.ID(), emb.Dimensions(), users[i],
			questions[i], "The answer to "+questions[i]+", which is a few sentences long in practice.", index.EncodeVector(vecs[i]), now, 0); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO learned_keys(agent, intent, version, embedder, generation) VALUES (?, ?, ?, ?, 1)`,
		key.Agent, key.Intent, key.Version, emb.ID()); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return questions, users
}

// BenchmarkFAQHit10k is an FAQ-cache hit through Knowledge.CacheLookup on a
// collection of 10k FAQ entries (two questions each): embedding a paraphrase with
// Local and scanning every question; no learned entries.
func BenchmarkFAQHit10k(b *testing.B) {
	const n = 10_000
	x, _ := openIndex(b)
	ctx := b.Context()
	emb := &knowledge.Local{}
	r := rand.New(rand.NewPCG(10, 10_000))
	chunks := make([]knowledge.Chunk, n)
	asked := make([]string, n)
	for i := range chunks {
		q := benchQuestion(r, i)
		chunks[i] = knowledge.Chunk{Source: "faq.yaml", StartLine: i*4 + 1, EndLine: i*4 + 4, Kind: knowledge.ChunkFAQ,
			Questions: []string{q, "please tell me " + q}, Text: fmt.Sprintf("answer %d", i), Hash: fmt.Sprintf("%016x", r.Uint64())}
		asked[i] = q + "?"
	}
	if _, err := x.Update(ctx, "faq", chunks, emb); err != nil {
		b.Fatal(err)
	}
	k := x.Knowledge(emb, nil)
	query := func(i int) knowledge.CacheQuery {
		return knowledge.CacheQuery{Collection: "faq", Agent: "shop", Intent: "faq", Version: "v1", User: "u", Question: asked[i*37%n]}
	}
	if h, err := k.CacheLookup(ctx, query(0)); err != nil || h == nil { // loads the vectors
		b.Fatal(h, err)
	}
	timings := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		q := query(i)
		t0 := time.Now()
		h, err := k.CacheLookup(ctx, q)
		timings = append(timings, time.Since(t0))
		if err != nil || h == nil || h.Kind != knowledge.CacheEntryFAQ || h.Answer != fmt.Sprintf("answer %d", i*37%n) {
			b.Fatalf("%q: %+v, %v", q.Question, h, err)
		}
		i++
	}
	slices.Sort(timings)
	at := func(q float64) float64 { return float64(timings[int(q*float64(len(timings)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

// BenchmarkLearnedHit10k is a learned-cache hit through Knowledge.CacheLookup with
// 10k entries of the key: embedding the question with Local (the questions cycle
// through more than the memo holds, so each is embedded), reading the key's
// generation and scanning the shared entries and the user's own.
func BenchmarkLearnedHit10k(b *testing.B) {
	const n = 10_000
	x, _ := openIndex(b)
	ctx := b.Context()
	emb := &knowledge.Local{}
	key := index.LearnedKey{Agent: "shop", Intent: "faq", Version: "v1"}
	questions, users := learnMany(b, x, key, emb, n)
	k := x.Knowledge(emb, nil)
	query := func(i int) knowledge.CacheQuery {
		j := i * 37 % n // 10k/37 ≫ index.MemoSize distinct questions
		return knowledge.CacheQuery{Agent: key.Agent, Intent: key.Intent, Version: key.Version, User: users[j], Question: questions[j]}
	}
	t0 := time.Now()
	if h, err := k.CacheLookup(ctx, query(0)); err != nil || h == nil { // loads the vectors
		b.Fatal(h, err)
	}
	b.Logf("cold lookup (loading %d entries): %v", n, time.Since(t0).Round(time.Microsecond))

	timings := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		q := query(i)
		t0 := time.Now()
		h, err := k.CacheLookup(ctx, q)
		timings = append(timings, time.Since(t0))
		if err != nil || h == nil || h.Score < 0.999 {
			b.Fatalf("%q: %+v, %v", q.Question, h, err)
		}
		i++
	}
	slices.Sort(timings)
	at := func(q float64) float64 { return float64(timings[int(q*float64(len(timings)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")

	// A Learn in this process updates the cache in place of a reload.
	q := knowledge.CacheQuery{Agent: key.Agent, Intent: key.Intent, Version: key.Version, Question: "a question never asked before"}
	t0 = time.Now()
	if err := k.CacheLearn(ctx, q, "an answer", false, 0); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if h, err := k.CacheLookup(ctx, q); err != nil || h == nil || h.Answer != "an answer" {
		b.Fatal(h, err)
	}
	b.Logf("Learn %v, then a lookup %v", t1.Sub(t0).Round(time.Microsecond), time.Since(t1).Round(time.Microsecond))
}

var benchMarkdownWords = strings.Fields(`The order is shipped from our warehouse within two working days. A refund
goes back to the card used for payment. Customers may change the delivery address until the parcel
leaves. Express delivery costs extra and arrives the next day in most cities. Coupons cannot be
combined with member discounts. Opening hours differ on public holidays.`)

var benchMarkdownHan = []string{"订单将在两个工作日内从仓库发出。", "退款会退回到原支付卡。", "包裹发出前可以修改收货地址。",
	"快递需要额外运费，多数城市次日送达。", "优惠券不能与会员折扣同时使用。", "节假日营业时间有所不同。"}

// writeMarkdown writes n Markdown files of about 2 KB each under dir/docs: a title,
// sections and subsections, paragraphs of English and Chinese.
func writeMarkdown(b *testing.B, dir string, n int) {
	r := rand.New(rand.NewPCG(5, 6))
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o750); err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for i := range n {
		sb.Reset()
		fmt.Fprintf(&sb, "# Help article %d\n\n", i)
		for s := 0; sb.Len() < 2000; s++ {
			if s%2 == 0 {
				fmt.Fprintf(&sb, "## Section %d.%d %s\n\n", i, s, benchWords[r.IntN(len(benchWords))])
			} else {
				fmt.Fprintf(&sb, "### 小节 %d %s\n\n", s, benchMarkdownHan[r.IntN(len(benchMarkdownHan))])
			}
			for range 1 + r.IntN(2) {
				for range 3 + r.IntN(4) {
					if r.IntN(3) == 0 {
						sb.WriteString(benchMarkdownHan[r.IntN(len(benchMarkdownHan))])
					} else {
						w := r.IntN(len(benchMarkdownWords) - 12)
						sb.WriteString(strings.Join(benchMarkdownWords[w:w+8+r.IntN(4)], " ") + " " + benchWords[r.IntN(len(benchWords))] + ". ")
					}
				}
				sb.WriteString("\n\n")
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "docs", fmt.Sprintf("article%04d.md", i)), []byte(sb.String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexBuild1000Files is a first index of 1,000 Markdown files of about
// 2 KB: ReadSources and UpdateWith with Local, into a new file each time.
func BenchmarkIndexBuild1000Files(b *testing.B) {
	const files = 1000
	dir := b.TempDir()
	writeMarkdown(b, dir, files)
	ctx := b.Context()
	var chunks, vectors int
	run := 0
	for b.Loop() {
		run++
		x, err := Open(filepath.Join(dir, fmt.Sprintf("index%d.db", run)))
		if err != nil {
			b.Fatal(err)
		}
		cs, _, err := knowledge.ReadSources(dir, []string{"docs/*.md"}, knowledge.ChunkOptions{})
		if err != nil {
			b.Fatal(err)
		}
		st, err := x.UpdateWith(ctx, "docs", cs, &knowledge.Local{}, index.UpdateOptions{Manifest: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		x.Close()
		chunks, vectors = len(cs), st.Vectors
	}
	b.ReportMetric(float64(files*b.N)/b.Elapsed().Seconds(), "files/s")
	b.ReportMetric(float64(chunks), "chunks")
	b.Logf("%d files → %d chunks, %d vectors", files, chunks, vectors)
}
