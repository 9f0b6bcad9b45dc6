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

// instructions_file text gets the same substitution as inline instructions.
func TestInstructionsFile(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "skills", "doc"), 0o755)
	os.WriteFile(filepath.Join(dir, "skills", "doc", "skill.yaml"), []byte("name: doc\noptions:\n  shop: {type: string, default: 小满}\ninstructions_file: GUIDE.md\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "skills", "doc", "GUIDE.md"), []byte("Serve ${options.shop}'s customers in ${REGION:-cn}.\n"), 0o644)
	l := newTestLoader(t)
	s, diags := l.Load(filepath.Join(dir, "agent.yaml"), []byte("version: 1\nname: a\nskills: [./skills/doc]\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := s.Instructions.Source; got != "## Skill: doc\nServe 小满's customers in cn." {
		t.Errorf("instructions %q", got)
	}
}
