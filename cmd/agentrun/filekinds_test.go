package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/serve"
	"github.com/agentrun/agentrun/spec"
)

// besideSpecs are the files the docs put in a directory of specs, one of each kind,
// named so that no name gives away what they are.
var besideSpecs = map[string]string{
	"agent.yaml":  "version: 1\nname: good\nmodel: {provider: test}\ninstructions: Help.\n",
	"config.yaml": "auth:\n  tokens: [{sha256: " + strings.Repeat("a", 64) + ", user: alice}]\nlimits: {max_concurrent: 4}\n",
	"run1.yaml":   "turns:\n  - text: Hello.\n",
	"checks.yaml": "agent: agent.yaml\ncases:\n  - name: greets\n    input: Hi\n    model: [{text: Hello.}]\n    expect: {answer: {contains: Hello}}\n",
	"kb.yaml":     "faq:\n  - question: Where is my order?\n    answer: On its way.\n",
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// with is besideSpecs with one file replaced or added.
func with(name, content string) map[string]string {
	files := map[string]string{name: content}
	for n, c := range besideSpecs {
		if n != name {
			files[n] = c
		}
	}
	return files
}

// withFAQAgent is with, the agent answering from kb.yaml.
func withFAQAgent(name, content string) map[string]string {
	files := with(name, content)
	files["agent.yaml"] += "knowledge: {collections: {kb: {sources: [kb.yaml]}}}\n" +
		"intents: {faq: {description: FAQ., kind: knowledge, cache: true}}\nrouting: {fallback: faq}\n"
	return files
}

// validate DIR checks every file beside the specs as what its content says it is:
// all clean, or an error in the file that is wrong, at what is wrong with it; a
// file that is no kind is an error that says what the kinds look like.
func TestValidateDirFileKinds(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		code  int
		want  []string // lines of stdout, in order
	}{
		{"one of each is clean", besideSpecs, 0, []string{"5 files checked: no problems"}},
		{"a file that is no kind", with("notes.yaml", "title: Notes\nbody: text\n"), 1, []string{
			"notes.yaml:1:1: error: not an agent spec, serve config, scenario test, model script, FAQ file, knowledge evaluation set or eval file: its top-level keys are title, body",
			"    hint: an agent spec starts with `version: 1` and `name: …`; serve.yaml has auth, limits…; a scenario test cases; a model script turns; an FAQ file faq; a knowledge evaluation set cache or retrieval; an eval file kind: eval",
			"6 files checked: 1 error, 0 warnings"}},
		{"a typo of a known key", with("notes.yaml", "instructons: Help.\n"), 1, []string{
			"notes.yaml:1:1: error: not an agent spec, serve config, scenario test, model script, FAQ file, knowledge evaluation set or eval file: its top-level keys are instructons",
			`    hint: did you mean "instructions" for "instructons"?`,
			"6 files checked: 1 error, 0 warnings"}},
		{"a bad FAQ entry", with("kb.yaml", "faq:\n  - question: Where is my order?\n"), 1, []string{
			"kb.yaml:2:5: error: faq[0]: missing answer",
			`    hint: an entry is - {question: "…?", variants: ["…?"], answer: "…"}; quote texts with ?, : or #`,
			"5 files checked: 1 error, 0 warnings"}},
		{"a bad FAQ entry an agent's collection names, reported once", withFAQAgent("kb.yaml", "faq:\n  - question: Where is my order?\n"), 1, []string{
			"kb.yaml:2:5: error: faq[0]: missing answer",
			`    hint: an entry is - {question: "…?", variants: ["…?"], answer: "…"}; quote texts with ?, : or #`,
			"5 files checked: 1 error, 0 warnings"}},
		{"a bad serve config", with("config.yaml", "limits:\n  max_concurent: 4\n  run_timeout: 5 sec\n"), 1, []string{
			`config.yaml:2:3: error: limits: unknown key "max_concurent"`,
			`    hint: did you mean "max_concurrent"?`,
			`config.yaml:3:16: error: limits.run_timeout: invalid duration "5 sec"`,
			"    hint: use a number with a unit: 500ms, 30s, 2m, 1h30m",
			"5 files checked: 2 errors, 0 warnings"}},
		{"a bad test", with("checks.yaml", "agent: agent.yaml\ncases:\n  - name: greets\n"), 1, []string{
			`checks.yaml:3:5: error: cases[0]: case "greets" has no input`,
			"    hint: give input (one run) or turns (several)",
			"5 files checked: 1 error, 0 warnings"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			code, stdout, stderr := runCLI(t, "validate", "--strict", dir)
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, stdout, stderr)
			}
			if got := strings.Split(strings.TrimSuffix(strings.ReplaceAll(withoutSource(stdout), dir+string(filepath.Separator), ""), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// serve DIR serves the agent specs only: the other kinds are skipped with a note in
// the log, and a file that is no kind stops the server.
func TestServeDirFileKinds(t *testing.T) {
	var logs bytes.Buffer
	srv, err := serve.New(t.Context(), serve.Options{Config: serve.Config{Addr: "127.0.0.1:0"}, Specs: []string{writeDir(t, besideSpecs)}, InsecureNoAuth: true, Model: "test",
		Store: "memory", Index: filepath.Join(t.TempDir(), "index.db"), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, name := range []string{"config.yaml", "run1.yaml", "checks.yaml", "kb.yaml"} {
		if !strings.Contains(logs.String(), name+`","kind":`) {
			t.Errorf("no note about %s in the log:\n%s", name, logs.String())
		}
	}
	if strings.Contains(logs.String(), "agent.yaml") {
		t.Errorf("the agent spec was skipped:\n%s", logs.String())
	}

	_, err = serve.New(t.Context(), serve.Options{Config: serve.Config{Addr: "127.0.0.1:0"}, Specs: []string{writeDir(t, with("notes.yaml", "title: Notes\n"))}, InsecureNoAuth: true, Model: "test",
		Store: "memory", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	var diags spec.Diagnostics
	if !errors.As(err, &diags) || len(diags) != 1 || !strings.HasSuffix(diags[0].Pos.File, "notes.yaml") || !strings.Contains(diags[0].Message, "not an agent spec") {
		t.Errorf("serve.New with a file that is no kind: %v", err)
	}
}

// serve refuses to start on a serve.yaml with problems, printing the diagnostics
// validate prints.
func TestServeRefusesBadConfig(t *testing.T) {
	dir := writeDir(t, with("config.yaml", "limits:\n  max_concurrent: -3\n"))
	code, stdout, stderr := runCLI(t, "serve", "--config", filepath.Join(dir, "config.yaml"), filepath.Join(dir, "agent.yaml"))
	want := filepath.Join(dir, "config.yaml") + ":2:19: error: limits.max_concurrent: must be at least 0, got -3\n"
	if code != 1 || withoutSource(stderr) != want {
		t.Errorf("exit %d\nstdout %q\nstderr %q\nwant   %q", code, stdout, stderr, want)
	}
}
