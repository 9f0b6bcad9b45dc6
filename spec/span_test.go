package spec

import (
	"slices"
	"testing"
)

// A diagnostic's range covers the text it is about: a scalar's value with its quotes,
// a wide character as one column (columns count characters), a key, the name an
// expression error is about inside a template.
func TestDiagnosticRanges(t *testing.T) {
	const head = "version: 1\nname: s\n"
	tests := []struct {
		name, yaml, path string
		line, col, end   int
	}{
		{"plain scalar", "instructions: hi\nguards:\n  duplicate_calls: halt  # comment\n", "guards.duplicate_calls", 5, 20, 24},
		{"quoted scalar", "instructions: hi\nguards:\n  duplicate_calls: \"h\\\"lt\"\n", "guards.duplicate_calls", 5, 20, 27},
		{"single-quoted scalar", "instructions: hi\nguards:\n  duplicate_calls: 'it''s'\n", "guards.duplicate_calls", 5, 20, 27},
		{"CJK scalar", "instructions: hi\nguards:\n  max_turns: 停止了\n", "guards.max_turns", 5, 14, 17},
		{"key", "instructions: hi\nmodle: {name: gpt-4o}\n", "", 4, 1, 6},
		{"scalar in a flow mapping", "instructions: hi\nintents:\n  cancel: {description: Cancel., domain: orders}\n", "intents.cancel.domain", 5, 42, 48},
		{"expression in a template", "instructions: \"Hi {{ usr.id }}\"\n", "instructions", 3, 22, 25},
		{"unclosed template", "instructions: \"Hi {{ user.id\"\n", "instructions", 3, 19, 29},
		{"a flow mapping in a sequence", "instructions: hi\ntools:\n  - {builtin: calculater}  # typo\n", "tools[0].builtin", 5, 15, 25},
	}
	l := newTestLoader(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := l.Load("a.yaml", []byte(head+tt.yaml))
			i := slices.IndexFunc(diags, func(d Diagnostic) bool { return d.Path == tt.path })
			if i < 0 {
				t.Fatalf("no diagnostic at %q in %v", tt.path, diags)
			}
			d := diags[i]
			if d.Pos.Line != tt.line || d.Pos.Col != tt.col {
				t.Fatalf("diagnostic %v, want it at %d:%d", d, tt.line, tt.col)
			}
			if want := (Pos{File: "a.yaml", Line: tt.line, Col: tt.end}); d.End != want {
				t.Errorf("%v: end %v, want %v", d, d.End, want)
			}
		})
	}
}
