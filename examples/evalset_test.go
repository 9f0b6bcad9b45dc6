package examples

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The evaluation set of the help centre: the questions the FAQ cache and retrieval
// are measured on. A label that names a question, file or heading that is not there
// any more would make every score on it meaningless, so this test ties the labels to
// the help centre as it is.
const evalFile = "help-center.eval.yaml"

type evalSet struct {
	Collection string          `yaml:"collection"`
	Cache      []evalCacheItem `yaml:"cache"`
	Retrieval  []evalRetrieval `yaml:"retrieval"`
}

type evalCacheItem struct {
	Q    string  `yaml:"q"`
	FAQ  *string `yaml:"faq"` // nil: a negative
	Lang string  `yaml:"lang"`
	Kind string  `yaml:"kind"`
	Why  string  `yaml:"why"`
}

type evalRetrieval struct {
	Q       string `yaml:"q"`
	Source  string `yaml:"source"`
	Heading string `yaml:"heading"`
	Lang    string `yaml:"lang"`
}

// helpCenter is what the labels may name: the FAQ's questions (and, to keep the set
// independent of them, their variants) and each article's `##` headings.
type helpCenter struct {
	questions []string            // in file order
	wordings  map[string]bool     // every question and variant, normalised
	headings  map[string][]string // article file name → its ## headings
}

// The minimums the set is written to; a smaller set measures too little to compare
// thresholds or embedders on.
const (
	minCache, minPositives, minNegatives, minPerFAQ = 160, 90, 70, 3
	minRetrieval, minRetrievalPerLang               = 45, 15
	minPositivesPerLang, minMixedPositives          = 20, 10
)

var (
	positiveKinds = []string{"paraphrase", "typo", "colloquial", "short", "long", "mixed"}
	negativeKinds = []string{"qualifier", "date", "number", "entity", "other-topic", "single-word"}
	langs         = []string{"zh", "en", "mixed"}
	// A natural-language Latin word: codes such as A1001, SPRING2025 or XM-FREE-100
	// have no lower-case run and do not make a Chinese question mixed.
	latinWord = regexp.MustCompile(`\b[A-Za-z][a-z]+\b`)
	han       = regexp.MustCompile(`\p{Han}`)
)

func normalise(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func loadHelpCenter(t *testing.T, fsys fs.FS) helpCenter {
	t.Helper()
	src, err := fs.ReadFile(fsys, "help-center/faq.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var faq struct {
		FAQ []struct {
			Question string   `yaml:"question"`
			Variants []string `yaml:"variants"`
		} `yaml:"faq"`
	}
	if err := yaml.Unmarshal(src, &faq); err != nil {
		t.Fatal(err)
	}
	hc := helpCenter{wordings: map[string]bool{}, headings: map[string][]string{}}
	for _, e := range faq.FAQ {
		hc.questions = append(hc.questions, e.Question)
		hc.wordings[normalise(e.Question)] = true
		for _, v := range e.Variants {
			hc.wordings[normalise(v)] = true
		}
	}
	articles, err := fs.Glob(fsys, "help-center/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range articles {
		text, err := fs.ReadFile(fsys, a)
		if err != nil {
			t.Fatal(err)
		}
		hs := []string{}
		for line := range strings.Lines(string(text)) {
			if h, ok := strings.CutPrefix(line, "## "); ok {
				hs = append(hs, strings.TrimSpace(h))
			}
		}
		hc.headings[path.Base(a)] = hs
	}
	return hc
}

// decodeEvalSet reads the set with strict keys, and checks that every cache item
// spells out `faq`, since a forgotten key would read as a negative.
func decodeEvalSet(src []byte) (evalSet, []string) {
	var set evalSet
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&set); err != nil {
		return set, []string{"parse: " + err.Error()}
	}
	var raw struct {
		Cache []map[string]any `yaml:"cache"`
	}
	if err := yaml.Unmarshal(src, &raw); err != nil {
		return set, []string{"parse: " + err.Error()}
	}
	var problems []string
	for i, m := range raw.Cache {
		if _, ok := m["faq"]; !ok {
			problems = append(problems, fmt.Sprintf("cache[%d]: no faq key (write faq: null for a negative)", i))
		}
	}
	return set, problems
}

// langProblem says how q's script disagrees with its lang label, or "".
func langProblem(q, lang string) string {
	hasHan, hasLatin := han.MatchString(q), latinWord.MatchString(q)
	switch {
	case !slices.Contains(langs, lang):
		return fmt.Sprintf("lang %q is not one of %v", lang, langs)
	case lang == "zh" && (!hasHan || hasLatin):
		return "lang zh needs Chinese and no English words"
	case lang == "en" && (hasHan || !hasLatin):
		return "lang en needs English and no Chinese"
	case lang == "mixed" && (!hasHan || !hasLatin):
		return "lang mixed needs both Chinese and English words"
	}
	return ""
}

// checkCache checks every cache item's labels and returns its problems and the
// counts the minimums are about.
func checkCache(set evalSet, hc helpCenter, seen map[string]int) (problems []string, counts map[string]int) {
	counts = map[string]int{}
	for i, c := range set.Cache {
		at := fmt.Sprintf("cache[%d] %q", i, c.Q)
		problems = append(problems, checkQ(at, c.Q, seen)...)
		if hc.wordings[normalise(c.Q)] {
			problems = append(problems, at+": copies an FAQ question or variant")
		}
		if p := langProblem(c.Q, c.Lang); p != "" {
			problems = append(problems, at+": "+p)
		}
		if c.FAQ == nil {
			counts["negative"]++
			counts["negative:"+c.Kind]++
			counts["negative:"+c.Lang]++
			if strings.TrimSpace(c.Why) == "" {
				problems = append(problems, at+": a negative needs why")
			}
			if !slices.Contains(negativeKinds, c.Kind) {
				problems = append(problems, fmt.Sprintf("%s: kind %q of a negative is not one of %v", at, c.Kind, negativeKinds))
			}
			continue
		}
		counts["positive"]++
		counts["positive:"+c.Kind]++
		counts["positive:"+c.Lang]++
		counts["faq:"+*c.FAQ]++
		if !slices.Contains(hc.questions, *c.FAQ) {
			problems = append(problems, fmt.Sprintf("%s: faq %q is no question of help-center/faq.yaml", at, *c.FAQ))
		}
		if !slices.Contains(positiveKinds, c.Kind) {
			problems = append(problems, fmt.Sprintf("%s: kind %q of a positive is not one of %v", at, c.Kind, positiveKinds))
		}
	}
	return problems, counts
}

func checkRetrieval(set evalSet, hc helpCenter, seen map[string]int) (problems []string, counts map[string]int) {
	counts = map[string]int{}
	for i, r := range set.Retrieval {
		at := fmt.Sprintf("retrieval[%d] %q", i, r.Q)
		problems = append(problems, checkQ(at, r.Q, seen)...)
		if p := langProblem(r.Q, r.Lang); p != "" {
			problems = append(problems, at+": "+p)
		}
		counts["lang:"+r.Lang]++
		counts["source:"+r.Source]++
		headings, ok := hc.headings[r.Source]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: source %q is no article of help-center/", at, r.Source))
		case !slices.Contains(headings, r.Heading):
			problems = append(problems, fmt.Sprintf("%s: %s has no ## heading %q", at, r.Source, r.Heading))
		}
	}
	return problems, counts
}

// checkQ reports an empty question or one asked twice in the file.
func checkQ(at, q string, seen map[string]int) []string {
	n := normalise(q)
	seen[n]++
	switch {
	case n == "":
		return []string{at + ": empty q"}
	case seen[n] == 2:
		return []string{at + ": q repeats"}
	}
	return nil
}

// minimums reports every count below its minimum.
func minimums(hc helpCenter, cache, retrieval map[string]int, nCache, nRetrieval int) []string {
	var problems []string
	atLeast := func(what string, got, want int) {
		if got < want {
			problems = append(problems, fmt.Sprintf("%s: %d, want at least %d", what, got, want))
		}
	}
	atLeast("cache items", nCache, minCache)
	atLeast("positives", cache["positive"], minPositives)
	atLeast("negatives", cache["negative"], minNegatives)
	for _, q := range hc.questions {
		atLeast("positives for "+q, cache["faq:"+q], minPerFAQ)
	}
	for _, k := range positiveKinds {
		atLeast("positives of kind "+k, cache["positive:"+k], 1)
	}
	for _, k := range negativeKinds {
		atLeast("negatives of kind "+k, cache["negative:"+k], 1)
	}
	atLeast("zh positives", cache["positive:zh"], minPositivesPerLang)
	atLeast("en positives", cache["positive:en"], minPositivesPerLang)
	atLeast("mixed positives", cache["positive:mixed"], minMixedPositives)
	atLeast("retrieval items", nRetrieval, minRetrieval)
	atLeast("zh retrieval items", retrieval["lang:zh"], minRetrievalPerLang)
	atLeast("en retrieval items", retrieval["lang:en"], minRetrievalPerLang)
	for article := range hc.headings {
		atLeast("retrieval items on "+article, retrieval["source:"+article], 1)
	}
	return problems
}

// checkEvalSet is every problem of the set's source against the help centre and
// the collection names the spec declares.
func checkEvalSet(src []byte, hc helpCenter, collections []string) []string {
	set, problems := decodeEvalSet(src)
	if len(problems) > 0 && strings.HasPrefix(problems[0], "parse: ") {
		return problems
	}
	if !slices.Contains(collections, set.Collection) {
		problems = append(problems, fmt.Sprintf("collection %q is not one of shop-support's %v", set.Collection, collections))
	}
	seen := map[string]int{}
	cp, cache := checkCache(set, hc, seen)
	rp, retrieval := checkRetrieval(set, hc, seen)
	problems = append(problems, cp...)
	problems = append(problems, rp...)
	return append(problems, minimums(hc, cache, retrieval, len(set.Cache), len(set.Retrieval))...)
}

func shopCollections(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	src, err := fs.ReadFile(fsys, "shop-support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Knowledge struct {
			Collections map[string]any `yaml:"collections"`
		} `yaml:"knowledge"`
	}
	if err := yaml.Unmarshal(src, &spec); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range spec.Knowledge.Collections {
		names = append(names, name)
	}
	return names
}

func TestEvalSetIntegrity(t *testing.T) {
	fsys := Agents()
	src, err := fs.ReadFile(fsys, evalFile)
	if err != nil {
		t.Fatal(err)
	}
	hc := loadHelpCenter(t, fsys)
	if len(hc.questions) == 0 || len(hc.headings) == 0 {
		t.Fatalf("help centre read as %d FAQ questions and %d articles", len(hc.questions), len(hc.headings))
	}
	for _, p := range checkEvalSet(src, hc, shopCollections(t, fsys)) {
		t.Error(p)
	}
}

// The checker itself: each kind of broken label is reported, so a clean run of
// TestEvalSetIntegrity means something.
func TestEvalSetCheckerReportsBrokenLabels(t *testing.T) {
	hc := helpCenter{
		questions: []string{"How do I cancel an order?"},
		wordings:  map[string]bool{"how do i cancel an order?": true, "can i cancel my order?": true},
		headings:  map[string][]string{"refunds.md": {"审核时间"}},
	}
	src := `collection: help_center
cache:
  - {q: "Can I cancel my order? ", faq: "How do I cancel an order?", lang: en, kind: paraphrase}
  - {q: how to cancel, faq: "How do I cancel orders?", lang: en, kind: short}
  - {q: 取消, faq: null, lang: zh, kind: single-word}
  - {q: 取消, faq: null, lang: en, kind: vague, why: two words}
  - {q: cancel scheduled, lang: en, kind: qualifier, why: forgot faq}
retrieval:
  - {q: 退款审核要多久, source: refunds.md, heading: 审核, lang: zh}
  - {q: where is it, source: nowhere.md, heading: x, lang: en}
`
	got := strings.Join(checkEvalSet([]byte(src), hc, []string{"help_center"}), "\n")
	for _, want := range []string{
		"cache[4]: no faq key",
		`cache[0] "Can I cancel my order? ": copies an FAQ question or variant`,
		`cache[1] "how to cancel": faq "How do I cancel orders?" is no question`,
		`cache[2] "取消": a negative needs why`,
		`cache[3] "取消": q repeats`,
		`cache[3] "取消": lang en needs English and no Chinese`,
		`cache[3] "取消": kind "vague" of a negative is not one of`,
		`retrieval[0] "退款审核要多久": refunds.md has no ## heading "审核"`,
		`retrieval[1] "where is it": source "nowhere.md" is no article`,
		"cache items: 5, want at least 160",
		"positives for How do I cancel an order?: 1, want at least 3",
		"negatives of kind date: 0, want at least 1",
		"en retrieval items: 1, want at least 15",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
	if got := checkEvalSet([]byte("collection: help_center\ncache: []\nextra: 1\n"), hc, []string{"help_center"}); len(got) != 1 || !strings.Contains(got[0], "field extra not found") {
		t.Errorf("an unknown key gave %q, want one parse problem naming it", got)
	}
	if got := strings.Join(checkEvalSet([]byte("collection: kb\n"), hc, []string{"help_center"}), "\n"); !strings.Contains(got, `collection "kb" is not one of`) {
		t.Errorf("a wrong collection was not reported; got:\n%s", got)
	}
}
