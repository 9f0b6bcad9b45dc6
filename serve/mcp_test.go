package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/internal/otlptest"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/serve"
)

// gwServiceToken is what agentrun lists the gateway's tools with at start.
const gwServiceToken = "gw-service-token-0123456789"

// mcpGateway is an MCP server of the official SDK behind its bearer-token
// middleware, which accepts serve's static tokens: a team's gateway that
// authorizes each user. It records the Authorization of every tools/call.
type mcpGateway struct {
	URL   string
	mu    sync.Mutex
	calls []string
}

func newMCPGateway(t *testing.T) *mcpGateway {
	g := &mcpGateway{}
	s := sdk.NewServer(&sdk.Implementation{Name: "gateway", Version: "1"}, nil)
	type none struct{}
	for _, name := range []string{"whoami", "confirm"} {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: "Says whose token the call carried."}, func(_ context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "token of " + req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	}
	users := map[string]string{aliceToken: "alice", bobToken: "bob", gwServiceToken: "agentrun"}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, ok := users[token]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			if json.Unmarshal(body, &msg); msg.Method == "tools/call" {
				g.mu.Lock()
				g.calls = append(g.calls, r.Header.Get("Authorization"))
				g.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/mcp"
	return g
}

// Calls are the Authorization headers of the tools/call requests so far.
func (g *mcpGateway) Calls() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

const gwSpec = `version: 1
name: gw
description: Asks the gateway whose token a call carries.
instructions: Ask the gateway.
mcp_servers:
  - name: gw
    url: GATEWAY
    headers: {Authorization: "Bearer ${GW_SERVICE_TOKEN}"}
    forward_auth: true
    tools: [whoami, confirm]
tools:
  - name: confirm
    mcp: {server: gw}
    approval: {message: "Ask the gateway?"}
`

// gwReply calls the tool the input names, then answers with its result.
func gwReply(req openaitest.Request) openaitest.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last["role"] == "tool" {
		return openaitest.Reply{Content: "the gateway says: " + messageText(last)}
	}
	return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: messageText(last), Arguments: "{}"}}}
}

// A forward_auth MCP server gets each call with the bearer token of the serve
// request that started the run — alice's with alice's, bob's with bob's — and
// the token shows in no result, event, trace or log. A run resumed after an
// approval has no token: its call fails clearly and nothing goes out unauthenticated.
func TestMCPForwardAuth(t *testing.T) {
	g := newMCPGateway(t)
	model := openaitest.New(t, gwReply)
	specFile := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(specFile, []byte(strings.Replace(gwSpec, "GATEWAY", g.URL, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	recv := otlptest.New(t)
	tel, err := telemetry.Setup(t.Context(), func(k string) (string, bool) {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return recv.URL, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	t.Setenv("GW_SERVICE_TOKEN", gwServiceToken) // ${VAR} in a spec reads the process's environment
	vars := map[string]string{"LLM_BASE_URL": model.URL, "LLM_API_KEY": "sk-fake"}
	srv, err := serve.New(t.Context(), serve.Options{
		Config: serve.Config{Addr: "127.0.0.1:0", Auth: serve.AuthConfig{Tokens: []serve.TokenConfig{
			{SHA256: sha256Hex(aliceToken), User: "alice"}, {SHA256: sha256Hex(bobToken), User: "bob"}}}},
		Specs:         []string{specFile},
		Store:         "memory:",
		Model:         "openai:fake",
		Logger:        slog.New(slog.NewJSONHandler(logs, nil)),
		LookupEnv:     func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Telemetry:     tel,
		RecordContent: true,
	})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	e := &env{t: t, URL: hs.URL, client: hs.Client()}

	var shown []string // everything the API answered
	for _, who := range []struct{ token, user string }{{aliceToken, "alice"}, {bobToken, "bob"}} {
		r := e.do("POST", "/v1/agents/gw/runs", who.token, map[string]any{"input": "whoami"})
		var res runResult
		if err := json.Unmarshal(r.Body, &res); err != nil || r.Status != http.StatusOK || res.Result.Answer != "the gateway says: token of "+who.user {
			t.Fatalf("%s's run: %d %s", who.user, r.Status, r.Body)
		}
		events := e.do("GET", "/v1/runs/"+res.ID+"/events", who.token, nil)
		if events.Status != http.StatusOK || !strings.Contains(string(events.Body), "whoami") {
			t.Fatalf("%s's events: %d %s", who.user, events.Status, events.Body)
		}
		shown = append(shown, string(r.Body), string(events.Body))
	}
	if calls := g.Calls(); !slices.Equal(calls, []string{"Bearer " + aliceToken, "Bearer " + bobToken}) {
		t.Errorf("the gateway's calls carried %q", calls)
	}

	// The approved call goes on in a resumed run, which has no token to forward.
	before := len(g.Calls())
	r := e.do("POST", "/v1/agents/gw/runs", aliceToken, map[string]any{"input": "confirm"})
	var paused pausedRun
	if err := json.Unmarshal(r.Body, &paused); err != nil || paused.Result.Stop != "awaiting_approval" {
		t.Fatalf("the confirm run: %d %s", r.Status, r.Body)
	}
	if d := e.do("POST", "/v1/runs/"+paused.ID+"/approvals/call_1", aliceToken, map[string]any{"decision": "approve"}); d.Status != http.StatusOK {
		t.Fatalf("approve: %d %s", d.Status, d.Body)
	}
	var finished map[string]any
	eventually(t, "the resumed run finishes", func() bool {
		finished = e.do("GET", "/v1/runs/"+paused.ID, aliceToken, nil).json(t)
		return finished["status"] == "finished" && finished["result"].(map[string]any)["stop"] != "awaiting_approval"
	})
	data, _ := json.Marshal(finished)
	if !strings.Contains(string(data), "MCP server gw takes the bearer token of the user's request (forward_auth), and this run has none") {
		t.Errorf("the resumed run: %s", data)
	}
	if n := len(g.Calls()); n != before {
		t.Errorf("the resumed run sent %d requests to the gateway", n-before)
	}
	shown = append(shown, string(data))

	if err := tel.Shutdown(context.Background()); err != nil { // exports every span
		t.Fatal(err)
	}
	if len(recv.Spans()) == 0 {
		t.Fatal("no spans were exported")
	}
	for _, token := range []string{aliceToken, bobToken, gwServiceToken} {
		for _, s := range append(shown, logs.String()) {
			if strings.Contains(s, token) {
				t.Errorf("a token shows in %s", s)
			}
		}
		if recv.Contains(token) {
			t.Errorf("a token is in the trace")
		}
	}
}
