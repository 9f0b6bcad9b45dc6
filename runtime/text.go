package runtime

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The run's text helpers: cutting what events and prompts show to size, and
// quoting data inside a prompt.

// clipText is s cut to at most n bytes on a UTF-8 boundary, marked as cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// truncate cuts s to at most max bytes on a UTF-8 boundary and says so.
func truncate(s string, max int) string {
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", cut, len(s))
}

func preview(s string) string { return clipText(s, 200) }

// quote is s as a JSON string: data inside a prompt, never markup of ours.
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
