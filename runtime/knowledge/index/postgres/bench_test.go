package postgres

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index/sqlite"
)

// The synthetic corpus of runtime/knowledge/index/sqlite's benchmarks (same seed, same chunks).

var benchWords = strings.Fields(`order refund delivery courier parcel address payment card invoice account
password coupon discount voucher store opening hours holiday closed menu allergen vegetarian spicy
rice noodle soup drink tea coffee cake late missing wrong damaged cold replace cancel change phone
email receipt tax member points level gift wrap driver tip rating review complaint manager branch
city district express standard weekend morning evening minute hour day week month price fee free
minimum basket checkout app website login verify code message notification language setting`)

var benchHan = []rune("订单退款配送地址支付发票账户密码优惠券门店营业时间节假日菜单辣米饭面条汤饮料茶咖啡蛋糕迟到丢失错误损坏取消修改电话会员积分礼品司机评价投诉城市快递运费价格")

// synthetic returns n text chunks of 60 words (English) or 80 characters (Chinese,
// one chunk in four), deterministic. Words follow Zipf's law over a vocabulary of
// 5000 (the real words above at random ranks, the rest made up), as in real text,
// so some query terms are in most chunks and some in few.
func synthetic(n int) []knowledge.Chunk {
	r := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	syllables := strings.Fields("ka lo mi re sun ta pe vo ri ang del mor tis ue ban cor")
	for i := range vocab {
		vocab[i] = syllables[r.IntN(len(syllables))] + syllables[r.IntN(len(syllables))] + syllables[r.IntN(len(syllables))]
	}
	for _, w := range benchWords {
		vocab[r.IntN(len(vocab))] = w
	}
	zipf := rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))
	out := make([]knowledge.Chunk, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		if i%4 == 3 {
			for range 80 {
				b.WriteRune(benchHan[r.IntN(len(benchHan))])
			}
		} else {
			for j := range 60 {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(vocab[zipf.Uint64()])
			}
		}
		text := b.String()
		out[i] = knowledge.Chunk{
			Source: fmt.Sprintf("doc%04d.md", i/100), Heading: fmt.Sprintf("Section %d", i%100),
			StartLine: i%100*10 + 1, EndLine: i%100*10 + 9, Text: text, Kind: knowledge.ChunkText,
			Hash: fmt.Sprintf("%016x", r.Uint64()),
		}
	}
	return out
}

var benchQueries = []string{
	"where is my parcel, the courier is late",
	"how do I get a refund for a damaged cake",
	"change the delivery address of my order",
	"opening hours on holiday weekend",
	"我的订单配送迟到了",
	"退款什么时候到账",
}

// BenchmarkSearch10k is Search (embedding the query with Local, the vector scan
// over vectors cached in process, the full-text query and the fusion) over a
// collection of 10k chunks; it logs the cold query that loads the vectors, and the
// SQLite index's time for the same queries.
func BenchmarkSearch10k(b *testing.B) {
	const n = 10_000
	x, _, _ := openIndex(b)
	ctx := b.Context()
	emb := &knowledge.Local{}
	chunks := synthetic(n)
	start := time.Now()
	if _, err := x.Update(ctx, "bench", chunks, emb); err != nil {
		b.Fatal(err)
	}
	b.Logf("postgres: index of %d chunks built in %v", n, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := x.Search(ctx, "bench", benchQueries[0], emb, 5); err != nil { // loads the vectors
		b.Fatal(err)
	}
	b.Logf("postgres: first query (loads the vectors) %v", time.Since(start).Round(time.Microsecond))

	lite, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer lite.Close()
	if _, err := lite.Update(ctx, "bench", chunks, emb); err != nil {
		b.Fatal(err)
	}
	for _, q := range benchQueries {
		lite.Search(ctx, "bench", q, emb, 5)
		t0 := time.Now()
		for range 20 {
			lite.Search(ctx, "bench", q, emb, 5)
		}
		t1 := time.Now()
		for range 20 {
			x.Search(ctx, "bench", q, emb, 5)
		}
		b.Logf("%-45q postgres %v, sqlite %v", q, (time.Since(t1) / 20).Round(time.Microsecond), (t1.Sub(t0) / 20).Round(time.Microsecond))
	}

	timings := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		hits, err := x.Search(ctx, "bench", benchQueries[i%len(benchQueries)], emb, 5)
		if err != nil || len(hits) != 5 {
			b.Fatalf("%v, %v", hits, err)
		}
		timings = append(timings, time.Since(t0))
		i++
	}
	slices.Sort(timings)
	at := func(q float64) float64 { return float64(timings[int(q*float64(len(timings)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}
