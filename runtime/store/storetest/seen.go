package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime/store"
)

func testSeen(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, false), Seen: map[string][]string{"orders": {"A1", "A2"}}})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A2", "A3"}, "cards": {"x"}}})
	seen := seenOf(t, s, "c1")
	orders := slices.Sorted(slices.Values(seen["orders"]))
	if !slices.Equal(orders, []string{"A1", "A2", "A3"}) || !slices.Equal(seen["cards"], []string{"x"}) {
		t.Errorf("seen %v", seen)
	}
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Errorf("a record without messages added a turn: %d", c.Turns)
	}
}

// A record carries only what its run revealed; the store merges it into what the
// conversation has: each kind oldest first, an entity revealed again the newest.
func testSeenMerge(t *testing.T, s store.Store) {
	commits := []map[string][]string{
		{"orders": {"A1", "A2", "A3"}, "cards": {"x"}},
		{"orders": {"A4"}},
		{"orders": {"A2", "A5", "A5"}, "tickets": {"T1"}}, // A2 renewed; A5 twice in one record
		{"orders": nil, "cards": {}},                      // nothing revealed
		{"cards": {"y", "x"}},
	}
	for _, seen := range commits {
		commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Seen: seen})
	}
	commit(t, s, store.Record{UserID: "u1", Conversation: "other", Seen: map[string][]string{"orders": {"Z9"}}})
	seen := seenOf(t, s, "c1")
	want := map[string][]string{"orders": {"A1", "A3", "A4", "A2", "A5"}, "cards": {"y", "x"}, "tickets": {"T1"}}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("seen\n got %v\nwant %v", seen, want)
	}
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 0 {
		t.Errorf("records without messages made %d turns", c.Turns)
	}
	// What SeenEntities returns is the caller's: changing it changes nothing stored.
	seen["orders"][0] = "changed"
	if again := seenOf(t, s, "c1"); again["orders"][0] != "A1" {
		t.Errorf("the store shares its slices: %v", again["orders"])
	}
	if o := seenOf(t, s, "other"); !reflect.DeepEqual(o, map[string][]string{"orders": {"Z9"}}) {
		t.Errorf("another conversation: %v", o)
	}
}

// Beyond MaxSeen the store drops the oldest entities of the kind that outgrew it,
// and only of that kind and conversation; an entity revealed again is new again.
func testSeenCap(t *testing.T, s store.Store) {
	rec := func(conv string, seen map[string][]string) store.Record {
		return store.Record{UserID: "u1", Conversation: conv, Seen: seen, MaxSeen: 3}
	}
	commit(t, s, rec("c1", map[string][]string{"orders": {"A1", "A2"}, "cards": {"x", "y", "z"}}))
	commit(t, s, rec("c2", map[string][]string{"orders": {"A1", "A2", "A3"}}))
	commit(t, s, rec("c1", map[string][]string{"orders": {"A3"}}))
	commit(t, s, rec("c1", map[string][]string{"orders": {"A1", "A4"}})) // A1 renewed: A2 is the oldest
	commit(t, s, rec("c1", map[string][]string{"orders": {"A5", "A6", "A7", "A8"}}))
	want := map[string][]string{"orders": {"A6", "A7", "A8"}, "cards": {"x", "y", "z"}}
	if c1 := seenOf(t, s, "c1"); !reflect.DeepEqual(c1, want) {
		t.Errorf("c1 after the cap\n got %v\nwant %v", c1, want)
	}
	steps := []struct {
		seen map[string][]string
		want []string
	}{
		{map[string][]string{"orders": {"A6"}}, []string{"A7", "A8", "A6"}},
		{map[string][]string{"orders": {"A9"}}, []string{"A8", "A6", "A9"}},
	}
	for _, st := range steps {
		commit(t, s, rec("c1", st.seen))
		if c := seenOf(t, s, "c1"); !slices.Equal(c["orders"], st.want) {
			t.Errorf("after %v: orders %v, want %v", st.seen, c["orders"], st.want)
		}
	}
	if c2 := seenOf(t, s, "c2"); !slices.Equal(c2["orders"], []string{"A1", "A2", "A3"}) {
		t.Errorf("another conversation lost entities: %v", c2)
	}
	// Without a cap nothing is dropped; a later cap applies when the kind grows again.
	for i := range 5 {
		commit(t, s, store.Record{UserID: "u1", Conversation: "c3", Seen: map[string][]string{"orders": {fmt.Sprint("B", i)}}})
	}
	if c3 := seenOf(t, s, "c3"); len(c3["orders"]) != 5 {
		t.Errorf("MaxSeen 0 dropped entities: %v", c3)
	}
	commit(t, s, rec("c3", map[string][]string{"orders": {"B5"}}))
	if c3 := seenOf(t, s, "c3"); !slices.Equal(c3["orders"], []string{"B3", "B4", "B5"}) {
		t.Errorf("a cap after uncapped commits: %v", c3)
	}
}

// Runs committing entities to one conversation at once lose none of them.
func testSeenConcurrent(t *testing.T, s store.Store) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			// Each run reveals its own entities and two every run reveals.
			errs <- s.Commit(ctx, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, false), MaxSeen: 1000,
				Seen: map[string][]string{"orders": {fmt.Sprint("A", i), "shared-1", fmt.Sprint("B", i), "shared-2"}}})
		})
		wg.Go(func() { // and another conversation, with its own cap
			errs <- s.Commit(ctx, store.Record{UserID: "u1", Conversation: "c2", MaxSeen: 5,
				Seen: map[string][]string{"orders": {fmt.Sprint("C", i)}}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Conversation(ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(slices.Values(seenOf(t, s, "c1")["orders"]))
	want := []string{"shared-1", "shared-2"}
	for i := range n {
		want = append(want, fmt.Sprint("A", i), fmt.Sprint("B", i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%d entities kept of %d: %v", len(got), len(want), got)
	}
	if c.Turns != n {
		t.Errorf("%d turns", c.Turns)
	}
	if c2 := seenOf(t, s, "c2"); len(c2["orders"]) != 5 {
		t.Errorf("concurrent commits under a cap of 5 kept %v", c2["orders"])
	}
}

// Seen answers for one entity — of this conversation and kind only, as kept under
// MaxSeen — whatever characters the ids hold.
func testSeenLookup(t *testing.T, s store.Store) {
	odd := "c:1%3A" // ':' and '%' in ids must not collide with a store's key syntax
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", MaxSeen: 3,
		Seen: map[string][]string{"orders": {"A1", "A2", "A3"}, "cards": {"x"}}})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c2", Seen: map[string][]string{"orders": {"Z9"}}})
	commit(t, s, store.Record{UserID: "u1", Conversation: odd, Seen: map[string][]string{"orders": {"订单 1", "a:b", "100%"}}})
	check := func(step, conv, kind, id string, want bool) {
		t.Helper()
		found, err := s.Seen(ctx, conv, kind, id)
		if err != nil || found != want {
			t.Errorf("%s: Seen(%q, %q, %q) = %v, %v; want %v", step, conv, kind, id, found, err, want)
		}
	}
	for _, c := range []struct {
		conv, kind, id string
		want           bool
	}{
		{"c1", "orders", "A1", true},
		{"c1", "orders", "A3", true},
		{"c1", "cards", "x", true},
		{"c1", "orders", "A4", false},   // never revealed
		{"c1", "orders", "a1", false},   // ids are compared exactly
		{"c1", "orders", "Z9", false},   // another conversation's
		{"c1", "cards", "A1", false},    // another kind's
		{"c1", "tickets", "A1", false},  // a kind never collected
		{"c1:orders", "A1", "x", false}, // keys that could run into each other
		{"c3", "orders", "A1", false},   // no such conversation
		{odd, "orders", "订单 1", true},
		{odd, "orders", "a:b", true},
		{odd, "orders", "100%", true},
		{odd, "orders", "a", false},
		{"c1%3A", "orders", "a:b", false},
	} {
		check("initially", c.conv, c.kind, c.id, c.want)
	}
	// A2 renewed, then two new ones under a cap of 3: A1 and A3, the oldest, go.
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", MaxSeen: 3, Seen: map[string][]string{"orders": {"A2", "A4", "A5"}}})
	check("after the cap", "c1", "orders", "A1", false)
	check("after the cap", "c1", "orders", "A3", false)
	for _, id := range []string{"A2", "A4", "A5"} {
		check("after the cap", "c1", "orders", id, true)
	}
	check("after the cap", "c1", "cards", "x", true)
	// A lookup agrees with the list, entity by entity.
	for kind, ids := range seenOf(t, s, "c1") {
		for _, id := range ids {
			check("listed", "c1", kind, id, true)
		}
	}
}

// SeenEntities returns the kinds asked for, or all; a kind without entities is absent.
func testSeenEntities(t *testing.T, s store.Store) {
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A1", "A2"}, "cards": {"x"}, "tickets": {"T1"}}})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A1"}}})
	for _, c := range []struct {
		kinds []string
		want  map[string][]string
	}{
		{nil, map[string][]string{"orders": {"A2", "A1"}, "cards": {"x"}, "tickets": {"T1"}}},
		{[]string{"orders"}, map[string][]string{"orders": {"A2", "A1"}}},
		{[]string{"cards", "tickets"}, map[string][]string{"cards": {"x"}, "tickets": {"T1"}}},
		{[]string{"orders", "never"}, map[string][]string{"orders": {"A2", "A1"}}},
		{[]string{"never"}, map[string][]string{}},
	} {
		got, err := s.SeenEntities(ctx, "c1", c.kinds...)
		if err != nil || !reflect.DeepEqual(got, c.want) && (len(got) != 0 || len(c.want) != 0) {
			t.Errorf("SeenEntities(c1, %q) = %v, %v; want %v", c.kinds, got, err, c.want)
		}
	}
}
