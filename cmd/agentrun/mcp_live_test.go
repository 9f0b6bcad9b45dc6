package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSDKEverything builds the Go MCP SDK's own example server, which offers tools
// named like "greet (structured)": names chat APIs refuse.
func goSDKEverything(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip("no go command to build the SDK's example server")
	}
	bin := filepath.Join(t.TempDir(), "everything")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/examples/server/everything")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the SDK's example server: %v\n%s", err, out)
	}
	return bin
}

// validate --live shows the name the model sees for a tool whose own name chat APIs
// refuse, and an exec run calls the tool under that name.
func TestMCPToolNamesLive(t *testing.T) {
	server := goSDKEverything(t)
	agent := writeFile(t, "names.yaml", "version: 1\nname: names\nmcp_servers:\n  - name: go\n    command: ["+server+"]\n"+
		"    tools: [greet, \"greet (structured)\"]\n    idempotent: [greet]\n")
	code, stdout, _ := runCLI(t, "validate", "--live", agent)
	want := `names.yaml:4:5: warning: mcp_servers[0]: MCP server go's tool "greet (structured)" is offered to the model as "greet__structured_": chat APIs accept only letters, digits, _ and - (at most 64) in tool names`
	if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, `hint: intents, domains, filters and fact rules name it "greet__structured_"`) || !strings.Contains(stdout, "0 errors, 1 warning") {
		t.Errorf("exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := runCLI(t, "validate", "--live", "--strict", agent); code != 1 {
		t.Errorf("--strict: exit %d\n%s", code, stdout)
	}

	script := writeFile(t, "names.script.yaml", "turns:\n  - tool_calls:\n      - {name: greet__structured_, arguments: {name: Ada}}\n  - text: done\n")
	code, stdout, stderr := runCLI(t, "exec", "--json", "--model", "script:"+script, agent, "Greet Ada.")
	var res struct {
		Steps []struct{ Tool, Outcome, Result string }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	if len(res.Steps) != 1 || res.Steps[0].Tool != "greet__structured_" || res.Steps[0].Outcome != "ok" || res.Steps[0].Result != `{"message":"Hi Ada"}` {
		t.Errorf("steps %+v", res.Steps)
	}
}

// validate --live checks what only a server knows about the names in idempotent and
// about names two servers would share.
func TestMCPIdempotentAndCollisionLive(t *testing.T) {
	server := goSDKEverything(t)
	open := writeFile(t, "open.yaml", "version: 1\nname: open\nmcp_servers:\n  - name: go\n    command: ["+server+"]\n    prefix: go_\n    idempotent: [gret]\n")
	code, stdout, _ := runCLI(t, "validate", "--live", open)
	if code != 0 || !strings.Contains(stdout, `warning: mcp_servers[0].idempotent: idempotent names "gret", which MCP server go does not offer`) || !strings.Contains(stdout, `hint: did you mean "greet"?`) {
		t.Errorf("exit %d\n%s", code, stdout)
	}
	// The same server twice without a prefix: every tool would have a twin.
	clash := writeFile(t, "clash.yaml", "version: 1\nname: clash\nmcp_servers:\n  - name: a\n    command: ["+server+"]\n  - name: b\n    command: ["+server+"]\n")
	code, stdout, _ = runCLI(t, "validate", "--live", clash)
	if stdout = withoutSource(stdout); code != 1 || !strings.Contains(stdout, `clash.yaml:6:5: error: mcp_servers[1]: MCP server b: its tool "elicit (form)" would be offered to the model as "elicit__form__96f15fb7", like tool "elicit (form)" of MCP server a (and `) ||
		!strings.Contains(stdout, "give one of the servers a prefix, or leave one tool out of its allow list (tools)\n1 file checked") {
		t.Errorf("exit %d\n%s", code, stdout)
	}
}

// exec has no authenticated request, so a forward_auth server's tool fails with a
// clear tool error, audited as no_credential, and nothing reaches the server.
func TestMCPForwardAuthInExec(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "gateway", Version: "1"}, nil)
	var calls atomic.Int32
	sdk.AddTool(s, &sdk.Tool{Name: "whoami"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		calls.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "someone"}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	agent := writeFile(t, "gw.yaml", "version: 1\nname: gw\nmcp_servers:\n  - name: gw\n    url: "+srv.URL+"\n    forward_auth: true\n")
	script := writeFile(t, "gw.script.yaml", "turns:\n  - tool_calls:\n      - {name: whoami, arguments: {}}\n  - text: done\n")
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	code, stdout, stderr := runCLI(t, "exec", "--json", "--audit", audit, "--model", "script:"+script, agent, "Who am I?")
	var res struct {
		Steps []struct{ Tool, Outcome, Result string }
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	if len(res.Steps) != 1 || res.Steps[0].Outcome != "error" ||
		!strings.Contains(res.Steps[0].Result, "MCP server gw takes the bearer token of the user's request (forward_auth), and this run has none") {
		t.Errorf("steps %+v", res.Steps)
	}
	var rec struct{ Outcome string }
	if data, err := os.ReadFile(audit); err != nil || json.Unmarshal(data, &rec) != nil || rec.Outcome != "no_credential" {
		t.Errorf("audit %s %v", data, err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the server got %d calls", n)
	}
}
