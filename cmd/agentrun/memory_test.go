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
		dir, err := os.MkdirTemp("", "agentrun-bin")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "agentrun")
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
// store: the second request carries the first exchange and the facts it wrote.
func TestExecRemembersAcrossProcesses(t *testing.T) {
	bin := agentrunBinary(t)
	newShop(t)
	f := newFakeOpenAI(t,
		calls(toolCall("c1", "list_recent_orders", `{}`)),
		calls(toolCall("c2", "cancel_order", `{"order_number":"A1001"}`)),
		answer("订单 A1001 已取消。"),
		answer("Something light: a vegetable soup."),
	)
	work := t.TempDir()
	spec, _ := filepath.Abs(shopSupport)
	run := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"exec", "-q", "--user", "u-42", "--conversation", "c-7"}, args...)...)
		cmd.Dir = work
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return string(out)
	}
	if out := run(spec, "帮我取消订单 A1001"); out != "订单 A1001 已取消。\n" {
		t.Fatalf("first run: %q", out)
	}
	if out := run("--intent", "menu_advice", spec, "what should I eat?"); out != "Something light: a vegetable soup.\n" {
		t.Fatalf("second run: %q", out)
	}
	if _, err := os.Stat(filepath.Join(work, ".agentrun", "state.db")); err != nil {
		t.Errorf("no default store: %v", err)
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
	// memory show and forget, on the same store.
	show := exec.Command(bin, "memory", "show", "--user", "u-42")
	show.Dir = work
	out, err := show.Output()
	if err != nil || !strings.Contains(string(out), "user u-42: 1 facts, 1 conversations") || !strings.Contains(string(out), "cancelled order A1001") {
		t.Errorf("memory show: %v\n%s", err, out)
	}
	forget := exec.Command(bin, "memory", "forget", "--user", "u-42")
	forget.Dir = work
	if out, err := forget.Output(); err != nil || string(out) != "forgot user u-42: 1 facts, 1 conversations\n" {
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
	want := "conversation c: 1 turns\n  user      one\n  assistant first answer\n"
	if string(out) != want {
		t.Errorf("after the kill:\n%s\nwant\n%s", out, want)
	}
}
