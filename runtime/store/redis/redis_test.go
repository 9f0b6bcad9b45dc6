package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/redis"
	"github.com/agentrun/agentrun/runtime/store/storetest"
)

var ctx = context.Background()

// redisURL is the server under test. Locally the tests skip without one; in CI a
// missing server is a failure, so the store cannot go untested unnoticed.
func redisURL(tb testing.TB) string {
	u := os.Getenv("REDIS_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("REDIS_URL is not set: CI must run the redis store tests against a server (e.g. redis://127.0.0.1:6379/0)")
		}
		tb.Skip("REDIS_URL is not set")
	}
	return u
}

// testStore opens a store under a fresh random prefix, with a plain client to look at
// its keys, and deletes every key under the prefix when the test ends.
func testStore(tb testing.TB, ttl time.Duration) (*redis.Store, *goredis.Client, string) {
	u := redisURL(tb)
	prefix := fmt.Sprintf("agentrun-test:%016x:", rand.Uint64())
	s, err := redis.Open(u, redis.Options{Prefix: prefix, TTL: ttl})
	if err != nil {
		tb.Fatal(err)
	}
	opts, err := goredis.ParseURL(u)
	if err != nil {
		tb.Fatal(err)
	}
	c := goredis.NewClient(opts)
	tb.Cleanup(func() {
		s.Close()
		if keys := scanKeys(tb, c, prefix); len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				tb.Errorf("cleanup: %v", err)
			}
		}
		c.Close()
	})
	return s, c, prefix
}

// scanKeys lists the keys under prefix, sorted. Test prefixes hold no glob characters.
func scanKeys(tb testing.TB, c *goredis.Client, prefix string) []string {
	tb.Helper()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.Sort(keys)
	return slices.Compact(keys) // SCAN may return a key twice
}

func commit(tb testing.TB, s store.Store, rec store.Record) {
	tb.Helper()
	if err := s.Commit(ctx, rec); err != nil {
		tb.Fatal(err)
	}
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _, _ := testStore(t, 0)
		return s
	})
}

func TestOpenFails(t *testing.T) {
	// A port that was just free: nothing answers there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	tests := []struct {
		name, url, want string
	}{
		{"no server", "redis://user:s3cret@" + closed + "/0", "does not answer"},
		{"wrong scheme", "http://user:s3cret@localhost:6379", "invalid URL"},
		{"bad database", "redis://user:s3cret@localhost:6379/x", "invalid database"},
		{"unparsable", "redis://user:s3cret@local host:6379", "invalid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := redis.Open(tt.url, redis.Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// The keys a commit leaves are the ones doc.go documents, with their types and
// contents, and ids with ':' or '%' are escaped.
func TestKeyLayout(t *testing.T) {
	s, c, prefix := testStore(t, 0)
	msgs := []model.Message{{Role: model.RoleUser, Content: "where is A1?"}, {Role: model.RoleAssistant, Content: "on its way"}}
	commit(t, s, store.Record{UserID: "u:1", Conversation: "shop:42%", Messages: msgs,
		Seen:  map[string][]string{"orders": {"A1"}, "a:b": {"x"}},
		Facts: []store.FactChange{{Op: store.FactSet, Key: "tier", Value: "gold", Source: "tool"}}})

	conv, user := prefix+"conv:shop%3A42%25:", prefix+"user:u%3A1:"
	want := map[string]string{
		conv + "turns":         "list",
		conv + "meta":          "hash",
		conv + "seen":          "set",
		conv + "seen:orders":   "zset",
		conv + "seen:a%3Ab":    "zset",
		user + "facts":         "hash",
		user + "conversations": "set",
	}
	keys := scanKeys(t, c, prefix)
	if !slices.Equal(keys, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("keys\n got %q\nwant %q", keys, slices.Sorted(maps.Keys(want)))
	}
	for key, typ := range want {
		if got := c.Type(ctx, key).Val(); got != typ {
			t.Errorf("%s is a %s, want a %s", key, got, typ)
		}
		if ttl := c.TTL(ctx, key).Val(); ttl != -1 {
			t.Errorf("%s expires (TTL %v) without Options.TTL", key, ttl)
		}
	}

	turns := c.LRange(ctx, conv+"turns", 0, -1).Val()
	var stored []model.Message
	if len(turns) != 1 || json.Unmarshal([]byte(turns[0]), &stored) != nil || !reflect.DeepEqual(stored, msgs) {
		t.Errorf("turns %q", turns)
	}
	meta := c.HGetAll(ctx, conv+"meta").Val()
	if meta["user"] != "u:1" || meta["turns"] != "1" || meta["reveals"] != "2" {
		t.Errorf("meta %v", meta)
	}
	if _, err := time.Parse(time.RFC3339Nano, meta["updated"]); err != nil {
		t.Errorf("meta updated: %v", err)
	}
	if kinds := slices.Sorted(slices.Values(c.SMembers(ctx, conv+"seen").Val())); !slices.Equal(kinds, []string{"a:b", "orders"}) {
		t.Errorf("seen kinds %q", kinds)
	}
	// Kinds take their scores in sorted order: "a:b" before "orders".
	if ids := c.ZRangeWithScores(ctx, conv+"seen:orders", 0, -1).Val(); !reflect.DeepEqual(ids, []goredis.Z{{Score: 2, Member: "A1"}}) {
		t.Errorf("seen orders %v", ids)
	}
	var fact map[string]any
	if err := json.Unmarshal([]byte(c.HGet(ctx, user+"facts", "tier").Val()), &fact); err != nil {
		t.Fatal(err)
	}
	if fact["value"] != "gold" || fact["source"] != "tool" || fact["updated"] == nil || len(fact) != 3 {
		t.Errorf("fact %v", fact)
	}
	if ids := c.SMembers(ctx, user+"conversations").Val(); !slices.Equal(ids, []string{"shop:42%"}) {
		t.Errorf("user's conversations %q", ids)
	}
}

// A conversation written with layout 1 — seen:<kind> plain sets, no reveals in its
// meta — reads as before, and its next commit converts it to sorted sets: the old
// entities, in sorted order, become the oldest.
func TestLayout1Conversion(t *testing.T) {
	s, c, prefix := testStore(t, 0)
	conv := prefix + "conv:c1:"
	if _, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSet(ctx, conv+"meta", "user", "u1", "turns", "0", "updated", time.Now().UTC().Format(time.RFC3339Nano))
		p.SAdd(ctx, conv+"seen", "orders", "cards")
		p.SAdd(ctx, conv+"seen:orders", "A2", "A1", "A3")
		p.SAdd(ctx, conv+"seen:cards", "x")
		p.SAdd(ctx, prefix+"user:u1:conversations", "c1")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SeenEntities(ctx, "c1")
	if want := map[string][]string{"orders": {"A1", "A2", "A3"}, "cards": {"x"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("layout 1 read: %v, %v; want %v", got, err, want)
	}
	for id, want := range map[string]bool{"A2": true, "B1": false} {
		if found, err := s.Seen(ctx, "c1", "orders", id); found != want || err != nil {
			t.Errorf("layout 1 lookup of %s: %v, %v; want %v", id, found, err, want)
		}
	}
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A1", "B1"}}, MaxSeen: 3})
	got, err = s.SeenEntities(ctx, "c1")
	if want := map[string][]string{"orders": {"A3", "A1", "B1"}, "cards": {"x"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after the converting commit: %v, %v; want %v", got, err, want)
	}
	for id, want := range map[string]bool{"A1": true, "A2": false, "B1": true} {
		if found, err := s.Seen(ctx, "c1", "orders", id); found != want || err != nil {
			t.Errorf("converted lookup of %s: %v, %v; want %v", id, found, err, want)
		}
	}
	for _, kind := range []string{"orders", "cards"} {
		if typ := c.Type(ctx, conv+"seen:"+kind).Val(); typ != "zset" {
			t.Errorf("seen:%s is a %s after the commit", kind, typ)
		}
	}
	// cards x: 1, orders A1-A3: 2-4, then A1 again: 5, B1: 6.
	if n := c.HGet(ctx, conv+"meta", "reveals").Val(); n != "6" {
		t.Errorf("reveals %q, want 6", n)
	}
}

// Ids that would share keys without escaping stay apart.
func TestEscapedIDs(t *testing.T) {
	s, _, _ := testStore(t, 0)
	ids := []string{"a:b", "a%3Ab", "a%253Ab", "a:b:seen", ""}
	for i, id := range ids {
		commit(t, s, store.Record{UserID: id, Conversation: "c" + id, Messages: []model.Message{{Role: model.RoleUser, Content: fmt.Sprint(i)}},
			Facts: []store.FactChange{{Op: store.FactSet, Key: "i", Value: fmt.Sprint(i)}}})
	}
	for i, id := range ids {
		c, err := s.Conversation(ctx, "c"+id, 10)
		if err != nil || c.Turns != 1 || c.Messages[0].Content != fmt.Sprint(i) {
			t.Errorf("conversation %q: %+v, %v", "c"+id, c, err)
		}
		facts, err := s.Facts(ctx, id)
		if err != nil || len(facts) != 1 || facts[0].Value != fmt.Sprint(i) {
			t.Errorf("facts of %q: %v, %v", id, facts, err)
		}
		convs, err := s.Conversations(ctx, id)
		if err != nil || !slices.Equal(convs, []string{"c" + id}) {
			t.Errorf("conversations of %q: %q, %v", id, convs, err)
		}
	}
}

// A conversation stays its first user's, as in the memory store: another user's
// commit is refused, does not list it for them and does not keep it from the owner's
// Forget.
func TestConversationOwner(t *testing.T) {
	s, c, prefix := testStore(t, 0)
	commit(t, s, store.Record{UserID: "u1", Conversation: "c", Messages: []model.Message{{Role: model.RoleUser, Content: "a"}}})
	if err := s.Commit(ctx, store.Record{UserID: "u2", Conversation: "c", Messages: []model.Message{{Role: model.RoleUser, Content: "b"}}}); !errors.Is(err, store.ErrForeignConversation) {
		t.Errorf("u2's commit: %v", err)
	}
	if ids, _ := s.Conversations(ctx, "u2"); len(ids) != 0 {
		t.Errorf("u2 lists %q", ids)
	}
	if ids, _ := s.Conversations(ctx, "u1"); !slices.Equal(ids, []string{"c"}) {
		t.Errorf("u1 lists %q", ids)
	}
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if keys := scanKeys(t, c, prefix); len(keys) != 0 {
		t.Errorf("left after forgetting the owner: %q", keys)
	}
}

func TestTTL(t *testing.T) {
	const ttl = time.Hour
	s, c, prefix := testStore(t, ttl)
	turn := []model.Message{{Role: model.RoleUser, Content: "q"}, {Role: model.RoleAssistant, Content: "a"}}
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn, Seen: map[string][]string{"orders": {"A1"}},
		Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v"}}})
	conv := prefix + "conv:c1:"
	// An older key of the conversation gets its expiry renewed by a later commit that
	// does not touch it, or it would vanish before the rest.
	if err := c.Expire(ctx, conv+"seen:orders", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn, Seen: map[string][]string{"cards": {"x"}}})
	for _, key := range []string{conv + "turns", conv + "meta", conv + "seen", conv + "seen:orders", conv + "seen:cards", prefix + "user:u1:conversations"} {
		if got := c.PTTL(ctx, key).Val(); got < ttl-time.Minute || got > ttl {
			t.Errorf("%s expires in %v, want about %v", key, got, ttl)
		}
	}
	if got := c.TTL(ctx, prefix+"user:u1:facts").Val(); got != -1 {
		t.Errorf("facts expire (TTL %v): they are long-term", got)
	}

	// Once a conversation has expired, its id leaves the list even though the user's
	// set, renewed by later commits, still holds it.
	commit(t, s, store.Record{UserID: "u1", Conversation: "c2", Messages: turn})
	if err := c.Del(ctx, conv+"turns", conv+"meta", conv+"seen", conv+"seen:orders", conv+"seen:cards").Err(); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Conversations(ctx, "u1"); err != nil || !slices.Equal(ids, []string{"c2"}) {
		t.Errorf("conversations %q, %v", ids, err)
	}
}

// Forget leaves no key of the user or of their conversations, and every key of
// another user.
func TestForgetKeys(t *testing.T) {
	s, c, prefix := testStore(t, time.Hour)
	for _, u := range []string{"u1", "u2"} {
		for _, id := range []string{u + ":a", u + "-b"} {
			commit(t, s, store.Record{UserID: u, Conversation: id,
				Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
				Seen:     map[string][]string{"orders": {"A1"}, "cards": {"x"}},
				Facts:    []store.FactChange{{Op: store.FactSet, Key: "k", Value: u}}})
		}
	}
	var others []string
	for _, k := range scanKeys(t, c, prefix) {
		if !strings.Contains(k, "u1") {
			others = append(others, k)
		}
	}
	if len(others) != 12 { // 2 conversations × 5 keys + facts + conversation set
		t.Fatalf("u2 has %d keys: %q", len(others), others)
	}
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if keys := scanKeys(t, c, prefix); !slices.Equal(keys, others) {
		t.Errorf("after Forget(u1)\n got %q\nwant %q", keys, others)
	}
}

// Forget racing with commits of the same user leaves either nothing or whole
// conversations and paused runs: never a key that no listed conversation owns, nor a
// run in the expiry index.
func TestForgetDuringCommits(t *testing.T) {
	s, c, prefix := testStore(t, 0)
	done := make(chan error)
	go func() {
		for i := range 50 {
			err := s.Commit(ctx, store.Record{UserID: "u", Conversation: fmt.Sprint("c", i%5),
				Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
				Seen:     map[string][]string{fmt.Sprint("kind", i): {"x"}},
				Pause:    &store.PausedRun{ID: fmt.Sprint("r", i), UserID: "u", Version: 1, Expires: time.Now()}})
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 20 {
		if err := s.Forget(ctx, "u"); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ids, err := s.Conversations(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	if keys := scanKeys(t, c, prefix); len(keys) != 0 {
		t.Errorf("left after Forget (conversations listed before it: %q): %q", ids, keys)
	}
}

// A paused run's keys are the ones doc.go documents, never expire, and go with the
// run: Resumed and Forget leave no key or index entry of it behind, nor does a change
// of its user.
func TestPausedKeys(t *testing.T) {
	s, c, prefix := testStore(t, time.Hour)
	created := time.Date(2030, 1, 2, 3, 4, 5, 123_456_789, time.FixedZone("UTC+8", 8*3600))
	run := store.PausedRun{ID: "run:1%", UserID: "u:1", Agent: "shop", Status: store.PauseWaiting, Version: 1,
		Created: created, Expires: created.Add(time.Hour), State: []byte(`{"a":1}`)}
	commit(t, s, store.Record{UserID: "u:1", Conversation: "c1", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}}, Pause: &run})
	other := store.PausedRun{ID: "r2", UserID: "u2", Version: 1, Created: created, Expires: created}
	commit(t, s, store.Record{UserID: "u2", Pause: &other})

	key, byUser, expiring := prefix+"run:run%3A1%25:paused", prefix+"user:u%3A1:paused", prefix+"paused:expires"
	for k, typ := range map[string]string{key: "hash", byUser: "zset", expiring: "zset", prefix + "user:u2:paused": "zset"} {
		if got := c.Type(ctx, k).Val(); got != typ {
			t.Errorf("%s is a %s, want a %s", k, got, typ)
		}
		if ttl := c.TTL(ctx, k).Val(); ttl != -1 {
			t.Errorf("%s expires (TTL %v): paused runs wait for their people", k, ttl)
		}
	}
	want := map[string]string{"user": "u:1", "agent": "shop", "status": "waiting", "version": "1",
		"created": "2030-01-01T19:04:05.123456789Z", "expires": "2030-01-01T20:04:05.123456789Z", "state": `{"a":1}`}
	if got := c.HGetAll(ctx, key).Val(); !reflect.DeepEqual(got, want) {
		t.Errorf("hash\n got %v\nwant %v", got, want)
	}
	if got := c.ZRangeWithScores(ctx, byUser, 0, -1).Val(); !reflect.DeepEqual(got, []goredis.Z{{Score: float64(created.UnixMilli()), Member: "run:1%"}}) {
		t.Errorf("the user's runs %v", got)
	}
	if got := c.ZRangeWithScores(ctx, expiring, 0, -1).Val(); !reflect.DeepEqual(got, []goredis.Z{
		{Score: float64(created.UnixMilli()), Member: "r2"}, {Score: float64(created.Add(time.Hour).UnixMilli()), Member: "run:1%"}}) {
		t.Errorf("the runs by expiry %v", got)
	}

	commit(t, s, store.Record{UserID: "u:1", Conversation: "c1", Resumed: "run:1%", ResumedVersion: 1})
	for _, k := range []string{key, byUser} {
		if c.Exists(ctx, k).Val() != 0 {
			t.Errorf("%s is left after the run resumed", k)
		}
	}
	if got := c.ZRange(ctx, expiring, 0, -1).Val(); !slices.Equal(got, []string{"r2"}) {
		t.Errorf("the runs by expiry %q", got)
	}
	// A run given to another user, by an update or a commit, leaves its old user's index.
	commit(t, s, store.Record{UserID: "u:1", Pause: &run})
	moved := run
	moved.UserID, moved.Version = "u2", run.Version+1
	if err := s.UpdatePaused(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if c.Exists(ctx, byUser).Val() != 0 {
		t.Errorf("%s is left after the update gave its run to u2", byUser)
	}
	back := run
	back.Version = moved.Version + 1
	commit(t, s, store.Record{UserID: "u:1", Pause: &back})
	if got := c.ZRange(ctx, prefix+"user:u2:paused", 0, -1).Val(); !slices.Equal(got, []string{"r2"}) {
		t.Errorf("u2's runs after the commit gave one back: %q", got)
	}
	if err := s.Forget(ctx, "u2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "u:1"); err != nil {
		t.Fatal(err)
	}
	if keys := scanKeys(t, c, prefix); len(keys) != 0 {
		t.Errorf("left after forgetting both users: %q", keys)
	}
}

// DeleteConversation leaves no key of the conversation and takes its id out of the
// owner's set; every other key stays, the owner's facts and other conversations too.
func TestDeleteConversationKeys(t *testing.T) {
	s, c, prefix := testStore(t, time.Hour)
	for _, id := range []string{"u1:a", "u1-b", "u2-c"} {
		commit(t, s, store.Record{UserID: id[:2], Conversation: id,
			Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
			Seen:     map[string][]string{"orders": {"A1"}, "cards": {"x"}},
			Facts:    []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v"}}})
	}
	conv := prefix + "conv:u1%3Aa:"
	var others []string
	for _, k := range scanKeys(t, c, prefix) {
		if !strings.HasPrefix(k, conv) {
			others = append(others, k)
		}
	}
	if err := s.DeleteConversation(ctx, "u2", "u1:a"); !errors.Is(err, store.ErrConversationNotFound) {
		t.Errorf("another user's delete: %v", err)
	}
	if err := s.DeleteConversation(ctx, "u1", "u1:a"); err != nil {
		t.Fatal(err)
	}
	if keys := scanKeys(t, c, prefix); !slices.Equal(keys, others) {
		t.Errorf("after DeleteConversation\n got %q\nwant %q", keys, others)
	}
	if ids := c.SMembers(ctx, prefix+"user:u1:conversations").Val(); !slices.Equal(ids, []string{"u1-b"}) {
		t.Errorf("the user's set holds %q", ids)
	}
}

// DeleteConversation racing with commits to the conversation never leaves a key
// behind that a later delete would not find (a seen kind added meanwhile).
func TestDeleteConversationDuringCommits(t *testing.T) {
	s, c, prefix := testStore(t, 0)
	done := make(chan error)
	go func() {
		for i := range 50 {
			err := s.Commit(ctx, store.Record{UserID: "u", Conversation: "c",
				Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
				Seen:     map[string][]string{fmt.Sprint("kind", i): {"x"}}})
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 20 {
		if err := s.DeleteConversation(ctx, "u", "c"); err != nil && !errors.Is(err, store.ErrConversationNotFound) {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Whatever the race left, one more commit and its delete must leave nothing.
	commit(t, s, store.Record{UserID: "u", Conversation: "c", Seen: map[string][]string{"last": {"x"}}})
	if err := s.DeleteConversation(ctx, "u", "c"); err != nil {
		t.Fatal(err)
	}
	if keys := scanKeys(t, c, prefix); len(keys) != 0 {
		t.Errorf("left after the last DeleteConversation: %q", keys)
	}
}

// BenchmarkLoadSave is one run's use of the store: see storetest.Bench.
func BenchmarkLoadSave(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, _, _ := testStore(b, 0)
		return s
	})
}
