package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/fixture"
	"github.com/agentrun/agentrun/skills"
)

func newTestLoader(t testing.TB) *Loader {
	t.Helper()
	l, err := NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.LookupEnv = func(name string) (string, bool) { return "", false }
	l.Bundled = skills.Bundled()
	return l
}

// TestInvalidFixtures loads every spec under testdata/invalid and requires exactly the
// diagnostics its comments declare: file, line, column, severity, message and hint.
func TestInvalidFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("only %d fixtures", len(files))
	}
	l := newTestLoader(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := l.Load(file, src)
			var got []fixture.Diagnostic
			for _, d := range diags {
				if d.Pos.File != file {
					t.Errorf("diagnostic in file %q, want %q", d.Pos.File, file)
				}
				got = append(got, fixture.Diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Summary: d.Summary(), Hint: d.Hint})
			}
			fixture.Compare(t, fixture.Expected(string(src)), got)
		})
	}
}
