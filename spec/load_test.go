package spec

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
			// Expectations live in the fixture and in the skill packs it uses; each
			// diagnostic is compared with those of the file it points into.
			files := append([]string{file}, skillFiles(file, string(src))...)
			for _, f := range files {
				fsrc, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var got []fixture.Diagnostic
				for _, d := range diags {
					if d.Pos.File == f {
						got = append(got, fixture.Diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Summary: d.Summary(), Hint: d.Hint})
					}
				}
				if want := fixture.Expected(string(fsrc)); len(want) > 0 || len(got) > 0 {
					fixture.Compare(t, want, got)
				}
			}
			for _, d := range diags {
				if !slices.Contains(files, d.Pos.File) {
					t.Errorf("diagnostic in an unexpected file: %v", d)
				}
			}
		})
	}
}

var useRe = regexp.MustCompile(`use: (\./skills/[a-z_]+)`)

// skillFiles are the skill.yaml files of the local skill packs a fixture uses.
func skillFiles(file, src string) []string {
	var out []string
	for _, m := range useRe.FindAllStringSubmatch(src, -1) {
		f := filepath.Join(filepath.Dir(file), m[1], "skill.yaml")
		if _, err := os.Stat(f); err == nil && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
