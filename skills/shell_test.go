package skills_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/builtin"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/skills"
	"github.com/agentrun/agentrun/spec"
)

// shellExamples returns the ```yaml blocks of a markdown file that use the shell skill,
// from the line starting with heading (all of the file when heading is "") up to the
// next heading of the same level.
func shellExamples(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if heading != "" {
		start := -1
		for i, l := range lines {
			if l == heading {
				start = i + 1
			} else if start >= 0 && strings.HasPrefix(l, strings.Fields(heading)[0]+" ") {
				lines = lines[start:i]
				break
			}
		}
		if start < 0 {
			t.Fatalf("%s has no heading %q", file, heading)
		}
	}
	var blocks []string
	var cur []string
	in := false
	for _, l := range lines {
		switch {
		case !in && l == "```yaml":
			in, cur = true, nil
		case in && l == "```":
			in = false
			if block := strings.Join(cur, "\n") + "\n"; strings.Contains(block, "use: shell") {
				blocks = append(blocks, block)
			}
		case in:
			cur = append(cur, l)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no shell example", file)
	}
	return blocks
}

// TestShellSkillExamplesAreSafe takes every example of the skill's README and of its
// section in docs/skills.md as written, and lets the model try the attack of issue 14,
// git -c alias.x='!touch FILE' x, besides a harmless ls: the file is never created.
func TestShellSkillExamplesAreSafe(t *testing.T) {
	examples := map[string]string{}
	for i, ex := range shellExamples(t, "bundled/shell/README.md", "") {
		examples[fmt.Sprintf("README example %d", i+1)] = ex
	}
	for i, ex := range shellExamples(t, "../docs/skills.md", "### shell") {
		examples[fmt.Sprintf("docs/skills.md example %d", i+1)] = ex
	}
	for name, example := range examples {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "agents", "shell")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{root, dir} {
				os.WriteFile(filepath.Join(d, "listed.txt"), nil, 0o644) // where ls looks, whatever the example's dir
			}
			file := filepath.Join(root, "FILE")
			a := agent(t, dir, "version: 1\nname: a\n"+example,
				offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{
					{Name: "run_command", Arguments: map[string]any{"command": "git", "args": []any{"-c", "alias.x=!touch " + file, "x"}}},
					{Name: "run_command", Arguments: map[string]any{"command": "git", "args": []any{"--config-env=alias.x=HOME", "x"}}},
					{Name: "run_command", Arguments: map[string]any{"command": "ls", "args": []any{"-a"}}},
				}}, done())
			res := run(t, a)
			for _, s := range res.Steps[:2] {
				if s.Outcome == runtime.OutcomeOK {
					t.Errorf("the attack ran: %+v", s)
				}
			}
			if res.Steps[2].Outcome != runtime.OutcomeOK || !strings.Contains(res.Steps[2].Result, "listed.txt") {
				t.Errorf("ls in dir: %+v", res.Steps[2])
			}
			if _, err := os.Stat(file); err == nil {
				t.Error("FILE was created")
			}
		})
	}
}

// compileShell loads an agent that uses the shell skill with these commands (YAML
// flow text) and compiles it, returning its diagnostics.
func compileShell(t *testing.T, commands string) spec.Diagnostics {
	t.Helper()
	l, _ := spec.NewLoader()
	l.Bundled = skills.Bundled()
	src := "version: 1\nname: a\nskills:\n  - use: shell\n    with: {commands: " + commands + "}\n"
	s, diags := l.Load(filepath.Join(t.TempDir(), "a.yaml"), []byte(src))
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	reg := tool.Registry{}
	builtin.Register(reg)
	_, diags = runtime.Compile(s, runtime.Options{Tools: reg})
	return diags
}

// TestShellSkillRefusesCodeRunners: through the skill, a code runner in commands is an
// error that names the entry, and points at the agent's use of the skill; the opt-in
// and argument rules pass through the skill's option unchanged.
func TestShellSkillRefusesCodeRunners(t *testing.T) {
	tests := []struct {
		name     string
		commands string
		want     string // in the error; "" means it compiles
	}{
		{"the old example", "[ls, wc, git]", "with.allow[2]: git runs commands from its options"},
		{"an interpreter", "[ls, python3]", "with.allow[1]: python3 is an interpreter"},
		{"awk", "[awk]", "awk's system() runs commands"},
		{"the opt-in", "[ls, {program: python3, allow_code_execution: true}]", ""},
		{"rules without the opt-in", "[{program: git, subcommands: [status]}]", "{program: git, allow_code_execution: true}"},
		{"a shell even with the opt-in", "[{program: bash, allow_code_execution: true}]", "bash would run any command"},
		{"a typo in an entry", "[{program: ls, deny_option: [-R]}]", `did you mean "deny_options"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags := compileShell(t, tt.commands)
			if tt.want == "" {
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				return
			}
			if len(diags) != 1 || !strings.Contains(diags[0].Message, tt.want) {
				t.Fatalf("diags %v, want one with %q", diags, tt.want)
			}
			// The error points at the skill's tool and notes the agent's skill entry.
			if n := diags[0].Notes; len(n) != 1 || n[0].Pos.Line != 4 || !strings.HasSuffix(n[0].Pos.File, "a.yaml") {
				t.Errorf("notes %+v, want the agent's line 4", n)
			}
		})
	}
}

// TestShellSkillRunsNarrowedGit: git listed with the opt-in and rules runs its allowed
// subcommands for real and refuses the rest, naming the rule.
func TestShellSkillRunsNarrowedGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	src := "version: 1\nname: a\nskills:\n  - use: shell\n    with:\n      commands:\n" +
		"        - {program: git, allow_code_execution: true, subcommands: [status], deny_options: [-c, --exec-path]}\n"
	a := agent(t, dir, src, offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{
		{Name: "run_command", Arguments: map[string]any{"command": "git", "args": []any{"status", "--short", "--branch"}}},
		{Name: "run_command", Arguments: map[string]any{"command": "git", "args": []any{"status", "--exec-path=/tmp"}}},
		{Name: "run_command", Arguments: map[string]any{"command": "git", "args": []any{"commit", "-m", "x"}}},
	}}, done())
	res := run(t, a)
	if res.Steps[0].Outcome != runtime.OutcomeOK || !strings.Contains(res.Steps[0].Result, "##") {
		t.Errorf("git status: %+v", res.Steps[0])
	}
	if res.Steps[1].Outcome != runtime.OutcomeError || !strings.Contains(res.Steps[1].Result, "deny_options: --exec-path is denied") {
		t.Errorf("--exec-path: %+v", res.Steps[1])
	}
	if res.Steps[2].Outcome != runtime.OutcomeError || !strings.Contains(res.Steps[2].Result, "rule subcommands") {
		t.Errorf("commit: %+v", res.Steps[2])
	}
}
