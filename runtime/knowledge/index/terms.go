package index

import (
	"cmp"
	"slices"
	"strings"
	"unicode"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// terms splits text into FTS terms: lower-cased words of letters and digits, and
// for runs of CJK characters (which have no spaces, and which FTS5's unicode61
// tokenizer would keep as one token) their overlapping bigrams, or the character
// itself for a run of one.
func terms(text string) []string {
	var out []string
	var word, cjk []rune
	flushWord := func() {
		if len(word) > 0 {
			out = append(out, stem(strings.ToLower(string(word))))
			word = word[:0]
		}
	}
	flushCJK := func() {
		switch len(cjk) {
		case 0:
		case 1:
			out = append(out, string(cjk))
		default:
			for i := 0; i+1 < len(cjk); i++ {
				out = append(out, string(cjk[i:i+2]))
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range text {
		switch {
		case isCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			flushCJK()
			word = append(word, r)
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

// stem folds a plural: "refunds" → "refund", "boxes" → "box", "policies" →
// "policy"; crude, but applied alike to the index and the query.
func stem(w string) string {
	switch {
	case len(w) <= 3 || !strings.HasSuffix(w, "s") || strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is"):
		return w
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "sses"):
		return w[:len(w)-2]
	}
	return w[:len(w)-1]
}

// QueryTerms are query's distinct terms, at most MaxQueryTerms.
func QueryTerms(query string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range terms(query) {
		if !seen[t] && len(out) < MaxQueryTerms {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Terms splits text into full-text terms, as SearchTerms and QueryTerms do.
func Terms(text string) []string { return terms(text) }

// SearchTerms are the full-text terms the index holds for a chunk, in order: its
// heading, questions and text split into lower-cased, plural-folded words, and
// runs of CJK characters as overlapping bigrams.
func SearchTerms(c knowledge.Chunk) []string { return terms(SearchText(c)) }

// SearchText is what the full-text search indexes of a chunk.
func SearchText(c knowledge.Chunk) string {
	parts := append([]string{c.Heading}, c.Questions...)
	return strings.Join(append(parts, c.Text), "\n")
}

// DroppedTerms says which of a query's terms a full-text search leaves out, given
// how many rows (over the whole index) hold each: those no row holds, and the most
// common ones while together they would match more than MaxTextMatches rows.
func DroppedTerms(docs []int) []bool {
	total := 0
	for _, d := range docs {
		total += d
	}
	order := make([]int, len(docs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(docs[b], docs[a]) })
	drop := make([]bool, len(docs))
	for _, i := range order {
		if total <= MaxTextMatches {
			break
		}
		drop[i] = true
		total -= docs[i]
	}
	for i, d := range docs {
		drop[i] = drop[i] || d == 0
	}
	return drop
}
