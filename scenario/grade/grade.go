package grade

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Grade is one grader's judgment of one answer.
type Grade struct {
	Passed bool
	// Score is how much of what the grader asks for the answer has, from 0 to 1:
	// the share of the listed texts found, the grader model's score, or 0 or 1.
	Score float64
	// Reason says what was found or missing, in a sentence a person reads in the
	// failures of a report.
	Reason string
	// Errored marks a grade the grader could not give (the grader model's verdict
	// was malformed): never passed, with Reason saying what went wrong.
	Errored bool
}

// TextGrader grades an answer by its text alone, without calling anything: the
// same answer always gets the same grade.
type TextGrader interface {
	Grade(answer string) Grade
}

var (
	_ TextGrader = (*Contains)(nil)
	_ TextGrader = (*NotContains)(nil)
	_ TextGrader = (*Regex)(nil)
	_ TextGrader = (*Equals)(nil)
	_ TextGrader = (*JSONPath)(nil)
)

func pass(reason string) Grade { return Grade{Passed: true, Score: 1, Reason: reason} }
func fail(reason string) Grade { return Grade{Reason: reason} }

// clip shortens s to at most n characters for a reason, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// quoteList lists texts as Go-quoted strings: "a", "b" and "c".
func quoteList(texts []string) string {
	q := make([]string, len(texts))
	for i, t := range texts {
		q[i] = fmt.Sprintf("%q", clip(t, 80))
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}
