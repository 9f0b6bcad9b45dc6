package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/proctest"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// agentrunBinary builds the CLI once, for tests that need real processes.
func agentrunBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binary = filepath.Join(testTemp, "agentrun")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// Two exec processes in a row on one conversation and user, with the default SQLite
// store, each from another working directory: the second request carries the first
// exchange and the facts it wrote, as the store is beside the spec, and the header
// line says where it is.
func TestExecRemembersAcrossProcesses(t *testing.T) {
	bin := agentrunBinary(t)
	t.Setenv("AGENTRUN_STORE", "") // the processes inherit it: use the default store, beside the spec
	t.Setenv("AGENTRUN_INDEX", "")
	newShop(t)
	f := newFakeOpenAI(t,
		calls(toolCall("c1", "list_recent_orders", `{}`)),
		calls(toolCall("c2", "cancel_order", `{"order_number":"A1001"}`)),
		answer("订单 A1001 已取消。"),
		answer("Something light: a vegetable soup."),
	)
	project := filepath.Join(t.TempDir(), "shop")
	if code, _, stderr := runCLI(t, "init", "--from", "shop-support", project); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	spec := filepath.Join(project, "shop-support.yaml")
	run := func(dir string, args ...string) (stdout, stderr string) {
		cmd := exec.Command(bin, append([]string{"exec", "--user", "u-42", "--conversation", "c-7"}, args...)...)
		cmd.Dir = dir
		var errOut strings.Builder
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		return string(out), errOut.String()
	}
	work, elsewhere := t.TempDir(), t.TempDir()
	out, progress := run(work, spec, "帮我取消订单 A1001")
	if out != "订单 A1001 已取消。\n" {
		t.Fatalf("first run: %q", out)
	}
	state := filepath.Join(project, ".agentrun", "state.db")
	if header := " · 5 tools · memory " + state + " · index " + filepath.Join(project, ".agentrun", "knowledge.db") + "\n"; !strings.Contains(progress, header) {
		t.Errorf("the header line does not say where the state is (%q):\n%s", header, progress)
	}
	if out, _ := run(elsewhere, "--intent", "menu_advice", spec, "what should I eat?"); out != "Something light: a vegetable soup.\n" {
		t.Fatalf("second run: %q", out)
	}
	if _, err := os.Stat(state); err != nil {
		t.Errorf("no default store beside the spec: %v", err)
	}
	for _, dir := range []string{work, elsewhere} {
		if _, err := os.Stat(filepath.Join(dir, ".agentrun")); err == nil {
			t.Errorf("a store in the working directory %s", dir)
		}
	}
	second := f.messages(3)
	var roles []string
	for _, m := range second {
		roles = append(roles, m["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,assistant,tool,assistant,user" {
		t.Errorf("second request roles %v", roles)
	}
	if second[1]["content"] != "帮我取消订单 A1001" || second[6]["content"] != "订单 A1001 已取消。" {
		t.Errorf("second request lacks the first exchange: %v", second)
	}
	if sys := second[0]["content"].(string); !strings.Contains(sys, `- notes: "cancelled order A1001"`) {
		t.Errorf("second request lacks the fact the first wrote:\n%s", sys)
	}
	// memory show and forget find the same store from the project's folder.
	work = project
	show := exec.Command(bin, "memory", "show", "--user", "u-42")
	show.Dir = work
	shown, err := show.Output()
	if err != nil || !strings.Contains(string(shown), "user u-42: 1 fact, 1 conversation") || !strings.Contains(string(shown), "cancelled order A1001") {
		t.Errorf("memory show: %v\n%s", err, shown)
	}
	show = exec.Command(bin, "memory", "show", "--user", "u-42", "--conversation", "c-7")
	show.Dir = work
	if out, err := show.Output(); err != nil || !strings.Contains(string(out), "conversation c-7: 2 turns\n") || !strings.Contains(string(out), "\nseen orders: A1001") {
		t.Errorf("memory show of the conversation: %v\n%s", err, out)
	}
	forget := exec.Command(bin, "memory", "forget", "--user", "u-42")
	forget.Dir = work
	if out, err := forget.Output(); err != nil || string(out) != "forgot user u-42: 1 fact, 1 conversation, 0 learned answers\n" {
		t.Errorf("memory forget: %v %q", err, out)
	}
	show = exec.Command(bin, "memory", "show", "--user", "u-42", "--conversation", "c-7")
	show.Dir = work
	if out, _ := show.Output(); string(out) != "conversation c-7: 0 turns\n" {
		t.Errorf("after forget: %q", out)
	}
}

// A process killed in the middle of a run leaves the store readable, with the runs
// before it intact.
func TestKilledRunLeavesStoreIntact(t *testing.T) {
	bin := agentrunBinary(t)
	t.Setenv("AGENTRUN_STORE", "") // the default store, in work: no other test's conversations
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "slow.sh"), []byte("#!/bin/sh\necho $$ > slow.pid\nexec sleep 60\n"), 0o755)
	t.Cleanup(func() { // the killed run's tool outlives it in its own process group
		if pid, err := os.ReadFile(filepath.Join(work, "slow.pid")); err == nil {
			var n int
			fmt.Sscan(string(pid), &n)
			if n > 0 {
				syscall.Kill(-n, syscall.SIGKILL)
			}
		}
	})
	agent := filepath.Join(work, "agent.yaml")
	os.WriteFile(agent, []byte(`
version: 1
name: slow
model: {provider: script}
tools:
  - name: slow
    command: {run: [./slow.sh]}
    timeout: 2m
`), 0o644)
	quick := filepath.Join(work, "quick.yaml")
	os.WriteFile(quick, []byte("turns:\n  - text: first answer\n"), 0o644)
	hang := filepath.Join(work, "hang.yaml")
	os.WriteFile(hang, []byte("turns:\n  - tool_calls: [{name: slow}]\n  - text: never\n"), 0o644)

	first := exec.Command(bin, "exec", "-q", "--user", "u", "--conversation", "c", "--model", "script:"+quick, agent, "one")
	first.Dir = work
	if out, err := first.Output(); err != nil || string(out) != "first answer\n" {
		t.Fatalf("first run: %v %q", err, out)
	}
	second := exec.Command(bin, "exec", "--user", "u", "--conversation", "c", "--model", "script:"+hang, agent, "two")
	second.Dir = work
	stderr, _ := second.StderrPipe()
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the tool runs: the run is in flight.
	lines := bufio.NewScanner(stderr)
	deadline := time.After(20 * time.Second)
	started := make(chan struct{})
	go func() {
		for lines.Scan() {
			if strings.Contains(lines.Text(), "⚙ slow") {
				close(started)
				io.Copy(io.Discard, stderr)
				return
			}
		}
	}()
	select {
	case <-started:
	case <-deadline:
		t.Fatal("the second run never reached its tool")
	}
	second.Process.Signal(syscall.SIGKILL)
	second.Wait()

	show := exec.CommandContext(context.Background(), bin, "memory", "show", "--user", "u", "--conversation", "c")
	show.Dir = work
	out, err := show.Output()
	if err != nil {
		t.Fatalf("the store is not readable after the kill: %v", err)
	}
	want := "conversation c: 1 turn\n  user      one\n  assistant first answer\n"
	if string(out) != want {
		t.Errorf("after the kill:\n%s\nwant\n%s", out, want)
	}
}

// No MCP server process outlives exec: not after a normal exit, not after Ctrl-C in
// the middle of a tool call.
func TestMCPServersStopWithExec(t *testing.T) {
	bin := agentrunBinary(t)
	server, _ := filepath.Abs("../../tools/node/node_modules/.bin/mcp-server-everything")
	if _, err := os.Stat(server); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip("node tools not installed")
	}
	work := t.TempDir()
	agent := filepath.Join(work, "agent.yaml")
	os.WriteFile(agent, []byte("version: 1\nname: m\nmcp_servers:\n  - {name: ev, command: ["+server+"], tools: [echo, trigger-long-running-operation]}\n"), 0o644)
	quick := filepath.Join(work, "quick.yaml")
	os.WriteFile(quick, []byte("turns:\n  - tool_calls: [{name: echo, arguments: {message: hi}}]\n  - text: done\n"), 0o644)
	slow := filepath.Join(work, "slow.yaml")
	os.WriteFile(slow, []byte("turns:\n  - tool_calls: [{name: trigger-long-running-operation, arguments: {duration: 30, steps: 30}}]\n  - text: never\n"), 0o644)

	for _, interrupt := range []bool{false, true} {
		script := quick
		if interrupt {
			script = slow
		}
		audit := filepath.Join(work, fmt.Sprintf("audit-%v.jsonl", interrupt))
		cmd := exec.Command(bin, "exec", "--model", "script:"+script, "--audit", audit, agent, "go")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var kids []int
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			if strings.Contains(lines.Text(), "⚙ ") { // a tool call is running: the server is up
				kids = proctest.Children(cmd.Process.Pid)
				if interrupt {
					cmd.Process.Signal(os.Interrupt)
				}
				break
			}
		}
		go io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		if len(kids) == 0 {
			t.Fatalf("interrupt=%v: no server process seen", interrupt)
		}
		if interrupt && err == nil {
			t.Error("an interrupted run exited 0")
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, k := range kids {
			for proctest.Alive(k) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if proctest.Alive(k) {
				syscall.Kill(k, syscall.SIGKILL)
				t.Errorf("interrupt=%v: server process %d outlived exec", interrupt, k)
			}
		}
		if !interrupt {
			if b, _ := os.ReadFile(audit); !strings.Contains(string(b), `"server":"ev","tool":"echo","arguments":{"message":"hi"},"user":"cli-user","outcome":"ok"`) {
				t.Errorf("audit: %s", b)
			}
		}
	}
}

// The mcp-files example runs offline with its script against the filesystem server.
func TestMCPFilesExample(t *testing.T) {
	if _, err := os.Stat("../../tools/node/node_modules/.bin/mcp-server-filesystem"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip("node tools not installed")
	}
	code, stdout, stderr := runCLI(t, "exec", "--model", "script:../../examples/agents/mcp-files.script.yaml", "../../examples/agents/mcp-files.yaml", "What docs are there?")
	if code != 0 || !strings.Contains(stdout, "testing.md starts with") || !strings.Contains(stderr, "✓ list_directory") || !strings.Contains(stderr, "✓ read_text_file") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestValidateLive(t *testing.T) {
	server, _ := filepath.Abs("../../tools/node/node_modules/.bin/mcp-server-everything")
	if _, err := os.Stat(server); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip("node tools not installed")
	}
	spec := writeFile(t, "live.yaml", "version: 1\nname: live\nmcp_servers:\n  - {name: ev, command: ["+server+"], tools: [echo]}\n"+
		"tools:\n  - name: echo\n    mcp: {server: ev}\n    bind: {user: user.id}\n    accept: args.mesage != \"\"\n")
	if code, stdout, _ := runCLI(t, "validate", spec); code != 0 {
		t.Errorf("static validation needs no server: exit %d\n%s", code, stdout)
	}
	code, stdout, _ := runCLI(t, "validate", "--live", spec)
	if code != 1 || !strings.Contains(stdout, `tools[0].bind: bind names "user", which ev's tool echo does not take`) || !strings.Contains(stdout, `tools[0].accept: accept names "mesage"`) {
		t.Errorf("exit %d\n%s", code, stdout)
	}
	missing := writeFile(t, "missing.yaml", "version: 1\nname: live\nmcp_servers:\n  - {name: ev, command: ["+server+"], tools: [echo, launch_rockets]}\n")
	if code, stdout, _ := runCLI(t, "validate", "--live", missing); code != 1 || !strings.Contains(stdout, `MCP server ev: the allow list names "launch_rockets", which the server does not offer`) {
		t.Errorf("exit %d\n%s", code, stdout)
	}
}
