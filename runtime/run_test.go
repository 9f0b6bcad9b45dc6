package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// recorder wraps a model and keeps a copy of every request, to check the protocol.
type recorder struct {
	model    model.Model
	mu       sync.Mutex
	requests []model.Request
}

func (r *recorder) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	r.mu.Lock()
	cp := *req
	cp.Messages = append([]model.Message(nil), req.Messages...)
	r.requests = append(r.requests, cp)
	r.mu.Unlock()
	return r.model.Complete(ctx, req)
}

// funcTool is a tool whose behaviour a test chooses; it counts its calls.
type funcTool struct {
	calls atomic.Int32
	fn    func(ctx context.Context, in tool.Input) (string, error)
}

func (f *funcTool) Call(ctx context.Context, in tool.Input) (string, error) {
	f.calls.Add(1)
	return f.fn(ctx, in)
}

func loadSpec(t testing.TB, src string) *spec.Spec {
	t.Helper()
	l, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.LookupEnv = func(string) (string, bool) { return "", false }
	s, diags := l.Load("agent.yaml", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("spec: %v", diags)
	}
	return s
}

// compile builds an agent whose http tools are the given funcTools, by name.
func compile(t testing.TB, src string, model model.Model, tools map[string]*funcTool) *runtime.Agent {
	t.Helper()
	return compileWith(t, src, nil, runtime.Options{Model: model}, tools)
}

// compileWith is compile with more options, and edit (when not nil) changing the
// loaded spec first.
func compileWith(t testing.TB, src string, edit func(*spec.Spec), opts runtime.Options, tools map[string]*funcTool) *runtime.Agent {
	t.Helper()
	opts.Tools = tool.Registry{"http": func(st *spec.Tool, dir string) (tool.Tool, error) {
		ft, ok := tools[st.Name]
		if !ok {
			return nil, fmt.Errorf("test has no tool %s", st.Name)
		}
		return ft, nil
	}}
	s := loadSpec(t, src)
	if edit != nil {
		edit(s)
	}
	a, diags := runtime.Compile(s, opts)
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	return a
}

func script(turns ...offline.ScriptTurn) *recorder {
	return &recorder{model: offline.NewScript("test", turns)}
}

func calls(cs ...offline.ScriptToolCall) offline.ScriptTurn { return offline.ScriptTurn{ToolCalls: cs} }
func say(text string) offline.ScriptTurn                    { return offline.ScriptTurn{Text: text} }
func tc(name string, args any) offline.ScriptToolCall {
	return offline.ScriptToolCall{Name: name, Arguments: args}
}

func echo() *funcTool {
	return &funcTool{fn: func(_ context.Context, in tool.Input) (string, error) {
		b, _ := json.Marshal(in.Args)
		return string(b), nil
	}}
}

const baseSpec = `
version: 1
name: t
instructions: "You help {{ user.id }}."
context: {user: [tenant]}
tools:
  - name: lookup
    parameters:
      type: object
      properties: {id: {type: string}}
      required: [id]
    bind: {owner: user.id, tenant: user.tenant}
    http: {url: "https://example.com/x"}
  - name: other
    http: {url: "https://example.com/y"}
guards:
  max_turns: 6
  max_tool_rounds: 3
  fallback: FALLBACK
`

func run(t *testing.T, a *runtime.Agent, input string) (*runtime.Result, []runtime.Event) {
	t.Helper()
	var mu sync.Mutex
	var events []runtime.Event
	res, err := a.Run(context.Background(), runtime.Request{
		Input: input, User: tool.User{ID: "u-42", Attributes: map[string]string{"tenant": "acme"}}, Conversation: "c-1",
		Observer: runtime.ObserverFunc(func(e runtime.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

// checkProtocol asserts what every request must look like: the system prompt exactly
// once and first, and no tool message without the assistant tool call it answers.
func checkProtocol(t *testing.T, reqs []model.Request) {
	t.Helper()
	for i, req := range reqs {
		systems := 0
		open := map[string]bool{}
		for j, m := range req.Messages {
			switch m.Role {
			case model.RoleSystem:
				systems++
				if j != 0 {
					t.Errorf("request %d: system message at %d", i, j)
				}
			case model.RoleAssistant:
				for id := range open {
					t.Errorf("request %d: tool call %s has no result before message %d", i, id, j)
				}
				open = map[string]bool{}
				for _, c := range m.ToolCalls {
					open[c.ID] = true
				}
			case model.RoleTool:
				if !open[m.ToolCallID] {
					t.Errorf("request %d: tool message %d answers %q, which no preceding assistant message called", i, j, m.ToolCallID)
				}
				delete(open, m.ToolCallID)
			}
		}
		if systems != 1 {
			t.Errorf("request %d has %d system messages", i, systems)
		}
	}
}

func TestToolRoundTrip(t *testing.T) {
	lookup, other := echo(), echo()
	m := script(
		calls(tc("lookup", map[string]any{"id": "A1"})),
		say("done"),
	)
	a := compile(t, baseSpec, m, map[string]*funcTool{"lookup": lookup, "other": other})
	res, _ := run(t, a, "find A1")
	if res.Stop != runtime.StopCompleted || res.Answer != "done" {
		t.Fatalf("stop %s, answer %q", res.Stop, res.Answer)
	}
	checkProtocol(t, m.requests)
	if got := m.requests[0].Messages[0].Content; got != "You help u-42." {
		t.Errorf("system prompt %q", got)
	}
	second := m.requests[1].Messages
	if len(second) != 4 || second[2].Role != model.RoleAssistant || second[3].Role != model.RoleTool || second[3].ToolCallID != second[2].ToolCalls[0].ID {
		t.Fatalf("second request: %+v", second)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(second[3].Content), &args); err != nil {
		t.Fatal(err)
	}
	if args["owner"] != "u-42" || args["tenant"] != "acme" || args["id"] != "A1" {
		t.Errorf("tool got %v: bound values missing", args)
	}
	// The stored exchange: user, assistant call, tool result, answer; no system message.
	roles := ""
	for _, m := range res.Messages {
		roles += string(m.Role[0])
	}
	if roles != "uata" {
		t.Errorf("stored roles %q, want uata", roles)
	}
	if len(res.Steps) != 1 || res.Steps[0].Outcome != "ok" || res.Turns != 2 || res.ToolRounds != 1 {
		t.Errorf("steps %+v, turns %d, rounds %d", res.Steps, res.Turns, res.ToolRounds)
	}
}

func TestParallelCallsKeepOrder(t *testing.T) {
	slow := &funcTool{fn: func(ctx context.Context, _ tool.Input) (string, error) {
		time.Sleep(20 * time.Millisecond)
		return "slow", nil
	}}
	fast := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return "fast", nil }}
	model := script(calls(tc("lookup", map[string]any{"id": "1"}), tc("other", nil)), say("ok"))
	a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": slow, "other": fast})
	res, _ := run(t, a, "both")
	checkProtocol(t, model.requests)
	msgs := model.requests[1].Messages
	if msgs[3].Content != "slow" || msgs[4].Content != "fast" || msgs[3].ToolCallID != "call_1_1" || msgs[4].ToolCallID != "call_1_2" {
		t.Errorf("tool messages out of call order: %+v", msgs[3:])
	}
	if res.Stop != runtime.StopCompleted {
		t.Errorf("stop %s", res.Stop)
	}
}

func TestUntrustedToolCalls(t *testing.T) {
	tests := []struct {
		name, args, tool string
		want             string // in the tool message the model gets back
	}{
		{name: "not JSON", tool: "lookup", args: `{"id": "A1"`, want: "not valid JSON"},
		{name: "not an object", tool: "lookup", args: `["A1"]`, want: "must be a JSON object, not an array"},
		{name: "schema", tool: "lookup", args: `{"id": 7}`, want: "at /id: got number, want string"},
		{name: "missing required", tool: "lookup", args: `{}`, want: "missing property 'id'"},
		{name: "unknown tool", tool: "delete_all", args: `{}`, want: `there is no tool "delete_all" for this request. Available tools: lookup, other.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := echo()
			model := script(calls(tc(tt.tool, tt.args)), say("ok"))
			a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": lookup, "other": echo()})
			res, events := run(t, a, "go")
			if lookup.calls.Load() != 0 {
				t.Error("the tool ran on bad input")
			}
			got := model.requests[1].Messages[3].Content
			if !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, tt.want) {
				t.Errorf("tool message %q does not contain %q", got, tt.want)
			}
			if res.Steps[0].Outcome != "refused" || !hasEvent(events, runtime.EventToolRefused) {
				t.Errorf("outcome %q, events %v", res.Steps[0].Outcome, eventKinds(events))
			}
		})
	}
}

func TestBoundParameterCannotBeSetByModel(t *testing.T) {
	lookup := echo()
	model := script(calls(tc("lookup", map[string]any{"id": "A1", "owner": "someone-else"})), say("ok"))
	a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": lookup, "other": echo()})
	res, events := run(t, a, "go")
	if !strings.Contains(res.Steps[0].Result, `"owner":"u-42"`) {
		t.Errorf("the model's owner was used: %s", res.Steps[0].Result)
	}
	if !hasEvent(events, runtime.EventBindDiscarded) {
		t.Error("no event for the discarded value")
	}
	for _, d := range a.Tools() {
		props := d.Parameters["properties"].(map[string]any)
		if _, ok := props["owner"]; ok {
			t.Errorf("bound parameter offered to the model: %v", d.Parameters)
		}
	}
}

func TestDuplicateCalls(t *testing.T) {
	twice := func() *recorder {
		return script(
			calls(tc("lookup", `{"id":"A1"}`)),
			calls(tc("lookup", `{ "id" : "A1" }`)), // the same call, spelled differently
			say("ok"),
		)
	}
	for _, mode := range []string{"stop", "hint", "allow"} {
		t.Run(mode, func(t *testing.T) {
			lookup := echo()
			m := twice()
			a := compile(t, baseSpec+"  duplicate_calls: "+mode+"\n", m, map[string]*funcTool{"lookup": lookup, "other": echo()})
			res, events := run(t, a, "go")
			checkProtocol(t, m.requests)
			switch mode {
			case "stop":
				if res.Stop != runtime.StopDuplicateCall || res.Answer != "FALLBACK" || lookup.calls.Load() != 1 {
					t.Errorf("stop %s, answer %q, calls %d", res.Stop, res.Answer, lookup.calls.Load())
				}
				if res.ToolRounds != 1 { // the response whose calls never ran is no round
					t.Errorf("tool rounds %d, want 1", res.ToolRounds)
				}
				if last := res.Messages[len(res.Messages)-1]; last.Role == model.RoleAssistant && len(last.ToolCalls) > 0 {
					t.Error("a tool call without its result was kept")
				}
			case "hint":
				if res.Stop != runtime.StopCompleted || lookup.calls.Load() != 1 {
					t.Errorf("stop %s, calls %d", res.Stop, lookup.calls.Load())
				}
				hint := m.requests[2].Messages[5].Content
				if !strings.Contains(hint, "already called") || !strings.Contains(hint, `"id":"A1"`) {
					t.Errorf("hint %q does not carry the earlier result", hint)
				}
			case "allow":
				if res.Stop != runtime.StopCompleted || lookup.calls.Load() != 2 {
					t.Errorf("stop %s, calls %d", res.Stop, lookup.calls.Load())
				}
			}
			if (mode != "allow") != hasEvent(events, runtime.EventGuard) {
				t.Errorf("guard event present = %v", hasEvent(events, runtime.EventGuard))
			}
		})
	}
}

func TestLimits(t *testing.T) {
	loop := func(n int) *recorder {
		var turns []offline.ScriptTurn
		for i := range n {
			turns = append(turns, calls(tc("lookup", map[string]any{"id": fmt.Sprint(i)})))
		}
		return script(turns...)
	}
	t.Run("max_tool_rounds", func(t *testing.T) {
		model := loop(10)
		a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": echo(), "other": echo()})
		res, _ := run(t, a, "go")
		if res.Stop != runtime.StopMaxToolRounds || res.ToolRounds != 3 || res.Answer != "FALLBACK" {
			t.Errorf("stop %s after %d rounds, answer %q", res.Stop, res.ToolRounds, res.Answer)
		}
		checkProtocol(t, model.requests)
	})
	t.Run("max_turns", func(t *testing.T) {
		model := loop(10)
		src := strings.Replace(baseSpec, "max_tool_rounds: 3", "max_tool_rounds: 6", 1)
		a := compile(t, src, model, map[string]*funcTool{"lookup": echo(), "other": echo()})
		res, _ := run(t, a, "go")
		if res.Stop != runtime.StopMaxTurns || res.Turns != 6 {
			t.Errorf("stop %s after %d turns", res.Stop, res.Turns)
		}
	})
	t.Run("model error", func(t *testing.T) {
		a := compile(t, baseSpec, failing{}, map[string]*funcTool{"lookup": echo(), "other": echo()})
		res, events := run(t, a, "go")
		if res.Stop != runtime.StopModelError || res.Answer != "FALLBACK" || !strings.Contains(res.Detail, "HTTP 500") {
			t.Errorf("stop %s, answer %q, detail %q", res.Stop, res.Answer, res.Detail)
		}
		if !hasEvent(events, runtime.EventStop) {
			t.Error("no stop event")
		}
	})
}

type failing struct{}

func (failing) Complete(context.Context, *model.Request) (*model.Response, error) {
	return nil, &model.Error{Status: 500, Err: errors.New("upstream failed")}
}

func TestToolTimeoutAndOutputCap(t *testing.T) {
	src := baseSpec + "  tool_timeout: 50ms\n  max_tool_output: 100\n"
	hang := &funcTool{fn: func(ctx context.Context, _ tool.Input) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	big := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return strings.Repeat("é", 500), nil }}
	model := script(calls(tc("lookup", map[string]any{"id": "1"}), tc("other", nil)), say("ok"))
	a := compile(t, src, model, map[string]*funcTool{"lookup": hang, "other": big})
	res, _ := run(t, a, "go")
	if !strings.Contains(res.Steps[0].Result, "timed out after 50ms") || res.Steps[0].Outcome != "error" {
		t.Errorf("timeout step: %+v", res.Steps[0])
	}
	out := res.Steps[1].Result
	if !strings.Contains(out, "[output truncated: 100 of 1000 bytes shown]") || !strings.HasPrefix(out, strings.Repeat("é", 50)+"\n") {
		t.Errorf("truncated output %q", out)
	}
	if res.Stop != runtime.StopCompleted {
		t.Errorf("stop %s", res.Stop)
	}
}

func TestToolPanicIsAnError(t *testing.T) {
	boom := &funcTool{fn: func(context.Context, tool.Input) (string, error) { panic("nil map") }}
	model := script(calls(tc("other", nil)), say("ok"))
	a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": echo(), "other": boom})
	res, _ := run(t, a, "go")
	if res.Steps[0].Outcome != "error" || !strings.Contains(res.Steps[0].Result, "failed unexpectedly") || res.Stop != runtime.StopCompleted {
		t.Errorf("%+v, stop %s", res.Steps[0], res.Stop)
	}
}

func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	block := &funcTool{fn: func(ctx context.Context, _ tool.Input) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	}}
	model := script(calls(tc("other", nil)), say("never"))
	a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": echo(), "other": block})
	res, err := a.Run(ctx, runtime.Request{Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCanceled || res.Answer != "FALLBACK" || len(model.requests) != 1 {
		t.Errorf("stop %s, answer %q, %d requests", res.Stop, res.Answer, len(model.requests))
	}
}

func TestStatesFollowTheMachine(t *testing.T) {
	model := script(calls(tc("other", nil)), say("ok"))
	a := compile(t, baseSpec, model, map[string]*funcTool{"lookup": echo(), "other": echo()})
	_, events := run(t, a, "go")
	var path []string
	for _, e := range events {
		if e.Kind == runtime.EventState {
			path = append(path, string(e.State))
		}
	}
	want := "TOOL_EXECUTING THINKING VALIDATING FINISHED"
	if got := strings.Join(path, " "); got != want {
		t.Errorf("states %q, want %q", got, want)
	}
}

func hasEvent(events []runtime.Event, k runtime.EventKind) bool {
	for _, e := range events {
		if e.Kind == k {
			return true
		}
	}
	return false
}

func eventKinds(events []runtime.Event) []runtime.EventKind {
	var out []runtime.EventKind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

// One Agent serves many runs at once; each run keeps its own state.
func TestConcurrentRuns(t *testing.T) {
	lookup := echo()
	a := compile(t, baseSpec, offline.Test{}, map[string]*funcTool{"lookup": lookup, "other": echo()})
	var wg sync.WaitGroup
	results := make([]*runtime.Result, 16)
	for i := range results {
		wg.Go(func() {
			res, err := a.Run(context.Background(), runtime.Request{Input: fmt.Sprint("q", i), User: tool.User{ID: fmt.Sprint("u", i)}})
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.Stop != runtime.StopCompleted || res.Messages[0].Content != fmt.Sprint("q", i) || !strings.Contains(res.Steps[0].Result, fmt.Sprintf(`"owner":"u%d"`, i)) {
			t.Errorf("run %d: %+v", i, res)
		}
	}
	if lookup.calls.Load() != 16 {
		t.Errorf("lookup ran %d times", lookup.calls.Load())
	}
}
