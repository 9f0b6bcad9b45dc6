package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/store/sqlite"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const memorySpec = `
version: 1
name: m
instructions: Help.
tools:
  - name: update_address
    parameters: {type: object, properties: {address: {type: string}}, required: [address]}
    http: {url: "https://example.com/a", method: POST}
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
  - name: cancel
    parameters: {type: object, properties: {number: {type: string}}, required: [number]}
    http: {url: "https://example.com/c", method: POST}
    accept: args.number in seen("orders")
intents:
  any: {description: Anything., tools: [update_address, list_orders, cancel], memory: full}
routing: {recognizer: off, fallback: any}
memory:
  window: 1
  facts:
    max_chars: 12
    from_tools:
      - on: update_address
        when: 'args.address != ""'
        set: {default_address: args.address}
        append: {notes: '"moved"'}
      - on: cancel
        append: {notes: '"cancelled " + args.number'}
        delete: [pending]
`

func memoryAgent(t *testing.T, model model.Model, store store.Store, tools map[string]*funcTool) *runtime.Agent {
	t.Helper()
	reg := tool.Registry{"http": func(st *spec.Tool, dir string) (tool.Tool, error) { return tools[st.Name], nil }}
	a, diags := runtime.Compile(loadSpec(t, memorySpec), runtime.Options{Tools: reg, Model: model, Store: store})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return a
}

func runIn(t *testing.T, a *runtime.Agent, conversation, input string) *runtime.Result {
	t.Helper()
	res, err := a.Run(context.Background(), runtime.Request{Input: input, User: tool.User{ID: "u-1"}, Conversation: conversation})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func memoryTools() map[string]*funcTool {
	orders := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return `{"orders":[{"number":"A1"}]}`, nil }}
	return map[string]*funcTool{"update_address": echo(), "list_orders": orders, "cancel": echo()}
}

// A conversation's later runs get its earlier turns, within the window, and the
// entities its earlier tool results revealed.
func TestHistoryAndSeenAcrossRuns(t *testing.T) {
	store := memory.New()
	model := script(
		calls(tc("list_orders", nil)), say("You have order A1."),
		say("Sure."),
		calls(tc("cancel", map[string]any{"number": "A1"})), say("A1 is cancelled."),
	)
	a := memoryAgent(t, model, store, memoryTools())
	runIn(t, a, "c1", "what are my orders?")
	runIn(t, a, "c1", "thanks")
	res := runIn(t, a, "c1", "cancel A1")
	if res.Steps[0].Outcome != "ok" {
		t.Errorf("cancel of an order revealed two runs earlier: %+v", res.Steps[0])
	}
	reqs := model.agentRequests()
	// Request 3 (the second run) carries the first run's whole exchange after the system prompt.
	second := reqs[2].Messages
	if len(second) != 6 || second[1].Content != "what are my orders?" || second[4].Content != "You have order A1." || second[5].Content != "thanks" {
		t.Errorf("second run's request: %+v", second)
	}
	// The third run has a window of 2 turns: the first run's turn is gone from it.
	third := reqs[3].Messages
	if third[1].Content != "thanks" || third[len(third)-1].Content != "cancel A1" {
		t.Errorf("third run's request: %+v", third)
	}
	conv, _ := store.Conversation(context.Background(), "c1", 10)
	seen, _ := store.SeenEntities(context.Background(), "c1")
	if conv.Turns != 3 || strings.Join(seen["orders"], ",") != "A1" {
		t.Errorf("stored %+v, seen %v", conv, seen)
	}
}

// Fact rules write facts from tool outcomes, no model involved; the next run of the
// same user sees them at its intent's memory level.
func TestFactRules(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	st.Commit(ctx, store.Record{UserID: "u-1", Facts: []store.FactChange{{Op: store.FactSet, Key: "pending", Value: "x"}}})
	model := script(
		calls(tc("update_address", map[string]any{"address": "上海市浦东新区世纪大道100号"})), say("Address updated."),
		calls(tc("list_orders", nil)), calls(tc("cancel", map[string]any{"number": "A1"})), say("Cancelled."),
	)
	a := memoryAgent(t, model, st, memoryTools())
	runIn(t, a, "", "my new address is …")
	runIn(t, a, "", "cancel my order")
	facts, _ := st.Facts(ctx, "u-1")
	got := map[string]string{}
	for _, f := range facts {
		got[f.Key] = f.Value
		if f.Source != "tool" {
			t.Errorf("fact %s source %q", f.Key, f.Source)
		}
	}
	if got["default_address"] != "上海市浦东新区世纪大道1" { // cut to max_chars 12
		t.Errorf("default_address %q", got["default_address"])
	}
	if got["notes"] != "cancelled A1" || len(got) != 2 { // "moved\ncancelled A1" keeps its newest 12 characters; pending deleted
		t.Errorf("facts %q", got)
	}
	if sys := model.agentRequests()[2].Messages[0].Content; !strings.Contains(sys, `- default_address: "上海市浦东新区世纪大道1"`) {
		t.Errorf("the second run does not see the fact:\n%s", sys)
	}
}

// Only an accepted answer goes into the history; a stopped run leaves no turn, but
// the facts its successful tool calls wrote stay: those side effects happened.
func TestStoppedRunKeepsFactsNotHistory(t *testing.T) {
	store := memory.New()
	model := script(
		calls(tc("update_address", map[string]any{"address": "Road 1"})),
		calls(tc("update_address", map[string]any{"address": "Road 1"})), // a duplicate: stop
	)
	a := memoryAgent(t, model, store, memoryTools())
	res := runIn(t, a, "c1", "move me")
	if res.Stop != runtime.StopDuplicateCall {
		t.Fatalf("stop %s", res.Stop)
	}
	conv, _ := store.Conversation(context.Background(), "c1", 10)
	facts, _ := store.Facts(context.Background(), "u-1")
	if conv.Turns != 0 || len(conv.Messages) != 0 || len(facts) != 2 {
		t.Errorf("conversation %+v, facts %+v", conv, facts)
	}
}

// A canceled run — its client went away — stores nothing: not the facts its tool
// calls wrote, not the entities they revealed, not the exchange; the store is left
// exactly as before it. A run stopped by its deadline instead keeps today's rule: its
// facts and entities are saved, its exchange is not.
func TestCanceledRunStoresNothing(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return memory.New() },
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlite.Open(filepath.Join(t.TempDir(), "a.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		for _, how := range []string{"cancel", "deadline"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				st := open(t)
				ctx := context.Background()
				before := store.Record{UserID: "u-1", Conversation: "c1",
					Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}, {Role: model.RoleAssistant, Content: "Hello."}},
					Seen:     map[string][]string{"orders": {"A1"}},
					Facts:    []store.FactChange{{Op: store.FactSet, Key: "pending", Value: "x", Source: "tool"}}}
				if err := st.Commit(ctx, before); err != nil {
					t.Fatal(err)
				}
				type snapshot struct {
					Facts []store.Fact
					Conv  store.Conversation
					Seen  map[string][]string
					Convs []string
				}
				snap := func() snapshot {
					var s snapshot
					var errs [4]error
					s.Facts, errs[0] = st.Facts(ctx, "u-1")
					s.Conv, errs[1] = st.Conversation(ctx, "c1", 10)
					s.Seen, errs[2] = st.SeenEntities(ctx, "c1")
					s.Convs, errs[3] = st.Conversations(ctx, "u-1")
					for _, err := range errs {
						if err != nil {
							t.Fatal(err)
						}
					}
					return s
				}
				was := snap()

				runCtx, cancel := context.WithCancel(ctx)
				if how == "deadline" {
					runCtx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				}
				defer cancel()
				orders := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return `{"orders":[{"number":"B2"}]}`, nil }}
				// The address is updated, then the run ends before the model sees it.
				update := &funcTool{fn: func(ctx context.Context, in tool.Input) (string, error) {
					if how == "cancel" {
						cancel()
					}
					<-ctx.Done()
					return `{"ok":true}`, nil
				}}
				model := script(calls(tc("list_orders", nil), tc("update_address", map[string]any{"address": "Road 1"})), say("never"))
				a := memoryAgent(t, model, st, map[string]*funcTool{"list_orders": orders, "update_address": update, "cancel": echo()})
				var mu sync.Mutex
				var events []runtime.Event
				res, err := a.Run(runCtx, runtime.Request{Input: "move me", User: tool.User{ID: "u-1"}, Conversation: "c1",
					Observer: runtime.ObserverFunc(func(e runtime.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Steps) != 2 || res.Steps[0].Outcome != "ok" || res.Steps[1].Outcome != "ok" {
					t.Fatalf("the tool calls did not both succeed: %+v", res.Steps)
				}
				now := snap()
				if how == "cancel" {
					if res.Stop != runtime.StopCanceled {
						t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
					}
					if !reflect.DeepEqual(now, was) {
						t.Errorf("the canceled run changed the store\nbefore %+v\nafter  %+v", was, now)
					}
					var said []string
					for _, e := range events {
						if e.Kind == runtime.EventMemory {
							said = append(said, e.Message)
						}
					}
					if !slices.Contains(said, "canceled: not saved 2 fact changes, 1 revealed entity") {
						t.Errorf("no memory event says what was not saved: %q", said)
					}
					return
				}
				if res.Stop != runtime.StopTimeout {
					t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
				}
				if !reflect.DeepEqual(now.Conv, was.Conv) || !reflect.DeepEqual(now.Seen, map[string][]string{"orders": {"A1", "B2"}}) ||
					valueOf(now.Facts, "default_address") != "Road 1" || valueOf(now.Facts, "pending") != "x" {
					t.Errorf("the timed-out run saved %+v", now)
				}
			})
		}
	}
}

func valueOf(facts []store.Fact, key string) string {
	for _, f := range facts {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

// extractor answers the fact-extraction request and passes the rest on.
type extractor struct {
	model.Model
	answer string
	asked  []string
}

func (e *extractor) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if req.JSONSchema != nil && req.JSONSchema.Name == "facts" {
		e.asked = append(e.asked, req.Messages[1].Content)
		return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: e.answer}}, nil
	}
	return e.Model.Complete(ctx, req)
}

func TestExtractFacts(t *testing.T) {
	st := memory.New()
	ctx := context.Background()
	st.Commit(ctx, store.Record{UserID: "u-1", Facts: []store.FactChange{{Op: store.FactSet, Key: "diet", Value: "vegan"}, {Op: store.FactSet, Key: "city", Value: "Beijing"}}})
	model := &extractor{Model: offline.NewScript("t", []offline.ScriptTurn{say("Noted!")}), answer: `{"facts": {"diet": "vegetarian, no spicy food", "city": null, "pet": "a cat named 小白"}}`}
	src := strings.Replace(memorySpec, "    max_chars: 12\n", "    max_chars: 100\n    extract: llm\n", 1)
	reg := tool.Registry{"http": func(st *spec.Tool, dir string) (tool.Tool, error) { return echo(), nil }}
	a, diags := runtime.Compile(loadSpec(t, src), runtime.Options{Tools: reg, Model: model, Store: st})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	req := runtime.Request{Input: "I eat no meat and no spicy food; I moved away from Beijing; my cat 小白 says hi", User: tool.User{ID: "u-1"}}
	res, _ := a.Run(ctx, req)
	if err := a.ExtractFacts(ctx, req, res); err != nil {
		t.Fatal(err)
	}
	if len(model.asked) != 1 || !strings.Contains(model.asked[0], "my cat 小白") || strings.Contains(model.asked[0], "Noted!") || !strings.Contains(model.asked[0], `- diet: "vegan"`) {
		t.Errorf("the extractor saw %q; it must see the user's messages and the known facts only", model.asked)
	}
	facts, _ := st.Facts(ctx, "u-1")
	var got []string
	for _, f := range facts {
		got = append(got, f.Key+"="+f.Value+"/"+f.Source)
	}
	if strings.Join(got, ";") != "diet=vegetarian, no spicy food/llm;pet=a cat named 小白/llm" {
		t.Errorf("facts %v", got)
	}
}

// Runs on one conversation at once, through SQLite, lose nothing and never interleave.
func TestConcurrentRunsOneConversation(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			model := script(calls(tc("update_address", map[string]any{"address": fmt.Sprintf("road %d", i)})), say(fmt.Sprintf("moved to road %d", i)))
			a := memoryAgent(t, model, store, memoryTools())
			if _, err := a.Run(context.Background(), runtime.Request{Input: fmt.Sprint("move ", i), User: tool.User{ID: "u-1"}, Conversation: "c1"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	conv, err := store.Conversation(context.Background(), "c1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if conv.Turns != n || len(conv.Messages) != 4*n {
		t.Fatalf("%d turns, %d messages", conv.Turns, len(conv.Messages))
	}
	for i := 0; i < len(conv.Messages); i += 4 {
		q, call, res, ans := conv.Messages[i], conv.Messages[i+1], conv.Messages[i+2], conv.Messages[i+3]
		k := strings.TrimPrefix(q.Content, "move ")
		if q.Role != model.RoleUser || res.ToolCallID != call.ToolCalls[0].ID || ans.Content != "moved to road "+k {
			t.Fatalf("turn %s interleaved: %+v", k, conv.Messages[i:i+4])
		}
	}
}
