package skills_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/builtin"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/kinds"
	"github.com/agentrun/agentrun/skills"
	"github.com/agentrun/agentrun/spec"
)

// agent loads an agent spec written into dir, with the bundled skills, and compiles
// it with the real tool kinds and a script model.
func agent(t *testing.T, dir, src string, turns ...offline.ScriptTurn) *runtime.Agent {
	t.Helper()
	l, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.Bundled = skills.Bundled()
	l.LookupEnv = func(string) (string, bool) { return "", false }
	file := filepath.Join(dir, "agent.yaml")
	s, diags := l.Load(file, []byte(src))
	if diags.HasErrors() {
		t.Fatalf("spec: %v", diags)
	}
	reg := tool.Registry{}
	builtin.Register(reg)
	kinds.Register(reg)
	a, diags := runtime.Compile(s, runtime.Options{Tools: reg, Model: offline.NewScript("t", turns)})
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	return a
}

func call(name string, args map[string]any) offline.ScriptTurn {
	return offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{{Name: name, Arguments: args}}}
}

func done() offline.ScriptTurn { return offline.ScriptTurn{Text: "done"} }

func run(t *testing.T, a *runtime.Agent) *runtime.Result {
	t.Helper()
	res, err := a.Run(context.Background(), runtime.Request{Input: "go", User: tool.User{ID: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func toolNames(a *runtime.Agent) string {
	var names []string
	for _, d := range a.Tools() {
		names = append(names, d.Name)
	}
	return strings.Join(names, ",")
}

func TestBundledSkillsList(t *testing.T) {
	l, _ := spec.NewLoader()
	l.Bundled = skills.Bundled()
	if got := strings.Join(l.BundledSkills(), ","); got != "calculator,files,shell,time,web" {
		t.Errorf("bundled skills %s", got)
	}
}

func TestCalculatorSkill(t *testing.T) {
	a := agent(t, t.TempDir(), "version: 1\nname: a\nskills: [calculator]\n", call("calculator", map[string]any{"expression": "6 * (3 + 4)"}), done())
	res := run(t, a)
	if res.Steps[0].Result != "42" {
		t.Errorf("%+v", res.Steps[0])
	}
}

func TestFilesSkill(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "notes.txt"), []byte("first\nsecond\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("TOPSECRET"), 0o644)
	readOnly := "version: 1\nname: a\nskills:\n  - use: files\n    with: {root: data}\n"
	a := agent(t, dir, readOnly,
		offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{
			{Name: "read_file", Arguments: map[string]any{"path": "notes.txt"}},
			{Name: "list_dir", Arguments: map[string]any{}},
			{Name: "read_file", Arguments: map[string]any{"path": "../secret.txt"}},
			{Name: "write_file", Arguments: map[string]any{"path": "x.txt", "content": "x"}},
		}}, done())
	if got := toolNames(a); got != "read_file,list_dir" {
		t.Errorf("read-only files skill offers %s", got)
	}
	res := run(t, a)
	if !strings.Contains(res.Steps[0].Result, "second") || !strings.Contains(res.Steps[1].Result, "notes.txt") {
		t.Errorf("read/list: %+v", res.Steps[:2])
	}
	if res.Steps[2].Outcome != "error" || strings.Contains(res.Steps[2].Result, "TOPSECRET") {
		t.Errorf("escape from the root: %+v", res.Steps[2])
	}
	if res.Steps[3].Outcome != "refused" {
		t.Errorf("write_file without write: true ran: %+v", res.Steps[3])
	}
	writable := "version: 1\nname: a\nskills:\n  - use: files\n    with: {root: data, write: true}\n"
	a = agent(t, dir, writable, call("write_file", map[string]any{"path": "new.txt", "content": "hello"}), done())
	if res := run(t, a); res.Steps[0].Outcome != "ok" {
		t.Fatalf("%+v", res.Steps[0])
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data", "new.txt")); string(b) != "hello" {
		t.Errorf("written %q", b)
	}
}

func TestWebSkill(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("page body")) }))
	defer srv.Close()
	src := "version: 1\nname: a\nskills:\n  - use: web\n    with: {allow_hosts: [127.0.0.1], timeout: 2s}\n"
	a := agent(t, t.TempDir(), src,
		offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{
			{Name: "http_get", Arguments: map[string]any{"url": srv.URL + "/doc"}},
			{Name: "http_get", Arguments: map[string]any{"url": "http://example.com/"}},
		}}, done())
	res := run(t, a)
	if !strings.Contains(res.Steps[0].Result, "page body") {
		t.Errorf("allowed host: %+v", res.Steps[0])
	}
	if res.Steps[1].Outcome != "error" || !strings.Contains(res.Steps[1].Result, "example.com") {
		t.Errorf("disallowed host: %+v", res.Steps[1])
	}
}

func TestShellSkill(t *testing.T) {
	src := "version: 1\nname: a\nskills:\n  - use: shell\n    with: {commands: [echo]}\n"
	a := agent(t, t.TempDir(), src,
		offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{
			{Name: "run_command", Arguments: map[string]any{"command": "echo", "args": []any{"hello", "$(id)", "*"}}},
			{Name: "run_command", Arguments: map[string]any{"command": "ls", "args": []any{"/"}}},
		}}, done())
	res := run(t, a)
	if res.Steps[0].Result != "hello $(id) *\n" {
		t.Errorf("arguments must reach the program uninterpreted: %q", res.Steps[0].Result)
	}
	if res.Steps[1].Outcome != "refused" {
		t.Errorf("a program outside the list: %+v", res.Steps[1])
	}
	// A shell may not be listed: it would run any command string.
	l, _ := spec.NewLoader()
	l.Bundled = skills.Bundled()
	for _, shell := range []string{"bash", "/bin/sh", "env", "/usr/bin/xargs"} {
		s, _ := l.Load(filepath.Join(t.TempDir(), "a.yaml"), []byte("version: 1\nname: a\nskills:\n  - use: shell\n    with: {commands: ["+shell+"]}\n"))
		reg := tool.Registry{}
		builtin.Register(reg)
		if _, diags := runtime.Compile(s, runtime.Options{Tools: reg}); !diags.HasErrors() || !strings.Contains(diags.Error(), shell+" would run any command") {
			t.Errorf("%s: diags %v", shell, diags)
		}
	}
}

func TestTimeSkill(t *testing.T) {
	src := "version: 1\nname: a\nskills:\n  - use: time\n    with: {timezone: Asia/Shanghai}\n"
	a := agent(t, t.TempDir(), src, call("current_time", map[string]any{}), done())
	if res := run(t, a); !strings.Contains(res.Steps[0].Result, "+08:00") || !strings.Contains(res.Steps[0].Result, "Asia/Shanghai") {
		t.Errorf("%+v", res.Steps[0])
	}
}

// Skills merge in list order, after the agent's instructions; a skill's filter acts
// on the skill's own tool and leaves the agent's tools alone.
func TestMergeOrderAndSkillFilters(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "skills", "masked"), 0o755)
	os.WriteFile(filepath.Join(dir, "skills", "masked", "skill.yaml"), []byte(`
name: masked
instructions: Masked skill rules.
tools:
  - name: masked_time
    builtin: current_time
filters:
  - on: tool_result
    redact: '\d'
    replacement: '#'
`), 0o644)
	src := `
version: 1
name: a
instructions: Agent rules.
skills: [./skills/masked, calculator]
tools:
  - name: clock
    builtin: current_time
`
	model := &recorder{Model: offline.NewScript("t", []offline.ScriptTurn{
		{ToolCalls: []offline.ScriptToolCall{{Name: "masked_time"}, {Name: "clock"}}}, done()})}
	l, _ := spec.NewLoader()
	l.Bundled = skills.Bundled()
	s, diags := l.Load(filepath.Join(dir, "agent.yaml"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	reg := tool.Registry{}
	builtin.Register(reg)
	a, _ := runtime.Compile(s, runtime.Options{Tools: reg, Model: model})
	res := run(t, a)
	sys := model.first
	iAgent, iMasked, iCalc := strings.Index(sys, "Agent rules."), strings.Index(sys, "## Skill: masked"), strings.Index(sys, "## Skill: calculator")
	if iAgent != 0 || iMasked < iAgent || iCalc < iMasked {
		t.Errorf("merge order:\n%s", sys)
	}
	if got := toolNames(a); got != "clock,masked_time,calculator" {
		t.Errorf("tools %s", got)
	}
	if strings.ContainsAny(res.Steps[0].Result, "0123456789") || !strings.ContainsAny(res.Steps[1].Result, "0123456789") {
		t.Errorf("the skill's filter must mask its own tool only: %q / %q", res.Steps[0].Result, res.Steps[1].Result)
	}
}

type recorder struct {
	model.Model
	first string
}

func (r *recorder) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if r.first == "" && len(req.Messages) > 0 {
		r.first = req.Messages[0].Content
	}
	return r.Model.Complete(ctx, req)
}
