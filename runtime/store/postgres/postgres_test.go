package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentrun/agentrun/internal/pgdb"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/storetest"
)

var ctx = context.Background()

// The multi-process tests re-run this test binary as a child: childEnv names what the
// child does, childURLEnv the store it does it to.
const (
	childEnv    = "AGENTRUN_PG_CHILD" // "loop" or "migrate"
	childURLEnv = "AGENTRUN_PG_URL"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := child(role, os.Getenv(childURLEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is the body of a child process. "loop" commits turns until killed, printing
// the index of each after its commit returned; "migrate" opens the store once its
// parent says go, so that two children migrate a new schema at once.
func child(role, u string) error {
	switch role {
	case "loop":
		s, err := Open(ctx, u, 0)
		if err != nil {
			return err
		}
		defer s.Close()
		for i := 0; ; i++ {
			if err := s.Commit(ctx, record("k", i)); err != nil {
				return err
			}
			fmt.Println(i)
		}
	case "migrate":
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		m, err := Migrate(ctx, u)
		if err != nil {
			return err
		}
		fmt.Println(m.Applied)
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// freshSchema is a schema of the test's own (see pgtest).
func freshSchema(tb testing.TB) (string, *pgdb.DB) { return pgtest.Schema(tb) }

func openFresh(tb testing.TB, ttl time.Duration) (*Store, *pgdb.DB, string) {
	tb.Helper()
	u, db := freshSchema(tb)
	s, err := Open(ctx, u, ttl)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, db, u
}

func commit(tb testing.TB, s store.Store, rec store.Record) {
	tb.Helper()
	if err := s.Commit(ctx, rec); err != nil {
		tb.Fatal(err)
	}
}

// record is turn i of the named writer: four messages that must stay together, a
// fact appended to a log shared by all writers, and a seen entity.
func record(name string, i int) store.Record {
	id := fmt.Sprintf("%s-%d", name, i)
	return store.Record{
		UserID:       "u1",
		Conversation: "shared",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "question " + id},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call-" + id, Name: "lookup", Arguments: `{"q":"` + id + `"}`}},
				Reasoning: &model.Reasoning{Field: "reasoning_content", Text: "look " + id + " up"}},
			{Role: model.RoleTool, ToolCallID: "call-" + id, Content: strings.Repeat("result "+id+" ", 200)},
			{Role: model.RoleAssistant, Content: "answer " + id},
		},
		Seen:  map[string][]string{"orders": {id}},
		Facts: []store.FactChange{{Op: store.FactAppend, Key: "log", Value: id, Source: "tool"}},
	}
}

// turnIDs checks that the conversation is made of whole turns written by record and
// returns their ids in order.
func turnIDs(t *testing.T, c store.Conversation) []string {
	t.Helper()
	if len(c.Messages) != 4*c.Turns {
		t.Fatalf("%d messages for %d turns", len(c.Messages), c.Turns)
	}
	var ids []string
	for i := 0; i < len(c.Messages); i += 4 {
		q, call, res, ans := c.Messages[i], c.Messages[i+1], c.Messages[i+2], c.Messages[i+3]
		id, ok := strings.CutPrefix(q.Content, "question ")
		if !ok || q.Role != model.RoleUser || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call-"+id ||
			call.Reasoning == nil || call.Reasoning.Text != "look "+id+" up" ||
			res.ToolCallID != "call-"+id || !strings.HasPrefix(res.Content, "result "+id+" ") || ans.Content != "answer "+id {
			t.Fatalf("turn %d is not whole: %+v", i/4, c.Messages[i:i+4])
		}
		ids = append(ids, id)
	}
	return ids
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _, _ := openFresh(t, 0)
		return s
	})
}

// The sweep deletes the expired blobs, and only those; the first PutBlob in a
// process starts one.
func TestBlobSweep(t *testing.T) {
	s, db, _ := openFresh(t, 0)
	for _, key := range []string{"old1", "old2"} {
		if err := s.PutBlob(ctx, key, []byte("x"), time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutBlob(ctx, "kept", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(ctx, "new", []byte("z"), time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	s.sweepBlobs(ctx)
	rows, err := db.Pool.Query(ctx, `SELECT key FROM blobs ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kept", "new"}; !slices.Equal(keys, want) {
		t.Errorf("rows %q, want %q", keys, want)
	}
	if s.blobsSwept.Load() == 0 {
		t.Error("PutBlob started no sweep")
	}
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
		{"no server", "postgres://user:s3cret@" + closed + "/x?connect_timeout=2&sslmode=disable", "postgres"},
		{"wrong scheme", "mysql://user:s3cret@localhost/x", "not a postgres:// URL"},
		{"bad schema", "postgres://user:s3cret@localhost/x?schema=Robert'%3B", "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.url, 0)
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

// The schema is at the latest version, recorded once, and opening again applies
// nothing.
func TestMigrations(t *testing.T) {
	s, db, u := openFresh(t, 0)
	var version int
	if err := db.Pool.QueryRow(ctx, `SELECT version FROM agentrun_migrations WHERE component = $1`, component).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != Version {
		t.Errorf("version %d, want %d", version, Version)
	}
	m, err := Migrate(ctx, u)
	if err != nil || m.Applied != 0 || m.Version != Version || m.Schema != s.Schema() {
		t.Errorf("Migrate again: %+v, %v", m, err)
	}
	// A schema written by a newer agentrun is refused.
	if _, err := db.Pool.Exec(ctx, `UPDATE agentrun_migrations SET version = version + 1 WHERE component = $1`, component); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, u, 0); !errors.Is(err, pgdb.ErrNewerSchema) {
		if err == nil {
			s2.Close()
		}
		t.Errorf("Open of a newer schema: %v", err)
	}
}

// Two pools and two processes migrating a new schema at once both succeed; the
// migrations are applied once.
func TestMigrateAtOnce(t *testing.T) {
	t.Run("pools", func(t *testing.T) {
		u, db := freshSchema(t)
		const n = 4
		applied := make(chan int, n)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				m, err := Migrate(ctx, u)
				applied <- m.Applied
				errs <- err
			})
		}
		wg.Wait()
		close(applied)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		total := 0
		for a := range applied {
			total += a
		}
		if total != Version {
			t.Errorf("%d migrations applied in all, want %d", total, Version)
		}
		checkVersion(t, db)
	})
	t.Run("processes", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts processes")
		}
		u, db := freshSchema(t)
		var cmds []*exec.Cmd
		var outs []*bufio.Scanner
		var gos []interface{ Close() error }
		for range 2 {
			cmd := startChild(t, "migrate", u)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := bufio.NewScanner(stdout)
			if !out.Scan() || out.Text() != "ready" {
				t.Fatalf("child: %q", out.Text())
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
			gos = append(gos, stdin)
		}
		for _, stdin := range gos {
			fmt.Fprintln(stdin.(interface{ Write([]byte) (int, error) }), "go")
			stdin.Close()
		}
		total := 0
		for i, cmd := range cmds {
			var applied int
			if outs[i].Scan() {
				fmt.Sscan(outs[i].Text(), &applied)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v", err)
			}
			total += applied
		}
		if total != Version {
			t.Errorf("%d migrations applied in all, want %d", total, Version)
		}
		checkVersion(t, db)
	})
}

func checkVersion(t *testing.T, db *pgdb.DB) {
	t.Helper()
	var version, rows int
	if err := db.Pool.QueryRow(ctx, `SELECT max(version), count(*) FROM agentrun_migrations WHERE component = $1`, component).Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if version != Version || rows != 1 {
		t.Errorf("version %d in %d rows, want %d in 1", version, rows, Version)
	}
}

func startChild(t *testing.T, role, u string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, childURLEnv+"="+u)
	cmd.Stderr = os.Stderr
	return cmd
}

// Twelve runs committing to one conversation at once, each through its own pool as
// twelve processes would, lose nothing: every turn whole, every fact append and
// every entity there.
func TestTwelveConcurrentCommits(t *testing.T) {
	s, _, u := openFresh(t, 0)
	const n = 12
	stores := make([]*Store, n)
	for i := range stores {
		var err error
		if stores[i], err = Open(ctx, u, 0); err != nil {
			t.Fatal(err)
		}
		defer stores[i].Close()
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs <- stores[i].Commit(ctx, record(fmt.Sprint("w", i), 0))
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Conversation(ctx, "shared", n)
	if err != nil {
		t.Fatal(err)
	}
	if c.Turns != n {
		t.Fatalf("%d turns, want %d", c.Turns, n)
	}
	ids := map[string]bool{}
	for _, id := range turnIDs(t, c) {
		ids[id] = true
	}
	if len(ids) != n {
		t.Errorf("%d distinct turns, want %d", len(ids), n)
	}
	facts, err := s.Facts(ctx, "u1")
	if err != nil || len(facts) != 1 {
		t.Fatalf("facts %v, %v", facts, err)
	}
	if got := len(strings.Split(facts[0].Value, "\n")); got != n {
		t.Errorf("the shared log kept %d of %d appends", got, n)
	}
	seen, err := s.SeenEntities(ctx, "shared", "orders")
	if err != nil || len(seen["orders"]) != n {
		t.Errorf("%d seen entities, want %d (%v)", len(seen["orders"]), n, err)
	}
}

// A process killed in the middle of a stream of commits leaves every turn whose
// commit had returned, each whole.
func TestKilledProcessLosesNothingCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	s, _, u := openFresh(t, 0)
	cmd := startChild(t, "loop", u)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var printed []string
	for len(printed) < 25 && lines.Scan() {
		printed = append(printed, lines.Text())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no chance to clean up
		t.Fatal(err)
	}
	for lines.Scan() {
		printed = append(printed, lines.Text())
	}
	cmd.Wait()
	if len(printed) < 25 {
		t.Fatalf("the child printed only %d commits", len(printed))
	}
	// The server notices the dead connection and rolls its transaction back; until
	// then its row lock holds the conversation, which the reads do not wait for.
	c, err := s.Conversation(ctx, "shared", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	ids := turnIDs(t, c)
	// The child may have committed one more turn than it printed, never fewer.
	if len(ids) < len(printed) || len(ids) > len(printed)+1 {
		t.Fatalf("%d turns stored, %d printed", len(ids), len(printed))
	}
	for i, p := range printed {
		if ids[i] != "k-"+p {
			t.Fatalf("turn %d is %s, the child printed %s", i, ids[i], p)
		}
	}
	facts, _ := s.Facts(ctx, "u1")
	if got := len(strings.Split(facts[0].Value, "\n")); got != len(ids) {
		t.Errorf("%d fact appends for %d turns: a commit was split", got, len(ids))
	}
	// And the store takes commits again once the server has let go of the lock.
	commit(t, s, record("after", 0))
}

// Forget leaves no row of the user in any table of the schema: those with a
// user_id column, and those with a conversation_id, through the user's
// conversations. Every table must be one or the other (or the migrations' own), so
// a table added later cannot escape the check.
func TestForgetLeavesNoRows(t *testing.T) {
	s, db, _ := openFresh(t, 0)
	commit(t, s, record("w", 0))
	commit(t, s, record("w", 1))
	commit(t, s, store.Record{UserID: "u1", Conversation: "second", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
		Seen: map[string][]string{"tickets": {"T1"}}, Pause: &store.PausedRun{ID: "run1", UserID: "u1", Agent: "a",
			Status: store.PauseWaiting, Version: 1, Created: time.Now(), Expires: time.Now().Add(time.Hour), State: []byte(`{}`)}})
	keep := store.Record{UserID: "u2", Conversation: "theirs", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
		Seen: map[string][]string{"orders": {"B1"}}, Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v"}}}
	commit(t, s, keep)
	convs, err := s.Conversations(ctx, "u1")
	if err != nil || len(convs) != 2 {
		t.Fatalf("conversations %v, %v", convs, err)
	}
	count := func(user string, convs []string) map[string]int {
		rows, err := db.Pool.Query(ctx, `SELECT table_name, bool_or(column_name = 'user_id'), bool_or(column_name = 'conversation_id')
			FROM information_schema.columns WHERE table_schema = $1 GROUP BY table_name ORDER BY table_name`, db.Schema)
		if err != nil {
			t.Fatal(err)
		}
		type table struct {
			name         string
			user, byConv bool
		}
		tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
			var tb table
			return tb, r.Scan(&tb.name, &tb.user, &tb.byConv)
		})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, tb := range tables {
			name := pgx.Identifier{tb.name}.Sanitize()
			var n int
			switch {
			case tb.user:
				err = db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+name+` WHERE user_id = $1`, user).Scan(&n)
			case tb.byConv:
				err = db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+name+` WHERE conversation_id = ANY($1)`, convs).Scan(&n)
			case tb.name == "agentrun_migrations":
				continue
			case tb.name == "blobs":
				// store.Blobs are keyed by content, not by user: they leave by their
				// ttl, which their writer must keep short for what a user may forget.
				continue
			case tb.name == "commits":
				// Commit keys (store.Record.Key) name commits, not users, and hold
				// no user's data: they leave after a week.
				continue
			default:
				t.Fatalf("table %s has neither user_id nor conversation_id: Forget's check cannot see it", tb.name)
			}
			if err != nil {
				t.Fatal(err)
			}
			out[tb.name] = n
		}
		return out
	}
	before := count("u1", convs)
	for _, table := range []string{"conversations", "messages", "seen", "seen_kinds", "facts", "paused_runs"} {
		if before[table] == 0 {
			t.Errorf("no row of the user in %s before Forget: the check proves nothing there", table)
		}
	}
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	for table, n := range count("u1", convs) {
		if n != 0 {
			t.Errorf("%d rows of the user left in %s", n, table)
		}
	}
	others := count("u2", []string{"theirs"})
	for _, table := range []string{"conversations", "messages", "seen", "seen_kinds", "facts"} {
		if others[table] == 0 {
			t.Errorf("Forget deleted the other user's rows in %s", table)
		}
	}
}

// With a TTL a conversation is gone once it has not been committed to for that
// long: the reads skip it, another user may start one under its id, and the user's
// facts stay.
func TestTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	s, db, _ := openFresh(t, ttl)
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
		Seen: map[string][]string{"orders": {"A1"}}, Facts: []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v"}}})
	if c, _ := s.Conversation(ctx, "c1", 10); c.Turns != 1 {
		t.Fatalf("fresh conversation: %+v", c)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	if c, err := s.Conversation(ctx, "c1", 10); err != nil || c.Turns != 0 || c.User != "" {
		t.Errorf("expired conversation: %+v, %v", c, err)
	}
	if found, err := s.Seen(ctx, "c1", "orders", "A1"); found || err != nil {
		t.Errorf("expired entity seen: %v, %v", found, err)
	}
	if seen, err := s.SeenEntities(ctx, "c1"); len(seen) != 0 || err != nil {
		t.Errorf("expired entities: %v, %v", seen, err)
	}
	if ids, err := s.Conversations(ctx, "u1"); len(ids) != 0 || err != nil {
		t.Errorf("expired conversations listed: %v, %v", ids, err)
	}
	if err := s.DeleteConversation(ctx, "u1", "c1"); !errors.Is(err, store.ErrConversationNotFound) {
		t.Errorf("delete of an expired conversation: %v", err)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 1 {
		t.Errorf("facts expired: %v", facts)
	}
	commit(t, s, store.Record{UserID: "u2", Conversation: "c2", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}}})
	time.Sleep(ttl + 100*time.Millisecond)
	s.swept.Store(0) // sweep on the next commit
	// Many expired conversations: the background sweep deletes them in batches.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO conversations(id, user_id, turns, updated_at)
		SELECT 'old-' || g, 'u3', 0, now() - interval '1 hour' FROM generate_series(1, $1::int) g`, 3*sweepBatch+7); err != nil {
		t.Fatal(err)
	}
	commit(t, s, store.Record{UserID: "u2", Conversation: "c2", Messages: []model.Message{{Role: model.RoleUser, Content: "again"}}})
	if c, _ := s.Conversation(ctx, "c2", 10); c.Turns != 1 || c.User != "u2" || c.Messages[0].Content != "again" {
		t.Errorf("a commit to an expired conversation starts it again: %+v", c)
	}
	s.upkeep.Wait() // the sweep runs off the commit
	var n, old int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d messages left after the sweep, want 1 (%v)", n, err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM conversations WHERE user_id = 'u3'`).Scan(&old); err != nil || old != 0 {
		t.Errorf("%d expired conversations left after the sweep (%v)", old, err)
	}
}

// BenchmarkLoadSave is one run's use of the store: see storetest.Bench.
func BenchmarkLoadSave(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, _, _ := openFresh(b, 0)
		return s
	})
}

// PostgreSQL's text holds no NUL byte and only UTF-8; a tool output carrying
// either is stored with U+FFFD in their place rather than failing the commit and
// losing the exchange.
func TestNULIsStorable(t *testing.T) {
	s, _, _ := openFresh(t, 0)
	commit(t, s, store.Record{UserID: "u1", Conversation: "c1",
		Messages: []model.Message{{Role: model.RoleUser, Content: "q\x00"}, {Role: model.RoleAssistant, Content: "caf\xe9"}},
		Facts:    []store.FactChange{{Op: store.FactSet, Key: "k", Value: "v\x00w"}},
		Seen:     map[string][]string{"orders": {"A\x001"}}})
	c, err := s.Conversation(ctx, "c1", 10)
	if err != nil || len(c.Messages) != 2 || c.Messages[0].Content != "q\uFFFD" || c.Messages[1].Content != "caf\uFFFD" {
		t.Fatalf("%v %+v", err, c)
	}
	if facts, _ := s.Facts(ctx, "u1"); len(facts) != 1 || facts[0].Value != "v\uFFFDw" {
		t.Fatalf("facts %+v", facts)
	}
	if found, err := s.Seen(ctx, "c1", "orders", "A\x001"); !found || err != nil {
		t.Fatalf("the entity with a NUL is not found: %v %v", found, err)
	}
}
