package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// An http tool's API redirects to another host: the other host is never contacted,
// with or without the bound header, and the model gets the refusal as the tool's
// result.
func TestExecHTTPRedirectToOtherHost(t *testing.T) {
	var mu sync.Mutex
	var otherHits []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		otherHits = append(otherHits, r.URL.Path+" X-User-Id="+r.Header.Get("X-User-Id"))
		mu.Unlock()
		w.Write([]byte("secret"))
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/secret", http.StatusFound)
	}))
	defer api.Close()
	spec := writeFile(t, "agent.yaml", `version: 1
name: redirect
tools:
  - name: get_order
    description: One of the user's orders.
    parameters: {type: object, properties: {ref: {type: string}}, required: [ref]}
    bind: {user_id: user.id}
    http:
      url: "`+api.URL+`/orders/{{ args.ref }}"
      headers: {X-User-Id: "{{ args.user_id }}"}
`)
	script := writeFile(t, "turns.yaml", `
turns:
  - tool_calls: [{name: get_order, arguments: {ref: A1}}]
  - text: The order service redirected me elsewhere.
`)
	code, res, stderr := execJSON(t, "--model", "script:"+script, "--user", "alice", spec, "where is A1?")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	otherHost := strings.TrimPrefix(other.URL, "http://")
	want := "the server redirected to " + otherHost + ", which this tool may not follow"
	if len(res.Steps) != 1 || res.Steps[0].Outcome != "error" || !strings.Contains(res.Steps[0].Result, want) {
		t.Errorf("steps %+v; want one error step with %q", res.Steps, want)
	}
	var toolMessage string
	for _, m := range res.Messages {
		if m.Role == "tool" {
			toolMessage = m.Content
		}
	}
	if !strings.Contains(toolMessage, want) {
		t.Errorf("the model got %q; want the refusal", toolMessage)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(otherHits) != 0 {
		t.Errorf("the other host was contacted: %v", otherHits)
	}
}

// A user id that no tool could use safely is a usage error (exit 2): the run never
// starts, so no tool builds a request from it.
func TestExecRefusesUnsafeUserID(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		w.Write([]byte(`{"orders":[]}`))
	}))
	defer api.Close()
	spec := writeFile(t, "agent.yaml", `version: 1
name: users
tools:
  - name: list_orders
    parameters: {type: object, properties: {}}
    bind: {user_id: user.id}
    http: {url: "`+api.URL+`/users/{{ args.user_id }}/orders"}
`)
	for _, tt := range []struct{ id, err string }{
		{"..", `user id ".." is not allowed`},
		{"", `user id "" is empty`},
		{".", `user id "." is not allowed`},
		{"bob/../alice", `user id "bob/../alice" is not allowed: it contains "/"`},
	} {
		code, stdout, stderr := runCLI(t, "exec", "--model", "test", "--user", tt.id, spec, "my orders")
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.err) {
			t.Errorf("--user %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.id, code, stdout, stderr, tt.err)
		}
	}
	code, _, stderr := runCLI(t, "exec", "--model", "test", "-q", spec, "my orders")
	if code != 0 {
		t.Fatalf("the default user: exit %d\n%s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(paths, " ") != "/users/cli-user/orders" {
		t.Errorf("the API saw %v; want only the default user's call", paths)
	}
}
