package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"go.temporal.io/server/temporaltest"
)

const deskSpec = "../../runtime/temporal/testdata/desk.yaml"

// syncBuffer is a process's output, read while the process writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A run started by `exec --engine temporal` survives its worker process being
// killed (SIGKILL) while the ticket call it made after the second of its four
// model calls is in flight: a second worker process completes the run. Every
// model call ran once; the ticket was filed once, the retried call carrying
// the same Idempotency-Key; exec printed the answer.
func TestExecOnTemporalSurvivesAKilledWorker(t *testing.T) {
	bin := agentrunBinary(t)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	model, back := desktest.Start(t)
	spec, _ := filepath.Abs(deskSpec)
	store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	cluster := []string{"--temporal", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(), "--task-queue", "desk"}

	worker := func() (*exec.Cmd, *syncBuffer) {
		var out syncBuffer
		cmd := exec.Command(bin, append(append([]string{"worker", "--heartbeat", "1s", "--store", store}, cluster...), spec)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, &out
	}
	first, firstOut := worker()
	killed := make(chan struct{})
	back.OnFirstTicket(func() {
		first.Process.Kill() // no goodbye: the call's result never reaches Temporal
		first.Wait()
		close(killed)
	})

	var stdout, stderr syncBuffer
	run := exec.Command(bin, append(append([]string{"exec", "--engine", "temporal", "--json", "--user", "u-1", "--conversation", "c-1", "--store", store}, cluster...),
		spec, "A1 arrived broken; and A2?")...)
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill() })
	select {
	case <-killed:
	case <-time.After(time.Minute):
		t.Fatalf("the ticket call never came\nworker: %s\nexec: %s", firstOut, stderr.String())
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("the killed worker made %d model calls, want 2", n)
	}
	_, secondOut := worker()
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exec: %v\n%s\nworker: %s", err, stderr.String(), secondOut)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("exec did not end\n%s\nworker: %s", stderr.String(), secondOut)
	}
	var res runtime.Result
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("exec --json: %v\n%s", err, stdout.String())
	}
	if res.Stop != runtime.StopCompleted || res.Answer != desktest.Answer || len(res.Steps) != 3 {
		t.Fatalf("stop %s, answer %q, %d steps", res.Stop, res.Answer, len(res.Steps))
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}
	if lookups, filed, requests := back.Counts(); lookups != 2 || filed != 1 || requests != 2 {
		t.Errorf("lookups %d, tickets %d from %d requests; want 2, 1 from 2", lookups, filed, requests)
	}
	// exec showed the run's progress, from both workers' parts.
	if progress := stderr.String(); !strings.Contains(progress, "create_ticket") || !strings.Contains(progress, "completed") {
		t.Errorf("exec's progress:\n%s", progress)
	}
	// The workers' store holds the exchange, once.
	st, err := agentrun.OpenStore(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conv, err := st.Conversation(context.Background(), "c-1", 10)
	if err != nil || conv.Turns != 1 || len(conv.Messages) != 8 {
		t.Errorf("stored %d turns, %d messages (%v); want 1, 8", conv.Turns, len(conv.Messages), err)
	}
}

// serve --engine temporal starts each run as a workflow on a worker process;
// a run that needs approval pauses, and the decision posted to serve resumes it
// on the worker, which files the ticket once.
func TestServeOnTemporal(t *testing.T) {
	bin := agentrunBinary(t)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	model, back := desktest.Start(t)
	spec, _ := filepath.Abs("../../runtime/temporal/testdata/desk-approval.yaml")
	store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	cluster := []string{"--temporal", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(), "--task-queue", "desk"}

	var workerOut syncBuffer
	worker := exec.Command(bin, append(append([]string{"worker", "--store", store}, cluster...), spec)...)
	worker.Stdout, worker.Stderr = &workerOut, &workerOut
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })
	p := startServe(t, serveOptions{store: store, model: model, tokens: map[string]string{"tok-1": "u-1"}, specs: []string{spec},
		args: append([]string{"--engine", "temporal"}, cluster...)})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	status, body, err := p.call(ctx, "POST", "/v1/agents/desk/runs", "tok-1", map[string]any{"input": "A1 arrived broken; and A2?"}, nil)
	if err != nil || status != 200 {
		t.Fatalf("POST runs: %v %d %s\nworker: %s", err, status, body, workerOut.String())
	}
	var started runReply
	json.Unmarshal(body, &started)
	if started.Result.Stop != string(runtime.StopAwaitingApproval) {
		t.Fatalf("the run did not pause: %s", body)
	}
	if status, body, err := p.call(ctx, "POST", "/v1/runs/"+started.ID+"/approvals/call_2", "tok-1", map[string]any{"decision": "approve"}, nil); err != nil || status >= 300 {
		t.Fatalf("approve: %v %d %s", err, status, body)
	}
	for {
		var run struct {
			Status string `json:"status"`
			Result struct {
				Answer string `json:"answer"`
				Stop   string `json:"stop"`
			} `json:"result"`
		}
		_, body, err := p.call(ctx, "GET", "/v1/runs/"+started.ID, "tok-1", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		json.Unmarshal(body, &run)
		if run.Result.Stop == string(runtime.StopCompleted) {
			if run.Result.Answer != desktest.Answer {
				t.Errorf("answer %q", run.Result.Answer)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the run did not complete: %s\nworker: %s", body, workerOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("the model got %d requests, want 4", n)
	}
	if _, filed, requests := back.Counts(); filed != 1 || requests != 1 {
		t.Errorf("%d tickets from %d requests, want 1 from 1", filed, requests)
	}
}

// runBinary runs agentrun with args and returns its exit code and output.
func runBinary(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCommand(t, exec.Command(bin, args...))
}

// runCommand runs cmd and returns its exit code and output.
func runCommand(t *testing.T, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// printedResume is the argument list of the first resume command stderr
// shows ("resume with:"), which the test's paths need no quoting in.
func printedResume(t *testing.T, stderr string) []string {
	t.Helper()
	_, after, ok := strings.Cut(stderr, "resume with:\n  agentrun ")
	if !ok {
		t.Fatalf("no resume command:\n%s", stderr)
	}
	line, _, _ := strings.Cut(after, "\n")
	return strings.Fields(line)
}

// A resume must go where the run waits. `resume` without --engine temporal on
// a run paused on Temporal, and `resume --engine temporal` on a run paused in
// the store by a local exec, are refused (exit 1) before the decision is
// stored, printing the command that reaches the run; that command completes
// it, the ticket filed once each.
func TestResumeOnTheRunsEngine(t *testing.T) {
	bin := agentrunBinary(t)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	_, back := desktest.Start(t)
	spec, _ := filepath.Abs("../../runtime/temporal/testdata/desk-approval.yaml")
	store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	cluster := []string{"--temporal", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace()}

	var workerOut syncBuffer
	worker := exec.Command(bin, append(append([]string{"worker", "--store", store, "--task-queue", "desk"}, cluster...), spec)...)
	worker.Stdout, worker.Stderr = &workerOut, &workerOut
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })

	tests := []struct {
		name       string
		exec       []string // where the run starts
		wrongPlace []string // the resume's flags that miss it
		refusal    string
		wantThere  []string // flags the printed command must carry
	}{
		{"paused on Temporal, resumed without --engine", append([]string{"--engine", "temporal", "--task-queue", "desk"}, cluster...), nil,
			"waits on Temporal (namespace " + ts.GetDefaultNamespace() + ", task queue desk), not on the local engine",
			append([]string{"--engine", "temporal"}, cluster...)},
		{"paused locally, resumed with --engine temporal", []string{"--ask=false"}, append([]string{"--engine", "temporal"}, cluster...),
			"waits on the local engine, not on Temporal", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			back.Reset()
			code, _, stderr := runBinary(t, bin, append(append([]string{"exec", "--user", "u-1", "--store", store}, tt.exec...), spec, "A1 arrived broken; and A2?")...)
			if code != exitAwaitingApproval {
				t.Fatalf("exec: exit %d\n%s\nworker: %s", code, stderr, workerOut.String())
			}
			id := pausedRunID(t, stderr)
			code, _, stderr = runBinary(t, bin, append([]string{"resume", id, "--approve", "call_2", "--store", store}, tt.wrongPlace...)...)
			if code != 1 || !strings.Contains(stderr, tt.refusal) {
				t.Fatalf("a resume elsewhere: exit %d, want 1 saying %q:\n%s", code, tt.refusal, stderr)
			}
			there := printedResume(t, stderr)
			want := append([]string{"resume", id, "--approve", "call_2", "--store", store}, tt.wantThere...)
			if strings.Join(there, " ") != strings.Join(want, " ") {
				t.Fatalf("printed resume %q\nwant %q", there, want)
			}
			if _, filed, _ := back.Counts(); filed != 0 {
				t.Fatalf("%d tickets filed by the refused resume", filed)
			}
			code, stdout, stderr := runBinary(t, bin, there...)
			if code != 0 || strings.TrimSpace(stdout) != desktest.Answer {
				t.Fatalf("the printed resume: exit %d, answer %q\n%s\nworker: %s", code, stdout, stderr, workerOut.String())
			}
			if _, filed, _ := back.Counts(); filed != 1 {
				t.Errorf("%d tickets filed, want 1", filed)
			}
		})
	}
}
