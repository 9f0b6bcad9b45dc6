package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/serve"
)

// A web page of an allowed origin, in a real browser, starts a streamed run with
// fetch, reads its id from the exposed header, and follows its text and result
// with EventSource and a stream token; a page of another origin is refused by
// the browser.
func TestBrowserFollowsARun(t *testing.T) {
	tools := nodetools.Dir(t)
	if _, err := exec.LookPath("chromium"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed: .ci/run installs Debian's chromium")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>shop</title><p>help</p>"))
	}))
	t.Cleanup(page.Close)
	other := httptest.NewServer(page.Config.Handler)
	t.Cleanup(other.Close)
	e := newEnv(t, envOptions{cors: serve.CORSConfig{AllowedOrigins: []string{page.URL}}})

	ask := func(pageURL string) map[string]any {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "browser-stream.mjs"), pageURL, e.URL, aliceToken, "support", "hello")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("browser-stream: %v\n%s\n%s", err, out, stderr.String())
		}
		var seen map[string]any
		if err := json.Unmarshal(out, &seen); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return seen
	}
	seen := ask(page.URL)
	if seen["answer"] != greeting || seen["text"] != greeting || seen["runId"] == nil || seen["error"] != nil {
		t.Errorf("the page saw %v", seen)
	}
	if refused := ask(other.URL); refused["blocked"] != true {
		t.Errorf("a page of another origin saw %v", refused)
	}
}
