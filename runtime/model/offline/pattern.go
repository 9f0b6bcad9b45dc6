package offline

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// patternString builds a string that matches a JSON schema's pattern within its
// length bounds (maxLen < 0: none), from the pattern's simple parts: literals,
// classes, repeats, alternatives (the first), anchors. When it cannot (a pattern
// RE2 does not parse, or one the walk gets wrong), the value says so, and the
// argument's validation error shows it to whoever reads the run.
func patternString(pattern string, minLen, maxLen int) string {
	re, err := regexp.Compile(pattern)
	if err == nil {
		// The fewest repeats first; then enough of each open repeat for minLength.
		for _, reps := range []int{0, minLen} {
			s, ok := fromPattern(pattern, reps)
			n := utf8.RuneCountInString(s)
			if ok && re.MatchString(s) && n >= minLen && (maxLen < 0 || n <= maxLen) {
				return s
			}
		}
	}
	return fmt.Sprintf("(the test model cannot generate a string matching the pattern %q)", pattern)
}

// fromPattern walks the parsed pattern; reps is how many times a repeat without
// an upper bound (*, +, {n,}) repeats at least.
func fromPattern(pattern string, reps int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	ok := walk(&b, re.Simplify(), reps)
	return b.String(), ok
}

func walk(b *strings.Builder, re *syntax.Regexp, reps int) bool {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		r, ok := classRune(re.Rune)
		if !ok {
			return false
		}
		b.WriteRune(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('a')
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
	case syntax.OpCapture:
		return walk(b, re.Sub[0], reps)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		return repeat(b, re, reps)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !walk(b, sub, reps) {
				return false
			}
		}
	case syntax.OpAlternate:
		return walk(b, re.Sub[0], reps)
	default: // OpNoMatch
		return false
	}
	return true
}

func repeat(b *strings.Builder, re *syntax.Regexp, reps int) bool {
	n := 0
	switch re.Op {
	case syntax.OpStar:
		n = reps
	case syntax.OpPlus:
		n = max(1, reps)
	case syntax.OpQuest:
	case syntax.OpRepeat:
		n = re.Min
		if re.Max < 0 {
			n = max(n, reps)
		}
	}
	for range n {
		if !walk(b, re.Sub[0], reps) {
			return false
		}
	}
	return true
}

// classRune picks a readable rune of a character class (pairs of lo, hi): a
// lower-case letter, a digit or an upper-case one when the class has one, else
// its first printable rune.
func classRune(ranges []rune) (rune, bool) {
	for _, want := range []rune{'a', '0', 'A'} {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= want && want <= ranges[i+1] {
				return want, true
			}
		}
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i+1] >= ' ' {
			return max(ranges[i], ' '), true
		}
	}
	return 0, false
}
