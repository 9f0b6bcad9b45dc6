package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/mcp"
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

	// Names chat APIs refuse, as MCP servers use them (the SDK's own example server has
	// "greet (structured)"), and one that only collides once mapped.
	type greeting struct {
		Name string `json:"name"`
	}
	for _, name := range []string{"greet (structured)", longName, "report.v2", "report_v2"} {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Says which tool answered."}, func(ctx context.Context, _ *sdk.CallToolRequest, in greeting) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello " + in.Name + " from " + name}}}, nil, nil
		})
	}

	// Tools with an effect that kill the server after acting and before answering, the
	// first time: each execution adds a line to its marker file.
	act := func(tool string) {
		marker := os.Getenv("AGENTRUN_TEST_MCP_MARKER") + "." + tool
		before, _ := os.ReadFile(marker)
		f, _ := os.OpenFile(marker, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		f.WriteString("executed\n")
		f.Close()
		if len(before) == 0 {
			os.Exit(3)
		}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "create_entities", Description: "Creates entities; not idempotent."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		act("create_entities")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "created"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "set_flag", Description: "Sets a flag; idempotent.", Annotations: &sdk.ToolAnnotations{IdempotentHint: true}}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		act("set_flag")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "flag set"}}}, nil, nil
	})
	// die_soon answers, then the process dies while idle: the next call finds it gone.
	sdk.AddTool(s, &sdk.Tool{Name: "die_soon", Description: "Exits after answering."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		time.AfterFunc(100*time.Millisecond, func() { os.Exit(4) })
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "bye"}}}, nil, nil
	})

	// idempotency_key answers the key the call carried in _meta; with a marker, it
	// first exits once before answering, so the call is sent again after a restart.
	sdk.AddTool(s, &sdk.Tool{Name: "idempotency_key", Description: "Answers the call's idempotency key."}, func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		if marker := os.Getenv("AGENTRUN_TEST_MCP_MARKER"); marker != "" {
			if _, err := os.Stat(marker + ".key"); err != nil {
				os.WriteFile(marker+".key", nil, 0o644)
				os.Exit(3)
			}
		}
		key, ok := req.Params.GetMeta()[mcp.MetaIdempotencyKey].(string)
		if !ok {
			key = "(none)"
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: key}}}, nil, nil
	})

	// Structured results: with a stub text, and with the data as text too (what the
	// SDK sends for a tool with an output type).
	sdk.AddTool(s, &sdk.Tool{Name: "stats", Description: "Order statistics."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}},
			StructuredContent: map[string]any{"open_orders": 3, "latest": "A<1024>"}}, nil, nil
	})
	type totals struct {
		Sum int `json:"sum"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "add"}, func(ctx context.Context, _ *sdk.CallToolRequest, in struct{ A, B int }) (*sdk.CallToolResult, totals, error) {
		return nil, totals{in.A + in.B}, nil
	})
	s.Run(context.Background(), &sdk.StdioTransport{})
}

const longName = "lookup_the_shipping_status_of_an_order_by_its_number_and_carrier_code"

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

func find(t *testing.T, m *mcp.Manager, name string) tool.Tool {
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
	in := func(args map[string]any) tool.Input {
		return tool.Input{Args: args, User: tool.User{ID: "u-42"}, Conversation: "c-1"}
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
	out, err := find(t, m, "echo").Call(context.Background(), tool.Input{Args: map[string]any{"message": "over http"}})
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
	if out, err := read.Call(ctx, tool.Input{Args: map[string]any{"path": filepath.Join(root, "inside.txt")}}); err != nil || out != "inside" {
		t.Errorf("inside: %q %v", out, err)
	}
	for _, p := range []string{filepath.Join(root, "..", filepath.Base(outside), "secret.txt"), filepath.Join(root, "link.txt"), filepath.Join(outside, "secret.txt")} {
		out, err := read.Call(ctx, tool.Input{Args: map[string]any{"path": p}})
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
	// crash is idempotent here; TestInterruptedCall covers tools that are not.
	server := self(t, "once", map[string]string{"AGENTRUN_TEST_MCP_MARKER": marker})
	server.Idempotent = []string{"crash"}
	m := start(t, []spec.MCPServer{server}, nil)
	if _, err := find(t, m, "fail").Call(ctx, tool.Input{}); err == nil || err.Error() != "the order service is down" {
		t.Errorf("isError result: %v", err)
	}
	// The server dies on the first crash; it is restarted once and the call retried.
	if out, err := find(t, m, "crash").Call(ctx, tool.Input{}); err != nil || out != "survived" {
		t.Errorf("after one restart: %q %v", out, err)
	}
	if out, err := find(t, m, "ping").Call(ctx, tool.Input{}); err != nil || out != "pong" {
		t.Errorf("the restarted server: %q %v", out, err)
	}

	server = self(t, "always", map[string]string{})
	server.Idempotent = []string{"crash"}
	always := start(t, []spec.MCPServer{server}, nil)
	_, err := find(t, always, "crash").Call(ctx, tool.Input{})
	if err == nil || !strings.Contains(err.Error(), "stopped again after one restart") {
		t.Errorf("a server that keeps crashing: %v", err)
	}
	if _, err := find(t, always, "ping").Call(ctx, tool.Input{}); err == nil || !strings.Contains(err.Error(), "not running") {
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
	a, diags := runtime.Compile(s, runtime.Options{Tools: tool.Registry{}, External: m.Tools()})
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

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

var chatToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// A tool whose name chat APIs refuse is offered under a valid name, and a call under
// that name reaches the tool by its own name.
func TestToolNamesChatAPIsAccept(t *testing.T) {
	m := start(t, []spec.MCPServer{self(t, "once", map[string]string{})}, nil)
	want := map[string]string{ // name on the server → name the model sees
		"greet (structured)": "greet__structured_",
		longName:             longName[:55] + "_" + shortHash(longName),
		"report.v2":          "report_v2_" + shortHash("report.v2"), // report_v2 is taken
		"report_v2":          "report_v2",
		"ping":               "ping",
	}
	if len(longName) <= 64 {
		t.Fatal("longName must be too long for chat APIs")
	}
	offered := map[string]mcp.Offered{}
	for _, o := range m.Offered() {
		offered[o.Tool] = o
	}
	for tool, name := range want {
		if o := offered[tool]; o.Name != name || o.Server != "crashy" {
			t.Errorf("%q is offered as %+v, want the name %q", tool, o, name)
		}
	}
	for _, x := range m.Tools() {
		if !chatToolName.MatchString(x.Def.Name) {
			t.Errorf("%q is not a name chat APIs accept", x.Def.Name)
		}
	}
	for tl, name := range want {
		if tl == "ping" {
			continue
		}
		out, err := find(t, m, name).Call(context.Background(), tool.Input{Args: map[string]any{"name": "Ada"}})
		if err != nil || out != "hello Ada from "+tl {
			t.Errorf("%s: %q %v", name, out, err)
		}
	}
}

// Two servers offering tools the model would see under one name cannot both be
// offered: Start fails naming the servers, and a prefix resolves it.
func TestToolNameCollision(t *testing.T) {
	a, b := self(t, "once", map[string]string{}), self(t, "once", map[string]string{})
	a.Name, b.Name = "orders", "billing"
	_, err := mcp.Start(context.Background(), []spec.MCPServer{a, b}, mcp.Options{Dir: t.TempDir()})
	var serverErr *mcp.ServerError
	if !errors.As(err, &serverErr) || serverErr.Server != "billing" ||
		!strings.HasPrefix(err.Error(), `MCP server billing: its tool "add" would be offered to the model as "add", like tool "add" of MCP server orders (and `) ||
		!strings.HasSuffix(err.Error(), `more tools alike); give one of the servers a prefix, or leave one tool out of its allow list (tools)`) {
		t.Fatalf("err = %v", err)
	}
	b.Prefix = "billing_"
	m := start(t, []spec.MCPServer{a, b}, nil)
	if out, err := find(t, m, "billing_greet__structured_").Call(context.Background(), tool.Input{Args: map[string]any{"name": "Bo"}}); err != nil || out != "hello Bo from greet (structured)" {
		t.Errorf("%q %v", out, err)
	}
}

func executions(t *testing.T, marker string) int {
	t.Helper()
	b, _ := os.ReadFile(marker)
	return strings.Count(string(b), "executed\n")
}

// A server that dies after acting and before answering: the call is not sent again
// unless the tool is idempotent, by the spec or by the server's idempotentHint.
func TestInterruptedCall(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		tool       string
		idempotent []string
		want       string
		executions int
	}{
		{name: "not idempotent", tool: "create_entities", executions: 1,
			want: "the MCP server crashy stopped during this call and was restarted; whether create_entities took effect is unknown, so it was not sent again"},
		{name: "idempotent in the spec", tool: "create_entities", idempotent: []string{"create_entities"}, want: "created", executions: 2},
		{name: "idempotentHint", tool: "set_flag", want: "flag set", executions: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "marker")
			server := self(t, "once", map[string]string{"AGENTRUN_TEST_MCP_MARKER": marker})
			server.Idempotent = tc.idempotent
			var audits []mcp.AuditRecord
			m := start(t, []spec.MCPServer{server}, func(r mcp.AuditRecord) { audits = append(audits, r) })
			out, err := find(t, m, tc.tool).Call(ctx, tool.Input{})
			got, outcome := out, "ok"
			if err != nil {
				got, outcome = err.Error(), "interrupted"
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if n := executions(t, marker+"."+tc.tool); n != tc.executions {
				t.Errorf("the tool ran %d times, want %d", n, tc.executions)
			}
			if len(audits) != 1 || audits[0].Outcome != outcome {
				t.Errorf("audit %+v, want outcome %s", audits, outcome)
			}
			if out, err := find(t, m, "ping").Call(ctx, tool.Input{}); err != nil || out != "pong" {
				t.Errorf("the restarted server: %q %v", out, err)
			}
		})
	}
}

// A server that died while idle never saw the next call: that call is sent to the
// restarted server, idempotent or not.
func TestCallAfterIdleCrash(t *testing.T) {
	ctx := context.Background()
	m := start(t, []spec.MCPServer{self(t, "once", map[string]string{})}, nil)
	if out, err := find(t, m, "die_soon").Call(ctx, tool.Input{}); err != nil || out != "bye" {
		t.Fatalf("%q %v", out, err)
	}
	time.Sleep(time.Second) // the process exits 100ms after answering
	if out, err := find(t, m, "ping").Call(ctx, tool.Input{}); err != nil || out != "pong" {
		t.Errorf("the call after the crash: %q %v", out, err)
	}
}

// The call's idempotency key reaches the server in _meta, and the same key again
// when the call is sent once more to a restarted server.
func TestIdempotencyKeyInMeta(t *testing.T) {
	ctx := context.Background()
	plain := start(t, []spec.MCPServer{self(t, "once", map[string]string{})}, nil)
	server := self(t, "once", map[string]string{"AGENTRUN_TEST_MCP_MARKER": filepath.Join(t.TempDir(), "crashed")})
	server.Idempotent = []string{"idempotency_key"}
	crashing := start(t, []spec.MCPServer{server}, nil)
	tests := []struct {
		name string
		m    *mcp.Manager
		key  string
		want string
	}{
		{"a key", plain, "run-1/call-1", "run-1/call-1"},
		{"no key", plain, "", "(none)"},
		{"the same key after a restart", crashing, "run-1/call-2", "run-1/call-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := find(t, tt.m, "idempotency_key").Call(ctx, tool.Input{Args: map[string]any{}, IdempotencyKey: tt.key})
			if err != nil || out != tt.want {
				t.Errorf("out %q, err %v; want %q", out, err, tt.want)
			}
		})
	}
}

// The model sees structured content as JSON when the text is only a stub, and the
// text alone when it already is that JSON.
func TestStructuredContent(t *testing.T) {
	m := start(t, []spec.MCPServer{self(t, "once", map[string]string{})}, nil)
	ctx := context.Background()
	if out, err := find(t, m, "stats").Call(ctx, tool.Input{}); err != nil || out != "ok\n"+`{"latest":"A<1024>","open_orders":3}` {
		t.Errorf("stats: %q %v", out, err)
	}
	if out, err := find(t, m, "add").Call(ctx, tool.Input{Args: map[string]any{"A": 2, "B": 3}}); err != nil || out != `{"sum":5}` {
		t.Errorf("add: %q %v", out, err)
	}
}

// recording remembers the tools each model request offered.
type recording struct {
	model.Model
	offered [][]string
}

func (r *recording) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	r.offered = append(r.offered, names)
	return r.Model.Complete(ctx, req)
}

// What the model itself gets in a run: valid tool names, the original tool's answer
// under a mapped name, structured data, and word of a call interrupted by a crash.
func TestWhatTheModelSees(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "marker")
	server := self(t, "once", map[string]string{"AGENTRUN_TEST_MCP_MARKER": marker})
	server.Prefix = "shop_"
	m := start(t, []spec.MCPServer{server}, nil)
	l, _ := spec.NewLoader()
	s, diags := l.Load("a.yaml", []byte("version: 1\nname: a\nmcp_servers:\n  - {name: crashy, command: [x], prefix: shop_}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	call := func(name string, args map[string]any) offline.ScriptTurn {
		return offline.ScriptTurn{ToolCalls: []offline.ScriptToolCall{{Name: name, Arguments: args}}}
	}
	llm := &recording{Model: offline.NewScript("mcp", []offline.ScriptTurn{
		call("shop_greet__structured_", map[string]any{"name": "Ada"}),
		call("shop_stats", map[string]any{}),
		call("shop_create_entities", map[string]any{}),
		{Text: "done"},
	})}
	a, diags := runtime.Compile(s, runtime.Options{Tools: tool.Registry{}, External: m.Tools(), Model: llm})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	res, err := a.Run(context.Background(), runtime.Request{Input: "go"})
	if err != nil || res.Answer != "done" {
		t.Fatalf("%+v %v", res, err)
	}
	for _, name := range llm.offered[0] {
		if !chatToolName.MatchString(name) {
			t.Errorf("the model was offered %q", name)
		}
	}
	if !slices.Contains(llm.offered[0], "shop_greet__structured_") {
		t.Errorf("offered %v", llm.offered[0])
	}
	var results []string
	for _, msg := range res.Messages {
		if msg.Role == model.RoleTool {
			results = append(results, msg.Content)
		}
	}
	want := []string{
		"hello Ada from greet (structured)",
		"ok\n" + `{"latest":"A<1024>","open_orders":3}`,
		"Error: the MCP server crashy stopped during this call and was restarted; whether create_entities took effect is unknown, so it was not sent again",
	}
	if !slices.Equal(results, want) {
		t.Errorf("tool results:\n%q\nwant\n%q", results, want)
	}
	if n := executions(t, marker+".create_entities"); n != 1 {
		t.Errorf("create_entities ran %d times", n)
	}
}
