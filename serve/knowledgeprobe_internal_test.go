package serve

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A passage's text is cut on a rune boundary, within the cap with its mark.
func TestClipUTF8(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "abc", 10, "abc"},
		{"exactly", "abcdef", 6, "abcdef"},
		{"ascii", "abcdefghij", 8, "abcd" + " …"},  // 4 bytes and the mark
		{"inside a rune", "配送费怎么收", 9, "配" + " …"}, // " …" is 4 bytes: 配送 would not fit
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := clipUTF8(tt.in, tt.n)
			if got != tt.want || len(got) > tt.n && got != tt.in || !utf8.ValidString(got) {
				t.Errorf("clipUTF8(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
	if got := clipUTF8(strings.Repeat("x", 10000), maxProbePassageText); len(got) > maxProbePassageText {
		t.Errorf("clipped to %d bytes", len(got))
	}
}
