// Package memory is the process-local store.Store: for tests, and for runs that
// need no memory beyond the process. Each kind of seen entities keeps an index, so
// Seen is a map lookup. It keeps paused runs (store.PausedRuns) and blobs
// (store.Blobs) too, which end with the process like everything else.
package memory

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// Store keeps everything in maps behind one lock, so a commit is atomic.
type Store struct {
	mu            sync.Mutex
	facts         map[string][]store.Fact
	conversations map[string]*conversation
	commits       uint64 // counts the commits to conversations: the latest's number
	paused        map[string]store.PausedRun
	blobs         map[string]blob
	blobsSwept    int // how many blobs the last sweep of expired ones left
	// applied holds the keys of the commits made (Record.Key), each with when it was.
	applied      map[string]time.Time
	appliedSwept int // how many keys the last sweep of expired ones left
}

// commitKeyTTL is how long a commit's key is kept: a retry later than that is made again.
const commitKeyTTL = 7 * 24 * time.Hour

// blob is a value of store.Blobs; expires is zero for one that never expires.
type blob struct {
	data    []byte
	expires time.Time
}

type conversation struct {
	user   string
	turns  [][]model.Message
	seen   map[string]*seenKind
	commit uint64 // the number of its latest commit, which orders Conversations
}

// seenKind holds the entities of one kind in the order of their last revelation,
// oldest first, with an index into that order: adding, renewing and dropping the
// oldest each cost O(1), whatever the number kept.
type seenKind struct {
	order *list.List               // of string
	index map[string]*list.Element // entity → its place in order
}

// reveal adds ids as the newest entities, then drops the oldest beyond limit (0: none).
func (k *seenKind) reveal(ids []string, limit int) {
	for _, id := range ids {
		if e, ok := k.index[id]; ok {
			k.order.MoveToBack(e)
			continue
		}
		k.index[id] = k.order.PushBack(id)
	}
	for limit > 0 && k.order.Len() > limit {
		delete(k.index, k.order.Remove(k.order.Front()).(string))
	}
}

func (k *seenKind) list() []string {
	out := make([]string, 0, k.order.Len())
	for e := k.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(string))
	}
	return out
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.PausedRuns = (*Store)(nil)
	_ store.Blobs      = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{facts: map[string][]store.Fact{}, conversations: map[string]*conversation{},
		paused: map[string]store.PausedRun{}, blobs: map[string]blob{}, applied: map[string]time.Time{}}
}

func (s *Store) Facts(_ context.Context, userID string) ([]store.Fact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.facts[userID])
	slices.SortFunc(out, func(a, b store.Fact) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *Store) Conversation(_ context.Context, id string, turns int) (store.Conversation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conversations[id]
	if c == nil {
		return store.Conversation{}, nil
	}
	out := store.Conversation{User: c.user, Turns: len(c.turns)}
	for _, t := range c.turns[max(0, len(c.turns)-turns):] {
		out.Messages = append(out.Messages, t...)
	}
	return out, nil
}

// Seen looks the entity up in the kind's index.
func (s *Store) Seen(_ context.Context, conversation, kind, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conversations[conversation]
	if c == nil || c.seen[kind] == nil {
		return false, nil
	}
	_, ok := c.seen[kind].index[id]
	return ok, nil
}

func (s *Store) SeenEntities(_ context.Context, conversation string, kinds ...string) (map[string][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	c := s.conversations[conversation]
	if c == nil {
		return out, nil
	}
	if len(kinds) == 0 {
		kinds = slices.Collect(maps.Keys(c.seen))
	}
	for _, kind := range kinds {
		if k := c.seen[kind]; k != nil && k.order.Len() > 0 {
			out[kind] = k.list()
		}
	}
	return out, nil
}

func (s *Store) Commit(_ context.Context, rec store.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	if rec.Key != "" {
		if at, ok := s.applied[rec.Key]; ok && now.Sub(at) < commitKeyTTL {
			return nil // made before: a retry writes nothing
		}
	}
	c := s.conversations[rec.Conversation]
	if rec.Conversation != "" && c != nil && c.user != rec.UserID {
		return store.ErrForeignConversation // before any write: the record is one transaction
	}
	if err := s.checkPaused(rec); err != nil {
		return err
	}
	if rec.Key != "" {
		s.apply(rec.Key, now)
	}
	for _, ch := range rec.Facts {
		s.facts[rec.UserID] = applyFact(s.facts[rec.UserID], ch, now)
	}
	// Resumed goes first: a run resumed under its id may pause again in the same commit.
	if rec.Resumed != "" {
		delete(s.paused, rec.Resumed)
	}
	if rec.Pause != nil {
		s.paused[rec.Pause.ID] = clonePaused(*rec.Pause)
	}
	if rec.Conversation == "" {
		return nil
	}
	if c == nil {
		c = &conversation{user: rec.UserID, seen: map[string]*seenKind{}}
		s.conversations[rec.Conversation] = c
	}
	s.commits++
	c.commit = s.commits
	if len(rec.Messages) > 0 {
		c.turns = append(c.turns, slices.Clone(rec.Messages))
	}
	for kind, ids := range rec.Seen {
		if len(ids) == 0 {
			continue
		}
		k := c.seen[kind]
		if k == nil {
			k = &seenKind{order: list.New(), index: map[string]*list.Element{}}
			c.seen[kind] = k
		}
		k.reveal(ids, rec.MaxSeen)
	}
	return nil
}

// apply records a commit's key. Each time their number has doubled the expired
// keys go, so they do not pile up, at an amortized O(1) a commit.
func (s *Store) apply(key string, now time.Time) {
	s.applied[key] = now
	if len(s.applied) < 2*max(s.appliedSwept, 64) {
		return
	}
	for k, at := range s.applied {
		if now.Sub(at) >= commitKeyTTL {
			delete(s.applied, k)
		}
	}
	s.appliedSwept = len(s.applied)
}

// checkPaused tells whether rec's Resumed and Pause may be written over the paused
// runs stored, before the commit writes anything: ErrPausedConflict if not.
func (s *Store) checkPaused(rec store.Record) error {
	if rec.Resumed != "" {
		if old, ok := s.paused[rec.Resumed]; !ok || old.Version != rec.ResumedVersion {
			return store.ErrPausedConflict
		}
	}
	if p := rec.Pause; p != nil && p.ID != rec.Resumed {
		old, ok := s.paused[p.ID]
		if ok && old.Version != p.Version-1 || !ok && p.Version != 1 {
			return store.ErrPausedConflict
		}
	}
	return nil
}

func applyFact(facts []store.Fact, ch store.FactChange, now time.Time) []store.Fact {
	i := slices.IndexFunc(facts, func(f store.Fact) bool { return f.Key == ch.Key })
	if ch.Op == store.FactDelete {
		if i >= 0 {
			facts = slices.Delete(facts, i, i+1)
		}
		return facts
	}
	old := ""
	if i >= 0 {
		old = facts[i].Value
	}
	f := store.Fact{Key: ch.Key, Value: store.ApplyFact(old, ch), Source: ch.Source, Updated: now}
	if i >= 0 {
		facts[i] = f
		return facts
	}
	return append(facts, f)
}

// Conversations lists the user's conversations, the latest committed to first.
func (s *Store) Conversations(_ context.Context, userID string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, c := range s.conversations {
		if c.user == userID {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Compare(s.conversations[b].commit, s.conversations[a].commit)
	})
	return out, nil
}

// DeleteConversation drops the conversation, with its turns and seen entities, when
// it is the user's.
func (s *Store) DeleteConversation(_ context.Context, userID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conversations[id]
	if c == nil || c.user != userID {
		return store.ErrConversationNotFound
	}
	delete(s.conversations, id)
	return nil
}

func (s *Store) Forget(_ context.Context, userID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.facts, userID)
	for id, c := range s.conversations {
		if c.user == userID {
			delete(s.conversations, id)
		}
	}
	for id, p := range s.paused {
		if p.UserID == userID {
			delete(s.paused, id)
		}
	}
	return nil
}

// clonePaused copies the run's state, so neither the caller nor the store changes
// the other's.
func clonePaused(p store.PausedRun) store.PausedRun {
	p.State = slices.Clone(p.State)
	return p
}

func (s *Store) PausedRun(_ context.Context, id string) (store.PausedRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.paused[id]
	if !ok {
		return store.PausedRun{}, store.ErrRunNotFound
	}
	return clonePaused(p), nil
}

func (s *Store) UpdatePaused(_ context.Context, p store.PausedRun) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.paused[p.ID]
	switch {
	case !ok:
		return store.ErrRunNotFound
	case old.Version != p.Version-1:
		return store.ErrPausedConflict
	}
	s.paused[p.ID] = clonePaused(p)
	return nil
}

// PausedRuns scans every paused run: a process-local store holds few.
func (s *Store) PausedRuns(_ context.Context, q store.PausedQuery) ([]store.PausedRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.PausedRun, 0, len(s.paused))
	for _, p := range s.paused {
		out = append(out, p)
	}
	out = q.Select(out)
	for i := range out {
		out[i] = clonePaused(out[i])
	}
	return out, nil
}

// PutBlob keeps a copy of data, so the caller may reuse its slice.
func (s *Store) PutBlob(_ context.Context, key string, data []byte, ttl time.Duration) error {
	b := blob{data: bytes.Clone(data)}
	if b.data == nil {
		b.data = []byte{}
	}
	if ttl > 0 {
		b.expires = time.Now().Add(ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[key] = b
	if len(s.blobs) >= 2*max(s.blobsSwept, 64) {
		s.sweepBlobs(time.Now())
	}
	return nil
}

// sweepBlobs drops the expired blobs. PutBlob calls it each time their number has
// doubled, so blobs never read again do not pile up, at an amortized O(1) a put.
func (s *Store) sweepBlobs(now time.Time) {
	for key, b := range s.blobs {
		if b.expired(now) {
			delete(s.blobs, key)
		}
	}
	s.blobsSwept = len(s.blobs)
}

func (b blob) expired(now time.Time) bool { return !b.expires.IsZero() && !now.Before(b.expires) }

// Blob drops the blob it finds expired.
func (s *Store) Blob(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[key]
	if !ok {
		return nil, store.ErrBlobNotFound
	}
	if b.expired(time.Now()) {
		delete(s.blobs, key)
		return nil, store.ErrBlobNotFound
	}
	return bytes.Clone(b.data), nil
}

func (s *Store) Close() error { return nil }
