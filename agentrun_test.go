package agentrun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/internal/proctest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

func writeSpec(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Open reports a spec's errors as diagnostics with their positions, and an
// unreadable file as a path error.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := agentrun.Open(ctx, writeSpec(t, "version: 1\nname: x\nguards: {max_turns: zero}\n"), agentrun.Options{Model: "test"})
	var diags spec.Diagnostics
	if !errors.As(err, &diags) || len(diags) != 1 || diags[0].Pos.Line != 3 {
		t.Errorf("a bad spec: %v", err)
	}
	var readErr *agentrun.ReadError
	if _, err := agentrun.Open(ctx, filepath.Join(t.TempDir(), "none.yaml"), agentrun.Options{}); !errors.As(err, &readErr) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	// Compile errors (found by the tool's own checks) are diagnostics too.
	_, err = agentrun.Open(ctx, writeSpec(t, "version: 1\nname: x\ntools: [{builtin: read_file, with: {max_bytes: 0}}]\n"), agentrun.Options{Model: "test"})
	if !errors.As(err, &diags) || !strings.Contains(diags.Error(), "max_bytes must be at least 1") {
		t.Errorf("a compile error: %T %v", err, err)
	}
	if _, err := agentrun.Open(ctx, writeSpec(t, "version: 1\nname: x\n"), agentrun.Options{Model: "gpt"}); err == nil || !strings.Contains(err.Error(), `unknown --model "gpt"`) {
		t.Errorf("a bad model override: %v", err)
	}
}

// The options decide what is opened: a store only when runs need one (or the
// caller asks), none when inspecting; the model override leaves the caller's spec
// alone.
func TestBuildOptions(t *testing.T) {
	ctx := context.Background()
	loader, err := agentrun.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	res := loader.LoadFile(writeSpec(t, "version: 1\nname: x\nintents:\n  a: {description: A, memory: full}\nrouting: {fallback: a}\n"))
	if res.Diagnostics.HasErrors() {
		t.Fatal(res.Diagnostics)
	}
	s := res.Spec
	a, err := agentrun.Build(ctx, s, agentrun.Options{Model: "test", Store: "memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if s.Model.Provider != "" || a.Spec.Model.Provider != spec.ProviderTest {
		t.Errorf("override: caller's %q, agent's %q", s.Model.Provider, a.Spec.Model.Provider)
	}
	got, err := a.Run(ctx, runtime.Request{Input: "hi", User: tool.User{ID: "u"}, Conversation: "c"})
	if err != nil || !got.Completed() || got.MemoryError != "" {
		t.Fatalf("run: %v %+v", err, got)
	}
	// A memory intent needs a store; a bad store URL fails the build unless inspecting.
	if _, err := agentrun.Build(ctx, s, agentrun.Options{Model: "test", Store: "nosuch://x"}); err == nil {
		t.Error("a bad store URL built")
	}
	if b, err := agentrun.Build(ctx, s, agentrun.Options{Store: "nosuch://x", Inspect: true, NoModel: true}); err != nil {
		t.Errorf("inspecting opened the store: %v", err)
	} else if _, err := b.Run(ctx, runtime.Request{Input: "hi"}); err == nil {
		t.Error("an agent built without a model ran")
	}
}

func TestCheckIntentAndUser(t *testing.T) {
	a, err := agentrun.Open(context.Background(), writeSpec(t, `version: 1
name: x
context: {user: [tier]}
intents:
  cancel_order: {description: Cancel}
  order_status: {description: Status}
routing: {fallback: order_status}
`), agentrun.Options{Model: "test", Inspect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := agentrun.CheckIntent(a.Spec, "cancel"); err == nil || !strings.Contains(err.Error(), `did you mean "cancel_order"?`) {
		t.Errorf("CheckIntent: %v", err)
	}
	if err := agentrun.CheckIntent(a.Spec, "order_status"); err != nil {
		t.Error(err)
	}
	u, err := agentrun.User(a.Spec, "u-1", []string{"tier=gold"})
	if err != nil || u.ID != "u-1" || u.Attributes["tier"] != "gold" {
		t.Errorf("User: %+v %v", u, err)
	}
	for _, bad := range []string{"tier", "vip=yes"} {
		if _, err := agentrun.User(a.Spec, "u-1", []string{bad}); err == nil {
			t.Errorf("attribute %q accepted", bad)
		}
	}
}

// Close stops every MCP server the agent started, and a build that fails after
// starting them stops them before it returns.
func TestBuildCleansUp(t *testing.T) {
	server := filepath.Join(nodetools.Dir(t), "node_modules", ".bin", "mcp-server-everything")
	body := "version: 1\nname: m\nmcp_servers:\n  - {name: ev, command: [" + server + "], tools: [echo]}\nmemory: {store: redis}\n"
	path := writeSpec(t, body)
	before := proctest.Children(os.Getpid())
	ctx := context.Background()

	a, err := agentrun.Open(ctx, path, agentrun.Options{Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	started := newProcesses(before)
	if len(started) == 0 {
		t.Fatal("no server process while the agent is open")
	}
	if err := a.Close(); err != nil {
		t.Error(err)
	}
	waitGone(t, started, "after Close")
	if err := a.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}

	// Remember needs the store, which fails (redis without a URL) after the server
	// started: Open must not leave it running.
	if _, err := agentrun.Open(ctx, path, agentrun.Options{Model: "test", Remember: true}); err == nil || !strings.Contains(err.Error(), "no URL") {
		t.Fatalf("Open: %v", err)
	}
	waitGone(t, newProcesses(before), "after a failed Open")
}

func newProcesses(before []int) []int {
	var out []int
	for _, p := range proctest.Children(os.Getpid()) {
		if !slices.Contains(before, p) && proctest.Alive(p) {
			out = append(out, p)
		}
	}
	return out
}

func waitGone(t *testing.T, pids []int, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pids {
		for proctest.Alive(p) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if proctest.Alive(p) {
			t.Errorf("%s: server process %d still runs", when, p)
		}
	}
}

// A server tool the spec declares under another name is offered once, under that
// name with the spec's rules, never also under its own name without them.
func TestDeclaredMCPToolIsOfferedOnce(t *testing.T) {
	server := filepath.Join(nodetools.Dir(t), "node_modules", ".bin", "mcp-server-everything")
	path := writeSpec(t, "version: 1\nname: m\nmcp_servers:\n  - {name: ev, command: ["+server+"]}\n"+
		"tools:\n  - {name: say, mcp: {server: ev, tool: echo}, accept: 'args.message == \"hi\"'}\n")
	a, err := agentrun.Open(context.Background(), path, agentrun.Options{Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var names []string
	for _, d := range a.Tools() {
		names = append(names, d.Name)
	}
	if !slices.Contains(names, "say") || slices.Contains(names, "echo") {
		t.Errorf("offered %v: want say and not echo", names)
	}
}
