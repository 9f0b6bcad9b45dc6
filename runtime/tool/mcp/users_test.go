package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/mcp"
	"github.com/agentrun/agentrun/spec"
)

// gateway is a streamable HTTP MCP server of the official SDK, optionally behind
// its bearer-token middleware as a team's MCP gateway would be. It records every
// request, and each session's close (DELETE) by the X-User it carried.
type gateway struct {
	URL     string
	handler http.Handler // what serves URL
	mu      sync.Mutex
	seen    []request
	closed  chan string
	// meet, when set, holds every whoami call until that many have arrived.
	meet *sync.WaitGroup
}

// request is one HTTP request the gateway got: its JSON-RPC method ("DELETE" for
// a session's close), session and headers.
type request struct {
	Method, Session, User, Authorization string
}

// tokens are the gateway's bearer tokens and the users they stand for.
var tokens = map[string]string{"alice-token-0123456789": "alice", "bob-token-0123456789": "bob", "service-token-0123456789": "agentrun"}

func newGateway(t *testing.T, requireToken bool) *gateway {
	t.Helper()
	g := &gateway{closed: make(chan string, 100)}
	s := sdk.NewServer(&sdk.Implementation{Name: "gateway", Version: "1"}, nil)
	type none struct{}
	// whoami answers whom the call's request named: its X-User header and the user
	// of its bearer token.
	sdk.AddTool(s, &sdk.Tool{Name: "whoami", Description: "Says who is asking."}, func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		if g.meet != nil {
			g.meet.Done()
			g.meet.Wait()
		}
		who := "x-user=" + req.Extra.Header.Get("X-User")
		if info := req.Extra.TokenInfo; info != nil {
			who += " token-user=" + info.UserID
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: who}}}, nil, nil
	})
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	if requireToken {
		h = auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			user, ok := tokens[token]
			if !ok {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
		}, nil)(h)
	}
	g.handler = g.record(h)
	srv := httptest.NewServer(g.handler)
	t.Cleanup(srv.Close)
	g.URL = srv.URL + "/mcp"
	return g
}

func (g *gateway) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := request{Method: r.Method, Session: r.Header.Get("Mcp-Session-Id"), User: r.Header.Get("X-User"), Authorization: r.Header.Get("Authorization")}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			json.Unmarshal(body, &msg)
			req.Method = msg.Method
		}
		// Recorded as the answer starts, before the client can go on: an initialize
		// with the session the server names in its answer.
		rec := &headerHook{ResponseWriter: w, hook: func() {
			if req.Session == "" {
				req.Session = w.Header().Get("Mcp-Session-Id")
			}
			g.mu.Lock()
			g.seen = append(g.seen, req)
			g.mu.Unlock()
		}}
		next.ServeHTTP(rec, r)
		rec.writeHeader()
		if r.Method == http.MethodDelete {
			g.closed <- req.User
		}
	})
}

// headerHook calls hook once, just before the answer's header goes out.
type headerHook struct {
	http.ResponseWriter
	hook func()
	once sync.Once
}

func (h *headerHook) writeHeader() { h.once.Do(h.hook) }

func (h *headerHook) WriteHeader(code int) {
	h.writeHeader()
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerHook) Write(b []byte) (int, error) {
	h.writeHeader()
	return h.ResponseWriter.Write(b)
}

func (h *headerHook) Unwrap() http.ResponseWriter { return h.ResponseWriter }

func (h *headerHook) Flush() {
	h.writeHeader()
	http.NewResponseController(h.ResponseWriter).Flush()
}

// requests are the requests so far with the JSON-RPC method (or DELETE).
func (g *gateway) requests(method string) []request {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []request
	for _, r := range g.seen {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// waitClosed waits for the gateway to see a session closed, and returns its X-User.
func (g *gateway) waitClosed(t *testing.T) string {
	t.Helper()
	select {
	case user := <-g.closed:
		return user
	case <-time.After(10 * time.Second):
		t.Fatal("no session was closed")
		return ""
	}
}

// server loads an MCP server entry as a spec declares it (templates compiled).
func server(t *testing.T, url, keys string) spec.MCPServer {
	t.Helper()
	l, _ := spec.NewLoader()
	s, diags := l.Load("a.yaml", []byte(fmt.Sprintf("version: 1\nname: a\nmcp_servers:\n  - name: gw\n    url: %s\n%s", url, keys)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return s.MCPServers[0]
}

func startWith(t *testing.T, sp spec.MCPServer, opts mcp.Options) *mcp.Manager {
	t.Helper()
	opts.Dir = t.TempDir()
	m, err := mcp.Start(context.Background(), []spec.MCPServer{sp}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func as(user string) tool.Input {
	return tool.Input{User: tool.User{ID: user}}
}

func whoami(t *testing.T, m *mcp.Manager, in tool.Input) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := find(t, m, "whoami").Call(ctx, in)
	if err != nil {
		t.Errorf("whoami as %q: %v", in.User.ID, err)
	}
	return out
}

// A header template that renders the user reaches the server with each call's own
// user: alice's calls carry alice and bob's bob, also at the same time, and every
// request of a session (initialize included) carries the same user.
func TestHeadersPerUser(t *testing.T) {
	g := newGateway(t, false)
	m := startWith(t, server(t, g.URL, `    headers: {X-User: "{{ user.id }}"}`), mcp.Options{})
	if p, ok := find(t, m, "whoami").(tool.UserPasser); !ok || !p.PassesUser() {
		t.Error("a server whose headers render the user passes the user on")
	}
	g.meet = &sync.WaitGroup{}
	users := []string{"alice", "bob", "alice", "bob"}
	g.meet.Add(len(users)) // every call waits for the others: they run at once
	got := make([]string, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() { got[i] = whoami(t, m, as(u)) })
	}
	wg.Wait()
	for i, u := range users {
		if got[i] != "x-user="+u {
			t.Errorf("%s's call reached the server as %q", u, got[i])
		}
	}
	bySession := map[string]string{}
	for _, r := range append(g.requests("initialize"), g.requests("tools/call")...) {
		if r.Session == "" {
			t.Fatalf("a request without a session: %+v", r)
		}
		if prev, ok := bySession[r.Session]; ok && prev != r.User {
			t.Errorf("session %s carried %q and %q", r.Session, prev, r.User)
		}
		bySession[r.Session] = r.User
	}
	if inits := g.requests("initialize"); len(inits) != 3 { // the tools at start, alice, bob
		t.Errorf("%d sessions opened, want 3: %+v", len(inits), inits)
	}
}

// The sessions are bounded: a new user past MaxSessions takes the place of the
// least recently used idle session, which is closed, and its user's next call
// opens a new one.
func TestSessionsBounded(t *testing.T) {
	g := newGateway(t, false)
	m := startWith(t, server(t, g.URL, `    headers: {X-User: "{{ user.id }}"}`), mcp.Options{MaxSessions: 2})
	if user := g.waitClosed(t); user != "" {
		t.Errorf("the session that listed the tools was closed as %q", user)
	}
	for _, u := range []string{"alice", "bob", "alice"} { // bob is now the least recently used
		whoami(t, m, as(u))
	}
	if out := whoami(t, m, as("carol")); out != "x-user=carol" {
		t.Errorf("carol: %q", out)
	}
	if user := g.waitClosed(t); user != "bob" {
		t.Errorf("closed %q's session, want bob's", user)
	}
	if out := whoami(t, m, as("bob")); out != "x-user=bob" {
		t.Errorf("bob again: %q", out)
	}
	if user := g.waitClosed(t); user != "alice" {
		t.Errorf("closed %q's session, want alice's", user)
	}
	var opened []string
	for _, r := range g.requests("initialize") {
		opened = append(opened, r.User)
	}
	if want := []string{"", "alice", "bob", "carol", "bob"}; !slices.Equal(opened, want) {
		t.Errorf("sessions opened for %q, want %q", opened, want)
	}
}

// A session unused for IdleTimeout is closed; the user's next call opens another.
func TestIdleSessionClosed(t *testing.T) {
	g := newGateway(t, false)
	m := startWith(t, server(t, g.URL, `    headers: {X-User: "{{ user.id }}"}`), mcp.Options{IdleTimeout: time.Millisecond})
	g.waitClosed(t) // the session that listed the tools
	whoami(t, m, as("alice"))
	if user := g.waitClosed(t); user != "alice" {
		t.Errorf("closed %q's session, want alice's", user)
	}
	if out := whoami(t, m, as("alice")); out != "x-user=alice" {
		t.Errorf("after the idle close: %q", out)
	}
	if n := len(g.requests("initialize")); n != 3 {
		t.Errorf("%d sessions opened, want 3 (the tools at start, alice twice)", n)
	}
}

// forward_auth sends each call with the bearer token of the user's request, over a
// session the gateway's own middleware binds to that token's user; the spec's
// Authorization header is only for listing the tools at start. A run without a
// credential gets a tool error, and nothing is sent. The audit names the
// credential by its fingerprint, never the token.
func TestForwardAuth(t *testing.T) {
	g := newGateway(t, true)
	var mu sync.Mutex
	var audits []mcp.AuditRecord
	m := startWith(t, server(t, g.URL, "    headers: {Authorization: \"Bearer service-token-0123456789\"}\n    forward_auth: true"),
		mcp.Options{Audit: func(r mcp.AuditRecord) { mu.Lock(); audits = append(audits, r); mu.Unlock() }})
	if p, ok := find(t, m, "whoami").(tool.UserPasser); !ok || !p.PassesUser() {
		t.Error("a forward_auth server passes the user on")
	}
	withToken := func(user, token string) tool.Input {
		return tool.Input{User: tool.User{ID: user, Credential: tool.NewCredential(token)}}
	}
	for _, u := range []string{"alice", "bob", "alice"} {
		if out := whoami(t, m, withToken(u, u+"-token-0123456789")); out != "x-user= token-user="+u {
			t.Errorf("%s's call reached the gateway as %q", u, out)
		}
	}
	for _, r := range g.requests("tools/call") {
		if r.Authorization == "Bearer service-token-0123456789" {
			t.Errorf("a call went with the listing token: %+v", r)
		}
	}

	_, err := find(t, m, "whoami").Call(context.Background(), as("carol"))
	if err == nil || err.Error() != "MCP server gw takes the bearer token of the user's request (forward_auth), and this run has none "+
		"(only runs agentrun serve starts for a request it authenticated have one; exec, Temporal workers and runs resumed after an approval have none); whoami was not sent" {
		t.Errorf("a call without a credential: %v", err)
	}
	if n := len(g.requests("tools/call")); n != 3 {
		t.Errorf("the gateway got %d calls, want 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(audits) != 4 || audits[0].User != "alice" || audits[0].Credential != tool.NewCredential("alice-token-0123456789").Fingerprint() ||
		!strings.HasPrefix(audits[0].Credential, "sha256:") || audits[3].Outcome != "no_credential" || audits[3].Credential != "" {
		t.Errorf("audits %+v", audits)
	}
	data, _ := json.Marshal(audits)
	if bytes.Contains(data, []byte("-token-0123456789")) {
		t.Errorf("an audit record holds a token: %s", data)
	}
}

// Without forward_auth the user's credential goes nowhere, whatever else the
// requests carry.
func TestNoForwardWithoutForwardAuth(t *testing.T) {
	g := newGateway(t, false)
	m := startWith(t, server(t, g.URL, `    headers: {X-User: "{{ user.id }}"}`), mcp.Options{})
	in := as("alice")
	in.User.Credential = tool.NewCredential("alice-token-0123456789")
	if out := whoami(t, m, in); out != "x-user=alice" {
		t.Errorf("%q", out)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.seen {
		if r.Authorization != "" {
			t.Errorf("a request carried Authorization %q: %+v", r.Authorization, r)
		}
	}
}

// An error connecting to a server or calling it shows no header value and nothing
// of the URL's userinfo or query: where the spec's ${VAR} secrets go.
func TestErrorsHideSecrets(t *testing.T) {
	const header, password, key = "Bearer hdr-secret-0123", "pw-secret-0123", "key-secret-0123"
	secrets := []string{"hdr-secret-0123", password, key}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens there any more
	url := strings.Replace(down.URL, "http://", "http://gateway-agent:"+password+"@", 1) + "/mcp?key=" + key
	_, err := mcp.Start(context.Background(), []spec.MCPServer{server(t, url, `    headers: {Authorization: "`+header+`"}`)}, mcp.Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "MCP server gw: cannot connect") {
		t.Fatalf("err = %v", err)
	}
	for _, s := range append(secrets, "gateway-agent") {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error shows %q: %v", s, err)
		}
	}

	// A gateway that quotes the token it refuses, in a JSON-RPC error, when a
	// user's session is opened.
	g := newGateway(t, false)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); strings.Contains(a, "alice") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"%s is not allowed here"}}`, a)
			return
		}
		g.handler.ServeHTTP(w, r)
	}))
	t.Cleanup(refusing.Close)
	m := startWith(t, server(t, refusing.URL+"/mcp", "    forward_auth: true"), mcp.Options{})
	in := as("alice")
	in.User.Credential = tool.NewCredential("alice-token-0123456789")
	_, err = find(t, m, "whoami").Call(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "MCP server gw: cannot connect") || !strings.Contains(err.Error(), "is not allowed here") ||
		strings.Contains(err.Error(), "alice-token") {
		t.Errorf("err = %v", err)
	}
}
