package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// Options tune a Store.
type Options struct {
	// Prefix starts every key, so several agents or environments can share a
	// server; "" means "agentrun:".
	Prefix string
	// TTL is how long a conversation is kept after its last commit; 0 keeps it forever.
	// Facts and paused runs never expire.
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

var (
	_ store.Store      = (*Store)(nil)
	_ store.PausedRuns = (*Store)(nil)
	_ store.Blobs      = (*Store)(nil)
)

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
	quietClient.Do(func() { goredis.SetLogger(discardLogger{}) })
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

func (s *Store) runKey(id, part string) string {
	return s.prefix + "run:" + escaper.Replace(id) + ":" + part
}

func (s *Store) turnsKey(id string) string       { return s.convKey(id, "turns") }
func (s *Store) metaKey(id string) string        { return s.convKey(id, "meta") }
func (s *Store) kindsKey(id string) string       { return s.convKey(id, "seen") }
func (s *Store) seenKey(id, kind string) string  { return s.convKey(id, "seen:"+escaper.Replace(kind)) }
func (s *Store) factsKey(user string) string     { return s.userKey(user, "facts") }
func (s *Store) userConvsKey(user string) string { return s.userKey(user, "conversations") }

// A paused run's keys are apart from any conversation's: it may have none.
func (s *Store) pausedKey(id string) string       { return s.runKey(id, "paused") }
func (s *Store) userPausedKey(user string) string { return s.userKey(user, "paused") }
func (s *Store) expiringKey() string              { return s.prefix + "paused:expires" }

// A blob's key is apart from every conversation's, user's and run's.
func (s *Store) blobKey(key string) string { return s.prefix + "blob:" + escaper.Replace(key) }

// commitKey marks the commit of a store.Record.Key as made, for commitKeyTTL.
func (s *Store) commitKey(key string) string { return s.prefix + "commit:" + escaper.Replace(key) }

// commitKeyTTL is how long a commit's key is kept: a retry later than that is made again.
const commitKeyTTL = 7 * 24 * time.Hour

// storedFact is a fact's value in the user's facts hash; the key is the hash field.
type storedFact struct {
	Value   string    `json:"value"`
	Source  string    `json:"source"`
	Updated time.Time `json:"updated"`
}

func (s *Store) Facts(ctx context.Context, userID string) ([]store.Fact, error) {
	fields, err := s.client.HGetAll(ctx, s.factsKey(userID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis store: facts of %q: %w", userID, err)
	}
	out := make([]store.Fact, 0, len(fields))
	for key, raw := range fields {
		var f storedFact
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			return nil, fmt.Errorf("redis store: fact %q of %q: %w", key, userID, err)
		}
		out = append(out, store.Fact{Key: key, Value: f.Value, Source: f.Source, Updated: f.Updated})
	}
	slices.SortFunc(out, func(a, b store.Fact) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// revealsField is the meta field counting the revelations of entities so far: the
// score of the newest. A conversation without it was written by an agentrun whose
// seen:<kind> keys were plain sets (layout 1); its next commit converts them.
const revealsField = "reveals"

func (s *Store) Conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	out, err := s.conversation(ctx, id, turns)
	if err != nil {
		return store.Conversation{}, fmt.Errorf("redis store: conversation %q: %w", id, err)
	}
	return out, nil
}

func (s *Store) conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	var meta *goredis.SliceCmd
	var list *goredis.StringSliceCmd
	// MULTI/EXEC so the turn count and the messages come from the same moment.
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		meta = p.HMGet(ctx, s.metaKey(id), "turns", "user")
		if turns > 0 { // LRANGE -0 -1 would be the whole list
			list = p.LRange(ctx, s.turnsKey(id), int64(-turns), -1)
		}
		return nil
	})
	if err != nil {
		return store.Conversation{}, err
	}
	count, ok := meta.Val()[0].(string)
	if !ok {
		return store.Conversation{}, nil
	}
	var out store.Conversation
	out.User, _ = meta.Val()[1].(string)
	if out.Turns, err = strconv.Atoi(count); err != nil {
		return store.Conversation{}, fmt.Errorf("turns: %w", err)
	}
	if list != nil {
		for _, raw := range list.Val() {
			var msgs []model.Message
			if err := json.Unmarshal([]byte(raw), &msgs); err != nil {
				return store.Conversation{}, fmt.Errorf("turn: %w", err)
			}
			out.Messages = append(out.Messages, msgs...)
		}
	}
	return out, nil
}

// Seen asks the kind's sorted set for the entity's score (ZSCORE): a hash lookup,
// whatever the number of entities. A conversation of layout 1 keeps a plain set,
// asked with SISMEMBER; a commit converting it in between makes the first answer
// WRONGTYPE, and the other command then finds the new layout.
func (s *Store) Seen(ctx context.Context, conversation, kind, id string) (bool, error) {
	key, sorted := s.seenKey(conversation, kind), true
	for attempt := 0; ; attempt++ {
		found, err := s.member(ctx, key, id, sorted)
		if err != nil && attempt < 2 && isWrongType(err) {
			sorted = !sorted
			continue
		}
		if err != nil {
			return false, fmt.Errorf("redis store: seen %s %q in conversation %q: %w", kind, id, conversation, err)
		}
		return found, nil
	}
}

// member asks a sorted set (ZSCORE) or a plain set (SISMEMBER) whether it holds id.
func (s *Store) member(ctx context.Context, key, id string, sorted bool) (bool, error) {
	if !sorted {
		return s.client.SIsMember(ctx, key, id).Result()
	}
	err := s.client.ZScore(ctx, key, id).Err()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// SeenEntities reads the kinds' sorted sets in one round trip (two when no kind is
// named: the conversation's kinds first), each lowest score — oldest — first.
func (s *Store) SeenEntities(ctx context.Context, conversation string, kinds ...string) (map[string][]string, error) {
	// A commit converting the conversation's seen keys between the two reads below
	// makes the second fail with WRONGTYPE; the next attempt sees the new layout.
	for attempt := 0; ; attempt++ {
		out, err := s.seenEntities(ctx, conversation, kinds)
		if err != nil && attempt < 2 && isWrongType(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redis store: seen entities of conversation %q: %w", conversation, err)
		}
		return out, nil
	}
}

func isWrongType(err error) bool { return strings.HasPrefix(err.Error(), "WRONGTYPE") }

func (s *Store) seenEntities(ctx context.Context, conversation string, kinds []string) (map[string][]string, error) {
	var reveals *goredis.SliceCmd
	var all *goredis.StringSliceCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		reveals = p.HMGet(ctx, s.metaKey(conversation), revealsField)
		if len(kinds) == 0 {
			all = p.SMembers(ctx, s.kindsKey(conversation))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	_, ordered := reveals.Val()[0].(string)
	if all != nil {
		kinds = all.Val()
	}
	out := map[string][]string{}
	if len(kinds) == 0 {
		return out, nil
	}
	// Read after the layout above: a commit in between can only have added entities
	// or dropped the oldest, which the next read would see anyway.
	ids := make([]*goredis.StringSliceCmd, len(kinds))
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, kind := range kinds {
			if ordered {
				ids[i] = p.ZRange(ctx, s.seenKey(conversation, kind), 0, -1)
			} else {
				ids[i] = p.SMembers(ctx, s.seenKey(conversation, kind))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, kind := range kinds {
		if len(ids[i].Val()) == 0 {
			continue
		}
		if ordered {
			out[kind] = ids[i].Val()
		} else {
			out[kind] = slices.Sorted(slices.Values(ids[i].Val())) // a set has no order
		}
	}
	return out, nil
}

// Commit reads the facts it changes, the conversation's owner and the users of the
// paused runs it ends or writes under WATCH, computes the new facts with
// store.ApplyFact, and writes everything in one MULTI/EXEC; a concurrent writer to
// the same keys makes EXEC fail, and the commit starts over on what that writer left.
// The paused runs' versions are checked on what it read (see store.Record): a
// commit that starts over on a changed run fails with store.ErrPausedConflict.
// A record with a Key watches its commit key too and sets it in the MULTI/EXEC: a
// key found set ends the commit with nothing written, and of two commits with one
// key the second's EXEC fails, and it starts over to find the key set.
func (s *Store) Commit(ctx context.Context, rec store.Record) error {
	var watched []string
	if rec.Key != "" {
		watched = append(watched, s.commitKey(rec.Key))
	}
	if len(rec.Facts) > 0 {
		watched = append(watched, s.factsKey(rec.UserID))
	}
	if rec.Conversation != "" {
		watched = append(watched, s.metaKey(rec.Conversation))
	}
	for _, id := range pausedOf(rec) {
		watched = append(watched, s.pausedKey(id))
	}
	if len(watched) == 0 {
		return nil // a run outside a conversation that learnt nothing and did not pause
	}
	var turn []byte
	if rec.Conversation != "" && len(rec.Messages) > 0 {
		var err error
		if turn, err = json.Marshal(rec.Messages); err != nil {
			return fmt.Errorf("redis store: commit: %w", err)
		}
	}
	err := s.transact(ctx, func(tx *goredis.Tx) error {
		read, err := s.readForCommit(ctx, tx, rec)
		if err != nil {
			return err
		}
		if read.applied {
			return nil // made before: a retry writes nothing
		}
		if rec.Conversation != "" && read.owner != rec.UserID {
			return store.ErrForeignConversation // meta is watched: the owner cannot change before EXEC
		}
		if err := checkPaused(rec, read.pausedVersions); err != nil {
			return err // the paused keys are watched: their versions cannot change before EXEC
		}
		facts := changedFacts(read.facts, rec.Facts, time.Now().UTC())
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			if rec.Key != "" {
				p.Set(ctx, s.commitKey(rec.Key), 1, commitKeyTTL)
			}
			s.writeFacts(ctx, p, rec.UserID, facts)
			s.writePaused(ctx, p, rec, read.pausedUsers)
			if rec.Conversation != "" {
				s.writeConversation(ctx, p, rec, read, turn)
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

// committed is what a commit reads under WATCH before it writes.
type committed struct {
	applied bool              // the record's Key is set: the commit was made before
	facts   map[string]string // the current values of the facts the record changes
	owner   string            // the conversation's owner
	kinds   []string          // its seen kinds, to renew their expiry
	reveals int64             // its revelations so far: the score of its newest entity
	// layout1 holds, for a conversation written before seen:<kind> were sorted sets,
	// each kind's entities, to convert; nil otherwise.
	layout1 map[string][]string
	// pausedUsers holds the users of the stored paused runs the record ends or writes:
	// their lists lose the runs.
	pausedUsers map[string]string
	// pausedVersions holds the versions of those runs, which the commit checks.
	pausedVersions map[string]int
}

// checkPaused tells whether rec's Resumed and Pause may be written over the stored
// runs' versions: store.ErrPausedConflict if not.
func checkPaused(rec store.Record, versions map[string]int) error {
	if rec.Resumed != "" {
		if v, ok := versions[rec.Resumed]; !ok || v != rec.ResumedVersion {
			return store.ErrPausedConflict
		}
	}
	if p := rec.Pause; p != nil && p.ID != rec.Resumed {
		v, ok := versions[p.ID]
		if ok && v != p.Version-1 || !ok && p.Version != 1 {
			return store.ErrPausedConflict
		}
	}
	return nil
}

// pausedOf is the ids of the paused runs the record ends or writes.
func pausedOf(rec store.Record) []string {
	var ids []string
	if rec.Resumed != "" {
		ids = append(ids, rec.Resumed)
	}
	if rec.Pause != nil {
		ids = append(ids, rec.Pause.ID)
	}
	return ids
}

// readForCommit reads, in one round trip (two for a layout 1 conversation), what the
// commit builds on: the facts it changes, the conversation's meta and seen kinds and
// the users of the paused runs.
func (s *Store) readForCommit(ctx context.Context, tx *goredis.Tx, rec store.Record) (committed, error) {
	var keys []string
	for _, c := range rec.Facts {
		if !slices.Contains(keys, c.Key) {
			keys = append(keys, c.Key)
		}
	}
	var factsCmd, metaCmd *goredis.SliceCmd
	var kindsCmd *goredis.StringSliceCmd
	var appliedCmd *goredis.IntCmd
	paused := pausedOf(rec)
	users := make([]*goredis.SliceCmd, len(paused))
	_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
		if rec.Key != "" {
			appliedCmd = p.Exists(ctx, s.commitKey(rec.Key))
		}
		if len(keys) > 0 {
			factsCmd = p.HMGet(ctx, s.factsKey(rec.UserID), keys...)
		}
		if rec.Conversation != "" {
			metaCmd = p.HMGet(ctx, s.metaKey(rec.Conversation), "user", revealsField)
			kindsCmd = p.SMembers(ctx, s.kindsKey(rec.Conversation))
		}
		for i, id := range paused {
			users[i] = p.HMGet(ctx, s.pausedKey(id), "user", "version")
		}
		return nil
	})
	if err != nil {
		return committed{}, err
	}
	out := committed{facts: map[string]string{}, owner: rec.UserID, pausedUsers: map[string]string{},
		pausedVersions: map[string]int{}}
	out.applied = appliedCmd != nil && appliedCmd.Val() == 1
	for i, id := range paused {
		if user, exists := users[i].Val()[0].(string); exists {
			out.pausedUsers[id] = user
			raw, _ := users[i].Val()[1].(string)
			if out.pausedVersions[id], err = strconv.Atoi(raw); err != nil {
				return committed{}, fmt.Errorf("paused run %q: version: %w", id, err)
			}
		}
	}
	if factsCmd != nil {
		for i, v := range factsCmd.Val() {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			var f storedFact
			if err := json.Unmarshal([]byte(raw), &f); err != nil {
				return committed{}, fmt.Errorf("fact %q: %w", keys[i], err)
			}
			out.facts[keys[i]] = f.Value
		}
	}
	if metaCmd == nil {
		return out, nil
	}
	out.kinds = kindsCmd.Val()
	owner, exists := metaCmd.Val()[0].(string)
	if exists {
		out.owner = owner
	}
	reveals, ordered := metaCmd.Val()[1].(string)
	if ordered {
		if out.reveals, err = strconv.ParseInt(reveals, 10, 64); err != nil {
			return committed{}, fmt.Errorf("meta %s: %w", revealsField, err)
		}
	}
	if !exists || ordered || len(out.kinds) == 0 {
		return out, nil
	}
	// Layout 1: read the plain sets to convert them. Meta is watched, and every
	// writer changes it, so the sets cannot change before EXEC unnoticed.
	sets := make([]*goredis.StringSliceCmd, len(out.kinds))
	_, err = tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, kind := range out.kinds {
			sets[i] = p.SMembers(ctx, s.seenKey(rec.Conversation, kind))
		}
		return nil
	})
	if err != nil {
		return committed{}, err
	}
	out.layout1 = map[string][]string{}
	for i, kind := range out.kinds {
		out.layout1[kind] = slices.Sorted(slices.Values(sets[i].Val()))
	}
	return out, nil
}

// changedFacts applies the changes in order and returns each touched key's final
// fact, nil for a deleted one.
func changedFacts(old map[string]string, changes []store.FactChange, now time.Time) map[string]*storedFact {
	out := map[string]*storedFact{}
	for _, c := range changes {
		if c.Op == store.FactDelete {
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
		out[c.Key] = &storedFact{Value: store.ApplyFact(prev, c), Source: c.Source, Updated: now}
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

func (s *Store) writeConversation(ctx context.Context, p goredis.Pipeliner, rec store.Record, read committed, turn []byte) {
	id := rec.Conversation
	meta := s.metaKey(id)
	added := int64(0)
	if turn != nil {
		p.RPush(ctx, s.turnsKey(id), turn)
		added = 1
	}
	// HINCRBY by 0 still creates the count, so a conversation without turns reads as 0.
	p.HIncrBy(ctx, meta, "turns", added)
	kinds, reveals := read.kinds, read.reveals
	// Convert layout 1: its entities, whose order a set did not keep, come first.
	for _, kind := range slices.Sorted(maps.Keys(read.layout1)) {
		key := s.seenKey(id, kind)
		p.Del(ctx, key)
		if members := scored(read.layout1[kind], &reveals); len(members) > 0 {
			p.ZAdd(ctx, key, members...)
			s.capSeen(ctx, p, key, rec.MaxSeen)
		}
	}
	// Each entity revealed, new or not, takes the next score: the newest of its kind.
	for _, kind := range slices.Sorted(maps.Keys(rec.Seen)) {
		ids := rec.Seen[kind]
		if len(ids) == 0 {
			continue
		}
		key := s.seenKey(id, kind)
		p.ZAdd(ctx, key, scored(ids, &reveals)...)
		s.capSeen(ctx, p, key, rec.MaxSeen)
		p.SAdd(ctx, s.kindsKey(id), kind)
		if !slices.Contains(kinds, kind) {
			kinds = append(kinds, kind)
		}
	}
	p.HSet(ctx, meta, "user", read.owner, "updated", time.Now().UTC().Format(time.RFC3339Nano), revealsField, reveals)
	p.SAdd(ctx, s.userConvsKey(read.owner), id)
	if s.ttl > 0 {
		keys := []string{s.turnsKey(id), meta, s.kindsKey(id), s.userConvsKey(read.owner)}
		for _, kind := range kinds {
			keys = append(keys, s.seenKey(id, kind))
		}
		for _, k := range keys {
			p.PExpire(ctx, k, s.ttl)
		}
	}
}

// writePaused deletes the paused run the record ends, then writes the one it pauses,
// which may have the same id: a run resumed under its id can pause again. users are
// the stored runs' users, whose lists lose them.
func (s *Store) writePaused(ctx context.Context, p goredis.Pipeliner, rec store.Record, users map[string]string) {
	if user, exists := users[rec.Resumed]; exists && rec.Resumed != "" {
		p.Del(ctx, s.pausedKey(rec.Resumed))
		p.ZRem(ctx, s.userPausedKey(user), rec.Resumed)
		p.ZRem(ctx, s.expiringKey(), rec.Resumed)
	}
	if rec.Pause != nil {
		if user, exists := users[rec.Pause.ID]; exists && user != rec.Pause.UserID {
			p.ZRem(ctx, s.userPausedKey(user), rec.Pause.ID)
		}
		s.setPaused(ctx, p, *rec.Pause)
	}
}

// setPaused writes every field of the run, so it replaces a stored one whole, and
// indexes it by its user and by its expiry. The scores are Unix milliseconds, which a
// float64 holds exactly; PausedRuns orders within one millisecond itself.
func (s *Store) setPaused(ctx context.Context, p goredis.Pipeliner, r store.PausedRun) {
	p.HSet(ctx, s.pausedKey(r.ID), "user", r.UserID, "agent", r.Agent, "status", string(r.Status), "version", r.Version,
		"created", r.Created.UTC().Format(time.RFC3339Nano), "expires", r.Expires.UTC().Format(time.RFC3339Nano),
		"state", r.State)
	p.ZAdd(ctx, s.userPausedKey(r.UserID), goredis.Z{Score: float64(r.Created.UnixMilli()), Member: r.ID})
	p.ZAdd(ctx, s.expiringKey(), goredis.Z{Score: float64(r.Expires.UnixMilli()), Member: r.ID})
}

// capSeen drops all but the limit newest entities of a kind (limit 0: none).
func (s *Store) capSeen(ctx context.Context, p goredis.Pipeliner, key string, limit int) {
	if limit > 0 {
		p.ZRemRangeByRank(ctx, key, 0, int64(-limit-1))
	}
}

// scored gives ids the scores after *last, in order, and advances *last. A member
// given twice keeps its later score, as ZADD does.
func scored(ids []string, last *int64) []goredis.Z {
	out := make([]goredis.Z, len(ids))
	for i, id := range ids {
		*last++
		out[i] = goredis.Z{Score: float64(*last), Member: id}
	}
	return out
}

// Conversations lists the ids in the user's set whose conversation still exists — with
// a TTL a conversation can expire while the set, renewed by later commits, lives on —
// the latest committed to first, by the time its meta records.
func (s *Store) Conversations(ctx context.Context, userID string) ([]string, error) {
	ids, err := s.client.SMembers(ctx, s.userConvsKey(userID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis store: conversations of %q: %w", userID, err)
	}
	updated := make([]*goredis.SliceCmd, len(ids))
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			updated[i] = p.HMGet(ctx, s.metaKey(id), "updated")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis store: conversations of %q: %w", userID, err)
	}
	convs := make([]store.Activity, 0, len(ids))
	for i, id := range ids {
		raw, exists := updated[i].Val()[0].(string)
		if !exists {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return nil, fmt.Errorf("redis store: conversation %q: meta updated: %w", id, err)
		}
		convs = append(convs, store.Activity{ID: id, Updated: t})
	}
	return store.NewestFirst(convs), nil
}

// DeleteConversation deletes every key of the conversation and takes it out of the
// user's set in one MULTI/EXEC, when its meta names the user as the owner. Meta is
// watched: a commit landing between the read and EXEC (a new seen kind) makes it
// start over rather than leave a key behind.
func (s *Store) DeleteConversation(ctx context.Context, userID, id string) error {
	meta := s.metaKey(id)
	err := s.transact(ctx, func(tx *goredis.Tx) error {
		var owner *goredis.SliceCmd
		var kinds *goredis.StringSliceCmd
		_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			owner = p.HMGet(ctx, meta, "user")
			kinds = p.SMembers(ctx, s.kindsKey(id))
			return nil
		})
		if err != nil {
			return err
		}
		if user, exists := owner.Val()[0].(string); !exists || user != userID {
			return store.ErrConversationNotFound
		}
		del := []string{s.turnsKey(id), meta, s.kindsKey(id)}
		for _, kind := range kinds.Val() {
			del = append(del, s.seenKey(id, kind))
		}
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			p.Del(ctx, del...)
			p.SRem(ctx, s.userConvsKey(userID), id)
			return nil
		})
		return err
	}, meta)
	if errors.Is(err, store.ErrConversationNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("redis store: delete conversation %q of %q: %w", id, userID, err)
	}
	return nil
}

// Forget deletes the user's facts, every key of the user's conversations and the
// user's paused runs in one MULTI/EXEC. It watches each conversation's meta, which
// every commit changes, so a commit landing meanwhile (a new conversation, a new seen
// kind) makes it start over rather than leave a key behind; and each paused run, which
// an update could give to another user.
func (s *Store) Forget(ctx context.Context, userID string) error {
	facts, convs, paused := s.factsKey(userID), s.userConvsKey(userID), s.userPausedKey(userID)
	err := s.transact(ctx, func(tx *goredis.Tx) error {
		var idsCmd, runsCmd *goredis.StringSliceCmd
		_, err := tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			idsCmd = p.SMembers(ctx, convs)
			runsCmd = p.ZRange(ctx, paused, 0, -1)
			return nil
		})
		if err != nil {
			return err
		}
		ids, runs := idsCmd.Val(), runsCmd.Val()
		del := []string{facts, convs, paused}
		if len(runs) > 0 {
			var runKeys []string
			for _, run := range runs {
				runKeys = append(runKeys, s.pausedKey(run))
			}
			if err := tx.Watch(ctx, runKeys...).Err(); err != nil {
				return err
			}
			del = append(del, runKeys...)
		}
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
			if len(runs) > 0 {
				p.ZRem(ctx, s.expiringKey(), runs)
			}
			return nil
		})
		return err
	}, facts, convs, paused)
	if err != nil {
		return fmt.Errorf("redis store: forget %q: %w", userID, err)
	}
	return nil
}

func (s *Store) PausedRun(ctx context.Context, id string) (store.PausedRun, error) {
	fields, err := s.client.HGetAll(ctx, s.pausedKey(id)).Result()
	if err != nil {
		return store.PausedRun{}, fmt.Errorf("redis store: paused run %q: %w", id, err)
	}
	if len(fields) == 0 {
		return store.PausedRun{}, store.ErrRunNotFound
	}
	p, err := pausedRun(id, fields)
	if err != nil {
		return store.PausedRun{}, fmt.Errorf("redis store: paused run %q: %w", id, err)
	}
	return p, nil
}

// pausedRun decodes the hash setPaused writes.
func pausedRun(id string, fields map[string]string) (store.PausedRun, error) {
	p := store.PausedRun{ID: id, UserID: fields["user"], Agent: fields["agent"],
		Status: store.PauseStatus(fields["status"]), State: []byte(fields["state"])}
	var err error
	if p.Version, err = strconv.Atoi(fields["version"]); err != nil {
		return store.PausedRun{}, fmt.Errorf("version: %w", err)
	}
	if p.Created, err = time.Parse(time.RFC3339Nano, fields["created"]); err != nil {
		return store.PausedRun{}, fmt.Errorf("created: %w", err)
	}
	if p.Expires, err = time.Parse(time.RFC3339Nano, fields["expires"]); err != nil {
		return store.PausedRun{}, fmt.Errorf("expires: %w", err)
	}
	return p, nil
}

// UpdatePaused reads the stored version under WATCH and writes over it in MULTI/EXEC
// only if it is the one before p's. An update landing in between makes EXEC fail, and
// the next attempt reads its version: a conflict.
func (s *Store) UpdatePaused(ctx context.Context, p store.PausedRun) error {
	key := s.pausedKey(p.ID)
	err := s.transact(ctx, func(tx *goredis.Tx) error {
		stored, err := tx.HMGet(ctx, key, "user", "version").Result()
		if err != nil {
			return err
		}
		user, exists := stored[0].(string)
		if !exists {
			return store.ErrRunNotFound
		}
		raw, _ := stored[1].(string)
		version, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("version: %w", err)
		}
		if version != p.Version-1 {
			return store.ErrPausedConflict
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			if user != p.UserID {
				pipe.ZRem(ctx, s.userPausedKey(user), p.ID)
			}
			s.setPaused(ctx, pipe, p)
			return nil
		})
		return err
	}, key)
	if err != nil && !errors.Is(err, store.ErrRunNotFound) && !errors.Is(err, store.ErrPausedConflict) {
		return fmt.Errorf("redis store: update paused run %q: %w", p.ID, err)
	}
	return err
}

// PausedRuns reads the candidates' ids from an index, then their hashes in one round
// trip, and orders them to the nanosecond. A run deleted or changed in between is
// left out if it no longer fits the query.
func (s *Store) PausedRuns(ctx context.Context, q store.PausedQuery) ([]store.PausedRun, error) {
	ids, err := s.pausedCandidates(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("redis store: paused runs: %w", err)
	}
	hashes := make([]*goredis.MapStringStringCmd, len(ids))
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range ids {
			hashes[i] = p.HGetAll(ctx, s.pausedKey(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis store: paused runs: %w", err)
	}
	out := make([]store.PausedRun, 0, len(ids))
	for i, id := range ids {
		if len(hashes[i].Val()) == 0 {
			continue
		}
		p, err := pausedRun(id, hashes[i].Val())
		if err != nil {
			return nil, fmt.Errorf("redis store: paused run %q: %w", id, err)
		}
		out = append(out, p)
	}
	return q.Select(out), nil
}

// pausedCandidates reads from an index the ids of the runs q may select, a superset
// in its order: the user's newest first (all of them when the expiry bound filters
// them too), or every user's expiring up to the bound's millisecond, soonest first.
// With a limit it reads on through the runs that share the last one's score, which
// their nanoseconds may order otherwise.
func (s *Store) pausedCandidates(ctx context.Context, q store.PausedQuery) ([]string, error) {
	z := goredis.ZRangeArgs{Key: s.expiringKey(), Start: "-inf", Stop: "+inf", ByScore: true}
	switch {
	case q.UserID != "":
		z = goredis.ZRangeArgs{Key: s.userPausedKey(q.UserID), Start: "+inf", Stop: "-inf", ByScore: true, Rev: true}
	case !q.ExpiresBefore.IsZero():
		z.Stop = q.ExpiresBefore.UnixMilli()
	}
	if q.Limit > 0 && (q.UserID == "" || q.ExpiresBefore.IsZero()) {
		z.Count = int64(q.Limit)
	}
	ranked, err := s.client.ZRangeArgsWithScores(ctx, z).Result()
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(ranked))
	for _, r := range ranked {
		ids = append(ids, r.Member.(string))
	}
	if z.Count == 0 || len(ranked) < q.Limit {
		return ids, nil
	}
	last := ranked[len(ranked)-1].Score
	tied, err := s.client.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: z.Key, Start: last, Stop: last, ByScore: true}).Result()
	if err != nil {
		return nil, err
	}
	cut := slices.IndexFunc(ranked, func(r goredis.Z) bool { return r.Score == last })
	return append(ids[:cut], tied...), nil
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

// The client library logs connection trouble to stderr on its own; every failure that
// matters comes back as an error, which agentrun reports where it belongs, so its log
// lines would only break -q and the progress output.
var quietClient sync.Once

// PutBlob sets the blob's key with the ttl as its expiry (PX), which Redis enforces:
// an expired blob is gone for every reader at once, and Redis reclaims its memory.
func (s *Store) PutBlob(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	if ttl > 0 && ttl < time.Millisecond {
		ttl = time.Millisecond // PX counts milliseconds; a shorter ttl still expires
	}
	if err := s.client.Set(ctx, s.blobKey(key), data, max(ttl, 0)).Err(); err != nil {
		return fmt.Errorf("redis store: put blob %q: %w", key, err)
	}
	return nil
}

func (s *Store) Blob(ctx context.Context, key string) ([]byte, error) {
	data, err := s.client.Get(ctx, s.blobKey(key)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, store.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redis store: blob %q: %w", key, err)
	}
	return data, nil
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
