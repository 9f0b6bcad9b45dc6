package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sourceLine matches the two lines a text diagnostic shows of its source: the
// numbered line and the caret under it.
var sourceLine = regexp.MustCompile(`(?m)^    (\d+| +) \| .*\n`)

// withoutSource is text diagnostics without their source lines, for tests about
// something else.
func withoutSource(s string) string { return sourceLine.ReplaceAllString(s, "") }

// A text diagnostic shows the line it points at, as the file has it (before
// ${VAR} is expanded), with a caret under its column, tabs kept.
func TestValidateShowsTheSourceLine(t *testing.T) {
	dir := t.TempDir()
	spec := "version: 1\nname: s\ninstructions: \"${NOT_SHOWN:-hi}\"\ntools:\n  - builtin: calculater\n"
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "validate", filepath.Join(dir, "agent.yaml"))
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	want := "    5 |   - builtin: calculater\n      |              ^\n"
	if !strings.Contains(stdout, want) {
		t.Fatalf("stdout:\n%s\nwant the source line and caret:\n%s", stdout, want)
	}
	if withoutSource(stdout) == stdout {
		t.Fatal("withoutSource removed nothing")
	}
}
