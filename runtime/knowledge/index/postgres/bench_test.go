package postgres

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index/indextest"
	"github.com/agentrun/agentrun/runtime/knowledge/index/sqlite"
)

// The synthetic corpus of every storage's benchmarks (same seed, same chunks).
var (
	synthetic     = indextest.Synthetic
	benchQueries  = indextest.Queries
	benchQuestion = indextest.Question
)

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
