package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"unicode"
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

// ftsText is what chunks_fts stores for a text: its terms separated by spaces.
func ftsText(text string) string { return strings.Join(terms(text), " ") }

// queryTerms are query's distinct terms, at most maxQueryTerms.
func queryTerms(query string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range terms(query) {
		if !seen[t] && len(out) < maxQueryTerms {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// ftsQuery is an FTS5 query matching any of the terms, each quoted (so no term is
// read as an operator); "" when there are none.
func ftsQuery(terms []string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " OR ")
}

// textQuery is the FTS5 query for query: its terms, without the most common ones
// while together they would match more than maxTextMatches rows (counted over the
// whole file, from the FTS vocabulary).
func textQuery(ctx context.Context, tx *sql.Tx, query string) (string, error) {
	ts := queryTerms(query)
	if len(ts) == 0 {
		return "", nil
	}
	docs := make([]int, len(ts))
	total := 0
	for i, t := range ts {
		err := tx.QueryRowContext(ctx, `SELECT doc FROM chunks_terms WHERE term = ?`, t).Scan(&docs[i])
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", err
		}
		total += docs[i]
	}
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(docs[b], docs[a]) })
	drop := map[int]bool{}
	for _, i := range order {
		if total <= maxTextMatches {
			break
		}
		drop[i] = true
		total -= docs[i]
	}
	kept := ts[:0:0]
	for i, t := range ts {
		if !drop[i] && docs[i] > 0 {
			kept = append(kept, t)
		}
	}
	return ftsQuery(kept), nil
}
