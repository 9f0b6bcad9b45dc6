package runtime_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store/memory"
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
	runtime.Store
	mu      sync.Mutex
	records []runtime.Record
}

func (s *commitRecorder) Commit(ctx context.Context, rec runtime.Record) error {
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
	return s.Store.Commit(ctx, rec)
}

func seenAgent(t *testing.T, maxSeen int, store runtime.Store, model runtime.Model, orders string) *runtime.Agent {
	t.Helper()
	tools := map[string]runtime.Tool{
		"list_orders": &funcTool{fn: func(context.Context, runtime.ToolInput) (string, error) { return orders, nil }},
		"cancel":      echo(),
	}
	reg := runtime.Registry{"http": func(st *spec.Tool, _ string) (runtime.Tool, error) { return tools[st.Name], nil }}
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
// accepted. The run commits only what it revealed, with the spec's cap, and returns
// only that in Result.Seen.
func TestSeenAtScale(t *testing.T) {
	const n = 100_000
	store := &commitRecorder{Store: memory.New()}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("A%06d", i)
	}
	ctx := context.Background()
	if err := store.Store.Commit(ctx, runtime.Record{UserID: "u-1", Conversation: "c1", Seen: map[string][]string{"orders": ids}}); err != nil {
		t.Fatal(err)
	}
	model := script(
		calls(tc("cancel", map[string]any{"number": "A000000"}), tc("cancel", map[string]any{"number": "A099999"}), tc("cancel", map[string]any{"number": "B1"})),
		calls(tc("list_orders", nil)),
		calls(tc("cancel", map[string]any{"number": "B1"}), tc("cancel", map[string]any{"number": "A100000"})),
		say("Done."),
	)
	a := seenAgent(t, 200_000, store, model, `{"orders":[{"number":"B1"},{"number":"A000005"}]}`)
	res := runIn(t, a, "c1", "cancel my orders")
	want := []string{
		`cancel {"number":"A000000"}: ok`, `cancel {"number":"A099999"}: ok`, `cancel {"number":"B1"}: refused`,
		`list_orders {}: ok`,
		`cancel {"number":"B1"}: ok`, `cancel {"number":"A100000"}: refused`,
	}
	if got := outcomes(res); !slices.Equal(got, want) {
		t.Errorf("steps\n got %q\nwant %q", got, want)
	}
	revealed := map[string][]string{"orders": {"B1", "A000005"}}
	if len(store.records) != 1 || !reflect.DeepEqual(store.records[0].Seen, revealed) || store.records[0].MaxSeen != 200_000 {
		t.Fatalf("committed %+v, want only %v with MaxSeen 200000", store.records, revealed)
	}
	if !reflect.DeepEqual(res.Seen, revealed) {
		t.Errorf("Result.Seen %v, want only what the run revealed", res.Seen)
	}
	conv, _ := store.Conversation(ctx, "c1", 1)
	orders := conv.Seen["orders"]
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
	conv, _ := store.Conversation(context.Background(), "c1", 1)
	if !slices.Equal(conv.Seen["orders"], []string{"A2", "A3"}) {
		t.Errorf("stored %v", conv.Seen)
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
	res, err := a.Run(context.Background(), runtime.Request{Input: "cancel", User: runtime.User{ID: "u-1"}, Seen: passed})
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
