package index

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// The int8 first pass of a scan must not change what it finds: its top chunks are
// the exact scan's, in the same order with the same scores, for questions and for
// dense (API-like) query vectors.
func TestTopMatchesTheExactScan(t *testing.T) {
	emb := &knowledge.Local{}
	chunks := synthetic(20_000)
	texts := make([]string, len(chunks))
	for i, c := range chunks {
		texts[i] = c.Text
	}
	vecs, err := emb.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	v := &vectors{dims: emb.Dimensions(), index: map[int64]int32{}}
	for i, vec := range vecs {
		v.ids = append(v.ids, int64(i+1))
		v.start = append(v.start, int32(i))
		v.data = append(v.data, vec...)
	}
	v.start = append(v.start, int32(len(vecs)))
	v.quantize()

	queries, _ := emb.Embed(t.Context(), benchQueries)
	r := rand.New(rand.NewPCG(1, 2))
	for range 4 { // dense queries: a chunk's vector plus noise
		q := slices.Clone(vecs[r.IntN(len(vecs))])
		for i := range q {
			q[i] += float32(r.NormFloat64()) * 0.02
		}
		queries = append(queries, q)
	}
	for qi, q := range queries {
		qv := newQueryVector(q)
		if qi < len(benchQueries) && !qv.sparse {
			t.Errorf("query %d: a question of the local embedder should be sparse", qi)
		}
		exact := make([]scored, len(v.ids))
		for i := range v.ids {
			exact[i] = scored{knowledge.Dot(q, v.data[i*v.dims:(i+1)*v.dims]), int32(i)}
		}
		slices.SortFunc(exact, func(a, b scored) int {
			if a.score != b.score {
				if a.score > b.score {
					return -1
				}
				return 1
			}
			return int(a.i - b.i)
		})
		got := v.top(qv, 50)
		for k := range got {
			if got[k].i != exact[k].i || abs32(got[k].score-exact[k].score) > 1e-5 {
				t.Fatalf("query %d, rank %d: top gives chunk %d (%.6f), the exact scan %d (%.6f)", qi, k, got[k].i, got[k].score, exact[k].i, exact[k].score)
			}
		}
	}
}

func abs32(x float32) float32 { return max(x, -x) }

// The FAQ scan through the inverted questions finds what the exact scan finds.
func TestBestFAQMatchesTheExactScan(t *testing.T) {
	emb := &knowledge.Local{}
	r := rand.New(rand.NewPCG(3, 4))
	var questions []string
	for i := range 1500 {
		questions = append(questions, benchQuestion(r, i))
	}
	vecs, err := emb.Embed(t.Context(), questions)
	if err != nil {
		t.Fatal(err)
	}
	v := &vectors{dims: emb.Dimensions(), index: map[int64]int32{}}
	for i := 0; i < len(vecs); i += 3 { // chunks of up to three questions: an FAQ entry and its variants
		ci := int32(len(v.ids))
		v.ids = append(v.ids, int64(ci+1))
		v.start = append(v.start, int32(i))
		v.faq = append(v.faq, ci)
		for _, vec := range vecs[i:min(i+3, len(vecs))] {
			v.data = append(v.data, vec...)
		}
	}
	v.start = append(v.start, int32(len(vecs)))
	v.quantize()
	v.invertFAQ()
	if v.faqPostings == nil {
		t.Fatal("1500 short questions were not inverted")
	}
	asked := append(slices.Clone(benchQueries), "please tell me "+questions[7], questions[1499]+"?", questions[42][:len(questions[42])/2])
	for _, a := range asked {
		q, _ := emb.Embed(t.Context(), []string{a})
		qv := newQueryVector(q[0])
		gotI, gotScore, gotRow := v.bestFAQ(qv)
		wantI, wantScore, wantRow := int32(-1), float32(-2), -1
		for _, i := range v.faq {
			for r := v.start[i]; r < v.start[i+1]; r++ {
				if s := knowledge.Dot(q[0], v.data[int(r)*v.dims:int(r+1)*v.dims]); s > wantScore {
					wantI, wantScore, wantRow = i, s, int(r-v.start[i])
				}
			}
		}
		if gotI != wantI || gotRow != wantRow || abs32(gotScore-wantScore) > 1e-5 {
			t.Errorf("%q: bestFAQ chunk %d row %d (%.5f), exact chunk %d row %d (%.5f)", a, gotI, gotRow, gotScore, wantI, wantRow, wantScore)
		}
	}
}
