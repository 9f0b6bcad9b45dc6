package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sqlitedb"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/storetest"
)

var ctx = context.Background()

// The multi-process tests re-run this test binary as a child: childEnv names what the
// child does, the other variables its arguments.
const (
	childEnv     = "AGENTRUN_SQLITE_CHILD" // "commit" or "loop"
	childPathEnv = "AGENTRUN_SQLITE_PATH"
	childNameEnv = "AGENTRUN_SQLITE_NAME"
	childTurnEnv = "AGENTRUN_SQLITE_TURNS"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		if err := child(role); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is the body of a child process. "commit" commits n turns named after the
// child to one conversation once its parent says go; "loop" commits turns until
// killed, printing the index of each after its commit returned.
func child(role string) error {
	s, err := Open(os.Getenv(childPathEnv))
	if err != nil {
		return err
	}
	defer s.Close()
	name := os.Getenv(childNameEnv)
	switch role {
	case "commit":
		n, err := strconv.Atoi(os.Getenv(childTurnEnv))
		if err != nil {
			return err
		}
		// Say the store is open and wait for the word, so the writers start together.
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		for i := range n {
			if err := s.Commit(ctx, record(name, i)); err != nil {
				return err
			}
			// A real run works between commits. Without a pause one writer takes the
			// lock back at once and the other, asleep in its busy handler, waits
			// until the first is done: nothing would overlap.
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	case "loop":
		for i := 0; ; i++ {
			if err := s.Commit(ctx, record(name, i)); err != nil {
				return err
			}
			fmt.Println(i)
		}
	}
	return fmt.Errorf("unknown role %q", role)
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
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call-" + id, Name: "lookup", Arguments: `{"q":"` + id + `"}`}}},
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
			res.ToolCallID != "call-"+id || !strings.HasPrefix(res.Content, "result "+id+" ") || ans.Content != "answer "+id {
			t.Fatalf("turn %d is not whole: %+v", i/4, c.Messages[i:i+4])
		}
		ids = append(ids, id)
	}
	return ids
}

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentrun.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestOpenCreatesDirectoriesAndEscapesPath(t *testing.T) {
	// Characters that would end the path in a URI or start DSN parameters.
	dir := filepath.Join(t.TempDir(), "a b", "c?_pragma=foo#%20&x")
	path := filepath.Join(dir, "my data.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, record("w", 0)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the database is not at the path given: %v", err)
	}
	if info.Size() == 0 {
		t.Errorf("the file at %s is empty", path)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("file mode %v, want 0600: conversations are private", mode)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "my data.db") {
			t.Errorf("stray file %q beside the database", e.Name())
		}
	}
}

func TestOpenRejectsEmptyPath(t *testing.T) {
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func userVersion(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMigrations(t *testing.T) {
	s, path := openTemp(t)
	if err := s.Commit(ctx, record("w", 0)); err != nil {
		t.Fatal(err)
	}
	if v := userVersion(t, s.read); v != len(migrations) {
		t.Errorf("user_version %d, want %d", v, len(migrations))
	}
	s.Close()

	// Opening again migrates nothing and keeps the data.
	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if c, err := s.Conversation(ctx, "shared", 10); err != nil || c.Turns != 1 {
		t.Errorf("after reopening: %+v, %v", c, err)
	}

	// A later migration is applied once, on top of the existing schema.
	more := append(slices.Clone(migrations), `CREATE TABLE extra (x TEXT)`)
	for range 2 {
		if err := sqlitedb.Migrate(ctx, s.write, more, 0); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	if v := userVersion(t, s.read); v != len(more) {
		t.Errorf("user_version %d after a new migration, want %d", v, len(more))
	}
	if _, err := s.read.Exec(`SELECT x FROM extra`); err != nil {
		t.Errorf("the new migration did not run: %v", err)
	}
	s.Close()

	// This agentrun knows fewer migrations than the file has: refuse it.
	_, err = Open(path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("opening a newer database: %v", err)
	}
	want := fmt.Sprintf("schema version %d, this agentrun knows up to %d", len(more), len(migrations))
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should name the file and say %q", err, want)
	}
}

// A version 1 file keeps its seen entities, in the order they were revealed, and
// their counts, so the cap applies from the first commit after the upgrade.
func TestMigrationToOrderedSeen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", sqlitedb.FileURI(path)+"?"+sqlitedb.WriteParams)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitedb.Migrate(ctx, db, migrations[:1], 0); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO conversations VALUES('c1', 'u1', 0, '2025-01-01T00:00:00Z'), ('c2', 'u1', 0, '2025-01-01T00:00:00Z')`,
		`INSERT INTO seen(conversation_id, kind, value) VALUES('c1', 'orders', 'A3'), ('c2', 'orders', 'Z'), ('c1', 'cards', 'x'), ('c1', 'orders', 'A1'), ('c1', 'orders', 'A2')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := userVersion(t, s.read); v != len(migrations) {
		t.Errorf("user_version %d, want %d", v, len(migrations))
	}
	seen, err := s.SeenEntities(ctx, "c1")
	if want := map[string][]string{"orders": {"A3", "A1", "A2"}, "cards": {"x"}}; err != nil || !reflect.DeepEqual(seen, want) {
		t.Errorf("after the migration: %v, %v; want %v", seen, err, want)
	}
	if found, err := s.Seen(ctx, "c1", "orders", "A1"); !found || err != nil {
		t.Errorf("a migrated entity is not found: %v, %v", found, err)
	}
	if err := s.Commit(ctx, store.Record{UserID: "u1", Conversation: "c1", Seen: map[string][]string{"orders": {"A4"}}, MaxSeen: 3}); err != nil {
		t.Fatal(err)
	}
	seen, _ = s.SeenEntities(ctx, "c1", "orders")
	if want := []string{"A1", "A2", "A4"}; !slices.Equal(seen["orders"], want) {
		t.Errorf("the first capped commit: %v, want %v", seen["orders"], want)
	}
	if seen, _ := s.SeenEntities(ctx, "c2"); !slices.Equal(seen["orders"], []string{"Z"}) {
		t.Errorf("c2: %v", seen)
	}
}

func TestMigrationFailureLeavesNoTrace(t *testing.T) {
	s, _ := openTemp(t)
	bad := append(slices.Clone(migrations), `CREATE TABLE half (x TEXT)`, `NOT SQL`)
	if err := sqlitedb.Migrate(ctx, s.write, bad, 0); err == nil {
		t.Fatal("a broken migration succeeded")
	}
	if v := userVersion(t, s.read); v != len(migrations) {
		t.Errorf("user_version %d after a failed migration, want %d", v, len(migrations))
	}
	if _, err := s.read.Exec(`SELECT x FROM half`); err == nil {
		t.Error("a failed migration left its first step behind")
	}
}

func TestWALMode(t *testing.T) {
	s, path := openTemp(t)
	for name, db := range map[string]*sql.DB{"write": s.write, "read": s.read} {
		var mode string
		if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" {
			t.Errorf("%s connection: journal_mode %q", name, mode)
		}
		var fk int
		if err := db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
			t.Errorf("%s connection: foreign_keys %d, %v", name, fk, err)
		}
	}
	if err := s.Commit(ctx, record("w", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no write-ahead log: %v", err)
	}
}

// Forget leaves no rows behind, including the messages and seen entities that go by
// cascade.
func TestForgetLeavesNoRows(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Commit(ctx, record("w", 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"conversations", "messages", "seen", "seen_kinds", "facts"} {
		var n int
		if err := s.read.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows left in %s", n, table)
		}
	}
}

// DeleteConversation leaves no row of the conversation, including its messages and
// seen entities, which go by cascade; the user's facts and other conversation stay.
func TestDeleteConversationLeavesNoRows(t *testing.T) {
	s, _ := openTemp(t)
	for _, rec := range []store.Record{record("w", 0), record("w", 1)} {
		if err := s.Commit(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	keep := store.Record{UserID: "u1", Conversation: "other", Messages: []model.Message{{Role: model.RoleUser, Content: "q"}},
		Seen: map[string][]string{"orders": {"B1"}}}
	if err := s.Commit(ctx, keep); err != nil {
		t.Fatal(err)
	}
	id := record("w", 0).Conversation
	if err := s.DeleteConversation(ctx, "u1", id); err != nil {
		t.Fatal(err)
	}
	for table, column := range map[string]string{"conversations": "id", "messages": "conversation_id", "seen": "conversation_id", "seen_kinds": "conversation_id"} {
		var n int
		if err := s.read.QueryRow(`SELECT count(*) FROM `+table+` WHERE `+column+` = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of the deleted conversation left in %s", n, table)
		}
	}
	if facts, err := s.Facts(ctx, "u1"); err != nil || len(facts) != 1 {
		t.Errorf("the user's facts: %v, %v", facts, err)
	}
	if c, err := s.Conversation(ctx, "other", 10); err != nil || c.Turns != 1 {
		t.Errorf("the other conversation: %+v, %v", c, err)
	}
}

// Two stores on one file, as two runs in one process with separate connections
// would have: nothing is lost to SQLITE_BUSY.
func TestTwoStoresOneFile(t *testing.T) {
	s1, path := openTemp(t)
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	const n = 30
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() { errs <- s1.Commit(ctx, record("a", i)) })
		wg.Go(func() { errs <- s2.Commit(ctx, record("b", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s1.Conversation(ctx, "shared", 2*n)
	if err != nil {
		t.Fatal(err)
	}
	if ids := turnIDs(t, c); len(ids) != 2*n {
		t.Errorf("%d turns, want %d", len(ids), 2*n)
	}
}

func startChild(t *testing.T, role, path, name string, turns int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, childPathEnv+"="+path, childNameEnv+"="+name,
		childTurnEnv+"="+strconv.Itoa(turns))
	cmd.Stderr = os.Stderr
	return cmd
}

// Two processes commit to one conversation at once: every turn of each is there,
// whole, each process's turns in its own order, and no fact append is lost.
func TestConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	// Whether the two writers interleave is up to the scheduler; on a loaded machine
	// one may finish before the other starts. Try a few times before calling the
	// test unable to prove anything; every attempt checks that nothing was lost.
	for attempt := 1; ; attempt++ {
		switches := concurrentWriters(t)
		t.Logf("attempt %d: the writers took turns %d times", attempt, switches)
		if switches >= 2 {
			return
		}
		if attempt == 3 {
			t.Fatalf("the writers never overlapped in %d attempts, so this test proved nothing", attempt)
		}
	}
}

// concurrentWriters runs two processes that commit to one conversation at once and
// checks that every turn arrived whole and in each writer's order; it returns how
// often the writers took turns.
func concurrentWriters(t *testing.T) int {
	path := filepath.Join(t.TempDir(), "shared.db")
	const n = 40
	var cmds []*exec.Cmd
	var gos []io.WriteCloser
	for _, name := range []string{"a", "b"} {
		// Both open the new file at once, so they also race to create the schema.
		cmd := startChild(t, "commit", path, name, n)
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
		if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
			t.Fatalf("child %s: %q, %v", name, line, err)
		}
		cmds = append(cmds, cmd)
		gos = append(gos, stdin)
	}
	for _, stdin := range gos {
		fmt.Fprintln(stdin, "go")
		stdin.Close()
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Conversation(ctx, "shared", 2*n)
	if err != nil {
		t.Fatal(err)
	}
	if c.Turns != 2*n {
		t.Fatalf("%d turns, want %d", c.Turns, 2*n)
	}
	next := map[string]int{}
	switches, last := 0, ""
	for _, id := range turnIDs(t, c) {
		name, i, _ := strings.Cut(id, "-")
		if last != "" && name != last {
			switches++
		}
		last = name
		if want := strconv.Itoa(next[name]); i != want {
			t.Fatalf("writer %s: turn %s where %s was expected", name, i, want)
		}
		next[name]++
	}
	if next["a"] != n || next["b"] != n {
		t.Errorf("turns per writer: %v", next)
	}
	seen, err := s.SeenEntities(ctx, "shared", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(seen["orders"]); got != 2*n {
		t.Errorf("%d seen entities, want %d", got, 2*n)
	}
	facts, err := s.Facts(ctx, "u1")
	if err != nil || len(facts) != 1 {
		t.Fatalf("facts %v, %v", facts, err)
	}
	if got := len(strings.Split(facts[0].Value, "\n")); got != 2*n {
		t.Errorf("the shared log kept %d of %d appends", got, 2*n)
	}
	return switches
}

// A process killed in the middle of a stream of commits leaves a sound database
// holding every turn whose commit had returned.
func TestKilledProcessLosesNothingCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	path := filepath.Join(t.TempDir(), "killed.db")
	cmd := startChild(t, "loop", path, "k", 0)
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
	// Commits reported before the kill landed in the pipe; read them too.
	for lines.Scan() {
		printed = append(printed, lines.Text())
	}
	cmd.Wait()
	if len(printed) < 25 {
		t.Fatalf("the child printed only %d commits", len(printed))
	}

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var check string
	if err := s.read.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
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
}

// BenchmarkLoadSave is one run's use of the store: see storetest.Bench.
func BenchmarkLoadSave(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, _ := openTemp(b)
		return s
	})
}

// PutBlob deletes the expired blobs: nothing else would, as Blob reads on the
// query-only connection.
func TestPutBlobSweepsExpired(t *testing.T) {
	s, _ := openTemp(t)
	for _, key := range []string{"old1", "old2"} {
		if err := s.PutBlob(ctx, key, []byte("x"), time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutBlob(ctx, "kept", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := s.PutBlob(ctx, "new", []byte("z"), time.Hour); err != nil {
		t.Fatal(err)
	}
	rows, err := s.read.Query(`SELECT key FROM blobs ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if want := []string{"kept", "new"}; !slices.Equal(keys, want) {
		t.Errorf("rows %q, want %q", keys, want)
	}
}
