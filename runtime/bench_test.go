package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// cannedModel answers instantly from prepared responses: two rounds of tool calls,
// then an answer. It stands for the model so the benchmark measures the runtime.
type cannedModel struct{ first, second, answer *model.Response }

func (m *cannedModel) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	assistants := 0
	for i := range req.Messages {
		if req.Messages[i].Role == model.RoleAssistant {
			assistants++
		}
	}
	switch assistants {
	case 0:
		return m.first, nil
	case 1:
		return m.second, nil
	}
	return m.answer, nil
}

// BenchmarkRunThreeTurns is a whole run of three model calls (two with a tool call,
// one answer) against an in-process model: the runtime's own cost per run. Divide by
// three for the cost per model call.
func BenchmarkRunThreeTurns(b *testing.B) {
	call := func(id, args string) *model.Response {
		return &model.Response{Message: model.Message{Role: model.RoleAssistant,
			ToolCalls: []model.ToolCall{{ID: id, Name: "lookup", Arguments: args}}}}
	}
	model := &cannedModel{
		first:  call("call_1", `{"id":"A1"}`),
		second: call("call_2", `{"id":"B2"}`),
		answer: &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "Both orders are on their way."}},
	}
	lookup := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return `{"status":"delivering"}`, nil }}
	a := compile(b, baseSpec, model, map[string]*funcTool{"lookup": lookup, "other": echo()})
	req := runtime.Request{Input: "Where are A1 and B2?", User: tool.User{ID: "u-1", Attributes: map[string]string{"tenant": "acme"}}, Conversation: "c-1"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Run(ctx, req)
		if err != nil || res.Stop != runtime.StopCompleted || res.Turns != 3 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// roundModel answers by the round of the current exchange — the assistant messages
// after the last user message — so a conversation's history does not shift it.
type roundModel struct {
	rounds []func(i int) *model.Response
}

func (m *roundModel) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	round := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != model.RoleUser; i-- {
		if req.Messages[i].Role == model.RoleAssistant {
			round++
		}
	}
	return m.rounds[min(round, len(m.rounds)-1)](round), nil
}

const seenBenchSpec = `
version: 1
name: seen-bench
instructions: Help.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
  - name: cancel
    parameters: {type: object, properties: {number: {type: string}}, required: [number]}
    http: {url: "https://example.com/c", method: POST}
    accept: args.number in seen("orders")
memory:
  max_seen: 1000000
`

// BenchmarkRunSeen is one run in a conversation that has already revealed n orders:
// list the user's orders (one of a handful, so the data stays the same size), cancel
// one — an accept rule `args.number in seen("orders")` — and answer. The run reads the
// conversation's last turns at the start and commits at the end, as every run does.
// In seen=N it cancels the order it just listed, which the run answers itself; in
// earlier/seen=N the one the previous run listed, which only the store knows.
func BenchmarkRunSeen(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return memory.New() }},
		{"sqlite", func(b *testing.B) store.Store {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, st := range stores {
		for _, earlier := range []bool{false, true} {
			for _, n := range []int{0, 10_000, 100_000} {
				name := fmt.Sprintf("store=%s/seen=%d", st.name, n)
				if earlier {
					name = fmt.Sprintf("store=%s/earlier/seen=%d", st.name, n)
				}
				b.Run(name, func(b *testing.B) { benchRunSeen(b, st.open(b), n, earlier) })
			}
		}
	}
}

func benchRunSeen(b *testing.B, st store.Store, n int, earlier bool) {
	ctx := context.Background()
	seed := make([]string, n)
	for i := range seed {
		seed[i] = fmt.Sprintf("A%06d", i)
	}
	if err := st.Commit(ctx, store.Record{UserID: "u-1", Conversation: "c-1", Seen: map[string][]string{"orders": seed}}); err != nil {
		b.Fatal(err)
	}
	i := 0
	order := func(i int) string { return fmt.Sprintf("B%02d", i%20) }
	cancel := func() string {
		if earlier && i > 0 {
			return order(i + 19) // the previous run's
		}
		return order(i)
	}
	model := &roundModel{rounds: []func(int) *model.Response{
		func(int) *model.Response {
			return &model.Response{Message: model.Message{Role: model.RoleAssistant,
				ToolCalls: []model.ToolCall{{ID: "call_1", Name: "list_orders", Arguments: `{}`}}}}
		},
		func(int) *model.Response {
			return &model.Response{Message: model.Message{Role: model.RoleAssistant,
				ToolCalls: []model.ToolCall{{ID: "call_2", Name: "cancel", Arguments: `{"number":"` + cancel() + `"}`}}}}
		},
		func(int) *model.Response {
			return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "Cancelled."}}
		},
	}}
	tools := map[string]tool.Tool{
		"list_orders": &funcTool{fn: func(context.Context, tool.Input) (string, error) {
			return `{"orders":[{"number":"` + order(i) + `"}]}`, nil
		}},
		"cancel": &funcTool{fn: func(context.Context, tool.Input) (string, error) { return `{"ok":true}`, nil }},
	}
	reg := tool.Registry{"http": func(st *spec.Tool, _ string) (tool.Tool, error) { return tools[st.Name], nil }}
	a, diags := runtime.Compile(loadSpec(b, seenBenchSpec), runtime.Options{Tools: reg, Model: model, Store: st})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	req := runtime.Request{Input: "Cancel my latest order.", User: tool.User{ID: "u-1"}, Conversation: "c-1"}
	run := func() {
		res, err := a.Run(ctx, req)
		if err != nil || res.Stop != runtime.StopCompleted || len(res.Steps) != 2 || res.Steps[1].Outcome != runtime.OutcomeOK || res.MemoryError != "" {
			b.Fatalf("%v %+v", err, res)
		}
		i++
	}
	if earlier {
		run() // so that the first measured run has a previous one
	}
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
}

// BenchmarkSubAgentCall is a run whose model hands one task to a sub-agent (one
// model call of its own) and then answers: three model calls, one of them a
// sub-run's, no store: the runtime's own cost of a run that delegates once.
func BenchmarkSubAgentCall(b *testing.B) {
	model := &roundModel{rounds: []func(int) *model.Response{
		func(int) *model.Response { // the desk's first turn, and the specialist's only one
			return &model.Response{Message: model.Message{Role: model.RoleAssistant,
				ToolCalls: []model.ToolCall{{ID: "c-sub", Name: "refunds", Arguments: `{"task":"Refund A1."}`}}}}
		},
		func(int) *model.Response {
			return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "A1 is refunded."}}
		},
	}}
	specialist := &specialistModel{}
	sub := loadSpec(b, "version: 1\nname: refunds\ninstructions: You handle refunds.\n")
	subAgent, diags := runtime.Compile(sub, runtime.Options{Model: specialist})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	a := compileWith(b, parentSpec, withRefunds(sub), runtime.Options{Model: model, Agents: map[string]*runtime.Agent{"refunds": subAgent}}, map[string]*funcTool{"lookup": echo()})
	req := runtime.Request{Input: "Refund A1", User: tool.User{ID: "u-1"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Run(ctx, req)
		if err != nil || res.Stop != runtime.StopCompleted || len(res.Steps) != 1 || res.Steps[0].Agent == nil {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// specialistModel answers every request at once.
type specialistModel struct{}

func (specialistModel) Complete(context.Context, *model.Request) (*model.Response, error) {
	return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "Refunded A1."}}, nil
}
