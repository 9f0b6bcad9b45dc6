package grade

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Contains passes an answer that contains every one of its texts, exactly as
// written (case and width count: "退款" is not "退 款"). Its score is the share
// found.
type Contains struct{ texts []string }

// NewContains is a Contains of texts: at least one, none empty.
func NewContains(texts []string) (*Contains, error) {
	if err := checkTexts(texts); err != nil {
		return nil, fmt.Errorf("contains: %w", err)
	}
	return &Contains{texts: texts}, nil
}

// Grade implements TextGrader.
func (c *Contains) Grade(answer string) Grade {
	var missing []string
	for _, t := range c.texts {
		if !strings.Contains(answer, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return pass("the answer contains " + quoteList(c.texts))
	}
	g := fail(fmt.Sprintf("the answer does not contain %s (%d of %d missing)", quoteList(missing), len(missing), len(c.texts)))
	g.Score = float64(len(c.texts)-len(missing)) / float64(len(c.texts))
	return g
}

// NotContains passes an answer that contains none of its texts. Its score is the
// share absent.
type NotContains struct{ texts []string }

// NewNotContains is a NotContains of texts: at least one, none empty.
func NewNotContains(texts []string) (*NotContains, error) {
	if err := checkTexts(texts); err != nil {
		return nil, fmt.Errorf("not_contains: %w", err)
	}
	return &NotContains{texts: texts}, nil
}

// Grade implements TextGrader.
func (c *NotContains) Grade(answer string) Grade {
	var found []string
	for _, t := range c.texts {
		if strings.Contains(answer, t) {
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return pass("the answer contains none of " + quoteList(c.texts))
	}
	g := fail(fmt.Sprintf("the answer contains %s, which it must not (%d of %d found)", quoteList(found), len(found), len(c.texts)))
	g.Score = float64(len(c.texts)-len(found)) / float64(len(c.texts))
	return g
}

// checkTexts refuses an empty list and an empty text, which every answer contains.
func checkTexts(texts []string) error {
	if len(texts) == 0 {
		return errors.New("no texts to look for")
	}
	for i, t := range texts {
		if t == "" {
			return fmt.Errorf("text %d is empty", i+1)
		}
	}
	return nil
}

// Regex passes an answer that the regular expression (Go's RE2 syntax) matches
// somewhere; anchor it with ^ and $ to match the whole answer, flag it with (?i)
// to ignore case.
type Regex struct{ re *regexp.Regexp }

// NewRegex compiles pattern once.
func NewRegex(pattern string) (*Regex, error) {
	if pattern == "" {
		return nil, errors.New("regex: the pattern is empty")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("regex: %w", err)
	}
	return &Regex{re: re}, nil
}

// Grade implements TextGrader.
func (r *Regex) Grade(answer string) Grade {
	if loc := r.re.FindStringIndex(answer); loc != nil {
		return pass(fmt.Sprintf("the answer matches /%s/ at %q", r.re, clip(answer[loc[0]:loc[1]], 80)))
	}
	return fail(fmt.Sprintf("the answer does not match /%s/", r.re))
}

// Equals passes an answer that is its text exactly, once leading and trailing
// white space is trimmed from both.
type Equals struct{ want string }

// NewEquals is an Equals of want, which may be empty (an empty answer is wanted).
func NewEquals(want string) *Equals { return &Equals{want: strings.TrimSpace(want)} }

// Grade implements TextGrader.
func (e *Equals) Grade(answer string) Grade {
	got := strings.TrimSpace(answer)
	if got == e.want {
		return pass(fmt.Sprintf("the answer is %q", clip(e.want, 80)))
	}
	return fail(fmt.Sprintf("the answer is %q, not %q", clip(got, 120), clip(e.want, 120)))
}
