package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// expectation is a diagnostic a fixture declares inline, as a comment:
//
//	key: value  # ERROR:COL path: message => hint
//	# WARNING@LINE:COL path: message
//
// The first form points at the comment's own line.
type expectation struct {
	line, col int
	severity  string
	summary   string
	hint      string
}

func (e expectation) String() string {
	s := fmt.Sprintf("%d:%d: %s: %s", e.line, e.col, e.severity, e.summary)
	if e.hint != "" {
		s += " => " + e.hint
	}
	return s
}

var expectRe = regexp.MustCompile(`#\s*(ERROR|WARNING)(?:@(\d+))?:(\d+)\s+(.*)$`)

func expectations(t *testing.T, src string) []expectation {
	t.Helper()
	var out []expectation
	for i, line := range strings.Split(src, "\n") {
		m := expectRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		e := expectation{line: i + 1, severity: strings.ToLower(m[1])}
		if m[2] != "" {
			e.line, _ = strconv.Atoi(m[2])
		}
		e.col, _ = strconv.Atoi(m[3])
		e.summary, e.hint, _ = strings.Cut(m[4], " => ")
		out = append(out, e)
	}
	return out
}

func newTestLoader(t testing.TB) *Loader {
	t.Helper()
	l, err := NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.LookupEnv = func(name string) (string, bool) { return "", false }
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
			want := expectations(t, string(src))
			if len(want) == 0 {
				t.Fatal("fixture declares no expected diagnostic")
			}
			_, diags := l.Load(file, src)
			var got []expectation
			for _, d := range diags {
				if d.Pos.File != file {
					t.Errorf("diagnostic in file %q, want %q", d.Pos.File, file)
				}
				got = append(got, expectation{d.Pos.Line, d.Pos.Col, d.Severity.String(), d.Summary(), d.Hint})
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					t.Errorf("missing diagnostic\n  want %s", w)
				}
			}
			for _, g := range got {
				if !slices.Contains(want, g) {
					t.Errorf("unexpected diagnostic\n   got %s", g)
				}
			}
		})
	}
}
