package mcp

import "testing"

// carries keeps structured data unless the text already holds it exactly.
func TestCarries(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
		value any
		want  bool
	}{
		{"the same JSON", []string{`{"b":2, "a":1}`}, map[string]any{"a": 1.0, "b": 2.0}, true},
		{"the text as content", []string{"hello"}, map[string]any{"content": "hello"}, true},
		{"a stub", []string{"ok"}, map[string]any{"latest": "A1", "open": 3.0}, false},
		{"a number inside a longer one", []string{"ok: created order 12345"}, map[string]any{"order_id": 1234.0, "status": "ok"}, false},
		{"one string among others", []string{"ok"}, map[string]any{"status": "ok", "id": "x"}, false},
	}
	for _, tt := range tests {
		if got := carries(tt.parts, tt.value); got != tt.want {
			t.Errorf("%s: carries = %v, want %v", tt.name, got, tt.want)
		}
	}
}
