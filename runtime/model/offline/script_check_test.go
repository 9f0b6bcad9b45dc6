package offline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/fixture"
	"github.com/agentrun/agentrun/spec"
)

// TestInvalidScripts loads every script under testdata/invalid as --model script:
// and validate do, and requires exactly the diagnostics its comments declare: the
// new keys' mistakes at their lines, with hints.
func TestInvalidScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 4 {
		t.Fatalf("only %d fixtures", len(files))
	}
	l, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, diags := LoadScriptWith(l, file)
			var got []fixture.Diagnostic
			for _, d := range diags {
				if d.Pos.File != file {
					t.Errorf("diagnostic in another file: %v", d)
				}
				got = append(got, fixture.Diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Summary: d.Summary(), Hint: d.Hint})
			}
			fixture.Compare(t, fixture.Expected(string(src)), got)
			if diags.HasErrors() != (s == nil) {
				t.Errorf("errors %v, script %v", diags.HasErrors(), s)
			}
			if _, err := LoadScript(file); diags.HasErrors() && (err == nil || err.Error() != diags.Error()) {
				t.Errorf("LoadScript: %v, want the diagnostics", err)
			}
		})
	}
}
