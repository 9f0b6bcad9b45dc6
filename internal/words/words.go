// Package words holds the small pieces of text handling that the knowledge
// embedder and the engine's learned-answer rule must do alike: which characters
// are CJK and how English words are stemmed. It imports nothing of ours.
package words

import (
	"strings"
	"unicode"
)

// IsCJK reports whether r is a Chinese, Japanese or Korean character: text in
// those scripts has no spaces between words.
func IsCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// Stem strips the commonest English inflections ("takes", "weekends", "accepted"),
// crudely but consistently: both sides of a comparison are stemmed alike.
func Stem(w string) string {
	switch {
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		return w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}
