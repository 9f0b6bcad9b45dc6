package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// inProcess is an agentrun command running in this process until the test ends.
type inProcess struct {
	url    string // http://host:port, read from its stderr
	stderr *syncBuffer
}

// startInProcess runs agentrun with args and waits for the line of its stderr
// that matches listen, whose first group is the address it listens on. When the
// test ends its context is canceled and it must stop.
func startInProcess(t *testing.T, listen *regexp.Regexp, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{stderr: &syncBuffer{}}
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, args, strings.NewReader(""), io.Discard, p.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("%s exited %d after its context ended\n%s", args[0], code, p.stderr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s of its context ending", args[0])
		}
		if t.Failed() {
			t.Logf("%s's stderr:\n%s", args[0], p.stderr)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := listen.FindStringSubmatch(p.stderr.String()); m != nil {
			p.url = "http://" + m[1]
			return p
		}
		select {
		case code := <-exited:
			exited <- code
			t.Fatalf("%s exited %d before listening:\n%s", args[0], code, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen within 60s:\n%s", args[0], p.stderr)
		}
	}
}

// getJSON GETs path and decodes its JSON body into v, returning the status.
func (p *inProcess) getJSON(t *testing.T, path, token string, v any) int {
	t.Helper()
	req, err := http.NewRequest("GET", p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}
	return resp.StatusCode
}

// serve --ui serves the console's pages to anyone and its API still only with a
// token.
func TestServeUIServesTheConsoleBehindAuth(t *testing.T) {
	const token = "ui-test-token"
	config := writeFile(t, "serve.yaml", "auth:\n  tokens:\n    - {sha256: "+tokenHash(token)+", user: alice}\n")
	srv := startInProcess(t, regexp.MustCompile(`listening on http://(\S+)`),
		"serve", "--ui", "--config", config, "--addr", "127.0.0.1:0", "--model", "test", "--store", "memory:", concierge)
	resp, err := http.Get(srv.url + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /ui/: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("GET /ui/: Content-Security-Policy %q", csp)
	}
	if code := srv.getJSON(t, "/v1/agents", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/agents without a token: %d, want 401", code)
	}
	if code := srv.getJSON(t, "/v1/agents", token, nil); code != http.StatusOK {
		t.Errorf("GET /v1/agents with the token: %d, want 200", code)
	}
}
