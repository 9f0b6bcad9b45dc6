package knowledge

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/agentrun/agentrun/internal/words"
)

// A cache hit is served without a model, so nothing downstream catches a wrong
// one: a question that is an FAQ question plus one qualifier ("remove one dish
// from my order", "opening hours on a public holiday") scores close to it and
// asks something else. Besides its score, a hit must pass the gates of CheckHit.

// Gate names the precision gate that refused a hit.
type Gate string

const (
	// GateSpecifics: the question names a number, code, date, name or address the
	// entry does not (for a learned entry: they do not name the same ones).
	GateSpecifics Gate = "specifics"
	// GateExtraWords: the question has words the entry's questions and answer
	// have nowhere — a qualifier the entry was not written for.
	GateExtraWords Gate = "extra_words"
	// GateVague: the question says too little to be taken for the entry's: no
	// more than half of any of its questions, or fewer than two words
	// ("membership", "手机号") unless it is one of its questions word for word.
	GateVague Gate = "vague"
)

// minCoverage is the share of one of the entry's questions' content words a
// question must have more than: "delivery" alone is a third of "how much is the
// delivery fee", "cancel" half of "can I cancel my order", "what does delivery
// cost" all of a variant.
const minCoverage = 0.5

// minWords is how many content words a question needs to be taken for an
// entry's at all, a Chinese character counting half: "手机号" or "refund" alone
// could ask any of several things.
const minWords = 2

// wordCount counts a's content words, a CJK character as half of one.
func wordCount(a analysed) float64 {
	n := 0.0
	for _, w := range a.content {
		if r, _ := utf8.DecodeRuneInString(w); utf8.RuneCountInString(w) == 1 && words.IsCJK(r) {
			n += 0.5
		} else {
			n++
		}
	}
	return n
}

// Verdict is the gates' decision on a hit, with what decided it.
type Verdict struct {
	Passed bool     `json:"passed"`
	Gate   Gate     `json:"gate,omitempty"`
	Words  []string `json:"words,omitempty"`
	// Coverage is the largest share of an entry question's content words the
	// question has.
	Coverage float64 `json:"coverage"`
}

// Debatable reports whether a judge may overrule the refusal (verify: judge):
// words the entry does not mention may be a synonym as well as a qualifier, and
// only reading them tells; another number, or too few words, is not a matter of
// reading.
func (v Verdict) Debatable() bool { return v.Gate == GateExtraWords }

// Reason says why a hit was refused, for a trace and for people.
func (v Verdict) Reason() string {
	switch v.Gate {
	case GateSpecifics:
		if len(v.Words) == 0 {
			return "the question names other numbers, codes, names or addresses than the one the answer was learned for"
		}
		return "the question names " + quoteAll(v.Words) + ", which the entry does not"
	case GateExtraWords:
		return "the question asks about " + quoteAll(v.Words) + ", which the entry does not mention"
	case GateVague:
		return fmt.Sprintf("the question says too little to be taken for the entry's (%.0f%% of its words)", 100*v.Coverage)
	}
	return "passed"
}

func quoteAll(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = fmt.Sprintf("%q", w)
	}
	return strings.Join(q, ", ")
}

// CheckHit puts a hit for asked through the precision gates: the question may
// name nothing specific the entry does not, may ask about nothing the entry's
// questions and answer leave out, and must say enough of one of the entry's
// questions. A learned entry must also name the same specific things as the
// question it was learned for, with no word put in another's place
// (SameSpecifics): its answer was written for that question alone.
func CheckHit(asked string, hit *CacheHit) Verdict {
	a := analyse(asked)
	questions := hit.Questions
	if len(questions) == 0 {
		questions = []string{hit.Question}
	}
	entry := make([]analysed, 0, len(questions)+1)
	known, entryTokens := map[string]bool{}, map[string]bool{}
	for _, text := range append(slices.Clone(questions), hit.Answer) {
		e := analyse(text)
		entry = append(entry, e)
		for _, w := range e.content {
			known[w] = true
		}
		for t := range e.tokens {
			entryTokens[t] = true
		}
	}
	content, extra := spelledAsKnown(a, known)
	var coverage float64
	exact := false // the question is one of the entry's, word for word
	written := literal(asked)
	for i, e := range entry[:len(questions)] { // the answer holds words the entry knows, not a question it asks
		coverage = max(coverage, covered(e.content, content))
		exact = exact || literal(questions[i]) == written
	}
	v := Verdict{Coverage: coverage}
	if missing := absent(a.specific, entryTokens); len(missing) > 0 {
		v.Gate, v.Words = GateSpecifics, missing
		return v
	}
	if hit.Kind == CacheEntryLearned && !SameSpecifics(asked, hit.Question) {
		v.Gate = GateSpecifics
		return v
	}
	if len(extra) > 0 {
		v.Gate, v.Words = GateExtraWords, extra
		return v
	}
	if !exact && (coverage <= minCoverage || wordCount(a) < minWords) {
		v.Gate = GateVague
		return v
	}
	v.Passed = true
	return v
}

// spelledAsKnown is a's content words with each misspelling of a word the entry
// knows put right, and the words, as written, that it knows under no spelling.
func spelledAsKnown(a analysed, known map[string]bool) (content, extra []string) {
	content = slices.Clone(a.content)
	for i, w := range content {
		if known[w] {
			continue
		}
		if k := misspelt(w, known); k != "" {
			content[i] = k
		} else if !slices.Contains(extra, a.written[i]) {
			extra = append(extra, a.written[i])
		}
	}
	return content, extra
}

// minTypoLength is the shortest word taken for a misspelling of another: below
// it one letter changes the word ("card", "cart"; "fee", "free").
const minTypoLength = 5

// misspelt is the one word of known that w is a slip of the keyboard away from
// ("cancle", "membrship", "huamn"), or "" when there is none or more than one.
func misspelt(w string, known map[string]bool) string {
	if utf8.RuneCountInString(w) < minTypoLength || !isLatinWord(w) {
		return ""
	}
	found := ""
	for k := range known {
		if utf8.RuneCountInString(k) >= minTypoLength && words.Distance(w, k) == 1 {
			if found != "" {
				return ""
			}
			found = k
		}
	}
	return found
}

func isLatinWord(w string) bool {
	for _, r := range w {
		if !unicode.In(r, unicode.Latin) {
			return false
		}
	}
	return true
}

// literal is text's words in order, in lower case: a question as written, but
// for case, spacing and punctuation.
func literal(text string) string {
	ws := splitWords(norm.NFKC.String(text))
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = strings.ToLower(w.text)
	}
	return strings.Join(out, " ")
}

// covered is the share of want's distinct words that have has.
func covered(want, has []string) float64 {
	distinct := map[string]bool{}
	for _, w := range want {
		distinct[w] = true
	}
	if len(distinct) == 0 {
		return 1
	}
	n := 0
	for w := range distinct {
		if slices.Contains(has, w) {
			n++
		}
	}
	return float64(n) / float64(len(distinct))
}

// absent are the words of set that tokens lacks, sorted.
func absent(set, tokens map[string]bool) []string {
	var out []string
	for w := range set {
		if !tokens[w] {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}
