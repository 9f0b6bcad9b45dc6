package knowledge

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// reportPercentiles adds the p50 and p99 of the per-iteration timings to the
// benchmark's output (ns/op is their mean).
func reportPercentiles(b *testing.B, timings []time.Duration) {
	if len(timings) == 0 {
		return
	}
	slices.Sort(timings)
	at := func(q float64) float64 { return float64(timings[int(q*float64(len(timings)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

var benchQuestions = []string{
	"how can I track my order",
	"how do i delete my acount",
	"I forgot my password, how do I reset it?",
	"我的订单物流怎么查询",
	"我想修改一下收货地址",
	"退款几天能到账",
}

func BenchmarkLocalEmbedQuestion(b *testing.B) {
	e := &Local{}
	ctx := context.Background()
	texts := make([][]string, len(benchQuestions))
	for i, q := range benchQuestions {
		texts[i] = []string{q}
	}
	timings := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		if _, err := e.Embed(ctx, texts[i%len(texts)]); err != nil {
			b.Fatal(err)
		}
		timings = append(timings, time.Since(start))
		i++
	}
	reportPercentiles(b, timings)
}

// BenchmarkCacheHit10k is the FAQ cache's path at 10k entries: embed the question with
// Local, then brute-force top-1 over a contiguous matrix of the entries' vectors.
func BenchmarkCacheHit10k(b *testing.B) {
	const entries = 10_000
	e := &Local{}
	dims := e.Dimensions()
	ctx := context.Background()

	texts := make([]string, entries)
	subjects := []string{"order", "refund", "delivery", "address", "payment", "account", "invoice", "coupon",
		"订单", "退款", "配送", "地址", "支付", "账号", "发票", "优惠券"}
	actions := []string{"track", "cancel", "change", "check", "delete", "request", "查询", "取消", "修改", "申请"}
	for i := range texts {
		texts[i] = fmt.Sprintf("how do I %s my %s number %d %s", actions[i%len(actions)], subjects[(i/len(actions))%len(subjects)], i, subjects[i%len(subjects)])
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil {
		b.Fatal(err)
	}
	matrix := make([]float32, 0, entries*dims)
	for _, v := range vecs {
		matrix = append(matrix, v...)
	}

	timings := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		q, err := e.Embed(ctx, []string{benchQuestions[i%len(benchQuestions)]})
		if err != nil {
			b.Fatal(err)
		}
		best, bestScore := -1, float32(-2)
		for j := 0; j < entries; j++ {
			if s := Dot(q[0], matrix[j*dims:(j+1)*dims]); s > bestScore {
				best, bestScore = j, s
			}
		}
		if best < 0 {
			b.Fatal("no entry found")
		}
		timings = append(timings, time.Since(start))
		i++
	}
	reportPercentiles(b, timings)
}
