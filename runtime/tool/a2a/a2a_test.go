package a2a_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/a2apeer"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/a2a"
	"github.com/agentrun/agentrun/spec"
)

const token = "peer-token-5f1c2e"

// remote is the agent at the peer's path, with the peer's token unless token
// says otherwise.
func remote(t *testing.T, p *a2apeer.Peer, path string, tok string) *a2a.Agent {
	t.Helper()
	a, err := a2a.New("refunds", &spec.A2AAgent{URL: p.URL + path, Auth: &spec.A2AAuth{TokenEnv: "REFUNDS_TOKEN"}}, tok)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tasks records what a call reports of its remote task.
type tasks struct {
	mu   sync.Mutex
	seen []tool.RemoteTask
}

func (ts *tasks) input(run, task string) tool.Input {
	return tool.Input{Name: "refunds", Run: run, Args: map[string]any{spec.SubAgentTaskParam: task},
		User: tool.User{ID: "alice", Credential: tool.NewCredential("alice-serve-token")},
		OnRemoteTask: func(rt tool.RemoteTask) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.seen = append(ts.seen, rt)
		}}
}

func (ts *tasks) states() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for _, rt := range ts.seen {
		out = append(out, rt.State)
	}
	return out
}

func (ts *tasks) last() tool.RemoteTask {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.seen) == 0 {
		return tool.RemoteTask{}
	}
	return ts.seen[len(ts.seen)-1]
}

// A task the remote agent completes is answered with its artifact's text, its
// chunks put together, whether the agent streams or is polled; the call reports
// the task (host, ids, states), and two calls of one run share one remote
// context while another run gets its own.
func TestACompletedTaskIsTheAnswer(t *testing.T) {
	p := a2apeer.Start(t, token)
	for _, path := range []string{"/stream", "/plain"} {
		t.Run(path, func(t *testing.T) {
			a := remote(t, p, path, token)
			var ts tasks
			out, err := a.Call(context.Background(), ts.input("run_1", "Refund order A1."))
			if err != nil {
				t.Fatal(err)
			}
			first := ts.last()
			if want := fmt.Sprintf("Done: Refund order A1. [context %s]", first.Context); out != want {
				t.Fatalf("answer %q, want %q", out, want)
			}
			if first.Host != strings.TrimPrefix(p.URL, "http://") || first.Task == "" || first.State != "completed" {
				t.Fatalf("reported %+v", first)
			}
			if p.Log(t).Contexts[first.Task] != first.Context {
				t.Fatalf("the peer saw context %q for task %s, the call reported %q", p.Log(t).Contexts[first.Task], first.Task, first.Context)
			}
			if _, err := a.Call(context.Background(), ts.input("run_1", "And order A2.")); err != nil {
				t.Fatal(err)
			}
			if second := ts.last(); second.Context != first.Context || second.Task == first.Task {
				t.Fatalf("a second call of the run: %+v, the first %+v: want one context, two tasks", second, first)
			}
			if _, err := a.Call(context.Background(), ts.input("run_2", "Order A3.")); err != nil {
				t.Fatal(err)
			}
			if other := ts.last(); other.Context == first.Context {
				t.Fatalf("another run shares the context %s", other.Context)
			}
		})
	}
}

// An agent that answers with a message, not a task, is answered by its text.
func TestAMessageIsTheAnswer(t *testing.T) {
	p := a2apeer.Start(t, token)
	var ts tasks
	out, err := remote(t, p, "/stream", token).Call(context.Background(), ts.input("run_1", "message: hello"))
	if err != nil || out != "A message: hello" {
		t.Fatalf("%q, %v", out, err)
	}
}

// A task that fails, is rejected or asks for input is an error that says so in
// the remote agent's words; one that asks for input is canceled, not answered
// (nobody here can), and not asked again.
func TestATaskThatEndsWithoutAnAnswerIsAnError(t *testing.T) {
	p := a2apeer.Start(t, token)
	for _, tt := range []struct {
		task, want, state string
		canceled          bool
	}{
		{"fail: refund A1", "the remote agent refunds failed the task: the refund service is down", "failed", false},
		{"reject: bake a cake", "the remote agent refunds rejected the task: I only handle refunds", "rejected", false},
		{"input: refund it", "the remote agent refunds needs input it cannot get here (input-required): Which order do you mean?", "canceled", true},
	} {
		for _, path := range []string{"/stream", "/plain"} {
			t.Run(tt.state+path, func(t *testing.T) {
				var ts tasks
				_, err := remote(t, p, path, token).Call(context.Background(), ts.input("run_1", tt.task))
				if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				last := ts.last()
				if last.State != tt.state {
					t.Fatalf("states %v, want the last %s", ts.states(), tt.state)
				}
				if got := slices.Contains(p.Log(t).Canceled, last.Task); got != tt.canceled {
					t.Fatalf("canceled %v, want %v (log %v)", got, tt.canceled, p.Log(t).Canceled)
				}
			})
		}
	}
}

// A call that ends before its task (its deadline, or the run canceled) cancels
// the remote task with tasks/cancel and reports it canceled, whether the agent
// streams or is polled.
func TestACallThatEndsFirstCancelsTheTask(t *testing.T) {
	p := a2apeer.Start(t, token)
	ends := map[string]func() (context.Context, context.CancelFunc){
		"deadline": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 1500*time.Millisecond)
		},
		"canceled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(1500*time.Millisecond, cancel)
			return ctx, cancel
		},
	}
	for _, path := range []string{"/stream", "/plain"} {
		for end, ctxOf := range ends {
			t.Run(end+path, func(t *testing.T) {
				var ts tasks
				ctx, cancel := ctxOf()
				defer cancel()
				start := time.Now()
				_, err := remote(t, p, path, token).Call(ctx, ts.input("run_1", "slow: refund everything"))
				if err == nil || !strings.Contains(err.Error(), "did not finish") || time.Since(start) > 10*time.Second {
					t.Fatalf("error %v after %s", err, time.Since(start))
				}
				last := ts.last()
				if last.State != "canceled" || !slices.Contains(p.Log(t).Canceled, last.Task) {
					t.Fatalf("reported %v; the peer canceled %v", ts.states(), p.Log(t).Canceled)
				}
			})
		}
	}
}

// The token goes with every request: the peer refuses a call without the right
// one, and the error says so without showing the token sent.
func TestTheTokenIsSentAndNeverShown(t *testing.T) {
	p := a2apeer.Start(t, token)
	const wrong = "not-the-peer-token-93ab"
	var ts tasks
	_, err := remote(t, p, "/stream", wrong).Call(context.Background(), ts.input("run_1", "Refund A1."))
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("error %v", err)
	}
	if p.Log(t).Refused == 0 {
		t.Fatal("the peer refused nothing")
	}
	a := remote(t, p, "/stream", token)
	if s := fmt.Sprintf("%v %+v %#v", a, a, a); strings.Contains(s, token) {
		t.Fatalf("the agent prints its token: %s", s)
	}
}

// An agent card that names an endpoint on another host is refused: the token
// goes only to the host of the entry's url.
func TestAnEndpointOnAnotherHostIsRefused(t *testing.T) {
	p := a2apeer.Start(t, token)
	var ts tasks
	_, err := remote(t, p, "/elsewhere", token).Call(context.Background(), ts.input("run_1", "Refund A1."))
	if err == nil || !strings.Contains(err.Error(), "names no endpoint on "+p.URL) {
		t.Fatalf("error %v", err)
	}
	if p.Log(t).Refused != 0 || len(p.Log(t).Contexts) != 0 {
		t.Fatalf("the other host was reached: %+v", p.Log(t))
	}
}

// A response over MaxResponse fails the call instead of filling memory.
func TestAResponseIsBounded(t *testing.T) {
	p := a2apeer.Start(t, token)
	for _, path := range []string{"/stream", "/plain"} {
		t.Run(path, func(t *testing.T) {
			var ts tasks
			_, err := remote(t, p, path, token).Call(context.Background(), ts.input("run_1", fmt.Sprintf("big:%d", a2a.MaxResponse+1024)))
			if err == nil || !strings.Contains(err.Error(), "answered with more than 8 MiB") {
				t.Fatalf("error %v", err)
			}
			out, err := remote(t, p, path, token).Call(context.Background(), ts.input("run_1", "big:1000"))
			if err != nil || out != strings.Repeat("x", 1000) {
				t.Fatalf("a small answer: %d bytes, %v", len(out), err)
			}
		})
	}
}
