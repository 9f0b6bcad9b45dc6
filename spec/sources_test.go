package spec

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeTree(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestExpandSources(t *testing.T) {
	dir := writeTree(t, "a.md", "docs/b.md", "docs/x/c.md", "docs/x/d.txt", "docs/.git/e.md",
		"docs/y.md/f.md", // a directory named like a file: not a source itself
		"other/g.md", "faq.yaml")
	tests := []struct {
		name    string
		pattern string
		want    []string
	}{
		{"glob in the top directory", "*.md", []string{"a.md"}},
		{"glob in a subdirectory", "docs/*.md", []string{"docs/b.md"}},
		{"single star enters hidden directories", "docs/*/*", []string{"docs/.git/e.md", "docs/x/c.md", "docs/x/d.txt", "docs/y.md/f.md"}},
		{"double star skips hidden directories", "**/*.md", []string{"a.md", "docs/b.md", "docs/x/c.md", "docs/y.md/f.md", "other/g.md"}},
		{"double star under a prefix", "docs/**/*.md", []string{"docs/b.md", "docs/x/c.md", "docs/y.md/f.md"}},
		{"double star at the end", "docs/**", []string{"docs/b.md", "docs/x/c.md", "docs/x/d.txt", "docs/y.md/f.md"}},
		{"a literal path is cleaned", "./docs/../a.md", []string{"a.md"}},
		{"a missing literal path is returned", "docs/missing.md", []string{"docs/missing.md"}},
		{"question mark", "faq.yam?", []string{"faq.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ws, err := ExpandSources(dir, tt.pattern)
			if err != nil || len(ws) != 0 || !slices.Equal(got, tt.want) {
				t.Errorf("ExpandSources(%q) = %q, %v, %v; want %q", tt.pattern, got, ws, err, tt.want)
			}
		})
	}
}

func TestExpandSourcesNoMatch(t *testing.T) {
	dir := writeTree(t, "a.md")
	for _, pattern := range []string{"*.pdf", "nothing/*.md", "nothing/**/*.md", "docs/y.md*"} {
		t.Run(pattern, func(t *testing.T) {
			files, ws, err := ExpandSources(dir, pattern)
			want := `glob "` + pattern + `" matches no file`
			if err != nil || files != nil || len(ws) != 1 || ws[0].Severity != Warning || ws[0].Message != want || ws[0].Pos.File != pattern {
				t.Errorf("ExpandSources(%q) = %q, %+v, %v; want one warning %q", pattern, files, ws, err, want)
			}
		})
	}
}

func TestExpandSourcesErrors(t *testing.T) {
	dir := writeTree(t, "a.md")
	tests := []struct{ pattern, want string }{
		{"", "a knowledge source must be a path relative to the spec's directory"},
		{"/etc/passwd", "a knowledge source must be a path relative to the spec's directory"},
		{"/docs/*.md", "a knowledge source must be a path relative to the spec's directory"},
		{"docs/[.md", "bad glob: syntax error in pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			files, _, err := ExpandSources(dir, tt.pattern)
			if err == nil || err.Error() != tt.want || files != nil {
				t.Errorf("ExpandSources(%q) = %q, %v; want error %q", tt.pattern, files, err, tt.want)
			}
		})
	}
}

func TestHasGlobMeta(t *testing.T) {
	for s, want := range map[string]bool{"a.md": false, "docs/a.md": false, "*.md": true, "a?.md": true, "[ab].md": true, `a\*.md`: true, "**": true} {
		if got := HasGlobMeta(s); got != want {
			t.Errorf("HasGlobMeta(%q) = %v, want %v", s, got, want)
		}
	}
}
