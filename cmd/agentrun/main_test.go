package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/fixture"
	"github.com/agentrun/agentrun/schema"
	"github.com/agentrun/agentrun/spec"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testTemp is a directory for the whole package run, removed when it ends.
var testTemp string

// TestMain keeps the tests out of the source tree: exec's default store is
// .agentrun/state.db in the working directory, which under go test is this package's
// directory, so AGENTRUN_STORE points at a file in testTemp instead. It overrides the
// caller's AGENTRUN_STORE too, so the tests never write into a real store. A test of
// the default place clears it with t.Setenv and runs in a t.TempDir().
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentrun-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	testTemp = dir
	os.Setenv("AGENTRUN_STORE", "sqlite:"+filepath.Join(dir, "state.db"))
	os.Setenv("AGENTRUN_INDEX", filepath.Join(dir, "knowledge.db")) // the knowledge index, likewise
	return m.Run()
}

// runCLI runs agentrun in-process.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/agentrun -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

const (
	manyMistakes = "../../spec/testdata/invalid/many_mistakes.yaml"
	warnings     = "../../spec/testdata/invalid/warnings.yaml"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string // compare stdout with testdata/golden/<golden>
		stdout string // or require stdout to contain this
		stderr string // require stderr to contain this
	}{
		{name: "examples are clean", args: []string{"validate", "--strict", "../../examples/agents"}, code: 0, stdout: "20 files checked: no problems\n"},
		{name: "every mistake at once", args: []string{"validate", manyMistakes}, code: 1, golden: "many_mistakes.txt"},
		{name: "json", args: []string{"validate", "--format", "json", manyMistakes}, code: 1, golden: "many_mistakes.json"},
		{name: "github annotations", args: []string{"validate", "--format=github", manyMistakes}, code: 1, golden: "many_mistakes.github"},
		{name: "warnings pass", args: []string{"validate", warnings}, code: 0, stdout: "1 file checked: 0 errors, 3 warnings\n"},
		{name: "warnings fail with strict", args: []string{"validate", "--strict", warnings}, code: 1, stdout: "3 warnings"},
		{name: "several files", args: []string{"validate", warnings, manyMistakes, "../../examples/agents/shop-support.yaml"}, code: 1, stdout: "3 files checked: 5 errors, 3 warnings\n"},
		{name: "a missing program is a warning", args: []string{"validate", "../../spec/testdata/invalid/command_missing.yaml"}, code: 0, stdout: "1 file checked: 0 errors, 2 warnings\n"},
		{name: "a missing program fails with strict", args: []string{"validate", "--strict", "../../spec/testdata/invalid/command_missing.yaml"}, code: 1,
			stdout: "command_missing.yaml:7:13: warning: tools[0].command.run[0]: program ./bin/lookup is not found at ../../spec/testdata/invalid/bin/lookup\n    hint: build or install it there"},
		{name: "missing file", args: []string{"validate", "nope.yaml"}, code: 2, stderr: "nope.yaml: no such file or directory"},
		{name: "directory without specs", args: []string{"validate", "testdata/empty-dir"}, code: 2, stderr: "no agent specs"},
		{name: "unknown format", args: []string{"validate", "--format", "xml", warnings}, code: 2, stderr: `unknown --format "xml"`},
		{name: "no arguments", args: []string{"validate"}, code: 2, stderr: "requires at least 1 arg"},
		{name: "unknown command", args: []string{"valdate"}, code: 2, stderr: `unknown command "valdate"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.golden != "" {
				checkGolden(t, tt.golden, stdout)
			}
			if !strings.Contains(withoutSource(stdout), tt.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout, tt.stdout)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.stderr)
			}
		})
	}
}

// An unreadable file is an I/O error (exit 2), reported along with the other files.
func TestValidateUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "locked.yaml")
	if err := os.WriteFile(file, []byte("version: 1\nname: x\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "validate", file)
	if code != 2 || !strings.Contains(stdout, "permission denied") {
		t.Errorf("code %d, stdout %q", code, stdout)
	}
}

func TestValidateJSONIsMachineReadable(t *testing.T) {
	_, stdout, _ := runCLI(t, "validate", "--format", "json", manyMistakes, warnings)
	var out struct {
		Files, Errors, Warnings int
		Diagnostics             []struct {
			File, Severity, Path, Message, Hint string
			Line, Col                           int
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Files != 2 || out.Errors != 5 || out.Warnings != 3 || len(out.Diagnostics) != 8 {
		t.Errorf("got %+v", out)
	}
	for _, d := range out.Diagnostics {
		if d.File == "" || d.Line < 1 || d.Col < 1 || d.Message == "" {
			t.Errorf("incomplete diagnostic %+v", d)
		}
	}
}

func TestSchemaCommand(t *testing.T) {
	code, stdout, _ := runCLI(t, "schema")
	if code != 0 || stdout != string(schema.JSON) {
		t.Fatalf("code %d; schema output differs from the embedded schema", code)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["$id"] != schema.ID {
		t.Errorf("$id = %v", doc["$id"])
	}
	for which, want := range map[string][]byte{"skill": schema.SkillJSON, "test": schema.TestJSON, "eval": schema.EvalJSON, "serve": schema.ServeJSON} {
		if code, stdout, _ := runCLI(t, "schema", which); code != 0 || stdout != string(want) {
			t.Errorf("schema %s: exit %d", which, code)
		}
	}
	if code, _, stderr := runCLI(t, "schema", "tools"); code != 2 || !strings.Contains(stderr, `unknown schema "tools"`) {
		t.Errorf("schema tools: exit %d %s", code, stderr)
	}
}

// Every example names the schema for yaml-language-server, by a path that exists.
func TestExamplesHaveSchemaModeline(t *testing.T) {
	for _, f := range exampleAgents(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(src), "\n")
		rel, ok := strings.CutPrefix(first, "# yaml-language-server: $schema=")
		if !ok {
			t.Errorf("%s: first line %q is not a yaml-language-server modeline", f, first)
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), rel)); err != nil {
			t.Errorf("%s: modeline points at %s: %v", f, rel, err)
		}
	}
}

// TestCompileFixtures validates specs whose problems only Compile finds (builtin
// tool configurations): validate must report them like the loader's, at the tool.
func TestCompileFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runCLI(t, "validate", "--format", "json", file)
			if code != 1 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			var out struct {
				Diagnostics []struct {
					File, Severity, Path, Message, Hint string
					Line, Col                           int
				}
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatal(err)
			}
			// Each diagnostic is compared with the expectations of the file it points
			// into: the spec, or a knowledge source it names (under kb/).
			got := map[string][]fixture.Diagnostic{file: nil}
			for _, d := range out.Diagnostics {
				got[d.File] = append(got[d.File], fixture.Diagnostic{Line: d.Line, Col: d.Col, Severity: d.Severity, Summary: strings.TrimPrefix(d.Path+": "+d.Message, ": "), Hint: d.Hint})
			}
			for _, m := range kbRe.FindAllString(string(src), -1) {
				sources, _ := filepath.Glob(filepath.Join(filepath.Dir(file), m))
				for _, s := range sources {
					if _, ok := got[s]; !ok {
						got[s] = nil // its expectations must be reported too
					}
				}
			}
			for f, diags := range got {
				fsrc := src
				if f != file {
					if fsrc, err = os.ReadFile(f); err != nil {
						t.Fatal(err)
					}
				}
				if want := fixture.Expected(string(fsrc)); len(want) > 0 || len(diags) > 0 {
					fixture.Compare(t, want, diags)
				}
			}
		})
	}
}

var kbRe = regexp.MustCompile(`kb/[\w*.]+`)

// exampleAgents are the example specs, found the way validate finds specs (no tests,
// scripts or skill packs).
func exampleAgents(t *testing.T) []string {
	t.Helper()
	files, walked, err := spec.SpecFiles([]string{"../../examples/agents"})
	if err != nil || len(walked) > 0 || len(files) < 3 {
		t.Fatalf("example agents: %v %v %v", files, walked, err)
	}
	return files
}
