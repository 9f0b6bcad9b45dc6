package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/serve"
)

// A page of an allowed origin gets its preflight answered and may read the
// API's answers; another origin's preflight is refused and its answers carry
// nothing a browser would let it read. Without cors nothing changes.
func TestCORS(t *testing.T) {
	const page = "https://app.example.com"
	e := newEnv(t, envOptions{cors: serve.CORSConfig{AllowedOrigins: []string{page}}})
	preflight := func(origin string) response {
		return e.doT(t, "OPTIONS", "/v1/agents/support/runs", "", nil, "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
	}
	ok := preflight(page)
	if ok.Status != http.StatusNoContent || ok.Header.Get("Access-Control-Allow-Origin") != page ||
		ok.Header.Get("Access-Control-Allow-Headers") == "" || ok.Header.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("preflight of %s: %d %v", page, ok.Status, ok.Header)
	}
	// The protocols' browser clients send headers of their own, and MCP's reads its session's.
	for _, h := range []string{"Mcp-Session-Id", "MCP-Protocol-Version", "A2A-Version", "Idempotency-Key"} {
		if !strings.Contains(ok.Header.Get("Access-Control-Allow-Headers"), h) {
			t.Errorf("a page may not send %s: %q", h, ok.Header.Get("Access-Control-Allow-Headers"))
		}
	}
	if bad := preflight("https://evil.example"); bad.Status != http.StatusForbidden || bad.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", bad.Status, bad.Header)
	}
	run := e.doT(t, "POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hello"}, "Origin", page)
	if run.Status != http.StatusOK || run.Header.Get("Access-Control-Allow-Origin") != page || run.Header.Get("Access-Control-Expose-Headers") == "" {
		t.Errorf("a run from %s: %d %v", page, run.Status, run.Header)
	}
	if exposed := run.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(exposed, "Mcp-Session-Id") || !strings.Contains(exposed, "X-Agentrun-Run") {
		t.Errorf("a page may not read the session or run headers: %q", exposed)
	}
	if other := e.doT(t, "GET", "/v1/agents", aliceToken, nil, "Origin", "https://evil.example"); other.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin may read the answer: %v", other.Header)
	}
	if noAuth := e.doT(t, "GET", "/v1/agents", "", nil, "Origin", page); noAuth.Status != http.StatusUnauthorized {
		t.Errorf("an allowed origin without a token: %d", noAuth.Status)
	}

	off := newEnv(t, envOptions{})
	if r := off.doT(t, "OPTIONS", "/v1/agents", "", nil, "Origin", page, "Access-Control-Request-Method", "GET"); r.Header.Get("Access-Control-Allow-Origin") != "" || r.Status == http.StatusNoContent {
		t.Errorf("without cors: %d %v", r.Status, r.Header)
	}
}
