package spec

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Rules are the routing rules of a spec's intents, compiled once: each intent's
// keywords (lower case, found anywhere in the input), patterns, and examples
// (the whole input, in normal form). A run's router and the checker that warns of
// rules taking FAQ questions from a cached intent match alike.
type Rules struct {
	intents []intentRules
}

type intentRules struct {
	name     string
	keywords []string
	patterns []*regexp.Regexp
	examples []string // normalized
	raw      []string // the examples as written
}

// RuleMatch is the rule that chose an intent: the intent, the rule for people
// (keyword "取消"), and where it is under the intent (Key keywords, patterns or
// examples, its Index).
type RuleMatch struct {
	Intent, Rule, Key string
	Index             int
}

// NewRules compiles intents' rules; patterns that did not compile are left out.
func NewRules(intents []Intent) *Rules {
	r := &Rules{}
	for _, in := range intents {
		ir := intentRules{name: in.Name, raw: in.Examples}
		for _, k := range in.Keywords {
			ir.keywords = append(ir.keywords, strings.ToLower(k))
		}
		for _, p := range in.Patterns {
			if p != nil && p.Re != nil {
				ir.patterns = append(ir.patterns, p.Re)
			}
		}
		for _, e := range in.Examples {
			ir.examples = append(ir.examples, normalizeExample(e))
		}
		r.intents = append(r.intents, ir)
	}
	return r
}

// Match is the first intent, in spec order, one of whose rules matches input.
func (r *Rules) Match(input string) (RuleMatch, bool) {
	lower := strings.ToLower(input)
	norm := normalizeExample(input)
	for _, in := range r.intents {
		for i, k := range in.keywords {
			if strings.Contains(lower, k) {
				return RuleMatch{in.name, "keyword " + quoteRule(k), "keywords", i}, true
			}
		}
		for i, p := range in.patterns {
			if p.MatchString(input) {
				return RuleMatch{in.name, "pattern " + quoteRule(p.String()), "patterns", i}, true
			}
		}
		for i, e := range in.examples {
			if e == norm {
				return RuleMatch{in.name, "example " + quoteRule(in.raw[i]), "examples", i}, true
			}
		}
	}
	return RuleMatch{}, false
}

// normalizeExample is s as examples compare: lower case, words of letters,
// digits and non-ASCII characters (but CJK punctuation) joined by single spaces.
func normalizeExample(s string) string {
	return strings.ToLower(strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127 && !strings.ContainsRune("，。？！、；：“”‘’（）", r))
	}), " "))
}

func quoteRule(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
