package spec

import "testing"

// A tool is retryable unless it says idempotent: false.
func TestToolRetryable(t *testing.T) {
	l := newTestLoader(t)
	src := "version: 1\nname: idem\ntools:\n" +
		"  - builtin: calculator\n" +
		"  - {builtin: current_time, idempotent: true}\n" +
		"  - {name: pay, command: {run: [pay]}, idempotent: false}\n"
	s, diags := l.Load("idem.yaml", []byte(src))
	if diags.HasErrors() { // "pay" is not installed: a warning
		t.Fatal(diags)
	}
	tests := []struct {
		name string
		want bool
	}{
		{"calculator", true},
		{"current_time", true},
		{"pay", false},
	}
	for i, tt := range tests {
		tool := &s.Tools[i]
		if tool.Name != tt.name {
			t.Fatalf("tools[%d] is %q, want %q", i, tool.Name, tt.name)
		}
		if got := tool.Retryable(); got != tt.want {
			t.Errorf("%s: Retryable() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
