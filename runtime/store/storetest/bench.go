package storetest

import (
	"fmt"
	"testing"

	"github.com/agentrun/agentrun/runtime/store"
)

// Bench measures one run's use of a store — load the last 10 turns of a
// conversation, look up two entities (one of the oldest, revealed before the turns,
// and one never revealed), then commit a 4-message turn with a fact change and an
// entity revealed again — in a conversation of 50 to 250 turns that has revealed 0,
// 10k or 100k entities (seen=N); and, apart, loading every entity of the kind, what a
// rule using seen(kind) other than by `in` costs once per run (list/seen=N). The data
// stays that size whatever b.N: the fact is set, not appended, the entity is one of a
// handful, and every 200 runs the conversation is forgotten and seeded again, off the
// clock. open is called once per benchmark.
func Bench(b *testing.B, open func(b *testing.B) store.Store) {
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("seen=%d", n), func(b *testing.B) { benchLoadSave(b, open(b), n, false) })
	}
	for _, n := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("list/seen=%d", n), func(b *testing.B) { benchLoadSave(b, open(b), n, true) })
	}
}

func benchLoadSave(b *testing.B, s store.Store, n int, list bool) {
	const (
		seedTurns = 50
		handful   = 20  // entities the benchmark's runs reveal again and again
		epoch     = 200 // runs between two resets
	)
	record := func(i int) store.Record {
		return store.Record{UserID: "u1", Conversation: "c1", Messages: turn(i, true), MaxSeen: n + handful,
			Seen:  map[string][]string{"orders": {fmt.Sprint("B", i%handful)}},
			Facts: []store.FactChange{{Op: store.FactSet, Key: "last_order", Value: fmt.Sprint("B", i%handful), Source: "tool"}}}
	}
	seed := func() {
		if err := s.Forget(ctx, "u1"); err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("A%06d", i)
		}
		commit(b, s, store.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": ids}})
		for i := range seedTurns {
			commit(b, s, record(i))
		}
	}
	seed()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if list {
			seen, err := s.SeenEntities(ctx, "c1", "orders")
			if err != nil || len(seen["orders"]) != n+handful {
				b.Fatalf("%d entities, %v", len(seen["orders"]), err)
			}
			continue
		}
		if i > 0 && i%epoch == 0 {
			b.StopTimer()
			seed()
			b.StartTimer()
		}
		c, err := s.Conversation(ctx, "c1", 10)
		if err != nil || len(c.Messages) != 40 {
			b.Fatalf("%d messages, %v", len(c.Messages), err)
		}
		old := "B0"
		if n > 0 {
			old = "A000000"
		}
		if found, err := s.Seen(ctx, "c1", "orders", old); !found || err != nil {
			b.Fatalf("seen %s: %v, %v", old, found, err)
		}
		if found, err := s.Seen(ctx, "c1", "orders", "X1"); found || err != nil {
			b.Fatalf("seen X1: %v, %v", found, err)
		}
		if err := s.Commit(ctx, record(seedTurns+i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
