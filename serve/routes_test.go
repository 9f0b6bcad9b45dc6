package serve_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/serve"
)

// Every endpoint of the API is documented in docs/serve.md and refuses a request
// without a token: a route added to the table without both fails here, not in a
// user's deployment.
func TestEveryRouteIsAuthenticatedAndDocumented(t *testing.T) {
	docs, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{})
	patterns := serve.RoutePatterns()
	if len(patterns) < 10 {
		t.Fatalf("only %d routes: %v", len(patterns), patterns)
	}
	wildcard := regexp.MustCompile(`\{[a-z_]+\}`)
	for _, p := range patterns {
		if !strings.Contains(string(docs), p) {
			t.Errorf("docs/serve.md does not document %s", p)
		}
		method, path, _ := strings.Cut(p, " ")
		req, err := http.NewRequest(method, e.URL+wildcard.ReplaceAllString(path, "x"), strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", p, res.StatusCode)
		}
	}
}
