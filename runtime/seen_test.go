package runtime_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const seenSpec = `
version: 1
name: seen
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
  max_seen: %d
`

// commitRecorder is a store that keeps a copy of every record committed to it.
type commitRecorder struct {
	store.Store
	mu      sync.Mutex
	records []store.Record
}

func (s *commitRecorder) Commit(ctx context.Context, rec store.Record) error {
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
	return s.Store.Commit(ctx, rec)
}

func seenAgent(t *testing.T, maxSeen int, store store.Store, model model.Model, orders string) *runtime.Agent {
	t.Helper()
	tools := map[string]tool.Tool{
		"list_orders": &funcTool{fn: func(context.Context, tool.Input) (string, error) { return orders, nil }},
		"cancel":      echo(),
	}
	reg := tool.Registry{"http": func(st *spec.Tool, _ string) (tool.Tool, error) { return tools[st.Name], nil }}
	a, diags := runtime.Compile(loadSpec(t, fmt.Sprintf(seenSpec, maxSeen)), runtime.Options{Tools: reg, Model: model, Store: store})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return a
}

func outcomes(res *runtime.Result) []string {
	var out []string
	for _, s := range res.Steps {
		out = append(out, s.Tool+" "+s.Arguments+": "+string(s.Outcome))
	}
	return out
}

// A conversation with 100k seen entities still decides by them: the oldest and the
// newest are accepted, one never seen is refused, one revealed in the run is
// accepted — each asked of the store once, the list never read. The run commits only
// what it revealed, with the spec's cap, and returns only that in Result.Seen.
func TestSeenAtScale(t *testing.T) {
	const n = 100_000
	counted := &seenStore{Store: memory.New()}
	st := &commitRecorder{Store: counted}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("A%06d", i)
	}
	ctx := context.Background()
	if err := st.Store.Commit(ctx, store.Record{UserID: "u-1", Conversation: "c1", Seen: map[string][]string{"orders": ids}}); err != nil {
		t.Fatal(err)
	}
	model := script(
		calls(tc("cancel", map[string]any{"number": "A000000"}), tc("cancel", map[string]any{"number": "A099999"}), tc("cancel", map[string]any{"number": "B1"})),
		calls(tc("list_orders", nil)),
		calls(tc("cancel", map[string]any{"number": "B1"}), tc("cancel", map[string]any{"number": "A100000"})),
		say("Done."),
	)
	a := seenAgent(t, 200_000, st, model, `{"orders":[{"number":"B1"},{"number":"A000005"}]}`)
	res := runIn(t, a, "c1", "cancel my orders")
	want := []string{
		`cancel {"number":"A000000"}: ok`, `cancel {"number":"A099999"}: ok`, `cancel {"number":"B1"}: refused`,
		`list_orders {}: ok`,
		`cancel {"number":"B1"}: ok`, `cancel {"number":"A100000"}: refused`,
	}
	if got := outcomes(res); !slices.Equal(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
	if l, n := counted.lookups.Load(), counted.lists.Load(); l != 4 || n != 0 {
		t.Errorf("%d lookups and %d lists, want 4 lookups (B1 only once) and no list", l, n)
	}
	revealed := map[string][]string{"orders": {"B1", "A000005"}}
	if len(st.records) != 1 || !reflect.DeepEqual(st.records[0].Seen, revealed) || st.records[0].MaxSeen != 200_000 {
		t.Fatalf("committed %+v, want only %v with MaxSeen 200000", st.records, revealed)
	}
	if !reflect.DeepEqual(res.Seen, revealed) {
		t.Errorf("Result.Seen %v, want only what the run revealed", res.Seen)
	}
	seen, _ := st.SeenEntities(ctx, "c1")
	orders := seen["orders"]
	if len(orders) != n+1 || orders[0] != "A000000" || !slices.Equal(orders[n-1:], []string{"B1", "A000005"}) {
		t.Errorf("stored %d orders, first %q, last %q", len(orders), orders[0], orders[len(orders)-2:])
	}
}

// memory.max_seen reaches the store: beyond it the oldest entities are dropped, and
// an accept rule no longer finds them in the next run.
func TestMaxSeenDropsOldest(t *testing.T) {
	store := memory.New()
	model := script(
		calls(tc("list_orders", nil)), say("You have A1, A2 and A3."),
		calls(tc("cancel", map[string]any{"number": "A1"}), tc("cancel", map[string]any{"number": "A3"})), say("A3 is cancelled."),
	)
	a := seenAgent(t, 2, store, model, `{"orders":[{"number":"A1"},{"number":"A2"},{"number":"A3"}]}`)
	first := runIn(t, a, "c1", "my orders?")
	if got := first.Seen["orders"]; !slices.Equal(got, []string{"A1", "A2", "A3"}) {
		t.Errorf("the first run revealed %v", got) // the cap applies to what is kept, not to the run
	}
	res := runIn(t, a, "c1", "cancel A1 and A3")
	if got, want := outcomes(res), []string{`cancel {"number":"A1"}: refused`, `cancel {"number":"A3"}: ok`}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	seen, _ := store.SeenEntities(context.Background(), "c1")
	if !slices.Equal(seen["orders"], []string{"A2", "A3"}) {
		t.Errorf("stored %v", seen)
	}
}

// Without a store, a caller passes what earlier runs revealed and gets it back with
// what the run revealed, once each.
func TestSeenPassedIn(t *testing.T) {
	model := script(
		calls(tc("cancel", map[string]any{"number": "P1"}), tc("list_orders", nil)),
		calls(tc("cancel", map[string]any{"number": "A2"})),
		say("Done."),
	)
	a := seenAgent(t, 10, nil, model, `{"orders":[{"number":"P1"},{"number":"A2"}]}`)
	passed := map[string][]string{"orders": {"P1"}, "cards": {"x"}}
	res, err := a.Run(context.Background(), runtime.Request{Input: "cancel", User: tool.User{ID: "u-1"}, Seen: passed})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(res), []string{`cancel {"number":"P1"}: ok`, `list_orders {}: ok`, `cancel {"number":"A2"}: ok`}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if want := map[string][]string{"orders": {"P1", "A2"}, "cards": {"x"}}; !reflect.DeepEqual(res.Seen, want) {
		t.Errorf("Result.Seen %v, want %v", res.Seen, want)
	}
	if !slices.Equal(passed["orders"], []string{"P1"}) {
		t.Errorf("the caller's map was changed: %v", passed)
	}
}

// seenStore wraps a store: it counts the lookups and lists of seen entities a run
// asks for, and fails them with fail, or fails Conversation with failConversation.
type seenStore struct {
	store.Store
	fail, failConversation error
	lookups, lists         atomic.Int32
}

func (s *seenStore) Conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	if s.failConversation != nil {
		return store.Conversation{}, s.failConversation
	}
	return s.Store.Conversation(ctx, id, turns)
}

func (s *seenStore) Seen(ctx context.Context, conversation, kind, id string) (bool, error) {
	s.lookups.Add(1)
	if s.fail != nil {
		return false, s.fail
	}
	return s.Store.Seen(ctx, conversation, kind, id)
}

func (s *seenStore) SeenEntities(ctx context.Context, conversation string, kinds ...string) (map[string][]string, error) {
	s.lists.Add(1)
	if s.fail != nil {
		return nil, s.fail
	}
	return s.Store.SeenEntities(ctx, conversation, kinds...)
}

const seenRulesSpec = `
version: 1
name: seen-rules
instructions: Help.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
  - name: cancel
    parameters: {type: object, properties: {number: {type: string}}, required: [number]}
    http: {url: "https://example.com/c", method: POST}
    accept: args.number in seen("orders")
  - name: claim
    parameters: {type: object, properties: {number: {type: string}}, required: [number]}
    http: {url: "https://example.com/n", method: POST}
    accept: args.number not in seen("orders")
  - name: bulk
    parameters: {type: object, properties: {count: {type: integer}}, required: [count]}
    http: {url: "https://example.com/b", method: POST}
    accept: len(seen("orders")) >= args.count
guards: {duplicate_calls: allow}
`

// Accept rules decide by seen(kind) as they always did — `in` and `not in`, now
// answered one entity at a time, and len() over the list — whether the entities come
// from the store, from the caller or from this run. A store that cannot answer fails
// every rule the run cannot answer alone closed: the call is refused, with the error.
func TestSeenRules(t *testing.T) {
	model := func() model.Model {
		n := func(number string) map[string]any { return map[string]any{"number": number} }
		return script(
			calls(tc("cancel", n("A1")), tc("cancel", n("X9")), tc("claim", n("A1")), tc("claim", n("X9")),
				tc("bulk", map[string]any{"count": 2}), tc("bulk", map[string]any{"count": 3})),
			calls(tc("list_orders", nil)),
			calls(tc("cancel", n("B1")), tc("claim", n("B1")), tc("bulk", map[string]any{"count": 3}), tc("cancel", n("X9"))),
			say("Done."),
		)
	}
	// What each call comes to; "refused!" is a refusal because the rule could not be checked.
	decided := []string{"cancel A1: ok", "cancel X9: refused", "claim A1: refused", "claim X9: ok", "bulk 2: ok", "bulk 3: refused",
		"list_orders: ok", "cancel B1: ok", "claim B1: refused", "bulk 3: ok", "cancel X9: refused"}
	failed := []string{"cancel A1: refused!", "cancel X9: refused!", "claim A1: refused!", "claim X9: refused!", "bulk 2: refused!", "bulk 3: refused!",
		"list_orders: ok", "cancel B1: ok", "claim B1: refused", "bulk 3: refused!", "cancel X9: refused!"}
	earlier := map[string][]string{"orders": {"A1", "A2"}}
	stored := func() *seenStore {
		s := &seenStore{Store: memory.New()}
		if err := s.Store.Commit(context.Background(), store.Record{UserID: "u-1", Conversation: "c1", Seen: earlier}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	storeDown := errors.New("store down")
	cases := []struct {
		name   string
		store  *seenStore
		passed map[string][]string
		want   []string
		reason string // in every refusal the rule could not check
	}{
		{name: "store", store: stored(), want: decided},
		{name: "passed in", passed: earlier, want: decided},
		{name: "passed in and stored", store: stored(), passed: map[string][]string{"orders": {"A2"}}, want: decided},
		{name: "lookups fail", store: func() *seenStore { s := stored(); s.fail = storeDown; return s }(), want: failed, reason: "store down"},
		{name: "conversation unreadable", store: func() *seenStore { s := stored(); s.failConversation = storeDown; return s }(),
			want: failed, reason: "the conversation could not be read: store down"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := runtime.Options{Model: model(), Tools: tool.Registry{"http": func(st *spec.Tool, _ string) (tool.Tool, error) {
				if st.Name == "list_orders" {
					return &funcTool{fn: func(context.Context, tool.Input) (string, error) {
						return `{"orders":[{"number":"B1"}]}`, nil
					}}, nil
				}
				return echo(), nil
			}}}
			if c.store != nil {
				opts.Store = c.store
			}
			a, diags := runtime.Compile(loadSpec(t, seenRulesSpec), opts)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			res, err := a.Run(context.Background(), runtime.Request{Input: "go", User: tool.User{ID: "u-1"}, Conversation: "c1", Seen: c.passed})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range res.Steps {
				var args map[string]any
				json.Unmarshal([]byte(s.Arguments), &args)
				line := strings.TrimSpace(fmt.Sprint(s.Tool, " ", cmp.Or(args["number"], args["count"], ""))) + ": " + string(s.Outcome)
				if unchecked := strings.Contains(s.Result, "the rule could not be checked"); unchecked {
					line += "!"
					if !strings.Contains(s.Result, c.reason) || c.reason == "" {
						t.Errorf("%s: %q does not say %q", line, s.Result, c.reason)
					}
				}
				got = append(got, line)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("steps\n got %q\nwant %q", got, c.want)
			}
			if want := map[string][]string{"orders": {"B1"}}; c.passed == nil && !reflect.DeepEqual(res.Seen, want) {
				t.Errorf("Result.Seen %v, want %v", res.Seen, want)
			}
		})
	}
}

// A run asks the store only about what its rules check: one lookup per entity it
// cannot answer alone, and a kind's list once, the first time a rule wants it.
func TestSeenAsksTheStoreOnce(t *testing.T) {
	st := &seenStore{Store: memory.New()}
	ids := make([]string, 5000) // below the default memory.max_seen: the next run finds them all
	for i := range ids {
		ids[i] = fmt.Sprintf("A%05d", i)
	}
	if err := st.Store.Commit(context.Background(), store.Record{UserID: "u-1", Conversation: "c1", Seen: map[string][]string{"orders": ids}}); err != nil {
		t.Fatal(err)
	}
	n := func(number string) map[string]any { return map[string]any{"number": number} }
	model := script(
		calls(tc("cancel", n("A00001")), tc("claim", n("A00001")), tc("cancel", n("X1")), tc("claim", n("X1"))),
		calls(tc("list_orders", nil)),
		calls(tc("cancel", n("B1")), tc("cancel", n("A00001"))),
		say("Done."),
	)
	reg := tool.Registry{"http": func(st *spec.Tool, _ string) (tool.Tool, error) {
		if st.Name == "list_orders" {
			return &funcTool{fn: func(context.Context, tool.Input) (string, error) { return `{"orders":[{"number":"B1"}]}`, nil }}, nil
		}
		return echo(), nil
	}}
	a, diags := runtime.Compile(loadSpec(t, seenRulesSpec), runtime.Options{Model: model, Tools: reg, Store: st})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	res := runIn(t, a, "c1", "go")
	want := []string{`cancel {"number":"A00001"}: ok`, `claim {"number":"A00001"}: refused`, `cancel {"number":"X1"}: refused`, `claim {"number":"X1"}: ok`,
		`list_orders {}: ok`, `cancel {"number":"B1"}: ok`, `cancel {"number":"A00001"}: ok`}
	if got := outcomes(res); !slices.Equal(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
	if l, n := st.lookups.Load(), st.lists.Load(); l != 2 || n != 0 {
		t.Errorf("%d lookups and %d lists, want 2 lookups (A00001 and X1, once each) and no list", l, n)
	}

	// A rule over the list loads it once; later checks of the kind use it.
	st.lookups.Store(0)
	model = script(calls(tc("bulk", map[string]any{"count": 5001}), tc("bulk", map[string]any{"count": 5002}), tc("cancel", n("A04999")), tc("claim", n("Q"))), say("Done."))
	a, _ = runtime.Compile(loadSpec(t, seenRulesSpec), runtime.Options{Model: model, Tools: reg, Store: st})
	res = runIn(t, a, "c1", "go")
	want = []string{`bulk {"count":5001}: ok`, `bulk {"count":5002}: refused`, `cancel {"number":"A04999"}: ok`, `claim {"number":"Q"}: ok`}
	if got := outcomes(res); !slices.Equal(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
	if l, n := st.lookups.Load(), st.lists.Load(); l != 0 || n != 1 {
		t.Errorf("%d lookups and %d lists, want one list and no lookup", l, n)
	}
}

// seen(kind) lists the caller's entities first, then the store's, then this run's,
// each once, whether the store's are loaded before or after the run revealed its own.
func TestSeenListOrder(t *testing.T) {
	const listSpec = `
version: 1
name: seen-list
instructions: Help.
tools:
  - name: list_orders
    http: {url: "https://example.com/o"}
    collect: {orders: 'map(result.orders, .number)'}
  - name: check
    parameters: {type: object, properties: {want: {type: string}}, required: [want]}
    http: {url: "https://example.com/c", method: POST}
    accept: join(seen("orders"), ",") == args.want
`
	check := func(want string) offline.ScriptToolCall { return tc("check", map[string]any{"want": want}) }
	for _, c := range []struct {
		name  string
		turns []offline.ScriptTurn
	}{
		{"loaded first", []offline.ScriptTurn{calls(check("A2,P1,A1")), calls(tc("list_orders", nil)), calls(check("A2,P1,A1,B1"))}},
		{"revealed first", []offline.ScriptTurn{calls(tc("list_orders", nil)), calls(check("A2,P1,A1,B1"))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := memory.New()
			if err := st.Commit(context.Background(), store.Record{UserID: "u-1", Conversation: "c1", Seen: map[string][]string{"orders": {"A1", "A2"}}}); err != nil {
				t.Fatal(err)
			}
			reg := tool.Registry{"http": func(st *spec.Tool, _ string) (tool.Tool, error) {
				if st.Name == "list_orders" {
					return &funcTool{fn: func(context.Context, tool.Input) (string, error) {
						return `{"orders":[{"number":"B1"},{"number":"A1"}]}`, nil
					}}, nil
				}
				return echo(), nil
			}}
			model := script(append(c.turns, say("Done."))...)
			a, diags := runtime.Compile(loadSpec(t, listSpec), runtime.Options{Model: model, Tools: reg, Store: st})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			passed := map[string][]string{"orders": {"A2", "P1"}}
			res, err := a.Run(context.Background(), runtime.Request{Input: "go", User: tool.User{ID: "u-1"}, Conversation: "c1", Seen: passed})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Steps {
				if s.Outcome != runtime.OutcomeOK {
					t.Errorf("%s %s: %s", s.Tool, s.Arguments, s.Outcome)
				}
			}
			if want := map[string][]string{"orders": {"A2", "P1", "B1", "A1"}}; !reflect.DeepEqual(res.Seen, want) {
				t.Errorf("Result.Seen %v, want %v", res.Seen, want)
			}
			if !slices.Equal(passed["orders"], []string{"A2", "P1"}) {
				t.Errorf("the caller's list was changed: %v", passed["orders"])
			}
		})
	}
}
