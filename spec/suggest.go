package spec

import (
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/internal/words"
)

// suggest returns `did you mean "x"?` for the candidate closest to s, or "" when none
// is close enough to be a likely typo.
func suggest(s string, candidates []string) string {
	if best := Closest(s, candidates); best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return ""
}

// Closest returns the candidate most likely meant by the typo s, or "" when none is
// close enough. Other packages use it for their own "did you mean".
func Closest(s string, candidates []string) string {
	best, bestDist := "", maxTypoDistance(s)+1
	for _, c := range candidates {
		if c == s {
			continue
		}
		if d := words.Distance(strings.ToLower(s), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" && len(s) >= 3 { // a name cut short: "cancel" for "cancel_order"
		for _, c := range candidates {
			if strings.HasPrefix(strings.ToLower(c), strings.ToLower(s)) {
				if best != "" {
					return "" // more than one: no good guess
				}
				best = c
			}
		}
	}
	return best
}

// maxTypoDistance grows with the word: one slip in a short word, more in a long one.
func maxTypoDistance(s string) int {
	switch n := len([]rune(s)); {
	case n <= 5:
		return 1
	case n <= 10:
		return 2
	default:
		return 3
	}
}
