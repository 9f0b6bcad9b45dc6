package spec

import (
	"fmt"
	"strings"
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
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestDist {
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

// editDistance is the optimal-string-alignment distance: insertions, deletions,
// substitutions and swaps of neighbours each cost one, so "stpo" is one from "stop".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
