package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/nodetools"
)

func TestAgentrunTestExamples(t *testing.T) {
	code, stdout, stderr := runCLI(t, "test", "../../examples/agents")
	if code != 0 || !strings.HasSuffix(stdout, "43 passed, 0 failed\n") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "test", "--run", "judge", "../../examples/agents")
	if code != 0 || !strings.HasSuffix(stdout, "3 passed, 0 failed\n") {
		t.Errorf("--run judge: exit %d\n%s", code, stdout)
	}
}

// brokenShop copies the shop example and its skill pack with cancel_order taken out
// of the cancel_order intent.
func brokenShop(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src, _ := os.ReadFile(shopSupport)
	broken := strings.Replace(string(src), "    tools: [cancel_order]\n", "    tools: []\n", 1)
	if broken == string(src) {
		t.Fatal("the example changed: cannot break it")
	}
	os.WriteFile(filepath.Join(dir, "shop-support.yaml"), []byte(broken), 0o644)
	tests, _ := os.ReadFile("../../examples/agents/shop-support.test.yaml")
	os.WriteFile(filepath.Join(dir, "shop-support.test.yaml"), tests, 0o644)
	specialist, _ := os.ReadFile("../../examples/agents/refund-specialist.yaml")
	os.WriteFile(filepath.Join(dir, "refund-specialist.yaml"), specialist, 0o644)
	os.MkdirAll(filepath.Join(dir, "skills", "orders"), 0o755)
	pack, _ := os.ReadFile("../../examples/agents/skills/orders/skill.yaml")
	os.WriteFile(filepath.Join(dir, "skills", "orders", "skill.yaml"), pack, 0o644)
	if err := os.CopyFS(filepath.Join(dir, "help-center"), os.DirFS("../../examples/agents/help-center")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Breaking the spec makes the named cases fail with a readable diff.
func TestAgentrunTestReportsBrokenSpec(t *testing.T) {
	dir := brokenShop(t)
	code, stdout, _ := runCLI(t, "test", dir)
	if code != 1 || !strings.HasSuffix(stdout, "15 passed, 9 failed\n") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	for _, want := range []string{
		"FAIL " + filepath.Join(dir, "shop-support.test.yaml") + " › cancel an order the user was shown",
		"✗ calls (exact) differ:\n        expected:\n          - list_recent_orders → ok\n          - cancel_order {\"order_number\":\"A1001\"} → ok\n        actual:",
		"- cancel_order {\"order_number\":\"A1001\",\"reason\":\"不想要了\"} → refused",
		"✗ the model script calls cancel_order, which the agent does not offer here",
		"what the agent did:\n      intent cancel_order (rules)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// JSON and JUnit carry the same outcome.
	_, stdout, _ = runCLI(t, "test", "--format", "json", dir)
	var out struct {
		Passed, Failed int
		Files          []struct {
			Cases []struct {
				Case   string
				Passed bool
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || out.Passed != 15 || out.Failed != 9 {
		t.Errorf("json: %v %+v", err, out)
	}
}

// The JUnit report is read by test-results-parser, a JUnit consumer CI reporting
// tools use, with the totals and statuses the text report gives.
func TestAgentrunTestJUnit(t *testing.T) {
	tools := nodetools.Dir(t)
	dir := brokenShop(t)
	code, stdout, _ := runCLI(t, "test", "--format", "junit", dir)
	if code != 1 || !strings.HasPrefix(stdout, "<?xml") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	report := filepath.Join(t.TempDir(), "report.xml")
	os.WriteFile(report, []byte(stdout), 0o644)
	out, err := exec.Command("node", filepath.Join(tools, "junit-check.mjs"), report).Output()
	if err != nil {
		t.Fatalf("junit-check: %v\n%s", err, out)
	}
	var got struct {
		Total, Passed, Failed int
		Suites                []struct {
			Cases []struct{ Name, Status, Failure string }
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Total != 24 || got.Passed != 15 || got.Failed != 9 {
		t.Errorf("the consumer read %+v", got)
	}
	failed := 0
	for _, c := range got.Suites[0].Cases {
		if c.Status == "FAIL" {
			failed++
			if c.Failure == "" {
				t.Errorf("failed case %q has no failure message", c.Name)
			}
		}
	}
	if failed != 9 {
		t.Errorf("%d failed cases", failed)
	}
}

func TestAgentrunTestProblems(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "a.yaml")
	os.WriteFile(agent, []byte("version: 1\nname: a\ntools: [{builtin: calculator}]\n"), 0o644)
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(src), 0o644)
		return p
	}
	short := write("short.test.yaml", "agent: a.yaml\ncases:\n  - name: loops\n    input: x\n    model:\n      - tool_calls: [{name: calculator, arguments: {expression: '1'}}]\n")
	code, stdout, _ := runCLI(t, "test", short)
	if code != 1 || !strings.Contains(stdout, "the model script ran out: script") {
		t.Errorf("a script that runs out: exit %d\n%s", code, stdout)
	}
	unused := write("unused.test.yaml", "agent: a.yaml\ncases:\n  - name: extra\n    input: x\n    model:\n      - text: done\n      - text: never\n")
	if code, stdout, _ := runCLI(t, "test", unused); code != 1 || !strings.Contains(stdout, "the model script has 1 turn(s) the run never used") {
		t.Errorf("unused turns: exit %d\n%s", code, stdout)
	}
	bad := write("bad.test.yaml", "agent: a.yaml\ncases:\n  - name: typo\n    input: x\n    expect: {calls: [{tool: calculater}], stopp: completed}\n")
	code, stdout, _ = runCLI(t, "test", bad)
	if code != 1 || !strings.Contains(stdout, `unknown key "stopp"`) || !strings.Contains(stdout, `did you mean "stop"?`) {
		t.Errorf("a broken test file: exit %d\n%s", code, stdout)
	}
	wrongTool := write("tool.test.yaml", "agent: a.yaml\ncases:\n  - name: typo\n    input: x\n    expect: {calls: [{tool: calculater}]}\n")
	if code, stdout, _ := runCLI(t, "test", wrongTool); code != 1 || !strings.Contains(stdout, `the agent has no tool "calculater"`) {
		t.Errorf("an unknown tool: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCLI(t, "test", t.TempDir()); code != 2 || !strings.Contains(stderr, "no scenario tests") {
		t.Errorf("no tests: exit %d %s", code, stderr)
	}
}

// A recorded run replays to the same trajectory with the script model.
func TestRecordAndReplay(t *testing.T) {
	newFakeOpenAI(t,
		calls(toolCall("call_read", "read_file", `{"path":"go.mod","limit":1}`)),
		calls(toolCall("call_calc", "calculator", `{"expression":"3 * 7"}`)),
		answer("go.mod declares the module; 3 * 7 = 21 by the calculator."),
	)
	script := filepath.Join(t.TempDir(), "run.yaml")
	code, first, stderr := runCLI(t, "exec", "--json", "--record", script, codeAssistant, "Read go.mod and compute 3*7")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	recorded, _ := os.ReadFile(script)
	if strings.Contains(string(recorded), "SECRET") || !strings.Contains(string(recorded), "judge:") {
		t.Errorf("recorded script:\n%s", recorded)
	}
	code, second, stderr := runCLI(t, "exec", "--json", "--model", "script:"+script, codeAssistant, "Read go.mod and compute 3*7")
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, stderr)
	}
	type step struct{ Tool, Arguments, Outcome, Result string }
	var a, b struct {
		Answer, Stop string
		Steps        []step
		Verdicts     []struct{ Passed bool }
	}
	json.Unmarshal([]byte(first), &a)
	json.Unmarshal([]byte(second), &b)
	if a.Answer != b.Answer || a.Stop != b.Stop || len(a.Steps) != 2 || len(a.Verdicts) != len(b.Verdicts) {
		t.Fatalf("replay differs:\n%+v\n%+v", a, b)
	}
	for i := range a.Steps {
		if a.Steps[i] != b.Steps[i] {
			t.Errorf("step %d: %+v vs %+v", i, a.Steps[i], b.Steps[i])
		}
	}
}
