package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/store"
)

// pauseBase is the paused runs' clock: nanoseconds in it, so a store that kept times
// less precisely would show.
var pauseBase = time.Date(2030, 1, 2, 3, 4, 5, 123_456_789, time.UTC)

// pausedRun is a waiting run created at base+created that expires at base+expires.
func pausedRun(id, user string, created, expires time.Duration) store.PausedRun {
	return store.PausedRun{ID: id, UserID: user, Agent: "shop", Status: store.PauseWaiting, Version: 1,
		Created: pauseBase.Add(created), Expires: pauseBase.Add(expires),
		State: fmt.Appendf(nil, `{"run":%q,"note":"等待审批\u2028"}`, id)}
}

// samePaused compares two records field by field: times by the instant, not the
// location, and the state byte for byte.
func samePaused(a, b store.PausedRun) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Agent == b.Agent && a.Status == b.Status && a.Version == b.Version &&
		a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires) && bytes.Equal(a.State, b.State)
}

// checkPaused fails unless the store holds want under its id.
func checkPaused(t testing.TB, p store.PausedRuns, want store.PausedRun) {
	t.Helper()
	got, err := p.PausedRun(ctx, want.ID)
	if err != nil || !samePaused(got, want) {
		t.Errorf("PausedRun(%q) = %+v, %v\nwant %+v", want.ID, got, err, want)
	}
}

// checkNoPaused fails unless the store has no run of the id.
func checkNoPaused(t testing.TB, p store.PausedRuns, id string) {
	t.Helper()
	if got, err := p.PausedRun(ctx, id); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("PausedRun(%q) = %+v, %v; want ErrRunNotFound", id, got, err)
	}
}

// pausedIDs lists the ids of the runs q selects, checking each against the store's
// own record: a list returns whole records, state included.
func pausedIDs(t testing.TB, p store.PausedRuns, q store.PausedQuery) []string {
	t.Helper()
	runs, err := p.PausedRuns(ctx, q)
	if err != nil {
		t.Fatalf("PausedRuns(%+v): %v", q, err)
	}
	ids := []string{}
	for _, r := range runs {
		if one, err := p.PausedRun(ctx, r.ID); err != nil || !samePaused(r, one) {
			t.Errorf("PausedRuns(%+v) lists %+v; PausedRun has %+v, %v", q, r, one, err)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// A paused run committed on its own — no conversation, no messages, no facts — comes
// back field for field, whatever the location of its times; an unknown id is
// ErrRunNotFound.
func testPausedRoundTrip(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	checkNoPaused(t, p, "run_1")
	want := pausedRun("run_1", "u1", 0, time.Hour)
	want.Created = want.Created.In(time.FixedZone("UTC+8", 8*3600))
	want.State = []byte("{\"b\":\"\\u0000\xff\",\"a\":[1, 2 ]}") // not canonical JSON, nor valid UTF-8: kept as is
	rec := want
	rec.State = slices.Clone(want.State)
	commit(t, s, store.Record{UserID: "u1", Pause: &rec})
	rec.State[0] = 'X' // the store keeps its own copy
	checkPaused(t, p, want)
	got, _ := p.PausedRun(ctx, "run_1")
	got.State[0] = 'Y'
	checkPaused(t, p, want)
	checkNoPaused(t, p, "run_2")
	checkNoPaused(t, p, "run_")
	// Zero times and no state come back as such.
	bare := store.PausedRun{ID: "run:%3A", UserID: "u:1%", Version: 1}
	commit(t, s, store.Record{UserID: "u:1%", Pause: &bare})
	checkPaused(t, p, bare)
	if got, _ := p.PausedRun(ctx, bare.ID); !got.Created.IsZero() || !got.Expires.IsZero() || len(got.State) != 0 {
		t.Errorf("a bare run reads back as %+v", got)
	}
	if ids, _ := s.Conversations(ctx, "u1"); len(ids) != 0 {
		t.Errorf("a pause outside a conversation created %v", ids)
	}
}

// A run that resumed and pauses again replaces its claimed record (at the version
// before its own) with exactly the one given, even one of another user; the old
// user's list loses it.
func testPausedReplace(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	first := pausedRun("r1", "u1", 0, time.Hour)
	commit(t, s, store.Record{UserID: "u1", Pause: &first})
	claimed := first
	claimed.Version, claimed.Status = 2, store.PauseResuming
	if err := p.UpdatePaused(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	second := store.PausedRun{ID: "r1", UserID: "u2", Agent: "other", Status: store.PauseWaiting, Version: 3,
		Created: pauseBase.Add(time.Minute), Expires: pauseBase.Add(time.Second), State: []byte(`{}`)}
	commit(t, s, store.Record{UserID: "u2", Pause: &second})
	checkPaused(t, p, second)
	if ids := pausedIDs(t, p, store.PausedQuery{UserID: "u1"}); len(ids) != 0 {
		t.Errorf("the old user still lists %q", ids)
	}
	if ids := pausedIDs(t, p, store.PausedQuery{UserID: "u2"}); !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("the new user lists %q", ids)
	}
	if ids := pausedIDs(t, p, store.PausedQuery{ExpiresBefore: pauseBase.Add(time.Hour)}); !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("expiring before the old expiry: %q", ids)
	}
}

// A pause is written with the rest of its run's record: turn, entities and facts.
func testPausedWithConversation(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	run := pausedRun("r1", "u1", 0, time.Hour)
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, true), Pause: &run,
		Seen:  map[string][]string{"orders": {"A1"}},
		Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	checkPaused(t, p, run)
	if c, err := s.Conversation(ctx, "c1", 10); err != nil || c.Turns != 1 || c.User != "u1" || len(c.Messages) != 4 {
		t.Errorf("conversation %+v, %v", c, err)
	}
	if found, err := s.Seen(ctx, "c1", "orders", "A1"); !found || err != nil {
		t.Errorf("seen A1: %v, %v", found, err)
	}
	if facts, _ := s.Facts(ctx, "u1"); valueOf(facts, "k") != "v" {
		t.Errorf("facts %v", facts)
	}
}

// A commit to another user's conversation writes no pause and ends no paused run.
func testPausedForeign(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	commit(t, s, store.Record{UserID: "alice", Conversation: "c1", Messages: turn(1, false)})
	waiting := pausedRun("m0", "mallory", 0, time.Hour)
	commit(t, s, store.Record{UserID: "mallory", Pause: &waiting})
	run := pausedRun("m1", "mallory", 0, time.Hour)
	err := s.Commit(ctx, store.Record{UserID: "mallory", Conversation: "c1", Messages: turn(2, false), Pause: &run})
	if !errors.Is(err, store.ErrForeignConversation) {
		t.Fatalf("commit by another user: %v", err)
	}
	checkNoPaused(t, p, "m1")
	err = s.Commit(ctx, store.Record{UserID: "mallory", Conversation: "c1", Resumed: "m0", ResumedVersion: 1})
	if !errors.Is(err, store.ErrForeignConversation) {
		t.Fatalf("resuming commit by another user: %v", err)
	}
	checkPaused(t, p, waiting)
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
}

// Resumed deletes the paused run, at the version given, in the commit that writes the
// resumed execution's turn; a run resumed under its id may pause again in the same
// commit, with a record written as new whatever its version.
func testPausedResumed(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	r1, r2 := pausedRun("r1", "u1", 0, time.Hour), pausedRun("r2", "u1", time.Second, time.Hour)
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, false), Pause: &r1})
	commit(t, s, store.Record{UserID: "u1", Pause: &r2})
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(2, true), Resumed: "r1", ResumedVersion: 1,
		Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v"}}})
	checkNoPaused(t, p, "r1")
	checkPaused(t, p, r2)
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 2 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
	if ids := pausedIDs(t, p, store.PausedQuery{UserID: "u1"}); !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("u1 lists %q", ids)
	}
	if ids := pausedIDs(t, p, store.PausedQuery{ExpiresBefore: pauseBase.Add(2 * time.Hour)}); !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("expiring: %q", ids)
	}

	again := pausedRun("r2", "u1", time.Minute, 2*time.Hour)
	again.Version = 3
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Resumed: "r2", ResumedVersion: 1, Pause: &again})
	checkPaused(t, p, again)
	if ids := pausedIDs(t, p, store.PausedQuery{UserID: "u1"}); !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("u1 lists %q", ids)
	}
}

// snapshot is what a commit could have written: a conversation, a user's facts and
// conversations, and some paused runs.
type snapshot struct {
	conversation store.Conversation
	seen         map[string][]string
	facts        []store.Fact
	convs        []string
	paused       map[string]*store.PausedRun // nil for a run not stored
}

func takeSnapshot(t testing.TB, s store.Store, user, conversation string, paused ...string) snapshot {
	t.Helper()
	var snap snapshot
	var err error
	if snap.conversation, err = s.Conversation(ctx, conversation, 1000); err != nil {
		t.Fatal(err)
	}
	if snap.seen, err = s.SeenEntities(ctx, conversation); err != nil {
		t.Fatal(err)
	}
	if snap.facts, err = s.Facts(ctx, user); err != nil {
		t.Fatal(err)
	}
	if snap.convs, err = s.Conversations(ctx, user); err != nil {
		t.Fatal(err)
	}
	snap.paused = map[string]*store.PausedRun{}
	for _, id := range paused {
		switch r, err := implementing[store.PausedRuns](t, s).PausedRun(ctx, id); {
		case err == nil:
			snap.paused[id] = &r
		case errors.Is(err, store.ErrRunNotFound):
			snap.paused[id] = nil
		default:
			t.Fatal(err)
		}
	}
	return snap
}

func (a snapshot) equal(b snapshot) bool {
	if !reflect.DeepEqual(a.conversation, b.conversation) || !reflect.DeepEqual(a.seen, b.seen) ||
		!slices.Equal(a.convs, b.convs) || len(a.facts) != len(b.facts) || len(a.paused) != len(b.paused) {
		return false
	}
	for i := range a.facts {
		if x, y := a.facts[i], b.facts[i]; x.Key != y.Key || x.Value != y.Value || x.Source != y.Source || !x.Updated.Equal(y.Updated) {
			return false
		}
	}
	for id, x := range a.paused {
		y, ok := b.paused[id]
		if !ok || (x == nil) != (y == nil) || x != nil && !samePaused(*x, *y) {
			return false
		}
	}
	return true
}

// commitConflict fails unless committing rec fails with ErrPausedConflict and writes
// nothing: not its turn, entities or facts, nor any paused run.
func commitConflict(t testing.TB, s store.Store, what string, rec store.Record) {
	t.Helper()
	ids := []string{}
	if rec.Resumed != "" {
		ids = append(ids, rec.Resumed)
	}
	if rec.Pause != nil {
		ids = append(ids, rec.Pause.ID)
	}
	before := takeSnapshot(t, s, rec.UserID, rec.Conversation, ids...)
	if err := s.Commit(ctx, rec); !errors.Is(err, store.ErrPausedConflict) {
		t.Errorf("%s: commit = %v, want ErrPausedConflict", what, err)
	}
	if after := takeSnapshot(t, s, rec.UserID, rec.Conversation, ids...); !before.equal(after) {
		t.Errorf("%s: the failed commit wrote\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// A commit ends or writes a paused run only over the version it expects; otherwise
// it fails whole with ErrPausedConflict, so a slow execution whose claim was taken
// over cannot delete or overwrite the record of the one that took it.
func testPausedConflict(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	run, other := pausedRun("r1", "u1", 0, time.Hour), pausedRun("r2", "u1", time.Second, time.Hour)
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: turn(1, false), Pause: &run,
		Seen:  map[string][]string{"orders": {"A1"}},
		Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v", Source: "tool"}}})
	commit(t, s, store.Record{UserID: "u1", Pause: &other})
	// Execution A claims the run (version 2); B takes the claim over (version 3).
	claimA, claimB := run, run
	claimA.Version, claimA.Status, claimA.State = 2, store.PauseResuming, []byte(`{"claim":"A"}`)
	claimB.Version, claimB.Status, claimB.State = 3, store.PauseResuming, []byte(`{"claim":"B"}`)
	for _, c := range []store.PausedRun{claimA, claimB} {
		if err := p.UpdatePaused(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// What A's late commit would write with it: a turn, entities, facts.
	late := func(rec store.Record) store.Record {
		rec.UserID, rec.Conversation, rec.Messages = "u1", "c1", turn(2, true)
		rec.Seen = map[string][]string{"orders": {"B2"}, "cards": {"x"}}
		rec.Facts = []store.FactChange{{Op: store.FactSet, Key: "k", Value: "w"}, {Op: store.FactSet, Key: "k2", Value: "new"}}
		return rec
	}
	repause := func(id string, version int) *store.PausedRun {
		r := pausedRun(id, "u1", time.Minute, 2*time.Hour)
		r.Version, r.State = version, []byte(`{"late":true}`)
		return &r
	}
	commitConflict(t, s, "Resumed at a stale version", late(store.Record{Resumed: "r1", ResumedVersion: 2}))
	commitConflict(t, s, "Resumed at a later version", late(store.Record{Resumed: "r1", ResumedVersion: 4}))
	commitConflict(t, s, "Resumed of a missing run", late(store.Record{Resumed: "never", ResumedVersion: 1}))
	commitConflict(t, s, "Pause over a taken-over claim", late(store.Record{Pause: repause("r1", 3)}))
	commitConflict(t, s, "Pause at a later version", late(store.Record{Pause: repause("r1", 5)}))
	commitConflict(t, s, "Pause at the stored version", late(store.Record{Pause: repause("r1", 3)}))
	commitConflict(t, s, "a new Pause over a stored run", late(store.Record{Pause: repause("r2", 1)}))
	commitConflict(t, s, "a new Pause over a claimed run", late(store.Record{Pause: repause("r1", 1)}))
	commitConflict(t, s, "a Pause of a missing run at version 2", late(store.Record{Pause: repause("new", 2)}))
	commitConflict(t, s, "a stale Resumed with a good Pause", late(store.Record{Resumed: "r1", ResumedVersion: 2, Pause: repause("new", 1)}))
	commitConflict(t, s, "a good Resumed with a bad Pause", late(store.Record{Resumed: "r1", ResumedVersion: 3, Pause: repause("r2", 1)}))
	commitConflict(t, s, "a stale Resumed pausing again under its id", late(store.Record{Resumed: "r1", ResumedVersion: 2, Pause: repause("r1", 1)}))
	checkPaused(t, p, claimB)
	checkPaused(t, p, other)
	checkNoPaused(t, p, "new")
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 1 || valueOf(facts, "k") != "v" {
		t.Errorf("facts %v", facts)
	}
	if ids := pausedIDs(t, p, store.PausedQuery{UserID: "u1"}); !slices.Equal(ids, []string{"r2", "r1"}) {
		t.Errorf("u1 lists %q", ids)
	}

	// B pauses again over its claim, then resumes and ends the run.
	again := repause("r1", 4)
	commit(t, s, late(store.Record{Pause: again}))
	checkPaused(t, p, *again)
	commitConflict(t, s, "Resumed at the claim's version after a re-pause", store.Record{UserID: "u1", Resumed: "r1", ResumedVersion: 3})
	commit(t, s, store.Record{UserID: "u1", Resumed: "r1", ResumedVersion: 4})
	checkNoPaused(t, p, "r1")
	commitConflict(t, s, "Resumed of a run already ended", store.Record{UserID: "u1", Conversation: "c1", Resumed: "r1", ResumedVersion: 4})
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 2 {
		t.Errorf("conversation has %d turns", c.Turns)
	}
	if facts, _ := s.Facts(ctx, "u1"); valueOf(facts, "k") != "w" || valueOf(facts, "k2") != "new" {
		t.Errorf("facts %v", facts)
	}
}

// Of commits ending or re-pausing a run from the same version at once exactly one
// succeeds, turn and all; the others fail with ErrPausedConflict and write nothing.
func testPausedCommitRace(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	const n = 8
	for round := range 4 {
		id := fmt.Sprint("r", round)
		run := pausedRun(id, "u1", 0, time.Hour)
		commit(t, s, store.Record{UserID: "u1", Pause: &run})
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				rec := store.Record{UserID: "u1", Conversation: fmt.Sprintf("c%d-%d", round, i), Messages: turn(i, false),
					Facts: []store.FactChange{{Op: store.FactSet, Key: fmt.Sprintf("k%d-%d", round, i), Value: "v"}}}
				if round%2 == 0 {
					rec.Resumed, rec.ResumedVersion = id, 1
				} else {
					mine := run
					mine.Version, mine.State = 2, fmt.Appendf(nil, `{"winner":%d}`, i)
					rec.Pause = &mine
				}
				<-start
				errs[i] = s.Commit(ctx, rec)
			})
		}
		close(start)
		wg.Wait()
		winner := soleWinner(t, round, "committer", errs)
		if round%2 == 0 {
			checkNoPaused(t, p, id)
		} else {
			want := run
			want.Version, want.State = 2, fmt.Appendf(nil, `{"winner":%d}`, winner)
			checkPaused(t, p, want)
		}
		facts, _ := s.Facts(ctx, "u1")
		for i := range n {
			c, _ := s.Conversation(ctx, fmt.Sprintf("c%d-%d", round, i), 10)
			wrote := c.Turns != 0 || valueOf(facts, fmt.Sprintf("k%d-%d", round, i)) != ""
			if wrote != (i == winner) {
				t.Errorf("round %d: committer %d (winner %d) wrote %v: turns %d", round, i, winner, wrote, c.Turns)
			}
		}
	}
}

// UpdatePaused replaces the run only over the version before its own.
func testPausedUpdate(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	run := pausedRun("r1", "u1", 0, time.Hour)
	if err := p.UpdatePaused(ctx, run); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("updating a run never paused: %v", err)
	}
	checkNoPaused(t, p, "r1")
	commit(t, s, store.Record{UserID: "u1", Pause: &run})
	next := run
	next.Version, next.Status, next.State = 2, store.PauseResuming, []byte(`{"decided":true}`)
	next.Expires = pauseBase.Add(time.Minute)
	if err := p.UpdatePaused(ctx, next); err != nil {
		t.Fatal(err)
	}
	checkPaused(t, p, next)
	for _, v := range []int{1, 2, 4, 0} {
		stale := next
		stale.Version, stale.State = v, []byte(`{"stale":true}`)
		if err := p.UpdatePaused(ctx, stale); !errors.Is(err, store.ErrPausedConflict) {
			t.Errorf("update to version %d over version 2: %v", v, err)
		}
	}
	checkPaused(t, p, next)
	if ids := pausedIDs(t, p, store.PausedQuery{ExpiresBefore: pauseBase.Add(2 * time.Minute)}); !slices.Equal(ids, []string{"r1"}) {
		t.Errorf("the new expiry is not listed: %q", ids)
	}
	commit(t, s, store.Record{UserID: "u1", Resumed: "r1", ResumedVersion: 2})
	next.Version = 3
	if err := p.UpdatePaused(ctx, next); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("updating a resumed run: %v", err)
	}
	checkNoPaused(t, p, "r1")
}

// Of processes updating a run from the same version at once exactly one succeeds; the
// others learn that they lost.
func testPausedUpdateRace(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	const n = 8
	for round := range 3 {
		run := pausedRun(fmt.Sprint("r", round), "u1", 0, time.Hour)
		commit(t, s, store.Record{UserID: "u1", Pause: &run})
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				mine := run
				mine.Version, mine.State = 2, fmt.Appendf(nil, `{"winner":%d}`, i)
				<-start
				errs[i] = p.UpdatePaused(ctx, mine)
			})
		}
		close(start)
		wg.Wait()
		winner := soleWinner(t, round, "updater", errs)
		want := run
		want.Version, want.State = 2, fmt.Appendf(nil, `{"winner":%d}`, winner)
		checkPaused(t, p, want)
	}
}

// A user's runs come newest first, runs about to expire soonest first, ties by id —
// to the nanosecond, whatever precision a store's index keeps, and at whole seconds,
// whose RFC 3339 text is shorter.
func testPausedList(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	second := -time.Duration(pauseBase.Nanosecond()) // from pauseBase to its whole second
	runs := []store.PausedRun{
		pausedRun("w1", "u4", second, second+10*time.Hour),
		pausedRun("w2", "u4", second+500*time.Millisecond, second+10*time.Hour+time.Millisecond),
		pausedRun("r1", "u1", 0, 10*time.Minute),
		pausedRun("r2", "u1", time.Nanosecond, 5*time.Minute),
		pausedRun("r3", "u1", time.Nanosecond, 5*time.Minute+time.Nanosecond),
		pausedRun("r4", "u2", time.Hour, time.Minute),
		pausedRun("r5", "u1", -time.Hour, 2*time.Minute),
		pausedRun("r6", "u3", 0, 5*time.Minute-time.Nanosecond),
	}
	for i := range runs {
		commit(t, s, store.Record{UserID: runs[i].UserID, Pause: &runs[i]})
	}
	before := func(d time.Duration) time.Time { return pauseBase.Add(d) }
	for _, c := range []struct {
		q    store.PausedQuery
		want []string
	}{
		{store.PausedQuery{UserID: "u1"}, []string{"r2", "r3", "r1", "r5"}},
		{store.PausedQuery{UserID: "u1", Limit: 1}, []string{"r2"}},
		{store.PausedQuery{UserID: "u1", Limit: 3}, []string{"r2", "r3", "r1"}},
		{store.PausedQuery{UserID: "u1", Limit: 10}, []string{"r2", "r3", "r1", "r5"}},
		{store.PausedQuery{UserID: "u2"}, []string{"r4"}},
		{store.PausedQuery{UserID: "nobody"}, []string{}},
		{store.PausedQuery{ExpiresBefore: before(5*time.Minute + time.Nanosecond)}, []string{"r4", "r5", "r6", "r2"}},
		{store.PausedQuery{ExpiresBefore: before(5*time.Minute + time.Nanosecond), Limit: 3}, []string{"r4", "r5", "r6"}},
		{store.PausedQuery{ExpiresBefore: before(5 * time.Minute)}, []string{"r4", "r5", "r6"}},
		{store.PausedQuery{ExpiresBefore: before(time.Minute)}, []string{}},
		{store.PausedQuery{ExpiresBefore: before(time.Hour), Limit: 2}, []string{"r4", "r5"}},
		{store.PausedQuery{ExpiresBefore: before(time.Hour)}, []string{"r4", "r5", "r6", "r2", "r3", "r1"}},
		{store.PausedQuery{UserID: "u1", ExpiresBefore: before(5*time.Minute + time.Nanosecond)}, []string{"r2", "r5"}},
		{store.PausedQuery{UserID: "u1", ExpiresBefore: before(time.Hour), Limit: 1}, []string{"r2"}},
		{store.PausedQuery{UserID: "u2", ExpiresBefore: before(time.Minute)}, []string{}},
		{store.PausedQuery{UserID: "u4"}, []string{"w2", "w1"}},
		{store.PausedQuery{ExpiresBefore: before(second + 10*time.Hour + time.Millisecond)}, []string{"r4", "r5", "r6", "r2", "r3", "r1", "w1"}},
		{store.PausedQuery{}, []string{"r4", "r5", "r6", "r2", "r3", "r1", "w1", "w2"}},
	} {
		if got := pausedIDs(t, p, c.q); !slices.Equal(got, c.want) {
			t.Errorf("PausedRuns(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
}

// Forget deletes the user's paused runs; DeleteConversation leaves them.
func testPausedForget(t *testing.T, s store.Store) {
	p := implementing[store.PausedRuns](t, s)
	runs := []store.PausedRun{pausedRun("r1", "u1", 0, time.Hour), pausedRun("r2", "u1", time.Second, time.Hour),
		pausedRun("r3", "u2", 0, time.Hour)}
	for i := range runs {
		commit(t, s, store.Record{UserID: runs[i].UserID, Conversation: runs[i].UserID + "-c", Messages: turn(i, false), Pause: &runs[i]})
	}
	if err := s.DeleteConversation(ctx, "u1", "u1-c"); err != nil {
		t.Fatal(err)
	}
	checkPaused(t, p, runs[0])
	checkPaused(t, p, runs[1])
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	checkNoPaused(t, p, "r1")
	checkNoPaused(t, p, "r2")
	checkPaused(t, p, runs[2])
	if ids := pausedIDs(t, p, store.PausedQuery{UserID: "u1"}); len(ids) != 0 {
		t.Errorf("u1 still lists %q", ids)
	}
	if ids := pausedIDs(t, p, store.PausedQuery{ExpiresBefore: pauseBase.Add(2 * time.Hour)}); !slices.Equal(ids, []string{"r3"}) {
		t.Errorf("expiring: %q", ids)
	}
	if c, _ := s.Conversation(ctx, "u2-c", 10); c.Turns != 1 {
		t.Errorf("another user's conversation went too: %+v", c)
	}
}

// soleWinner is the index of the one racer whose call succeeded; every other must
// have lost with ErrPausedConflict.
func soleWinner(t *testing.T, round int, who string, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("round %d: %ss %d and %d both won", round, who, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrPausedConflict):
			t.Errorf("round %d: %s %d: %v", round, who, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("round %d: no %s won: %v", round, who, errs)
	}
	return winner
}
