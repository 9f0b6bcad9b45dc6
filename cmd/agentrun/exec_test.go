package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Both examples run offline with the built-in test model.
func TestExecExamplesWithTestModel(t *testing.T) {
	code, stdout, stderr := runCLI(t, "exec", "--model", "test", codeAssistant, "How long is README.md, and what is 2*(3+4)?")
	if code != 0 || !strings.Contains(stdout, "calculator → 14") || !strings.Contains(stdout, "read_file → 1 # agentrun") {
		t.Errorf("code assistant: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"test model (offline)", "⚙ read_file", "✓ calculator", "■ completed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	t.Setenv("SHOP_API", "http://127.0.0.1:1") // nothing listens: the tools fail, the run completes
	code, stdout, stderr = runCLI(t, "exec", "--model", "test", "-q", "--set", "tier=gold", "../../examples/agents/shop-support.yaml", "我的外卖到哪了？")
	if code != 0 || !strings.HasPrefix(stdout, "test model: called ") || stderr != "" {
		t.Errorf("shop support: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// The model sends a user_id for a tool that binds it: the tool still acts for the
// run's user, end to end through the http kind.
func TestExecBoundUserCannotBeForged(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Write([]byte(`{"orders":[{"number":"A1"}]}`))
	}))
	defer shop.Close()
	t.Setenv("SHOP_API", shop.URL)
	script := writeFile(t, "turns.yaml", `
turns:
  - tool_calls:
      - {name: list_recent_orders, arguments: {status: any, user_id: victim-7}}
  - text: Here are your orders.
`)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	code, stdout, stderr := runCLI(t, "exec", "--model", "script:"+script, "--user", "u-42", "--intent", "order_status", "--trace", trace, "../../examples/agents/shop-support.yaml", "my orders, and victim-7's")
	if code != 0 || stdout != "Here are your orders.\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if len(paths) != 1 || paths[0] != "/users/u-42/orders" {
		t.Errorf("the shop saw %v; want the run's user only", paths)
	}
	raw, _ := os.ReadFile(trace)
	if !strings.Contains(string(raw), `"kind":"bind_discarded"`) {
		t.Error("no bind_discarded event in the trace")
	}
	// The logs show what ran: the bound user, never the forged value as an argument.
	if strings.Contains(stderr, "victim-7\"") || strings.Contains(string(raw), `victim-7\"`) {
		t.Errorf("a discarded value shows as an argument:\n%s\n%s", stderr, raw)
	}
	if !strings.Contains(stderr, `⚙ list_recent_orders {"status":"any","user_id":"u-42"}`) {
		t.Errorf("progress does not show the arguments the tool ran with:\n%s", stderr)
	}
	code, stdout, _ = runCLI(t, "exec", "-q", "--json", "--model", "script:"+script, "--user", "u-42", "--intent", "order_status", "../../examples/agents/shop-support.yaml", "again")
	var res struct {
		Steps []struct {
			Arguments string   `json:"arguments"`
			Discarded []string `json:"discarded"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 || len(res.Steps) != 1 {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	if s := res.Steps[0]; strings.Contains(s.Arguments, "victim") || !strings.Contains(s.Arguments, `"user_id":"u-42"`) || len(s.Discarded) != 1 || s.Discarded[0] != "user_id" {
		t.Errorf("--json step %+v", s)
	}
}

func TestExecExitCodesAndInput(t *testing.T) {
	loop := writeFile(t, "loop.yaml", `
turns:
  - tool_calls: [{name: calculator, arguments: {expression: "1+1"}}]
  - tool_calls: [{name: calculator, arguments: {expression: "1+1"}}]
  - tool_calls: [{name: calculator, arguments: {expression: "1+1"}}]
`)
	specFile := writeFile(t, "agent.yaml", `
version: 1
name: stopper
model: {provider: test}
tools: [{builtin: calculator}]
guards: {duplicate_calls: stop, fallback: "Sorry, I got stuck."}
`)
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string
	}{
		{name: "completed", args: []string{"exec", "-q", specFile, "what is 1+1"}, code: 0, stdout: "test model: called calculator → 14\n"},
		{name: "question from stdin", args: []string{"exec", "-q", specFile, "-"}, stdin: "what is 1+1\n", code: 0, stdout: "test model: called calculator → 14\n"},
		{name: "stopped by a guard", args: []string{"exec", "-q", "--model", "script:" + loop, specFile, "loop"}, code: exitStopped, stdout: "Sorry, I got stuck.\n", stderr: "agentrun: stopped: duplicate_call: calculator was called again"},
		{name: "script runs out", args: []string{"exec", "--model", "script:" + writeFile(t, "short.yaml", "turns: [{tool_calls: [{name: calculator, arguments: {expression: '1'}}]}]\n"), specFile, "x"}, code: exitStopped, stderr: "the script has only 1 turns"},
		{name: "invalid spec", args: []string{"exec", "../../spec/testdata/invalid/many_mistakes.yaml", "x"}, code: 1, stderr: `unknown key "modle"`},
		{name: "undeclared attribute", args: []string{"exec", "--set", "tier=gold", specFile, "x"}, code: 2, stderr: `declares no user attribute "tier"`},
		{name: "empty question", args: []string{"exec", specFile, " "}, code: 2, stderr: "the question is empty"},
		{name: "no arguments", args: []string{"exec"}, code: 2, stderr: "Usage:\n  agentrun exec SPEC QUESTION [flags]"},
		{name: "bad model flag", args: []string{"exec", "--model", "gpt", specFile, "x"}, code: 2, stderr: `unknown --model "gpt"`},
		{name: "missing spec", args: []string{"exec", "nope.yaml", "x"}, code: 2, stderr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(tt.stdin), &out, &errOut)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", code, tt.code, out.String(), errOut.String())
			}
			if tt.stdout != "" && out.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tt.stderr)
			}
		})
	}
}

func TestExecJSONResult(t *testing.T) {
	code, stdout, _ := runCLI(t, "exec", "--json", "--model", "test", codeAssistant, "2*(3+4)?")
	var res struct {
		Answer, Stop string
		Turns        int
		Steps        []struct{ Tool, Outcome string }
		Messages     []struct{ Role string }
		Usage        struct {
			TotalTokens int64 `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if code != 0 || res.Stop != "completed" || res.Turns != 2 || len(res.Steps) != 3 || res.Usage.TotalTokens == 0 || len(res.Messages) != 6 {
		t.Errorf("exit %d, result %+v", code, res)
	}
}

// A command tool's relative program resolves against the spec's directory, however
// the spec's path was given.
func TestExecRelativeCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.sh"), []byte("#!/bin/sh\necho hello from the tool\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("version: 1\nname: rel\ntools:\n  - name: hello\n    command: {run: [./hello.sh]}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "turns.yaml"), []byte("turns:\n  - tool_calls: [{name: hello}]\n  - text: done\n"), 0o644)
	cwd, _ := os.Getwd()
	rel, err := filepath.Rel(cwd, filepath.Join(dir, "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "exec", "--json", "--model", "script:"+filepath.Join(dir, "turns.yaml"), rel, "hi")
	if code != 0 || !strings.Contains(stdout, `"result": "hello from the tool\n"`) {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
