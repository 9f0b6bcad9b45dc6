package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/internal/openaitest"
)

// `agentrun mcp` as a real process, driven by the official MCP clients: the
// TypeScript SDK's Client (tools/node/mcp-client.mjs) and the inspector's CLI;
// the inspector's CLI also against `agentrun serve`'s /mcp.

const menuSpec = "testdata/mcp/menu.yaml"

// mcpModel answers the concierge's and the menu's model calls: a look-up of the
// user's favourite, then a suggestion; the menu's structured answer; a failure
// for a question that asks for one.
func mcpModel(t *testing.T) *openaitest.Server {
	return openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		last := req.Messages[len(req.Messages)-1]
		content, _ := last["content"].(string)
		switch {
		case req.Body["response_format"] != nil:
			return openaitest.Reply{Content: `{"dish":"dumplings","price":12.5}`}
		case strings.Contains(content, "fail"):
			return openaitest.Reply{Status: http.StatusBadRequest}
		case last["role"] == "tool":
			return openaitest.Reply{Content: "Have the mapo tofu."}
		}
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "lookup_favourite", Arguments: `{"user_id":"mallory"}`}}}
	})
}

// mcpArgs are agentrun mcp's arguments for the two test agents, with the
// environment it needs.
func mcpArgs(t *testing.T, model *openaitest.Server, k *kitchen) (args []string, env map[string]string) {
	dir := t.TempDir()
	args = []string{"mcp", "--user", "u-42", "--model", "openai:fake", "--store", "sqlite:" + filepath.Join(dir, "state.db")}
	for _, s := range []string{concierge, menuSpec} {
		abs, err := filepath.Abs(s)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, abs)
	}
	env = map[string]string{"LLM_BASE_URL": model.URL, "LLM_API_KEY": "sk-fake", "LLM_MODEL_NAME": "fake",
		"KITCHEN_API": k.URL, "AGENTRUN_STORE": "", "AGENTRUN_INDEX": filepath.Join(dir, "knowledge.db")}
	return args, env
}

// The TypeScript SDK's client starts agentrun mcp and sees the two agents as
// tools; a call gets the concierge's answer, with progress while it runs, and
// the tool it called got --user's id, not the model's; the menu's call answers
// with structured content its output schema describes; a run whose model fails
// is an error result.
func TestMCPStdioWithTheTypeScriptClient(t *testing.T) {
	tools := nodetools.Dir(t)
	model, k := mcpModel(t), newKitchen(t)
	args, env := mcpArgs(t, model, k)
	plan := map[string]any{"transport": "stdio", "command": serveBinary(t), "args": args, "env": env, "steps": []map[string]any{
		{"op": "list"},
		{"op": "call", "name": "concierge", "arguments": map[string]any{"question": "What should I eat?", "conversation": "c-1"}, "progress": true},
		{"op": "call", "name": "menu", "arguments": map[string]any{"question": "What is on today?"}},
		{"op": "call", "name": "concierge", "arguments": map[string]any{"question": "please fail"}},
	}}
	data, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "mcp-client.mjs"), string(data))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // agentrun mcp's stderr too: its logs
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "DATA RACE") {
		t.Fatalf("mcp-client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Tools []struct {
			Name, Description string
			OutputSchema      map[string]any
		}
		Calls []struct {
			Progress []struct{ Message string }
			Result   struct {
				Content           []struct{ Text string }
				StructuredContent map[string]any
				IsError           bool
			}
		}
		Error string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Error != "" || len(got.Calls) != 3 {
		t.Fatalf("%v %s: %s\n%s", err, got.Error, out, stderr.String())
	}
	if len(got.Tools) != 2 || got.Tools[0].Name != "concierge" || got.Tools[1].Name != "menu" ||
		got.Tools[1].Description != "Picks today's dish and its price." || got.Tools[1].OutputSchema["type"] != "object" || got.Tools[0].OutputSchema != nil {
		t.Errorf("tools %+v", got.Tools)
	}
	if c := got.Calls[0]; c.Result.IsError || len(c.Result.Content) != 1 || c.Result.Content[0].Text != "Have the mapo tofu." {
		t.Errorf("concierge: %+v", c)
	}
	var msgs []string
	for _, p := range got.Calls[0].Progress {
		msgs = append(msgs, p.Message)
	}
	if !slices.Contains(msgs, "calling lookup_favourite") || !slices.Contains(msgs, "the model answered") {
		t.Errorf("progress %q", msgs)
	}
	if paths := k.seen(); !slices.Equal(paths, []string{"/users/u-42/favourite"}) {
		t.Errorf("the kitchen was asked for %v, want u-42's favourite", paths)
	}
	if c := got.Calls[1]; c.Result.IsError || c.Result.StructuredContent["dish"] != "dumplings" || c.Result.StructuredContent["price"] != 12.5 {
		t.Errorf("menu: %+v", c)
	}
	if c := got.Calls[2]; !c.Result.IsError || !strings.Contains(c.Result.Content[0].Text, "the agent's model failed") {
		t.Errorf("a failing run: %+v", c)
	}
}

// Every progress notification of a call reaches the TypeScript SDK's client,
// even when they come in one read with the result: agentrun mcp's output goes
// through tools/node/coalesce.mjs, which hands on what agentrun writes in bursts.
// The client takes a response at once but a notification a microtask later, and
// forgets a call's progress token with its response; agentrun mcp pings it after
// the last notification, so the result comes in a later read.
func TestMCPStdioProgressReadWithTheResult(t *testing.T) {
	tools := nodetools.Dir(t)
	model, k := mcpModel(t), newKitchen(t)
	args, env := mcpArgs(t, model, k)
	pipe := `"$0" "$@" | node "$COALESCE"`
	env["COALESCE"] = filepath.Join(tools, "coalesce.mjs")
	plan := map[string]any{"transport": "stdio", "command": "sh", "args": append([]string{"-c", pipe, serveBinary(t)}, args...), "env": env,
		"steps": []map[string]any{
			{"op": "call", "name": "concierge", "arguments": map[string]any{"question": "What should I eat?"}, "progress": true},
		}}
	data, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "mcp-client.mjs"), string(data))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "DATA RACE") {
		t.Fatalf("mcp-client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Calls []struct {
			Progress []struct{ Message string }
			Result   struct {
				Content []struct{ Text string }
				IsError bool
			}
		}
		Error string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Error != "" || len(got.Calls) != 1 {
		t.Fatalf("%v %s: %s\n%s", err, got.Error, out, stderr.String())
	}
	c := got.Calls[0]
	if c.Result.IsError || len(c.Result.Content) != 1 || c.Result.Content[0].Text != "Have the mapo tofu." {
		t.Errorf("concierge: %+v", c)
	}
	var msgs []string
	for _, p := range c.Progress {
		msgs = append(msgs, p.Message)
	}
	if want := []string{"the model asked for a tool call", "calling lookup_favourite", "the model answered"}; !slices.Equal(msgs, want) {
		t.Errorf("progress %q, want %q", msgs, want)
	}
}

// inspectorCLI runs the MCP inspector's CLI (@modelcontextprotocol/inspector-cli)
// with args and the environment env, and returns what it printed: the JSON answer.
func inspectorCLI(t *testing.T, env map[string]string, args ...string) map[string]any {
	t.Helper()
	tools := nodetools.Dir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tools, "node_modules", ".bin", "mcp-inspector-cli"), append([]string{"--cli"}, args...)...)
	// inspector-cli 1.0.3 looks for its package.json at ../package.json of the
	// working directory: its own build directory has it there.
	cmd.Dir = filepath.Join(tools, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "DATA RACE") {
		t.Fatalf("inspector %v: %v\n%s\n%s", args, err, out, stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("inspector %v: %v\n%s\n%s", args, err, out, stderr.String())
	}
	return v
}

// inspectorTools are the names of the tools an inspector's tools/list shows.
func inspectorTools(v map[string]any) []string {
	var names []string
	list, _ := v["tools"].([]any)
	for _, tl := range list {
		m, _ := tl.(map[string]any)
		name, _ := m["name"].(string)
		names = append(names, name)
	}
	return names
}

// inspectorText is the text of an inspector's tools/call result.
func inspectorText(v map[string]any) string {
	var b strings.Builder
	content, _ := v["content"].([]any)
	for _, c := range content {
		m, _ := c.(map[string]any)
		s, _ := m["text"].(string)
		b.WriteString(s)
	}
	return b.String()
}

// The MCP inspector's CLI lists and calls the tools of agentrun mcp, which it
// starts as its stdio server.
func TestMCPStdioWithTheInspector(t *testing.T) {
	model, k := mcpModel(t), newKitchen(t)
	args, env := mcpArgs(t, model, k)
	target := append([]string{serveBinary(t)}, args...)
	listed := inspectorCLI(t, env, append(target, "--method", "tools/list")...)
	if names := inspectorTools(listed); !slices.Equal(names, []string{"concierge", "menu"}) {
		t.Errorf("tools/list: %v", listed)
	}
	called := inspectorCLI(t, env, append(target, "--method", "tools/call", "--tool-name", "concierge", "--tool-arg", "question=What should I eat?")...)
	if inspectorText(called) != "Have the mapo tofu." || called["isError"] == true {
		t.Errorf("tools/call: %v", called)
	}
	if paths := k.seen(); !slices.Equal(paths, []string{"/users/u-42/favourite"}) {
		t.Errorf("the kitchen was asked for %v, want u-42's favourite", paths)
	}
}

// The MCP inspector's CLI lists and calls the tools of agentrun serve's /mcp
// with a bearer token: the token's user is the tool's user; without the token
// the inspector gets no further than a 401.
func TestMCPServeWithTheInspector(t *testing.T) {
	model, k := mcpModel(t), newKitchen(t)
	p := startServe(t, serveOptions{store: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), model: model,
		tokens: map[string]string{"tok-ann": "ann"}, env: []string{"KITCHEN_API=" + k.URL}, specs: []string{concierge, menuSpec}})
	url := p.url + "/mcp"
	auth := []string{"--transport", "http", "--header", "Authorization: Bearer tok-ann"}
	listed := inspectorCLI(t, nil, append(append([]string{url}, auth...), "--method", "tools/list")...)
	if names := inspectorTools(listed); !slices.Equal(names, []string{"concierge", "menu"}) {
		t.Errorf("tools/list: %v", listed)
	}
	called := inspectorCLI(t, nil, append(append([]string{url}, auth...), "--method", "tools/call", "--tool-name", "menu", "--tool-arg", "question=What is on today?")...)
	if sc, _ := called["structuredContent"].(map[string]any); sc["dish"] != "dumplings" || called["isError"] == true {
		t.Errorf("tools/call: %v", called)
	}
	called = inspectorCLI(t, nil, append(append([]string{url}, auth...), "--method", "tools/call", "--tool-name", "concierge", "--tool-arg", "question=What should I eat?")...)
	if inspectorText(called) != "Have the mapo tofu." {
		t.Errorf("tools/call: %v", called)
	}
	if paths := k.seen(); !slices.Equal(paths, []string{"/users/ann/favourite"}) {
		t.Errorf("the kitchen was asked for %v, want ann's favourite", paths)
	}
	code, body, err := p.call(context.Background(), "POST", "/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, nil)
	if err != nil || code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s %v", code, body, err)
	}
}

// SIGTERM while an MCP client holds its session's GET stream open: the server
// closes the idle session, which ends the stream, and exits long before the
// grace period, which the stream would otherwise use up.
func TestServeSIGTERMClosesIdleMCPSessions(t *testing.T) {
	model, k := mcpModel(t), newKitchen(t)
	p := startServe(t, serveOptions{store: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), model: model, grace: "30s",
		tokens: map[string]string{"tok-ann": "ann"}, env: []string{"KITCHEN_API=" + k.URL}, specs: []string{concierge}})
	post := func(session string, msg map[string]any) *http.Response {
		data, _ := json.Marshal(msg)
		req, _ := http.NewRequest("POST", p.url+"/mcp", bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer tok-ann")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %v", resp.StatusCode, resp.Header)
	}
	post(session, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	req, _ := http.NewRequest("GET", p.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer tok-ann")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	stream, err := p.client.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp: %v %v", err, stream)
	}
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stream.Body)
		close(ended)
	}()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(15 * time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	<-ended
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("exited %s after SIGTERM: the session's stream held the shutdown", d)
	}
}

// agentrun mcp refuses at start a user no agent can run for, before it serves
// anything: stdout, the protocol's, stays empty.
func TestMCPRefusesAnUnusableIdentity(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"undeclared attribute", []string{"--set", "tier=gold"}, `no agent declares the user attribute "tier"`},
		{"malformed attribute", []string{"--set", "tier"}, `--set "tier": want key=value`},
		{"user id", []string{"--user", "a/b"}, "--user, --set: agent concierge:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(append([]string{"mcp", "--model", "test"}, tt.args...), concierge)...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tt.stderr)
			}
		})
	}
}
