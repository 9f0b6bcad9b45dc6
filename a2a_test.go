package agentrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/a2apeer"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/internal/otlptest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool"
)

const a2aToken = "a2a-secret-7d41be90"

// a2aDesk is a front desk whose model hands tasks to the remote agent refunds,
// served by the official A2A JS SDK (tools/node/a2a-peer.mjs).
const a2aDesk = `version: 1
name: desk
instructions: You are the shop's front desk.
model:
  name: gpt-4o-mini
  base_url: MODEL_URL
  api_key_env: LLM_KEY
  retries: 0
guards: {max_run_time: RUN_TIME}
agents:
  - name: refunds
    description: Refunds paid orders.
    a2a:
      url: PEER_URL/stream
      auth: {token_env: REFUNDS_TOKEN}
      timeout: TIMEOUT
`

// deskModel asks the remote agent for each of tasks in one response, then
// answers with what the tools said.
func deskModel(t *testing.T, tasks ...string) *openaitest.Server {
	return openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		var results []string
		for _, m := range req.Messages {
			if m["role"] == "tool" {
				results = append(results, fmt.Sprint(m["content"]))
			}
		}
		if len(results) > 0 {
			return openaitest.Reply{Content: "The refunds agent said: " + strings.Join(results, " | ")}
		}
		var calls []openaitest.ToolCall
		for i, task := range tasks {
			args, _ := json.Marshal(map[string]string{"task": task})
			calls = append(calls, openaitest.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "refunds", Arguments: string(args)})
		}
		return openaitest.Reply{ToolCalls: calls}
	})
}

type a2aDeskOptions struct {
	runTime, timeout string
	tel              *telemetry.Telemetry
	spec             string // a2aDesk when empty
}

// openDesk opens the desk against the model and the peer.
func openDesk(t *testing.T, m *openaitest.Server, p *a2apeer.Peer, o a2aDeskOptions) *agentrun.Agent {
	t.Helper()
	body := strings.NewReplacer("MODEL_URL", m.URL, "PEER_URL", p.URL, "RUN_TIME", cmpOr(o.runTime, "1m"), "TIMEOUT", cmpOr(o.timeout, "30s")).
		Replace(cmpOr(o.spec, a2aDesk))
	env := map[string]string{"LLM_KEY": "sk-test", "REFUNDS_TOKEN": a2aToken}
	a, err := agentrun.Open(context.Background(), writeSpec(t, body), agentrun.Options{Telemetry: o.tel,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// events collects a run's events.
type events struct {
	mu  sync.Mutex
	all []runtime.Event
}

func (e *events) Observe(ev runtime.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) remote() []tool.RemoteTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []tool.RemoteTask
	for _, ev := range e.all {
		if ev.Kind == runtime.EventRemote {
			out = append(out, *ev.Remote)
		}
	}
	return out
}

func (e *events) has(kind runtime.EventKind, guard runtime.Guard) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.all, func(ev runtime.Event) bool { return ev.Kind == kind && ev.Guard == guard })
}

func runDesk(t *testing.T, a *agentrun.Agent, input string) (*runtime.Result, *events) {
	t.Helper()
	ev := &events{}
	res, err := a.Run(context.Background(), runtime.Request{Input: input, User: tool.User{ID: "alice"}, Observer: ev})
	if err != nil {
		t.Fatal(err)
	}
	return res, ev
}

// The model calls the remote agent like a local sub-agent: its answer is the
// tool's result, each call is a remote task the run's events name (host, task,
// state), and two calls of one run are one remote context, another run's
// another.
func TestARemoteA2AAgentIsATool(t *testing.T) {
	p := a2apeer.Start(t, a2aToken)
	m := deskModel(t, "Refund order A1.", "Refund order A2.")
	a := openDesk(t, m, p, a2aDeskOptions{})
	res, ev := runDesk(t, a, "Refund A1 and A2, please.")
	if res.Stop != runtime.StopCompleted || len(res.Steps) != 2 {
		t.Fatalf("stop %s (%s), steps %+v", res.Stop, res.Detail, res.Steps)
	}
	tasks := ev.remote()
	var completed []tool.RemoteTask
	for _, rt := range tasks {
		if rt.State == "completed" {
			completed = append(completed, rt)
		}
	}
	if len(completed) != 2 || completed[0].Context != completed[1].Context || completed[0].Task == completed[1].Task ||
		completed[0].Host != strings.TrimPrefix(p.URL, "http://") {
		t.Fatalf("remote tasks %+v", tasks)
	}
	ctxID := completed[0].Context
	for i, order := range []string{"A1", "A2"} {
		want := fmt.Sprintf("Done: Refund order %s. [context %s]", order, ctxID)
		if s := res.Steps[i]; s.Tool != "refunds" || s.Outcome != runtime.OutcomeOK || s.Result != want {
			t.Fatalf("step %d: %+v, want the result %q", i, s, want)
		}
	}
	if !strings.Contains(res.Answer, "Done: Refund order A1.") {
		t.Fatalf("answer %q", res.Answer)
	}
	_, again := runDesk(t, a, "Refund A1 and A2, please.")
	if other := again.remote(); len(other) == 0 || other[0].Context == ctxID {
		t.Fatalf("another run's tasks %+v share the context %s", other, ctxID)
	}
	if res.Usage.TotalTokens == 0 || res.Turns != 2 {
		t.Fatalf("turns %d, usage %+v: the desk's own two model calls", res.Turns, res.Usage)
	}
}

// A task the remote agent fails, or one that asks for input, is a tool error the
// model reads and answers from; the run goes on.
func TestARemoteAgentsFailureIsAToolError(t *testing.T) {
	p := a2apeer.Start(t, a2aToken)
	for _, tt := range []struct{ task, want string }{
		{"fail: refund A1", "Error: the remote agent refunds failed the task: the refund service is down"},
		{"input: refund it", "Error: the remote agent refunds needs input it cannot get here (input-required): Which order do you mean?"},
	} {
		t.Run(tt.task, func(t *testing.T) {
			m := deskModel(t, tt.task)
			res, _ := runDesk(t, openDesk(t, m, p, a2aDeskOptions{}), "Refund A1.")
			if res.Stop != runtime.StopCompleted || len(res.Steps) != 1 || res.Steps[0].Outcome != runtime.OutcomeError ||
				!strings.HasPrefix(res.Steps[0].Result, tt.want) {
				t.Fatalf("stop %s, steps %+v", res.Stop, res.Steps)
			}
			reqs := m.Requests()
			last := reqs[len(reqs)-1].Messages
			if got := fmt.Sprint(last[len(last)-1]["content"]); !strings.HasPrefix(got, tt.want) {
				t.Fatalf("the model read %q", got)
			}
		})
	}
}

// The entry's timeout ends a slow task like a tool's timeout (a guard event and
// a tool error, the run goes on); max_run_time ends the whole run with timeout.
// Either way the remote task is canceled.
func TestARemoteAgentIsBoundedInTime(t *testing.T) {
	p := a2apeer.Start(t, a2aToken)
	t.Run("its timeout", func(t *testing.T) {
		m := deskModel(t, "slow: refund everything")
		start := time.Now()
		res, ev := runDesk(t, openDesk(t, m, p, a2aDeskOptions{timeout: "1s"}), "Refund everything.")
		if res.Stop != runtime.StopCompleted || len(res.Steps) != 1 || res.Steps[0].Result != "Error: refunds timed out after 1s." ||
			!ev.has(runtime.EventGuard, runtime.GuardToolTimeout) || time.Since(start) > 20*time.Second {
			t.Fatalf("stop %s, steps %+v after %s", res.Stop, res.Steps, time.Since(start))
		}
		assertCanceled(t, p, ev)
	})
	t.Run("max_run_time", func(t *testing.T) {
		m := deskModel(t, "slow: refund everything")
		res, ev := runDesk(t, openDesk(t, m, p, a2aDeskOptions{runTime: "2s", timeout: "1m"}), "Refund everything.")
		if res.Stop != runtime.StopTimeout || !strings.Contains(res.Detail, "max_run_time") {
			t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
		}
		assertCanceled(t, p, ev)
	})
}

// assertCanceled checks that the run's remote task ended canceled, and that the
// peer was asked to cancel it.
func assertCanceled(t *testing.T, p *a2apeer.Peer, ev *events) {
	t.Helper()
	tasks := ev.remote()
	if len(tasks) == 0 || tasks[len(tasks)-1].State != "canceled" || !slices.Contains(p.Log(t).Canceled, tasks[0].Task) {
		t.Fatalf("remote tasks %+v; the peer canceled %v", tasks, p.Log(t).Canceled)
	}
}

// The token from the environment reaches the remote agent (it refuses calls
// without it) and nothing else: not the events, the result, the model, nor the
// traces, whose spans name the agent's host and the task.
func TestTheRemoteAgentsTokenIsSentAndNeverShown(t *testing.T) {
	p := a2apeer.Start(t, a2aToken)
	recv := otlptest.New(t)
	tel, err := telemetry.Setup(context.Background(), func(k string) (string, bool) {
		v, ok := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL, "OTEL_SERVICE_NAME": "desk"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	m := deskModel(t, "Refund order A1.")
	res, ev := runDesk(t, openDesk(t, m, p, a2aDeskOptions{tel: tel}), "Refund A1.")
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCompleted || res.Steps[0].Outcome != runtime.OutcomeOK || p.Log(t).Refused != 0 {
		t.Fatalf("stop %s, steps %+v, refused %d", res.Stop, res.Steps, p.Log(t).Refused)
	}
	seen, _ := json.Marshal(struct {
		Events []runtime.Event
		Result *runtime.Result
		Model  []openaitest.Request
	}{ev.all, res, m.Requests()})
	if strings.Contains(string(seen), a2aToken) || recv.Contains(a2aToken) {
		t.Fatal("the token is in the events, the result, the model's requests or the traces")
	}
	tasks := ev.remote()
	spans := recv.Named("execute_tool refunds")
	if len(spans) != 1 || spans[0].Attrs["agentrun.remote_agent.task_id"] != tasks[0].Task ||
		spans[0].Attrs["agentrun.remote_agent.host"] != strings.TrimPrefix(p.URL, "http://") ||
		spans[0].Attrs["agentrun.remote_agent.state"] != "completed" {
		t.Fatalf("tool spans %+v; tasks %+v", spans, tasks)
	}
	runs := recv.Named("invoke_agent desk")
	if len(runs) != 1 || !slices.Contains(runs[0].EventNames(), "agentrun.remote_agent") {
		t.Fatalf("run spans %+v", runs)
	}

	env := func(k string) (string, bool) { return "sk-test", k == "LLM_KEY" }
	body := strings.NewReplacer("MODEL_URL", m.URL, "PEER_URL", p.URL, "RUN_TIME", "1m", "TIMEOUT", "30s").Replace(a2aDesk)
	if _, err := agentrun.Open(context.Background(), writeSpec(t, body), agentrun.Options{LookupEnv: env}); err == nil ||
		!strings.Contains(err.Error(), "REFUNDS_TOKEN (a2a.auth.token_env) is not set") {
		t.Fatalf("without the token: %v", err)
	}
}

// a2aIntents hands the refund intent's runs to the remote agent.
const a2aIntents = a2aDesk + `intents:
  refund:
    description: Refund an order.
    patterns: ['(?i)refund']
    agent: refunds
  other:
    description: Anything else.
    patterns: ['.']
    kind: chat
routing: {recognizer: rules, fallback: other}
`

// An intent whose agent is the remote agent hands it the run: the user's
// message is its task and its answer the run's, with no model call of this
// agent's; a task it fails stops the run with model_error, saying why.
func TestAnIntentHandsItsRunsToARemoteAgent(t *testing.T) {
	p := a2apeer.Start(t, a2aToken)
	m := deskModel(t)
	a := openDesk(t, m, p, a2aDeskOptions{spec: a2aIntents})
	res, ev := runDesk(t, a, "Refund order A7.")
	tasks := ev.remote()
	if res.Stop != runtime.StopCompleted || len(tasks) == 0 ||
		res.Answer != fmt.Sprintf("Done: Refund order A7. [context %s]", tasks[0].Context) {
		t.Fatalf("stop %s (%s), answer %q, tasks %+v", res.Stop, res.Detail, res.Answer, tasks)
	}
	if res.Intent != "refund" || res.Handoff == nil || res.Handoff.Agent != "refunds" || len(m.Requests()) != 0 {
		t.Fatalf("intent %s, handoff %+v, %d model requests", res.Intent, res.Handoff, len(m.Requests()))
	}
	if got := res.Messages; len(got) != 2 || got[1].Content != res.Answer {
		t.Fatalf("the exchange kept: %+v", got)
	}
	res, _ = runDesk(t, a, "fail: refund order A7")
	if res.Stop != runtime.StopModelError || res.Detail != "intent refund: the remote agent refunds failed the task: the refund service is down" {
		t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
	}
}
