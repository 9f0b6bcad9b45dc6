package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentrun/agentrun/runtime"
)

// Options tune a Store.
type Options struct {
	// Prefix starts every key, so several agents or environments can share a
	// server; "" means "agentrun:".
	Prefix string
	// TTL is how long a conversation is kept after its last commit; 0 keeps it forever.
	TTL time.Duration
}

// DefaultPrefix starts every key when Options.Prefix is empty.
const DefaultPrefix = "agentrun:"

// Store keeps conversations and facts in Redis; it is safe for concurrent use.
type Store struct {
	client *goredis.Client
	prefix string
	ttl    time.Duration
}

var _ runtime.Store = (*Store)(nil)

const (
	// pingTimeout bounds Open's check, so a wrong address fails the start, not a run.
	pingTimeout = 5 * time.Second
	// maxAttempts bounds the optimistic retries of a transaction: each failed attempt
	// means another writer got through, so only a pathological pile-up reaches it.
	maxAttempts = 50
	maxBackoff  = 20 * time.Millisecond
)

// Open connects to the server a redis:// or rediss:// URL names and checks that it
// answers.
func Open(rawURL string, opts Options) (*Store, error) {
	o, err := goredis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, password included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis store: invalid URL: %w", err)
	}
	client := goredis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis store: %s does not answer: %w", redacted(rawURL), err)
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Store{client: client, prefix: prefix, ttl: opts.TTL}, nil
}

func redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "the server"
	}
	return u.Redacted()
}

func (s *Store) Close() error { return s.client.Close() }

// escaper keeps ':' a separator only; escaping '%' too makes the mapping one-to-one.
var escaper = strings.NewReplacer("%", "%25", ":", "%3A")

func (s *Store) convKey(id, part string) string {
	return s.prefix + "conv:" + escaper.Replace(id) + ":" + part
}

func (s *Store) userKey(user, part string) string {
	return s.prefix + "user:" + escaper.Replace(user) + ":" + part
}

func (s *Store) turnsKey(id string) string       { return s.convKey(id, "turns") }
func (s *Store) metaKey(id string) string        { return s.convKey(id, "meta") }
func (s *Store) kindsKey(id string) string       { return s.convKey(id, "seen") }
func (s *Store) seenKey(id, kind string) string  { return s.convKey(id, "seen:"+escaper.Replace(kind)) }
func (s *Store) factsKey(user string) string     { return s.userKey(user, "facts") }
func (s *Store) userConvsKey(user string) string { return s.userKey(user, "conversations") }

// storedFact is a fact's value in the user's facts hash; the key is the hash field.
type storedFact struct {
	Value   string    `json:"value"`
	Source  string    `json:"source"`
	Updated time.Time `json:"updated"`
}

func (s *Store) Facts(ctx context.Context, userID string) ([]runtime.Fact, error) {
	fields, err := s.client.HGetAll(ctx, s.factsKey(userID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis store: facts of %q: %w", userID, err)
	}
	out := make([]runtime.Fact, 0, len(fields))
	for key, raw := range fields {
		var f storedFact
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			return nil, fmt.Errorf("redis store: fact %q of %q: %w", key, userID, err)
		}
		out = append(out, runtime.Fact{Key: key, Value: f.Value, Source: f.Source, Updated: f.Updated})
	}
	slices.SortFunc(out, func(a, b runtime.Fact) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *Store) Conversation(ctx context.Context, id string, turns int) (runtime.Conversation, error) {
	var meta *goredis.SliceCmd
	var list, kinds *goredis.StringSliceCmd
	// MULTI/EXEC so the turn count and the messages come from the same moment.
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		meta = p.HMGet(ctx, s.metaKey(id), "turns", "user")
		if turns > 0 { // LRANGE -0 -1 would be the whole list
			list = p.LRange(ctx, s.turnsKey(id), int64(-turns), -1)
		}
		kinds = p.SMembers(ctx, s.kindsKey(id))
		return nil
	})
	if err != nil {
		return runtime.Conversation{}, fmt.Errorf("redis store: conversation %q: %w", id, err)
	}
	count, ok := meta.Val()[0].(string)
	if !ok {
		return runtime.Conversation{}, nil
	}
	out := runtime.Conversation{Seen: map[string][]string{}}
	out.User, _ = meta.Val()[1].(string)
	if out.Turns, err = strconv.Atoi(count); err != nil {
		return runtime.Conversation{}, fmt.Errorf("redis store: conversation %q: turns: %w", id, err)
	}
	if list != nil {
		for _, raw := range list.Val() {
			var msgs []runtime.Message
			if err := json.Unmarshal([]byte(raw), &msgs); err != nil {
				return runtime.Conversation{}, fmt.Errorf("redis store: conversation %q: turn: %w", id, err)
			}
			out.Messages = append(out.Messages, msgs...)
		}
	}
	if len(kinds.Val()) == 0 {
		return out, nil
	}
	// Seen sets only grow, so reading them after the snapshot above loses nothing.
	ids := map[string]*goredis.StringSliceCmd{}
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, kind := range kinds.Val() {
			ids[kind] = p.SMembers(ctx, s.seenKey(id, kind))
		}
		return nil
	})
	if err != nil {
		return runtime.Conversation{}, fmt.Errorf("redis store: conversation %q: seen: %w", id, err)
	}
	for kind, cmd := range ids {
		out.Seen[kind] = slices.Sorted(slices.Values(cmd.Val()))
	}
	return out, nil
}

// Commit reads the facts it changes and the conversation's owner under WATCH,
// computes the new facts with runtime.ApplyFact, and writes everything in one
// MULTI/EXEC; a concurrent writer to the same keys makes EXEC fail, and the commit
// starts over on what that writer left.
func (s *Store) Commit(ctx context.Context, rec runtime.Record) error {
	var watched []string
	if len(rec.Facts) > 0 {
		watched = append(watched, s.factsKey(rec.UserID))
	}
	if rec.Conversation != "" {
		watched = append(watched, s.metaKey(rec.Conversation))
	}
	if len(watched) == 0 {
		return nil // a run outside a conversation that learnt nothing
	}
	var turn []byte
	if rec.Conversation != "" && len(rec.Messages) > 0 {
		var err error
		if turn, err = json.Marshal(rec.Messages); err != nil {
			return fmt.Errorf("redis store: commit: %w", err)
		}
	}
	err := s.transact(ctx, func(tx *goredis.Tx) error {
		old, owner, kinds, err := s.readForCommit(ctx, tx, rec)
		if err != nil {
			return err
		}
		facts := changedFacts(old, rec.Facts, time.Now().UTC())
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			s.writeFacts(ctx, p, rec.UserID, facts)
			if rec.Conversation != "" {
				s.writeConversation(ctx, p, rec, owner, kinds, turn)
			}
			return nil
		})
		return err
	}, watched...)
	if err != nil {
		return fmt.Errorf("redis store: commit of user %q to conversation %q: %w", rec.UserID, rec.Conversation, err)
	}
	return nil
}

// readForCommit reads, in one round trip, the current values of the facts the record
// changes, the conversation's owner and its seen kinds (to renew their expiry).
func (s *Store) readForCommit(ctx context.Context, tx *goredis.Tx, rec runtime.Record) (old map[string]string, owner string, kinds []string, err error) {
	var keys []string
	for _, c := range rec.Facts {
		if !slices.Contains(keys, c.Key) {
			keys = append(keys, c.Key)
		}
	}
	var factsCmd, ownerCmd *goredis.SliceCmd
	var kindsCmd *goredis.StringSliceCmd
	_, err = tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
		if len(keys) > 0 {
			factsCmd = p.HMGet(ctx, s.factsKey(rec.UserID), keys...)
		}
		if rec.Conversation != "" {
			ownerCmd = p.HMGet(ctx, s.metaKey(rec.Conversation), "user")
			if s.ttl > 0 {
				kindsCmd = p.SMembers(ctx, s.kindsKey(rec.Conversation))
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", nil, err
	}
	old = map[string]string{}
	if factsCmd != nil {
		for i, v := range factsCmd.Val() {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			var f storedFact
			if err := json.Unmarshal([]byte(raw), &f); err != nil {
				return nil, "", nil, fmt.Errorf("fact %q: %w", keys[i], err)
			}
			old[keys[i]] = f.Value
		}
	}
	owner = rec.UserID
	if ownerCmd != nil {
		if u, ok := ownerCmd.Val()[0].(string); ok {
			owner = u
		}
	}
	if kindsCmd != nil {
		kinds = kindsCmd.Val()
	}
	return old, owner, kinds, nil
}

// changedFacts applies the changes in order and returns each touched key's final
// fact, nil for a deleted one.
func changedFacts(old map[string]string, changes []runtime.FactChange, now time.Time) map[string]*storedFact {
	out := map[string]*storedFact{}
	for _, c := range changes {
		if c.Op == runtime.FactDelete {
			out[c.Key] = nil
			continue
		}
		prev := old[c.Key]
		if f, touched := out[c.Key]; touched {
			prev = ""
			if f != nil {
				prev = f.Value
			}
		}
		out[c.Key] = &storedFact{Value: runtime.ApplyFact(prev, c), Source: c.Source, Updated: now}
	}
	return out
}

func (s *Store) writeFacts(ctx context.Context, p goredis.Pipeliner, user string, facts map[string]*storedFact) {
	var set []any
	var deleted []string
	for key, f := range facts {
		if f == nil {
			deleted = append(deleted, key)
			continue
		}
		raw, _ := json.Marshal(f) // strings and a time: cannot fail
		set = append(set, key, string(raw))
	}
	if len(set) > 0 {
		p.HSet(ctx, s.factsKey(user), set...)
	}
	if len(deleted) > 0 {
		p.HDel(ctx, s.factsKey(user), deleted...)
	}
}

func (s *Store) writeConversation(ctx context.Context, p goredis.Pipeliner, rec runtime.Record, owner string, kinds []string, turn []byte) {
	id := rec.Conversation
	meta := s.metaKey(id)
	added := int64(0)
	if turn != nil {
		p.RPush(ctx, s.turnsKey(id), turn)
		added = 1
	}
	// HINCRBY by 0 still creates the count, so a conversation without turns reads as 0.
	p.HIncrBy(ctx, meta, "turns", added)
	p.HSet(ctx, meta, "user", owner, "updated", time.Now().UTC().Format(time.RFC3339Nano))
	for kind, ids := range rec.Seen {
		if len(ids) == 0 {
			continue
		}
		p.SAdd(ctx, s.seenKey(id, kind), toAny(ids)...)
		p.SAdd(ctx, s.kindsKey(id), kind)
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	p.SAdd(ctx, s.userConvsKey(owner), id)
	if s.ttl > 0 {
		keys := []string{s.turnsKey(id), meta, s.kindsKey(id), s.userConvsKey(owner)}
		for _, kind := range kinds {
			keys = append(keys, s.seenKey(id, kind))
		}
		for _, k := range keys {
			p.PExpire(ctx, k, s.ttl)
		}
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Conversations lists the ids in the user's set whose conversation still exists: with
// a TTL a conversation can expire while the set, renewed by later commits, lives on.
func (s *Store) Conversations(ctx context.Context, userID string) ([]string, error) {
	ids, err := s.client.SMembers(ctx, s.userConvsKey(userID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis store: conversations of %q: %w", userID, err)
	}
	exists := make([]*goredis.IntCmd, len(ids))
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			exists[i] = p.Exists(ctx, s.metaKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis store: conversations of %q: %w", userID, err)
	}
	var out []string
	for i, id := range ids {
		if exists[i].Val() > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Forget deletes the user's facts and every key of the user's conversations in one
// MULTI/EXEC. It watches each conversation's meta, which every commit changes, so a
// commit landing meanwhile (a new conversation, a new seen kind) makes it start over
// rather than leave a key behind.
func (s *Store) Forget(ctx context.Context, userID string) error {
	facts, convs := s.factsKey(userID), s.userConvsKey(userID)
	err := s.transact(ctx, func(tx *goredis.Tx) error {
		ids, err := tx.SMembers(ctx, convs).Result()
		if err != nil {
			return err
		}
		del := []string{facts, convs}
		if len(ids) > 0 {
			var metas []string
			for _, id := range ids {
				metas = append(metas, s.metaKey(id))
			}
			if err := tx.Watch(ctx, metas...).Err(); err != nil {
				return err
			}
			kinds := make([]*goredis.StringSliceCmd, len(ids))
			_, err = tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, id := range ids {
					kinds[i] = p.SMembers(ctx, s.kindsKey(id))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for i, id := range ids {
				del = append(del, s.turnsKey(id), s.metaKey(id), s.kindsKey(id))
				for _, kind := range kinds[i].Val() {
					del = append(del, s.seenKey(id, kind))
				}
			}
		}
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Del(ctx, del...)
			return nil
		})
		return err
	}, facts, convs)
	if err != nil {
		return fmt.Errorf("redis store: forget %q: %w", userID, err)
	}
	return nil
}

// transact runs fn as an optimistic transaction on the watched keys, starting over
// while another writer changes them first. The jittered backoff spreads contenders
// out so they do not collide again at once.
func (s *Store) transact(ctx context.Context, fn func(*goredis.Tx) error, keys ...string) error {
	for attempt := range maxAttempts {
		err := s.client.Watch(ctx, fn, keys...)
		if !errors.Is(err, goredis.TxFailedErr) {
			return err
		}
		wait := rand.N(min(time.Millisecond<<min(attempt, 5), maxBackoff))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return fmt.Errorf("gave up after %d attempts, each overtaken by a concurrent writer: %w", maxAttempts, goredis.TxFailedErr)
}
