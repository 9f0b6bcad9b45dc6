package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// An option's value is expanded once, in the agent's file: a $ the agent escaped
// stays a $, in text and as a whole value.
func TestOptionValuesAreNotExpandedTwice(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "skills", "echo"), 0o755)
	os.WriteFile(filepath.Join(dir, "skills", "echo", "skill.yaml"), []byte(`
name: echo
options:
  note: {type: string}
  list: {type: array, default: []}
instructions: "Say ${options.note} and ${HOME_IN_SKILL:-home}."
tools:
  - name: echo
    command:
      run: [./echo]
      env: {A: "${options.note}"}
    description: "${options.note}"
`), 0o644)
	l := newTestLoader(t)
	s, diags := l.Load(filepath.Join(dir, "agent.yaml"), []byte("version: 1\nname: a\nskills:\n  - use: ./skills/echo\n    with: {note: \"costs $$5 ${NOPE:-x}\"}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := s.Tools[0].Description; got != "costs $5 x" {
		t.Errorf("whole value %q", got)
	}
	if got := s.Instructions.Source; got != "## Skill: echo\nSay costs $5 x and home." {
		t.Errorf("instructions %q", got)
	}
}
