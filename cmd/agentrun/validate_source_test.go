package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/spec"
)

// sourceLine matches the two lines a text diagnostic shows of its source: the
// numbered line and the carets under it.
var sourceLine = regexp.MustCompile(`(?m)^    (\d+| +) \| .*\n`)

// withoutSource is text diagnostics without their source lines, for tests about
// something else.
func withoutSource(s string) string { return sourceLine.ReplaceAllString(s, "") }

// A text diagnostic shows the line it points at, as the file has it (before
// ${VAR} is expanded), with carets under its range, tabs kept.
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
	want := "    5 |   - builtin: calculater\n      |              ^^^^^^^^^^\n"
	if !strings.Contains(stdout, want) {
		t.Fatalf("stdout:\n%s\nwant the source line and caret:\n%s", stdout, want)
	}
	if withoutSource(stdout) == stdout {
		t.Fatal("withoutSource removed nothing")
	}
}

// A diagnostic only the runtime finds (a builtin's configuration, found by
// Compile after loading) is underlined like the loader's, in text and JSON.
func TestValidateUnderlinesWhatCompileFinds(t *testing.T) {
	dir := t.TempDir()
	spec := "version: 1\nname: s\nmodel: {provider: test}\ninstructions: hi\ntools:\n  - builtin: read_file\n    with: {bogus: 1}\n"
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "validate", path)
	want := "    6 |   - builtin: read_file\n      |     ^^^^^^^\n"
	if code != 1 || !strings.Contains(stdout, `unknown key "bogus"`) || !strings.Contains(stdout, want) {
		t.Fatalf("exit %d, stdout:\n%s\nwant the builtin's error underlined:\n%s", code, stdout, want)
	}
	_, stdout, _ = runCLI(t, "validate", "--format", "json", path)
	if !strings.Contains(stdout, `"end_line": 6`) || !strings.Contains(stdout, `"end_col": 12`) {
		t.Fatalf("json has no end for the builtin's error:\n%s", stdout)
	}
}

// The underline marks the range's columns: a scalar, a quoted scalar with its
// quotes, wide characters with two carets each (and two spaces before), a key, a
// name inside a template; tabs stay tabs; a range past its line ends with the line;
// a diagnostic without an end gets one caret.
func TestValidateUnderline(t *testing.T) {
	at := func(line, col int) spec.Pos { return spec.Pos{File: "a.yaml", Line: line, Col: col} }
	for _, tt := range []struct {
		name, line string
		pos, end   spec.Pos
		want       string
	}{
		{"scalar", "  max_turns: zero  # comment", at(1, 14), at(1, 18), "             ^^^^"},
		{"quoted scalar", `  stop: "halt"`, at(1, 9), at(1, 15), "        ^^^^^^"},
		{"CJK scalar", "  max_turns: 停止", at(1, 14), at(1, 16), "             ^^^^"},
		{"after CJK", "  名前: 停止", at(1, 7), at(1, 9), "        ^^^^"},
		{"key", "modle: {name: gpt-4o}", at(1, 1), at(1, 6), "^^^^^"},
		{"expression in a template", `instructions: "Hi {{ usr.id }}"`, at(1, 22), at(1, 25), "                     ^^^"},
		{"tabs", "	key:	value", at(1, 7), at(1, 12), "	    	^^^^^"},
		{"range past its line", `  message: "two`, at(1, 12), at(2, 5), "           ^^^^"},
		{"no end", "  max_turns: 0", at(1, 14), spec.Pos{}, "             ^"},
		{"past the line's end", "key:", at(1, 6), at(1, 7), "     ^"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := underline(tt.line, tt.pos, tt.end); got != tt.want {
				t.Errorf("\n%s\n%s (got)\n%s (want)", tt.line, got, tt.want)
			}
		})
	}
}
