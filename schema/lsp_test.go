package schema

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/internal/nodetools"
)

type lspDiagnostic struct {
	Line, Col int
	Message   string
}

// TestYAMLLanguageServer opens the examples and a broken spec in a real
// yaml-language-server: the examples' modelines find the schema and raise nothing, and
// the broken spec's mistakes are flagged on their lines, so editors really get the
// schema's completion and checks.
func TestYAMLLanguageServer(t *testing.T) {
	tools := nodetools.Dir(t)
	server := filepath.Join(tools, "node_modules", "yaml-language-server", "bin", "yaml-language-server")
	dir := t.TempDir()
	schemaPath, _ := filepath.Abs("agent.schema.json")
	rel, err := filepath.Rel(dir, schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	src := "# yaml-language-server: $schema=" + rel + "\n" +
		"version: 1\nname: broken\ninstrucions: hi\nguards:\n  duplicate_calls: stpo\n  max_turns: ten\n"
	if err := os.WriteFile(broken, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Glob("../examples/agents/*.yaml")
	packs, _ := filepath.Glob("../examples/agents/skills/*/skill.yaml")
	bundled, _ := filepath.Glob("../skills/bundled/*/skill.yaml")
	if len(examples) == 0 || len(packs) == 0 || len(bundled) == 0 {
		t.Fatal("no examples or skill packs")
	}
	examples = append(append(examples, packs...), bundled...)
	// A broken skill pack: the skill schema reaches the agent schema's definitions
	// through a relative reference, which editors must resolve too.
	skillSchema, _ := filepath.Abs("skill.schema.json")
	relSkill, _ := filepath.Rel(dir, skillSchema)
	brokenSkill := filepath.Join(dir, "skill.yaml")
	os.WriteFile(brokenSkill, []byte("# yaml-language-server: $schema="+relSkill+"\nname: x\ntools:\n  - builtin: calculater\n"), 0o644)
	// An eval file's grader and expect are the agent and test schemas' definitions:
	// their errors show only when the editor resolves the references.
	evalSchema, _ := filepath.Abs("eval.schema.json")
	relEval, _ := filepath.Rel(dir, evalSchema)
	brokenEval := filepath.Join(dir, "broken.evals.yaml")
	os.WriteFile(brokenEval, []byte("# yaml-language-server: $schema="+relEval+"\nkind: eval\nversion: 1\ngrader: {name: x, temprature: 1}\n"+
		"cases:\n  - name: a\n    input: b\n    expect: {stop: nope}\n    graderz: []\n"), 0o644)
	out, err := exec.Command("node", append([]string{filepath.Join(tools, "lsp-check.mjs"), server, broken, brokenSkill, brokenEval}, examples...)...).Output()
	if err != nil {
		t.Fatalf("lsp-check: %v\n%s", err, out)
	}
	var got map[string][]lspDiagnostic
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, ex := range examples {
		if d := got[ex]; len(d) > 0 {
			t.Errorf("%s: yaml-language-server reports %+v", ex, d)
		}
	}
	var lines []int
	for _, d := range got[broken] {
		lines = append(lines, d.Line)
	}
	slices.Sort(lines)
	if !slices.Equal(lines, []int{4, 6, 7}) {
		t.Errorf("broken spec: diagnostics on lines %v, want 4 (unknown key), 6 (enum), 7 (type): %+v", lines, got[broken])
	}
	if d := got[brokenSkill]; len(d) != 1 || d[0].Line != 4 {
		t.Errorf("broken skill: %+v, want one diagnostic on line 4 (the builtin's name)", d)
	}
	lines = nil
	for _, d := range got[brokenEval] {
		lines = append(lines, d.Line)
	}
	slices.Sort(lines)
	if !slices.Equal(lines, []int{4, 8, 9}) {
		t.Errorf("broken eval file: diagnostics on lines %v, want 4 (the grader model's key), 8 (expect's enum), 9 (unknown key): %+v", lines, got[brokenEval])
	}
}
