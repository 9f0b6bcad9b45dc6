package agentrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentrun/agentrun/runtime/knowledge"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/spec"
)

// KnowledgeSet is a labelled evaluation set of an agent's knowledge: questions
// for its FAQ cache, each with the FAQ entry that answers it or none, and
// questions for retrieval, each with the section that answers it
// (docs/knowledge.md, "Evaluating the cache and retrieval").
type KnowledgeSet struct {
	Collection string          `yaml:"collection"`
	Intent     string          `yaml:"intent"` // the intent whose cache answers; "" the one with a cache
	Cache      []CacheCase     `yaml:"cache"`
	Retrieval  []RetrievalCase `yaml:"retrieval"`
}

// CacheCase is a question for the FAQ cache. FAQ is the `question` of the entry
// whose answer answers it; nil for a question no entry answers.
type CacheCase struct {
	Q    string  `yaml:"q"`
	FAQ  *string `yaml:"faq"`
	Lang string  `yaml:"lang"`
	Kind string  `yaml:"kind"`
	Why  string  `yaml:"why"`
}

// RetrievalCase is a question for retrieval and the section that answers it: the
// source file's name and the section's own heading (an FAQ entry's question).
type RetrievalCase struct {
	Q       string `yaml:"q"`
	Source  string `yaml:"source"`
	Heading string `yaml:"heading"`
	Lang    string `yaml:"lang"`
}

// LoadKnowledgeSet reads an evaluation set. Its problems — an unknown key, a
// value of the wrong type, a question without its text or a retrieval question
// without its source — are a spec.Diagnostics error, each at its line.
func LoadKnowledgeSet(file string) (*KnowledgeSet, error) {
	data, err := spec.ReadFile(file, spec.MaxFileSize)
	if err != nil {
		return nil, err
	}
	at := func(line int, msg string) spec.Diagnostic {
		return spec.Diagnostic{Severity: spec.Error, Pos: spec.Pos{File: file, Line: max(line, 1), Col: 1}, Message: msg}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var set KnowledgeSet
	if err := dec.Decode(&set); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, spec.Diagnostics{at(yamlErrorLine(err.Error()), err.Error())}
		}
		var ds spec.Diagnostics
		for _, e := range te.Errors {
			ds = append(ds, at(yamlErrorLine(e), e))
		}
		return nil, ds
	}
	var doc struct {
		Cache     []yaml.Node `yaml:"cache"`
		Retrieval []yaml.Node `yaml:"retrieval"`
	}
	_ = yaml.Unmarshal(data, &doc) // it decoded above
	var ds spec.Diagnostics
	for i, c := range set.Cache {
		if strings.TrimSpace(c.Q) == "" {
			ds = append(ds, at(doc.Cache[i].Line, fmt.Sprintf("cache[%d]: q is empty", i)))
		}
	}
	for i, c := range set.Retrieval {
		if strings.TrimSpace(c.Q) == "" || c.Source == "" {
			ds = append(ds, at(doc.Retrieval[i].Line, fmt.Sprintf("retrieval[%d]: q and source are required", i)))
		}
	}
	if len(ds) > 0 {
		return nil, ds
	}
	return &set, nil
}

// yamlErrorLine is the line a YAML error names ("yaml: line 7: …"), 1 if none.
func yamlErrorLine(msg string) int {
	_, rest, ok := strings.Cut(msg, "line ")
	if !ok {
		return 1
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return max(n, 1)
}

// CacheScores count a cache's answers to a set's questions.
type CacheScores struct {
	Questions int `json:"questions"`
	Positives int `json:"positives"` // questions an entry answers
	// Hits answered with the right entry; False answered with a wrong one, or a
	// question no entry answers.
	Hits  int `json:"hits"`
	False int `json:"false_hits"`
}

// Precision is the share of the cache's answers that were right (1 with none).
func (s CacheScores) Precision() float64 { return ratio(s.Hits, s.Hits+s.False, 1) }

// Recall is the share of the answerable questions answered right.
func (s CacheScores) Recall() float64 { return ratio(s.Hits, s.Positives, 0) }

// F1 is the harmonic mean of precision and recall.
func (s CacheScores) F1() float64 {
	p, r := s.Precision(), s.Recall()
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

func ratio(a, b int, none float64) float64 {
	if b == 0 {
		return none
	}
	return float64(a) / float64(b)
}

// CurvePoint is the cache's scores at one threshold, with the precision gates and
// by score alone.
type CurvePoint struct {
	Threshold  float64     `json:"threshold"`
	Gated      CacheScores `json:"gated"`
	ScoreAlone CacheScores `json:"score_alone"`
}

// CacheResult is one cache question's outcome.
type CacheResult struct {
	CacheCase
	Check *CacheCheckResult `json:"check"`
	Right bool              `json:"right"` // the cache did what the label says
}

// CacheCheckResult is what the cache did with a question: its closest entry's
// question, score and the gates' verdict, and whether it answered.
type CacheCheckResult struct {
	Entry    string             `json:"entry,omitempty"` // the closest entry's question
	Score    float64            `json:"score"`
	Verdict  *knowledge.Verdict `json:"verdict,omitempty"`
	Answered bool               `json:"answered"`
	Refused  string             `json:"refused,omitempty"`
}

// RetrievalScores rank a set's retrieval questions.
type RetrievalScores struct {
	Questions int     `json:"questions"`
	HitAt1    float64 `json:"hit_at_1"`
	HitAt3    float64 `json:"hit_at_3"`
	HitAt5    float64 `json:"hit_at_5"`
	MRR       float64 `json:"mrr"` // of the first relevant passage within the top 10
}

// KnowledgeEval is an evaluation of an agent's knowledge on a set.
type KnowledgeEval struct {
	Intent    string                 `json:"intent"`
	Threshold float64                `json:"threshold"`
	Cache     CacheScores            `json:"cache"`
	CacheLang map[string]CacheScores `json:"cache_by_lang"`
	Curve     []CurvePoint           `json:"curve"`
	Results   []CacheResult          `json:"results"`
	// Retrieval and BM25 are the hybrid search's ranking and plain BM25's over the
	// same chunks, by language ("all" for every question).
	Retrieval map[string]RetrievalScores `json:"retrieval"`
	BM25      map[string]RetrievalScores `json:"bm25"`
}

// EvalKnowledge puts the set's questions to agent's cache (as an anonymous user:
// the FAQ and the shared learned entries) and to its retrieval, and scores them.
func EvalKnowledge(ctx context.Context, a *Agent, set *KnowledgeSet) (*KnowledgeEval, error) {
	k := a.Knowledge()
	if k == nil {
		return nil, errors.New("the agent has no knowledge")
	}
	intent, err := evalIntent(a, set)
	if err != nil {
		return nil, err
	}
	ev := &KnowledgeEval{Intent: intent, CacheLang: map[string]CacheScores{}}
	if intent != "" {
		if err := ev.evalCache(ctx, a, set); err != nil {
			return nil, err
		}
	}
	if len(set.Retrieval) > 0 {
		if err := ev.evalRetrieval(ctx, a, k, set); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// evalIntent is the intent whose cache the set's questions go to: the set's, or
// the one with a cache on the set's collection; "" when the set has no cache
// questions.
func evalIntent(a *Agent, set *KnowledgeSet) (string, error) {
	switch {
	case len(set.Cache) == 0:
		return "", nil
	case set.Intent != "":
		return set.Intent, CheckIntent(a.Spec, set.Intent)
	}
	return CacheIntent(a, set.Collection)
}

// CacheIntent is the one intent of a with an FAQ cache (on collection, unless
// it is ""): what a command asks when it is not told which.
func CacheIntent(a *Agent, collection string) (string, error) {
	var cached []string
	for _, in := range a.Settings().Intents {
		if in.Cache != nil && (collection == "" || in.Cache.Collection == collection) {
			cached = append(cached, in.Name)
		}
	}
	switch len(cached) {
	case 0:
		if collection != "" {
			return "", fmt.Errorf("no intent has a cache on collection %q", collection)
		}
		return "", errors.New("no intent has a cache")
	case 1:
		return cached[0], nil
	}
	return "", fmt.Errorf("intents %s have a cache: say which", strings.Join(cached, ", "))
}

// curveThresholds are the thresholds of the curve.
var curveThresholds = []float64{0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.76, 0.8, 0.85, 0.9, 0.95}

func (ev *KnowledgeEval) evalCache(ctx context.Context, a *Agent, set *KnowledgeSet) error {
	judged := false // verify: judge: a hit refused only for words its entry lacks goes to the judge
	for _, in := range a.Settings().Intents {
		if in.Name == ev.Intent && in.Cache != nil {
			ev.Threshold, judged = in.Cache.Threshold, in.Cache.Verify == spec.VerifyJudge
		}
	}
	ev.Curve = make([]CurvePoint, len(curveThresholds))
	for i, t := range curveThresholds {
		ev.Curve[i].Threshold = t
	}
	for _, c := range set.Cache {
		check, err := a.CheckCache(ctx, ev.Intent, c.Q, "")
		if err != nil {
			return fmt.Errorf("cache question %q: %w", c.Q, err)
		}
		res := CacheResult{CacheCase: c, Check: &CacheCheckResult{Answered: check.Answers, Refused: check.Refused}}
		right := false // the closest entry is the labelled one
		if h := check.Closest; h != nil {
			res.Check.Entry, res.Check.Score, res.Check.Verdict = entryQuestion(h), h.Score, h.Verdict
			right = c.FAQ != nil && entryQuestion(h) == *c.FAQ
		}
		res.Right = check.Answers == right && (check.Answers || c.FAQ == nil)
		ev.Results = append(ev.Results, res)
		lang := ev.CacheLang[c.Lang]
		for _, s := range []*CacheScores{&ev.Cache, &lang} {
			s.count(c.FAQ != nil, check.Answers, right)
		}
		ev.CacheLang[c.Lang] = lang
		for i := range ev.Curve {
			p := &ev.Curve[i]
			above := check.Closest != nil && check.Closest.Score >= p.Threshold
			p.ScoreAlone.count(c.FAQ != nil, above, right)
			p.Gated.count(c.FAQ != nil, above && passes(check.Closest.Verdict, judged), right)
		}
	}
	return nil
}

// passes reports whether a hit with verdict v answers, if the judge, when there
// is one for the grey zone, confirms it.
func passes(v *knowledge.Verdict, judged bool) bool {
	return v != nil && (v.Passed || judged && v.Debatable())
}

// entryQuestion is an FAQ entry's own question (its first), or the learned
// entry's.
func entryQuestion(h *knowledge.CacheHit) string {
	if len(h.Questions) > 0 {
		return h.Questions[0]
	}
	return h.Question
}

func (s *CacheScores) count(positive, answered, right bool) {
	s.Questions++
	if positive {
		s.Positives++
	}
	switch {
	case answered && right:
		s.Hits++
	case answered:
		s.False++
	}
}

// evalRank is how many passages a ranking is read to for MRR.
const evalRank = 10

func (ev *KnowledgeEval) evalRetrieval(ctx context.Context, a *Agent, k knowledge.Knowledge, set *KnowledgeSet) error {
	i := slices.IndexFunc(a.Spec.Knowledge.Collections, func(c spec.Collection) bool { return c.Name == set.Collection })
	if i < 0 {
		return fmt.Errorf("the spec has no collection %q", set.Collection)
	}
	src, err := readCollection(a.Spec, &a.Spec.Knowledge.Collections[i])
	if err != nil {
		return err
	}
	bm25 := newBM25(src.chunks)
	hybrid, plain := map[string][]int{}, map[string][]int{}
	for _, c := range set.Retrieval {
		passages, err := k.Retrieve(ctx, set.Collection, c.Q, evalRank, 0)
		if err != nil {
			return fmt.Errorf("retrieval question %q: %w", c.Q, err)
		}
		rank := 0
		for i, p := range passages {
			if relevant(c, p.Source, p.Heading) {
				rank = i + 1
				break
			}
		}
		bmRank := 0
		for i, ch := range bm25.rank(c.Q, evalRank) {
			if relevant(c, ch.Source, ch.Heading) {
				bmRank = i + 1
				break
			}
		}
		for _, lang := range []string{"all", c.Lang} {
			hybrid[lang] = append(hybrid[lang], rank)
			plain[lang] = append(plain[lang], bmRank)
		}
	}
	ev.Retrieval, ev.BM25 = scoreRanks(hybrid), scoreRanks(plain)
	return nil
}

// relevant reports whether a passage of source under heading is the section c
// names: the same file, and the heading path's last heading the one named.
func relevant(c RetrievalCase, source, heading string) bool {
	if path.Base(source) != path.Base(c.Source) {
		return false
	}
	if c.Heading == "" {
		return true
	}
	parts := strings.Split(heading, knowledge.HeadingSeparator)
	return strings.TrimSpace(parts[len(parts)-1]) == strings.TrimSpace(c.Heading)
}

// scoreRanks scores the rank of each question's first relevant passage (0 none).
func scoreRanks(byLang map[string][]int) map[string]RetrievalScores {
	out := map[string]RetrievalScores{}
	for lang, ranks := range byLang {
		var s RetrievalScores
		s.Questions = len(ranks)
		for _, r := range ranks {
			if r == 0 {
				continue
			}
			s.MRR += 1 / float64(r)
			for _, at := range []struct {
				k int
				v *float64
			}{{1, &s.HitAt1}, {3, &s.HitAt3}, {5, &s.HitAt5}} {
				if r <= at.k {
					*at.v++
				}
			}
		}
		n := float64(max(s.Questions, 1))
		s.HitAt1, s.HitAt3, s.HitAt5, s.MRR = s.HitAt1/n, s.HitAt3/n, s.HitAt5/n, s.MRR/n
		out[lang] = s
	}
	return out
}

// bm25 is plain Okapi BM25 (k1 1.2, b 0.75) over chunks' full-text terms, the
// baseline an evaluation compares the hybrid search with.
type bm25 struct {
	chunks []knowledge.Chunk
	tf     []map[string]int
	length []int
	df     map[string]int
	avg    float64
}

func newBM25(chunks []knowledge.Chunk) *bm25 {
	b := &bm25{chunks: chunks, df: map[string]int{}}
	total := 0
	for _, c := range chunks {
		tf := map[string]int{}
		terms := kindex.SearchTerms(c)
		for _, t := range terms {
			tf[t]++
		}
		for t := range tf {
			b.df[t]++
		}
		b.tf, b.length = append(b.tf, tf), append(b.length, len(terms))
		total += len(terms)
	}
	b.avg = float64(total) / float64(max(len(chunks), 1))
	return b
}

// rank is the n best chunks for query, best first (ties in chunk order).
func (b *bm25) rank(query string, n int) []knowledge.Chunk {
	const k1, bb = 1.2, 0.75
	type scored struct {
		i     int
		score float64
	}
	var out []scored
	terms := kindex.QueryTerms(query)
	for i, tf := range b.tf {
		s := 0.0
		for _, t := range terms {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			df := float64(b.df[t])
			idf := math.Log(1 + (float64(len(b.tf))-df+0.5)/(df+0.5))
			s += idf * f * (k1 + 1) / (f + k1*(1-bb+bb*float64(b.length[i])/b.avg))
		}
		if s > 0 {
			out = append(out, scored{i, s})
		}
	}
	slices.SortStableFunc(out, func(x, y scored) int {
		switch {
		case x.score > y.score:
			return -1
		case x.score < y.score:
			return 1
		}
		return 0
	})
	chunks := make([]knowledge.Chunk, 0, min(n, len(out)))
	for _, s := range out[:min(n, len(out))] {
		chunks = append(chunks, b.chunks[s.i])
	}
	return chunks
}
