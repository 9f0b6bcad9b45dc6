package serve_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/serve"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// checkGolden compares got with testdata/name (go test ./serve -update writes it).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./serve -update writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// exampleServer serves example agents offline (the test model, an index of its
// own) for alice, and returns its URL.
func exampleServer(t *testing.T, specs ...string) string {
	t.Helper()
	srv, err := serve.New(t.Context(), serve.Options{
		Config: serve.Config{Addr: "127.0.0.1:0", Auth: serve.AuthConfig{Tokens: []serve.TokenConfig{{SHA256: sha256Hex(aliceToken), User: "alice"}}},
			Limits: serve.Limits{RatePerSecond: 1000, Burst: 1000, MaxConcurrentPerUser: 8}},
		Specs:     specs,
		Store:     "memory:",
		Model:     "test",
		Index:     filepath.Join(t.TempDir(), "index.db"),
		Logger:    slog.New(slog.NewJSONHandler(io.Discard, nil)),
		LookupEnv: func(string) (string, bool) { return "", false },
	})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// GET /v1/agents/{name}/graph answers the graph `agentrun graph --format json`
// prints, and 404 for an agent the server does not have.
func TestAgentGraph(t *testing.T) {
	url := exampleServer(t, "../examples/agents/shop-support.yaml", "../examples/agents/order-digest.yaml")
	for _, tt := range []struct {
		name, agent, token string
		status             int
		golden, code       string
	}{
		{name: "intents and a handoff", agent: "shop-support", token: aliceToken, status: http.StatusOK, golden: "graph/shop-support.json"},
		{name: "a workflow", agent: "order-digest", token: aliceToken, status: http.StatusOK, golden: "graph/order-digest.json"},
		{name: "unknown agent", agent: "shop", token: aliceToken, status: http.StatusNotFound, code: "unknown_agent"},
		{name: "no token", agent: "shop-support", status: http.StatusUnauthorized, code: "unauthorized"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", url+"/v1/agents/"+tt.agent+"/graph", nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			r := response{Status: res.StatusCode, Header: res.Header, Body: body}
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.status, body)
			}
			if tt.code != "" {
				if code := r.errorCode(t); code != tt.code {
					t.Errorf("code %q, want %q", code, tt.code)
				}
				return
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.golden, indented.Bytes())
		})
	}
}
