package knowledge

import (
	"context"
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
