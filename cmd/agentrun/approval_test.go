package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
)

// These tests pause runs for a person's approval and decide on them, most of them
// across real processes: exec pauses (or is killed at its prompt), and another
// process resumes the run from the SQLite store.

const ordersSpec = "testdata/approval/orders.yaml"

// orderBackend is the orders tools' HTTP service: it counts the cancellations and
// the look-ups it served — the side effects that must happen exactly once.
type orderBackend struct {
	URL                 string
	mu                  sync.Mutex
	cancelled, statuses int
}

func newOrderBackend(t *testing.T) *orderBackend {
	b := &orderBackend{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/cancel") {
			b.cancelled++
			fmt.Fprint(w, `{"status":"cancelled"}`)
			return
		}
		b.statuses++
		fmt.Fprint(w, `{"status":"paid","total":"¥268"}`)
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

func (b *orderBackend) counts() (cancelled, statuses int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cancelled, b.statuses
}

// ordersModel answers like a model would: before any tool result, a response with
// two calls — cancel_order (needs approval) and order_status (does not); after the
// results, an answer that says what became of the cancellation.
func ordersModel(req openaitest.Request) openaitest.Reply {
	var cancelResult string
	answered := false
	for _, m := range req.Messages {
		if m["role"] == "tool" {
			answered = true
			if m["tool_call_id"] == "call_cancel" {
				cancelResult, _ = m["content"].(string)
			}
		}
	}
	if !answered {
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{
			{ID: "call_cancel", Name: "cancel_order", Arguments: `{"order_number":"A2002"}`},
			{ID: "call_status", Name: "order_status", Arguments: `{"order_number":"A2002"}`},
		}}
	}
	if strings.Contains(cancelResult, `"cancelled"`) {
		return openaitest.Reply{Content: "Order A2002 is cancelled."}
	}
	return openaitest.Reply{Content: "Order A2002 was not cancelled."}
}

// lastToolResult is the content of the tool message for a call in the model's last
// request.
func lastToolResult(t *testing.T, model *openaitest.Server, callID string) string {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m["role"] == "tool" && m["tool_call_id"] == callID {
			s, _ := m["content"].(string)
			return s
		}
	}
	t.Fatalf("the last request has no result for %s", callID)
	return ""
}

// approvalWorld is a store, a model and a backend for the orders agent.
type approvalWorld struct {
	t       *testing.T
	dir     string
	store   string // sqlite:…
	spec    string // absolute
	model   *openaitest.Server
	backend *orderBackend
}

func newApprovalWorld(t *testing.T, specText string) *approvalWorld {
	w := &approvalWorld{t: t, dir: t.TempDir(), model: openaitest.New(t, ordersModel), backend: newOrderBackend(t)}
	w.store = "sqlite:" + filepath.Join(w.dir, "state.db")
	w.spec, _ = filepath.Abs(ordersSpec)
	if specText != "" {
		w.spec = filepath.Join(w.dir, "orders.yaml")
		if err := os.WriteFile(w.spec, []byte(specText), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// extraEnv is what the world's processes add to the environment.
func (w *approvalWorld) extraEnv() []string {
	return []string{"LLM_BASE_URL=" + w.model.URL, "LLM_API_KEY=sk-fake", "LLM_MODEL_NAME=fake",
		"ORDERS_API=" + w.backend.URL, "AGENTRUN_STORE=", "USER=tester"}
}

// command is an agentrun process in the world's directory.
func (w *approvalWorld) command(args ...string) *exec.Cmd {
	cmd := exec.Command(serveBinary(w.t), args...)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), w.extraEnv()...)
	return cmd
}

// run runs agentrun as a process and returns its exit code and output.
func (w *approvalWorld) run(stdin string, args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	cmd := w.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	if strings.Contains(errOut.String(), "DATA RACE") {
		w.t.Errorf("data race in %v:\n%s", args, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// runInProcess runs the CLI in this process with the world's environment.
func (w *approvalWorld) runInProcess(stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	w.t.Helper()
	for _, kv := range w.extraEnv() {
		k, v, _ := strings.Cut(kv, "=")
		w.t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

// conversation reads a conversation from the world's store.
func (w *approvalWorld) conversation(id string) []model.Message {
	w.t.Helper()
	st, err := sqlite.Open(strings.TrimPrefix(w.store, "sqlite:"))
	if err != nil {
		w.t.Fatal(err)
	}
	defer st.Close()
	conv, err := st.Conversation(context.Background(), id, 100)
	if err != nil {
		w.t.Fatal(err)
	}
	return conv.Messages
}

var resumeRe = regexp.MustCompile(`agentrun resume (run_[0-9a-f]+)`)

// pausedRunID is the run id in a paused exec's resume command.
func pausedRunID(t *testing.T, stderr string) string {
	t.Helper()
	m := resumeRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no resume command in stderr:\n%s", stderr)
	}
	return m[1]
}

// Pause, kill a process at its prompt, resume from new processes: the approved
// tool runs exactly once, the history is whole, and every decision that must be
// refused is.
func TestApprovalAcrossProcesses(t *testing.T) {
	w := newApprovalWorld(t, "")
	exec1 := []string{"exec", "--store", w.store, "--user", "u-1", "--conversation", "c-1", w.spec, "Cancel order A2002"}

	// 1. exec without a terminal: the run pauses, exit 4, the commands on stderr.
	code, stdout, stderr := w.run("", exec1...)
	if code != exitAwaitingApproval || stdout != "" {
		t.Fatalf("exec: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	runID := pausedRunID(t, stderr)
	for _, want := range []string{
		"paused: cancel_order needs approval (call call_cancel): Cancel order A2002?\n" +
			"  arguments: {\"order_number\":\"A2002\"}\nresume with:\n",
		"  agentrun resume " + runID + " --store " + w.store + " --approve call_cancel\n",
		"  agentrun resume " + runID + " --store " + w.store + " --reject call_cancel --reason \"…\"\n",
		"■ awaiting_approval",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("exec's stderr lacks %q:\n%s", want, stderr)
		}
	}
	if c, s := w.backend.counts(); c != 0 || s != 1 {
		t.Fatalf("after the pause: %d cancellations, %d look-ups; want 0 and 1", c, s)
	}

	// 2. exec --ask, killed while it waits at the prompt: its run stays paused.
	ask := w.command("exec", "--ask", "--store", w.store, "--user", "u-1", "--conversation", "c-2", w.spec, "Cancel order A2002")
	stdin, err := ask.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	pipe, err := ask.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ask.Start(); err != nil {
		t.Fatal(err)
	}
	prompted := make(chan string, 1)
	go func() {
		var seen strings.Builder
		r := bufio.NewReader(pipe)
		for {
			b, err := r.ReadByte()
			if err != nil {
				prompted <- seen.String()
				return
			}
			seen.WriteByte(b)
			if strings.HasSuffix(seen.String(), approvePrompt) {
				prompted <- seen.String()
				io.Copy(io.Discard, r)
				return
			}
		}
	}()
	var askStderr string
	select {
	case askStderr = <-prompted:
	case <-time.After(30 * time.Second):
		ask.Process.Kill()
		t.Fatal("exec --ask did not prompt within 30s")
	}
	if !strings.Contains(askStderr, "cancel_order needs approval (call call_cancel): Cancel order A2002?\n  arguments: {\"order_number\":\"A2002\"}\n"+approvePrompt) {
		t.Fatalf("exec --ask's stderr:\n%s", askStderr)
	}
	ask.Process.Kill() // SIGKILL: no chance to clean up
	ask.Wait()
	if c, s := w.backend.counts(); c != 0 || s != 2 {
		t.Fatalf("after the kill: %d cancellations, %d look-ups; want 0 and 2", c, s)
	}

	// 3. runs list shows both paused runs.
	code, stdout, stderr = w.run("", "runs", "list", "--store", w.store, "--user", "u-1")
	row := regexp.MustCompile(`(?m)^` + runID + ` +orders +u-1 +cancel_order\(call_cancel\) +in 23h5\dm +waiting$`)
	if code != 0 || !strings.HasPrefix(stdout, "RUN ") || !row.MatchString(stdout) ||
		strings.Count(stdout, "cancel_order(call_cancel)") != 2 {
		t.Errorf("runs list: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = w.run("", "runs", "list", "--store", w.store, "--user", "u-1", "--json")
	var listed []runtime.Paused
	if err := json.Unmarshal([]byte(stdout), &listed); code != 0 || err != nil || len(listed) != 2 {
		t.Fatalf("runs list --json: exit %d, %v\n%s", code, err, stdout)
	}
	var killedID string
	for _, p := range listed {
		if p.RunID != runID {
			killedID = p.RunID
		}
		if p.Agent != "orders" || p.User != "u-1" || p.Spec != w.spec || p.Input != "Cancel order A2002" || len(p.Approvals) != 1 ||
			p.Approvals[0].CallID != "call_cancel" || p.Approvals[0].Decision != nil || p.Approvals[0].ArgsHash == "" {
			t.Errorf("listed run %+v", p)
		}
	}
	if _, stdout, _ = w.run("", "runs", "list", "--store", w.store, "--user", "u-2"); stdout != "no paused runs\n" {
		t.Errorf("runs list of another user: %q", stdout)
	}
	if _, stdout, _ = w.run("", "runs", "list", "--store", w.store, "--all"); strings.Count(stdout, "u-1") != 2 {
		t.Errorf("runs list --all:\n%s", stdout)
	}

	// 4. A wrong argument hash is refused, and decides nothing.
	code, _, stderr = w.run("", "resume", runID, "--store", w.store, "--approve", "call_cancel", "--args-hash", "0123abcd")
	if code != 1 || !strings.Contains(stderr, "the arguments changed since the decision was made") {
		t.Errorf("resume with a wrong hash: exit %d\n%s", code, stderr)
	}
	// A call the run does not wait on, likewise.
	code, _, stderr = w.run("", "resume", runID, "--store", w.store, "--approve", "call_status")
	if code != 1 || !strings.Contains(stderr, "has no call call_status waiting for approval (its calls: cancel_order(call_cancel))") {
		t.Errorf("resume of a call that needs no approval: exit %d\n%s", code, stderr)
	}

	// 5. Approve from a new process: the tool runs once, the run completes.
	code, stdout, stderr = w.run("", "resume", runID, "--store", w.store, "--approve", "call_cancel", "--args-hash", listed[0].Approvals[0].ArgsHash)
	if code != 0 || stdout != "Order A2002 is cancelled.\n" {
		t.Fatalf("resume: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "call_cancel approved by tester\n") || !strings.Contains(stderr, "✓ cancel_order approved (call_cancel)") {
		t.Errorf("resume's stderr:\n%s", stderr)
	}
	if c, s := w.backend.counts(); c != 1 || s != 2 {
		t.Fatalf("after the approval: %d cancellations, %d look-ups; want 1 and 2", c, s)
	}
	history := w.conversation("c-1")
	var shape []string
	for _, m := range history {
		s := string(m.Role)
		for _, c := range m.ToolCalls {
			s += " →" + c.ID
		}
		if m.ToolCallID != "" {
			s += " ←" + m.ToolCallID
		}
		shape = append(shape, s)
	}
	if got := strings.Join(shape, ", "); got != "user, assistant →call_cancel →call_status, tool ←call_cancel, tool ←call_status, assistant" {
		t.Errorf("stored history: %s", got)
	}
	if len(history) == 5 && (history[0].Content != "Cancel order A2002" || !strings.Contains(history[2].Content, "cancelled") ||
		!strings.Contains(history[3].Content, "paid") || history[4].Content != "Order A2002 is cancelled.") {
		t.Errorf("stored history: %+v", history)
	}

	// 6. A second decision on the same call: the run is gone, nothing runs again.
	code, _, stderr = w.run("", "resume", runID, "--store", w.store, "--approve", "call_cancel")
	if code != 1 || !strings.Contains(stderr, "no paused run "+runID) {
		t.Errorf("second resume: exit %d\n%s", code, stderr)
	}
	if c, _ := w.backend.counts(); c != 1 {
		t.Fatalf("the second decision ran the tool again: %d cancellations", c)
	}

	// 7. The killed process's run, rejected with a reason: the model reads it.
	code, stdout, stderr = w.run("", "resume", killedID, "--store", w.store, "--reject", "call_cancel", "--reason", "too expensive to undo", "--json")
	var result runtime.Result
	if err := json.Unmarshal([]byte(stdout), &result); code != 0 || err != nil || result.Answer != "Order A2002 was not cancelled." {
		t.Fatalf("resume --reject: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if got := lastToolResult(t, w.model, "call_cancel"); !strings.Contains(got, "too expensive to undo") || !strings.Contains(got, "Rejected") {
		t.Errorf("the model's rejection: %q", got)
	}
	if c, s := w.backend.counts(); c != 1 || s != 2 {
		t.Errorf("after the rejection: %d cancellations, %d look-ups; want 1 and 2", c, s)
	}
	if _, stdout, _ = w.run("", "runs", "list", "--store", w.store, "--user", "u-1"); stdout != "no paused runs\n" {
		t.Errorf("runs list at the end: %q", stdout)
	}
}

// exec --json prints the paused result, with the run's id and its pending calls.
func TestApprovalExecJSON(t *testing.T) {
	w := newApprovalWorld(t, "")
	code, stdout, stderr := w.run("", "exec", "-q", "--json", "--store", w.store, w.spec, "Cancel order A2002")
	var result runtime.Result
	if err := json.Unmarshal([]byte(stdout), &result); code != exitAwaitingApproval || err != nil {
		t.Fatalf("exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if result.Stop != runtime.StopAwaitingApproval || !strings.HasPrefix(result.RunID, "run_") || len(result.Pending) != 1 ||
		result.Pending[0].CallID != "call_cancel" || result.Pending[0].Message != "Cancel order A2002?" {
		t.Errorf("result %+v", result)
	}
	if !strings.Contains(stderr, "agentrun resume "+result.RunID+" --store "+w.store+" --approve call_cancel") {
		t.Errorf("-q still prints how to resume:\n%s", stderr)
	}
	// A decision for the default user's run, by another name: recorded with it.
	code, _, stderr = w.run("", "resume", result.RunID, "--store", w.store, "--by", "alice", "--approve", "call_cancel", "-q")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if c, _ := w.backend.counts(); c != 1 {
		t.Errorf("%d cancellations", c)
	}
	if got := lastToolResult(t, w.model, "call_cancel"); !strings.Contains(got, "cancelled") {
		t.Errorf("the model's tool result: %q", got)
	}
}

// Approvals that expire: a decision comes too late and is refused; resuming without
// one applies approval.on_timeout (reject), and the tool never runs.
func TestApprovalExpires(t *testing.T) {
	base, err := os.ReadFile(ordersSpec)
	if err != nil {
		t.Fatal(err)
	}
	w := newApprovalWorld(t, string(base)+"\napproval:\n  timeout: 1s\n")
	code, _, stderr := w.run("", "exec", "--store", w.store, w.spec, "Cancel order A2002")
	if code != exitAwaitingApproval {
		t.Fatalf("exec: exit %d\n%s", code, stderr)
	}
	runID := pausedRunID(t, stderr)
	time.Sleep(1200 * time.Millisecond)
	if _, stdout, _ := w.run("", "runs", "list", "--store", w.store); !strings.Contains(stdout, "expired") {
		t.Errorf("runs list after expiry:\n%s", stdout)
	}
	code, _, stderr = w.run("", "resume", runID, "--store", w.store, "--approve", "call_cancel")
	if code != 1 || !strings.Contains(stderr, "call_cancel: approvals expired at ") {
		t.Errorf("a late approval: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := w.run("", "resume", runID, "--store", w.store)
	if code != 0 || stdout != "Order A2002 was not cancelled.\n" {
		t.Fatalf("resume after expiry: exit %d %q\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "approval.on_timeout decides cancel_order(call_cancel)") {
		t.Errorf("resume's stderr:\n%s", stderr)
	}
	if got := lastToolResult(t, w.model, "call_cancel"); !strings.Contains(got, "nobody approved it in time") {
		t.Errorf("the model's tool result: %q", got)
	}
	if c, s := w.backend.counts(); c != 0 || s != 1 {
		t.Errorf("%d cancellations, %d look-ups; want 0 and 1", c, s)
	}
}

// Nobody decides and the approvals have not expired: resume says what still waits
// (exit 4) and runs nothing.
func TestResumeUndecided(t *testing.T) {
	w := newApprovalWorld(t, "")
	_, _, stderr := w.run("", "exec", "--store", w.store, w.spec, "Cancel order A2002")
	runID := pausedRunID(t, stderr)
	code, _, stderr := w.runInProcess(strings.NewReader(""), "resume", runID, "--store", w.store)
	if code != exitAwaitingApproval || !strings.Contains(stderr, "waiting: cancel_order needs approval (call call_cancel)") ||
		!strings.Contains(stderr, "agentrun resume "+runID+" --store "+w.store+" --approve call_cancel") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if code, _, stderr := w.runInProcess(strings.NewReader(""), "resume", "run_0000", "--store", w.store, "--approve", "x"); code != 1 ||
		!strings.Contains(stderr, "no paused run run_0000") {
		t.Errorf("an unknown run: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := w.runInProcess(strings.NewReader(""), "resume", runID, "--reason", "x", "--store", w.store); code != 2 ||
		!strings.Contains(stderr, "--reason is the reason of a rejection") {
		t.Errorf("--reason without --reject: exit %d\n%s", code, stderr)
	}
	if c, _ := w.backend.counts(); c != 0 {
		t.Errorf("%d cancellations", c)
	}
	// Two decisions on one call: the first stands, the second is refused, and the
	// run stays paused, decided.
	code, _, stderr = w.runInProcess(strings.NewReader(""), "resume", runID, "--store", w.store, "--approve", "call_cancel", "--reject", "call_cancel")
	if code != 1 || !strings.Contains(stderr, "agentrun: call_cancel was already decided\n") {
		t.Errorf("two decisions: exit %d\n%s", code, stderr)
	}
	if _, stdout, _ := w.runInProcess(strings.NewReader(""), "runs", "list", "--store", w.store); !strings.Contains(stdout, "cancel_order(call_cancel ✓)") {
		t.Errorf("runs list of a decided run:\n%s", stdout)
	}
	if c, _ := w.backend.counts(); c != 0 {
		t.Errorf("%d cancellations before the resume", c)
	}
	code, stdout, stderr := w.runInProcess(strings.NewReader(""), "resume", runID, "--store", w.store)
	if code != 0 || stdout != "Order A2002 is cancelled.\n" {
		t.Errorf("resume of a decided run: exit %d %q\n%s", code, stdout, stderr)
	}
	if c, _ := w.backend.counts(); c != 1 {
		t.Errorf("%d cancellations", c)
	}
}

// exec --ask asks on the terminal: y runs the call, n with a reason rejects it,
// anything else asks again, and the end of input leaves the run paused.
func TestExecAsks(t *testing.T) {
	tests := []struct {
		name, input, answer string
		code, cancelled     int
		reason              string // in the model's tool result
	}{
		{name: "yes", input: "y\n", answer: "Order A2002 is cancelled.\n", cancelled: 1},
		{name: "no with a reason", input: "n too expensive\n", answer: "Order A2002 was not cancelled.\n", reason: "Reason: too expensive"},
		{name: "asks again", input: "maybe\nYes, go ahead\n", answer: "Order A2002 is cancelled.\n", cancelled: 1},
		{name: "end of input", input: "", code: exitAwaitingApproval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newApprovalWorld(t, "")
			code, stdout, stderr := w.runInProcess(strings.NewReader(tt.input), "exec", "--ask", "--store", w.store, w.spec, "Cancel order A2002")
			if code != tt.code || stdout != tt.answer {
				t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stderr, "cancel_order needs approval (call call_cancel): Cancel order A2002?\n  arguments: {\"order_number\":\"A2002\"}\n"+approvePrompt) {
				t.Errorf("stderr:\n%s", stderr)
			}
			if c, s := w.backend.counts(); c != tt.cancelled || s != 1 {
				t.Errorf("%d cancellations, %d look-ups; want %d and 1", c, s, tt.cancelled)
			}
			switch tt.name {
			case "asks again":
				if strings.Count(stderr, approvePrompt) != 2 {
					t.Errorf("asked %d times:\n%s", strings.Count(stderr, approvePrompt), stderr)
				}
			case "end of input":
				if !strings.Contains(stderr, "resume with:\n  agentrun resume run_") {
					t.Errorf("no resume command:\n%s", stderr)
				}
			default:
				if got := lastToolResult(t, w.model, "call_cancel"); !strings.Contains(got, tt.reason) {
					t.Errorf("the model's tool result %q lacks %q", got, tt.reason)
				}
			}
		})
	}
}

// Waiting at the prompt ends when the approvals expire: on_timeout decides, and a
// run whose on_timeout is stop ends with approval_timeout (exit 3).
func TestExecAskExpires(t *testing.T) {
	base, err := os.ReadFile(ordersSpec)
	if err != nil {
		t.Fatal(err)
	}
	for _, onTimeout := range []string{"reject", "stop"} {
		t.Run(onTimeout, func(t *testing.T) {
			w := newApprovalWorld(t, string(base)+"\napproval:\n  timeout: 1s\n  on_timeout: "+onTimeout+"\n")
			in, out := io.Pipe() // nobody ever answers
			defer out.Close()
			start := time.Now()
			code, stdout, stderr := w.runInProcess(in, "exec", "--ask", "--store", w.store, w.spec, "Cancel order A2002")
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s", d)
			}
			if !strings.Contains(stderr, "approval.on_timeout decides the rest") {
				t.Errorf("stderr:\n%s", stderr)
			}
			switch onTimeout {
			case "reject":
				if code != 0 || stdout != "Order A2002 was not cancelled.\n" {
					t.Errorf("exit %d, stdout %q\n%s", code, stdout, stderr)
				}
			case "stop":
				if code != exitStopped || !strings.Contains(stderr, "approval_timeout") {
					t.Errorf("exit %d, stdout %q\n%s", code, stdout, stderr)
				}
			}
			if c, _ := w.backend.counts(); c != 0 {
				t.Errorf("%d cancellations", c)
			}
		})
	}
}

// With a process-local store and nobody to ask, a pause could never be resumed:
// the call is refused and the model told why.
func TestExecMemoryStoreRefusesApprovals(t *testing.T) {
	w := newApprovalWorld(t, "")
	code, stdout, stderr := w.runInProcess(strings.NewReader(""), "exec", "--ask=false", "--store", "memory:", w.spec, "Cancel order A2002")
	if code != 0 || stdout != "Order A2002 was not cancelled.\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if got := lastToolResult(t, w.model, "call_cancel"); !strings.Contains(got, "approvals cannot be asked for on this channel") {
		t.Errorf("the model's tool result: %q", got)
	}
	if c, s := w.backend.counts(); c != 0 || s != 1 {
		t.Errorf("%d cancellations, %d look-ups", c, s)
	}
}

// The printed resume command names the store the way exec found it: --store as
// given, the spec when its memory.url or its project directory (the default place)
// named it, nothing for AGENTRUN_STORE.
func TestResumeFlags(t *testing.T) {
	t.Setenv("AGENTRUN_STORE", "")
	s, err := agentrun.Load(ordersSpec)
	if err != nil {
		t.Fatal(err)
	}
	if got := resumeFlags("sqlite:my state.db", s); strings.Join(got, " ") != "--store sqlite:my state.db" {
		t.Errorf("--store: %q", got)
	}
	abs, _ := filepath.Abs(ordersSpec)
	if got := resumeFlags("", s); strings.Join(got, " ") != "--spec "+abs {
		t.Errorf("default store: %q", got)
	}
	s.Memory.URL = "sqlite:/var/lib/agentrun/orders.db"
	if got := resumeFlags("", s); strings.Join(got, " ") != "--spec "+abs {
		t.Errorf("memory.url: %q", got)
	}
	t.Setenv("AGENTRUN_STORE", "sqlite:x.db")
	if got := resumeFlags("", s); got != nil {
		t.Errorf("AGENTRUN_STORE: %q", got)
	}
	var b strings.Builder
	writeResumeCommands(&b, "run_1", []runtime.Approval{{CallID: "call_1"}}, []string{"--store", "sqlite:my state.db"})
	if want := "resume with:\n  agentrun resume run_1 --store 'sqlite:my state.db' --approve call_1\n" +
		"  agentrun resume run_1 --store 'sqlite:my state.db' --reject call_1 --reason \"…\"\n"; b.String() != want {
		t.Errorf("got\n%swant\n%s", b.String(), want)
	}
}

func TestParseAnswer(t *testing.T) {
	for line, want := range map[string]struct {
		approve bool
		reason  string
		ok      bool
	}{
		"y\n": {true, "", true}, "YES": {true, "", true}, "yes, fine by me": {true, "fine by me", true},
		"n": {false, "", true}, "no  too expensive \n": {false, "too expensive", true}, "N\tlater": {false, "later", true},
		"": {}, "maybe": {}, "yep": {}, "nope": {},
	} {
		approve, reason, ok := parseAnswer(line)
		if approve != want.approve || reason != want.reason || ok != want.ok {
			t.Errorf("parseAnswer(%q) = %v %q %v", line, approve, reason, ok)
		}
	}
}
