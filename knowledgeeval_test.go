package agentrun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/spec"
)

const evalFAQ = `faq:
  - question: How do I cancel an order?
    variants: ["Can I cancel my order?"]
    answer: Unpaid orders can be cancelled in the order page.
  - question: How much is the delivery fee?
    variants: ["What does delivery cost?"]
    answer: Delivery costs 5 yuan, free over 30 yuan.
`

const evalArticle = `# Opening hours

## Spring Festival
During the Spring Festival the kitchen opens at noon.

## Weekdays
On weekdays we open at ten in the morning.
`

// evalWorld writes a spec whose faq intent caches the FAQ above, with intents
// before it as rules, and returns the spec's path.
func evalWorld(t *testing.T, intentsBefore string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"kb/faq.yaml": evalFAQ,
		"kb/hours.md": evalArticle,
		"agent.yaml": `version: 1
name: shop
instructions: You help the shop's customers.
model: {provider: test}
knowledge:
  index: ` + filepath.Join(dir, "index.db") + `
  collections:
    help: {sources: [kb/faq.yaml, kb/hours.md]}
intents:
` + intentsBefore + `  faq:
    kind: knowledge
    keywords: [delivery fee]
    cache: true
    rag: true
routing: {recognizer: rules, fallback: faq}
`,
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agent.yaml")
}

// A routing rule that takes FAQ questions from the cached intent is a warning at
// the rule, naming the questions; a rule that takes none is not.
func TestRulesThatStarveTheCacheAreWarned(t *testing.T) {
	path := evalWorld(t, `  cancel_order:
    kind: task
    patterns: ['(?i)cancel']
  orders:
    kind: task
    keywords: [my order 1]
`)
	loader, err := agentrun.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	res := loader.LoadFile(path)
	var warned []spec.Diagnostic
	for _, d := range res.Diagnostics {
		if strings.Contains(d.Message, "FAQ question") {
			warned = append(warned, d)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("%d warnings of starved questions, want 1: %v", len(warned), res.Diagnostics)
	}
	d := warned[0]
	want := `pattern "(?i)cancel" of intent cancel_order routes 2 FAQ questions of intent faq's cache away from it: "How do I cancel an order?", "Can I cancel my order?"`
	if d.Severity != spec.Warning || d.Path != "intents.cancel_order.patterns[0]" || d.Pos.Line != 12 || d.Pos.Col != 16 || d.Message != want {
		t.Errorf("%s %s at %d:%d: %s", d.Severity, d.Path, d.Pos.Line, d.Pos.Col, d.Message)
	}
}

// evalSet evaluates the spec at path on a set written beside it.
func evalSet(t *testing.T, path, set string) *agentrun.KnowledgeEval {
	t.Helper()
	file := filepath.Join(filepath.Dir(path), "set.yaml")
	if err := os.WriteFile(file, []byte(set), 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := agentrun.LoadKnowledgeSet(file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agentrun.Open(context.Background(), path, agentrun.Options{NoModel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ev, err := agentrun.EvalKnowledge(context.Background(), a, ks)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// The evaluation scores the cache and retrieval on a labelled set: a right hit,
// a refused near miss and a miss, and passages ranked by the hybrid search and
// by BM25.
func TestEvalKnowledge(t *testing.T) {
	ev := evalSet(t, evalWorld(t, ""), `collection: help
cache:
  - {q: "what does delivery cost?", faq: "How much is the delivery fee?", lang: en, kind: paraphrase}
  - {q: "how do I remove one dish from my order", faq: null, lang: en, kind: qualifier, why: not cancelling}
  - {q: "could you kindly explain what happens with shipping charges", faq: "How much is the delivery fee?", lang: en, kind: long}
retrieval:
  - {q: "when does the kitchen open during the Spring Festival", source: hours.md, heading: Spring Festival, lang: en}
  - {q: "weekday opening time", source: hours.md, heading: Weekdays, lang: en}
`)
	if c := ev.Cache; ev.Intent != "faq" || c.Questions != 3 || c.Positives != 2 || c.Hits != 1 || c.False != 0 || c.Precision() != 1 || c.Recall() != 0.5 {
		t.Errorf("intent %q, cache %+v", ev.Intent, c)
	}
	if r := ev.Results[1]; !r.Right || r.Check.Answered || r.Check.Verdict == nil || r.Check.Verdict.Passed {
		t.Errorf("the qualifier: %+v %+v", r, r.Check)
	}
	if len(ev.Curve) == 0 || ev.Curve[0].ScoreAlone.Questions != 3 {
		t.Errorf("curve %+v", ev.Curve)
	}
	for name, s := range map[string]agentrun.RetrievalScores{"hybrid": ev.Retrieval["all"], "bm25": ev.BM25["all"]} {
		if s.Questions != 2 || s.HitAt1 != 1 || s.MRR != 1 {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

// With verify: judge, a hit refused only for words its entry lacks is left to the
// judge, so the evaluation counts it as answered, at the threshold and on the
// curve alike; without it, it is a miss.
func TestEvalKnowledgeCountsHitsLeftToTheJudge(t *testing.T) {
	for _, verify := range []bool{false, true} {
		path := evalWorld(t, "")
		if verify {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			src = []byte(strings.Replace(string(src), "cache: true", "cache: {verify: judge}", 1) + "judge: {criteria: [The answer is right.]}\n")
			if err := os.WriteFile(path, src, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ev := evalSet(t, path, `collection: help
cache:
  - {q: "what does delivery cost nowadays", faq: "How much is the delivery fee?", lang: en, kind: colloquial}
`)
		want := 0
		if verify {
			want = 1
		}
		at := slices.IndexFunc(ev.Curve, func(p agentrun.CurvePoint) bool { return p.Threshold == ev.Threshold })
		if at < 0 {
			t.Fatalf("no point of the curve at the threshold %.2f", ev.Threshold)
		}
		if r := ev.Results[0]; ev.Cache.Hits != want || ev.Curve[at].Gated.Hits != want || r.Check.Verdict == nil || r.Check.Verdict.Gate != "extra_words" {
			t.Errorf("verify %v: %d hits, %d on the curve at %.2f, result %+v", verify, ev.Cache.Hits, ev.Curve[at].Gated.Hits, ev.Threshold, r.Check)
		}
	}
}

// A set's problems are diagnostics at their lines.
func TestLoadKnowledgeSetErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "set.yaml")
	if err := os.WriteFile(file, []byte("collection: help\ncache:\n  - {q: hi, faq: null}\n  - {q: \"\", faq: null}\nretrieval:\n  - {q: where, sorce: a.md}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := agentrun.LoadKnowledgeSet(file)
	var ds spec.Diagnostics
	if !errors.As(err, &ds) || len(ds) != 1 || ds[0].Pos.Line != 6 || !strings.Contains(ds[0].Message, "field sorce not found") {
		t.Fatalf("%v", err)
	}
	if err := os.WriteFile(file, []byte("collection: help\ncache:\n  - {q: hi, faq: null}\n  - {q: \"\", faq: null}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = agentrun.LoadKnowledgeSet(file)
	if !errors.As(err, &ds) || len(ds) != 1 || ds[0].Pos.Line != 4 || ds[0].Message != "cache[1]: q is empty" {
		t.Fatalf("%v", err)
	}
}
