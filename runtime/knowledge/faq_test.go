package knowledge

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type faqPair struct {
	Lang     string `yaml:"lang"`
	FAQ      string `yaml:"faq"`
	Question string `yaml:"question"`
	Hit      bool   `yaml:"hit"`
	Kind     string `yaml:"kind"`
}

func loadFAQPairs(t testing.TB) []faqPair {
	t.Helper()
	data, err := os.ReadFile("testdata/faq_pairs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Pairs []faqPair `yaml:"pairs"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc.Pairs
}

type scoredPair struct {
	faqPair
	score float32
}

func scorePairs(t testing.TB, e Embedder, pairs []faqPair) []scoredPair {
	t.Helper()
	out := make([]scoredPair, len(pairs))
	for i, p := range pairs {
		vs, err := e.Embed(context.Background(), []string{p.FAQ, p.Question})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = scoredPair{p, Dot(vs[0], vs[1])}
	}
	return out
}

// rates are the share of must-hit pairs scoring at or above threshold (hit rate) and
// the share of must-not pairs doing so (false-hit rate).
func rates(scored []scoredPair, threshold float32) (hit, falseHit float64, nHit, nMiss int) {
	var hits, falseHits int
	for _, s := range scored {
		if s.Hit {
			nHit++
			if s.score >= threshold {
				hits++
			}
		} else {
			nMiss++
			if s.score >= threshold {
				falseHits++
			}
		}
	}
	return float64(hits) / float64(nHit), float64(falseHits) / float64(nMiss), nHit, nMiss
}

func TestFAQPairsLabelledSet(t *testing.T) {
	pairs := loadFAQPairs(t)
	if len(pairs) < 100 {
		t.Fatalf("the labelled set has %d pairs, want at least 100", len(pairs))
	}
	langs := map[string]int{}
	for i, p := range pairs {
		langs[p.Lang]++
		if p.FAQ == "" || p.Question == "" {
			t.Errorf("pair %d: faq and question are required", i)
		}
		wantKinds := []string{"near_miss", "negation", "same_words"}
		if p.Hit {
			wantKinds = []string{"paraphrase", "word_order", "typo", "colloquial"}
		}
		if !slices.Contains(wantKinds, p.Kind) {
			t.Errorf("pair %d (%q): kind %q with hit %v, want one of %v", i, p.Question, p.Kind, p.Hit, wantKinds)
		}
	}
	if langs["en"] == 0 || langs["zh"] == 0 || len(langs) != 2 {
		t.Errorf("languages %v, want en and zh only", langs)
	}
}

// TestFAQCacheThreshold measures Local on the labelled set at DefaultCacheThreshold.
// Run with -v for the figures at other thresholds and the pairs on the wrong side.
func TestFAQCacheThreshold(t *testing.T) {
	pairs := loadFAQPairs(t)
	scored := scorePairs(t, &Local{}, pairs)

	for th := float32(0.50); th < 0.955; th += 0.025 {
		hit, falseHit, _, _ := rates(scored, th)
		t.Logf("threshold %.2f: hit rate %5.1f%%  false-hit rate %5.1f%%", th, 100*hit, 100*falseHit)
	}
	byKind := map[string][2]int{}
	for _, s := range scored {
		k := byKind[s.Lang+"/"+s.Kind]
		k[1]++
		if s.score >= DefaultCacheThreshold {
			k[0]++
		}
		byKind[s.Lang+"/"+s.Kind] = k
		if (s.score >= DefaultCacheThreshold) != s.Hit {
			t.Logf("wrong side: %.3f hit=%v %s %q ~ %q", s.score, s.Hit, s.Kind, s.FAQ, s.Question)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		t.Logf("%-14s %d/%d at or above the threshold", k, byKind[k][0], byKind[k][1])
	}

	hit, falseHit, nHit, nMiss := rates(scored, DefaultCacheThreshold)
	t.Logf("at DefaultCacheThreshold %.2f: hit rate %.1f%% of %d, false-hit rate %.1f%% of %d",
		DefaultCacheThreshold, 100*hit, nHit, 100*falseHit, nMiss)
	if falseHit > 0.01 {
		t.Errorf("false-hit rate %.1f%%, want at most 1%%", 100*falseHit)
	}
	// The floor sits a little under the measured rate (75.0% when set: 63 of 84), so a
	// change to Local that loses paraphrases fails here rather than quietly making the
	// cache useless.
	if hit < minHitRate {
		t.Errorf("hit rate %.1f%%, want at least %.0f%%", 100*hit, 100*minHitRate)
	}

	// What a run serves: the hits that also pass the precision gates, each FAQ
	// question an entry with no variants and no answer. Below 0.70 a word-order
	// swap gets through (0.67: "can I pay for my order after changing the
	// items" ~ "Can I change the items in my order after paying?").
	var gatedHits, gatedFalse int
	for _, s := range scored {
		if s.score < DefaultCacheThreshold || !CheckHit(s.Question, &CacheHit{Kind: CacheEntryFAQ, Question: s.FAQ}).Passed {
			continue
		}
		if s.Hit {
			gatedHits++
		} else {
			gatedFalse++
			t.Errorf("a must-not pair passes the gates: %.3f %q ~ %q", s.score, s.FAQ, s.Question)
		}
	}
	t.Logf("with the gates: %d of %d must-hit pairs served, %d of %d must-not", gatedHits, nHit, gatedFalse, nMiss)
}

const minHitRate = 0.70

// TestFAQTop1 checks the cache's real question: among all the set's FAQ questions,
// is the nearest one to a must-hit question its own FAQ?
func TestFAQTop1(t *testing.T) {
	pairs := loadFAQPairs(t)
	e := &Local{}
	var faqs []string
	for _, p := range pairs {
		if !slices.Contains(faqs, p.FAQ) {
			faqs = append(faqs, p.FAQ)
		}
	}
	faqVecs, err := e.Embed(context.Background(), faqs)
	if err != nil {
		t.Fatal(err)
	}
	var right, total int
	for _, p := range pairs {
		if !p.Hit {
			continue
		}
		total++
		q, _ := e.Embed(context.Background(), []string{p.Question})
		best, bestScore := -1, float32(-2)
		for i, v := range faqVecs {
			if s := Dot(q[0], v); s > bestScore {
				best, bestScore = i, s
			}
		}
		if faqs[best] == p.FAQ {
			right++
		} else {
			t.Logf("top-1 of %q is %q, want %q", p.Question, faqs[best], p.FAQ)
		}
	}
	t.Logf("top-1 among %d FAQ questions: %d/%d right", len(faqs), right, total)
	if float64(right) < 0.95*float64(total) {
		t.Errorf("top-1 right for %d of %d must-hit questions, want at least 95%%", right, total)
	}
}

// TestFAQDimensions logs the figures at other dimensions, the measurement behind
// DefaultLocalDimensions: for each, the best hit rate with no false hit.
func TestFAQDimensions(t *testing.T) {
	pairs := loadFAQPairs(t)
	for _, dims := range []int{128, 256, 384, 512, 768, 1024, 2048} {
		l, err := NewLocal(dims)
		if err != nil {
			t.Fatal(err)
		}
		scored := scorePairs(t, l, pairs)
		var maxMiss float32 = -1
		for _, s := range scored {
			if !s.Hit {
				maxMiss = max(maxMiss, s.score)
			}
		}
		th := maxMiss + 0.005
		hit, _, _, _ := rates(scored, th)
		t.Logf("dims %4d: highest must-not score %.3f; above it hit rate %.1f%%", dims, maxMiss, 100*hit)
	}
}
