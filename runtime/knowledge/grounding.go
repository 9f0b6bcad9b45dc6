package knowledge

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A learned answer is served to the next user who asks, so it must hold nothing
// one run picked up that the next should not get: a code a help article told the
// model to hand out, a user's own order number. Grounding decides what may be
// learned.

// instructionLike finds text addressed to the model rather than to a reader: an
// article that says "ignore all previous instructions" is an attack, not help.
var instructionLike = regexp.MustCompile(`(?i)` +
	`\b(ignore|disregard|forget|override)\b[^.!?\n]{0,40}\b(instructions?|rules|prompts?|guidelines)\b|` +
	`\bsystem prompt\b|\byou are now\b|\bdeveloper mode\b|` +
	`\b(do not|don't|never) (mention|reveal|disclose) (this|these|that|it)\b|` +
	`(tell|inform) the (customer|user) that\b|` +
	`(忽略|无视|忘记)[^。！？\n]{0,12}(指令|指示|规则|提示)|系统提示词?|不要(告诉|透露|提及)`)

// LooksLikeInstructions reports whether a passage speaks to the model: a
// retrieved passage that does is marked for the model, and its run's answer is
// never learned.
func LooksLikeInstructions(text string) bool { return instructionLike.MatchString(text) }

// Specifics are the specific things text names — numbers, codes, amounts,
// e-mail addresses, links, names — in lower case, sorted: what a learned answer
// may assert only when its sources hold them.
func Specifics(text string) []string {
	a := analyse(text)
	out := make([]string, 0, len(a.specific))
	for t := range a.specific {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Ungrounded are the specifics of answer that none of sources holds: found in
// lower case and whole ("100" is not held by "1000"), wherever it stands — in a
// sentence or inside a tool's JSON.
func Ungrounded(answer string, sources []string) []string {
	held := strings.ToLower(strings.Join(sources, "\n"))
	var out []string
	for _, t := range Specifics(answer) {
		if !holdsWhole(held, t) {
			out = append(out, t)
		}
	}
	return out
}

// holdsWhole reports whether text has word as a whole: not inside a longer run of
// letters or digits.
func holdsWhole(text, word string) bool {
	for from := 0; ; {
		i := strings.Index(text[from:], word)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(word)
		before, _ := utf8.DecodeLastRuneInString(text[:start])
		after, _ := utf8.DecodeRuneInString(text[end:])
		if !isWordRune(before) && !isWordRune(after) {
			return true
		}
		from = start + 1
	}
}
