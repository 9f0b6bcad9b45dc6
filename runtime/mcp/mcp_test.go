package mcp_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/mcp"
	"github.com/agentrun/agentrun/spec"
)

// TestMain doubles as a small MCP server (the SDK's own, over stdio) for the
// crash-and-restart tests: the test binary runs itself with AGENTRUN_TEST_MCP set.
func TestMain(m *testing.M) {
	if mode := os.Getenv("AGENTRUN_TEST_MCP"); mode != "" {
		serve(mode)
		return
	}
	os.Exit(m.Run())
}

func serve(mode string) {
	s := sdk.NewServer(&sdk.Implementation{Name: "crashy", Version: "1"}, nil)
	type none struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "ping", Description: "Answers pong."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exits the server."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		marker := os.Getenv("AGENTRUN_TEST_MCP_MARKER")
		if mode == "always" || marker == "" {
			os.Exit(3)
		}
		if _, err := os.Stat(marker); err != nil { // the first time only
			os.WriteFile(marker, nil, 0o644)
			os.Exit(3)
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "survived"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Fails."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the order service is down"}}}, nil, nil
	})
	s.Run(context.Background(), &sdk.StdioTransport{})
}

func everything(t *testing.T) string {
	return filepath.Join(nodetools.Dir(t), "node_modules", ".bin", "mcp-server-everything")
}

func start(t *testing.T, servers []spec.MCPServer, audit func(mcp.AuditRecord)) *mcp.Manager {
	t.Helper()
	m, err := mcp.Start(context.Background(), servers, mcp.Options{Dir: t.TempDir(), Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func find(t *testing.T, m *mcp.Manager, name string) runtime.Tool {
	t.Helper()
	for _, x := range m.Tools() {
		if x.Def.Name == name {
			return x.Impl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func TestStdioServer(t *testing.T) {
	t.Setenv("LLM_API_KEY", "sk-agentrun-secret")
	var audits []mcp.AuditRecord
	m := start(t, []spec.MCPServer{{Name: "ev", Command: []string{everything(t)}, Env: map[string]string{"SHOP_REGION": "cn-east"},
		Tools: []string{"echo", "get-sum", "get-env", "get-structured-content"}, Prefix: "ev_"}}, func(r mcp.AuditRecord) { audits = append(audits, r) })
	var names []string
	for _, x := range m.Tools() {
		names = append(names, x.Def.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "ev_echo,ev_get-env,ev_get-structured-content,ev_get-sum" {
		t.Errorf("offered %v: only the allow list, with the prefix", names)
	}
	ctx := context.Background()
	in := func(args map[string]any) runtime.ToolInput {
		return runtime.ToolInput{Args: args, User: runtime.User{ID: "u-42"}, Conversation: "c-1"}
	}
	if out, err := find(t, m, "ev_echo").Call(ctx, in(map[string]any{"message": "你好"})); err != nil || !strings.Contains(out, "你好") {
		t.Errorf("echo: %q %v", out, err)
	}
	if out, err := find(t, m, "ev_get-sum").Call(ctx, in(map[string]any{"a": 2, "b": 3})); err != nil || !strings.Contains(out, "5") {
		t.Errorf("get-sum: %q %v", out, err)
	}
	if out, err := find(t, m, "ev_get-structured-content").Call(ctx, in(map[string]any{"location": "Chicago"})); err != nil || out == "" {
		t.Errorf("structured: %q %v", out, err)
	}
	env, err := find(t, m, "ev_get-env").Call(ctx, in(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(env, "SHOP_REGION") || !strings.Contains(env, "PATH") || strings.Contains(env, "sk-agentrun-secret") || strings.Contains(env, "LLM_API_KEY") {
		t.Errorf("the server's environment must be PATH, HOME and what the spec declares:\n%s", env)
	}
	if len(audits) != 4 || audits[0].Server != "ev" || audits[0].Tool != "echo" || audits[0].User != "u-42" || audits[0].Conversation != "c-1" || audits[0].Outcome != "ok" || audits[0].Arguments["message"] != "你好" {
		t.Errorf("audit %+v", audits)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestStreamableHTTPServer(t *testing.T) {
	port := freePort(t)
	cmd := exec.Command(everything(t), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatal("the HTTP server did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := start(t, []spec.MCPServer{{Name: "web", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), Tools: []string{"echo"}}}, nil)
	out, err := find(t, m, "echo").Call(context.Background(), runtime.ToolInput{Args: map[string]any{"message": "over http"}})
	if err != nil || !strings.Contains(out, "over http") {
		t.Errorf("%q %v", out, err)
	}
}

// The filesystem server keeps its root through MCP too: .. and symlinks out fail.
func TestFilesystemServerConfinement(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(root, "inside.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOPSECRET"), 0o644)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link.txt"))
	bin := filepath.Join(nodetools.Dir(t), "node_modules", ".bin", "mcp-server-filesystem")
	m := start(t, []spec.MCPServer{{Name: "fs", Command: []string{bin, root}, Tools: []string{"read_text_file"}}}, nil)
	read := find(t, m, "read_text_file")
	ctx := context.Background()
	if out, err := read.Call(ctx, runtime.ToolInput{Args: map[string]any{"path": filepath.Join(root, "inside.txt")}}); err != nil || out != "inside" {
		t.Errorf("inside: %q %v", out, err)
	}
	for _, p := range []string{filepath.Join(root, "..", filepath.Base(outside), "secret.txt"), filepath.Join(root, "link.txt"), filepath.Join(outside, "secret.txt")} {
		out, err := read.Call(ctx, runtime.ToolInput{Args: map[string]any{"path": p}})
		if err == nil || strings.Contains(out, "TOPSECRET") || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("%s: %q %v", p, out, err)
		}
	}
}

func TestServerThatFailsToStart(t *testing.T) {
	_, err := mcp.Start(context.Background(), []spec.MCPServer{{Name: "orders", Command: []string{"/no/such/server"}}}, mcp.Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "MCP server orders: ") {
		t.Errorf("err = %v", err)
	}
	_, err = mcp.Start(context.Background(), []spec.MCPServer{{Name: "ev", Command: []string{everything(t)}, Tools: []string{"echo", "cancel_everything"}}}, mcp.Options{})
	if err == nil || !strings.Contains(err.Error(), `MCP server ev: the allow list names "cancel_everything", which the server does not offer`) {
		t.Errorf("err = %v", err)
	}
}

func self(t *testing.T, mode string, env map[string]string) spec.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env["AGENTRUN_TEST_MCP"] = mode
	return spec.MCPServer{Name: "crashy", Command: []string{exe}, Env: env}
}

func TestToolErrorAndRestart(t *testing.T) {
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "crashed")
	m := start(t, []spec.MCPServer{self(t, "once", map[string]string{"AGENTRUN_TEST_MCP_MARKER": marker})}, nil)
	if _, err := find(t, m, "fail").Call(ctx, runtime.ToolInput{}); err == nil || err.Error() != "the order service is down" {
		t.Errorf("isError result: %v", err)
	}
	// The server dies on the first crash; it is restarted once and the call retried.
	if out, err := find(t, m, "crash").Call(ctx, runtime.ToolInput{}); err != nil || out != "survived" {
		t.Errorf("after one restart: %q %v", out, err)
	}
	if out, err := find(t, m, "ping").Call(ctx, runtime.ToolInput{}); err != nil || out != "pong" {
		t.Errorf("the restarted server: %q %v", out, err)
	}

	always := start(t, []spec.MCPServer{self(t, "always", map[string]string{})}, nil)
	_, err := find(t, always, "crash").Call(ctx, runtime.ToolInput{})
	if err == nil || !strings.Contains(err.Error(), "stopped again after one restart") {
		t.Errorf("a server that keeps crashing: %v", err)
	}
	if _, err := find(t, always, "ping").Call(ctx, runtime.ToolInput{}); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("its tools then fail clearly: %v", err)
	}
}

// An intent's whitelist applies to MCP tools like any other.
func TestIntentWhitelistAppliesToMCPTools(t *testing.T) {
	m := start(t, []spec.MCPServer{{Name: "ev", Command: []string{everything(t)}, Tools: []string{"echo", "get-sum"}}}, nil)
	l, _ := spec.NewLoader()
	s, diags := l.Load("a.yaml", []byte(`
version: 1
name: a
mcp_servers:
  - {name: ev, command: [x], tools: [echo, get-sum]}
intents:
  math: {description: Sums., tools: [get-sum]}
  talk: {description: Talk., tools: [echo]}
routing: {recognizer: off, fallback: talk}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	a, diags := runtime.Compile(s, runtime.Options{Tools: runtime.Registry{}, External: m.Tools()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for intent, want := range map[string]string{"math": "get-sum", "talk": "echo"} {
		plan, _ := a.Explain(intent)
		var got []string
		for _, d := range plan.Tools {
			got = append(got, d.Name)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("intent %s offers %v, want %s", intent, got, want)
		}
	}
}
