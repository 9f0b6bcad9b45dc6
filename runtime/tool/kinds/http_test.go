package kinds_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/kinds"
)

// recorder is a real HTTP server that remembers every request it received.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path, rawPath, body string
	header                      http.Header
}

func newRecorder(t *testing.T, handle http.HandlerFunc) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.Path, r.URL.EscapedPath(), string(b), r.Header.Clone()})
		rec.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) take() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.reqs
	rec.reqs = nil
	return out
}

// The API redirects /go to its "to" query parameter with the status in "code"; the
// other server stands for any host the tool must not reach with the run's context.
func TestHTTPRedirects(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/users/u-7/go":
			code := map[string]int{"302": http.StatusFound, "303": http.StatusSeeOther, "307": http.StatusTemporaryRedirect}[r.URL.Query().Get("code")]
			http.Redirect(w, r, r.URL.Query().Get("to"), code)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			w.Write([]byte("api " + r.URL.Path + " for " + r.Header.Get("X-User-Id")))
		}
	})
	other := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("other host"))
	})
	otherHost := strings.TrimPrefix(other.URL, "http://")
	toOther := other.URL + "/secret"
	orders := func(method, redirects, to, code string) string {
		return "  - name: orders\n    parameters: {type: object, properties: {}}\n    bind: {owner: user.id}\n    http:\n" +
			"      method: " + method + "\n" +
			"      url: \"" + api.URL + "/users/{{ args.owner }}/go?code=" + code + "&to=" + url.QueryEscape(to) + "\"\n" +
			"      headers: {X-User-Id: \"{{ args.owner }}\", Authorization: \"Bearer s3cret\"}\n" + redirects
	}
	tests := []struct {
		name      string
		spec      string
		out       string
		err       string
		apiPaths  int // requests the API received
		otherSeen int // requests the other server received
	}{
		{
			name:     "cross-host redirect refused by default",
			spec:     orders("GET", "", toOther, "302"),
			err:      "GET " + api.URL + "/users/u-7/go?code=…&to=…: the server redirected to " + otherHost + ", which this tool may not follow",
			apiPaths: 1,
		},
		{
			name:     "same_host redirect followed with the headers",
			spec:     orders("GET", "      redirects: same_host\n", "/landing", "302"),
			out:      "api /landing for u-7",
			apiPaths: 2,
		},
		{
			name:     "none refuses even the same host",
			spec:     orders("GET", "      redirects: none\n", "/landing", "302"),
			err:      "the server redirected to " + strings.TrimPrefix(api.URL, "http://") + ", which this tool may not follow: it follows no redirects",
			apiPaths: 1,
		},
		{
			name:      "allowed host gets none of the tool's headers",
			spec:      orders("GET", "      redirects: {allow: [\""+otherHost+"\"]}\n", toOther, "302"),
			out:       "other host",
			apiPaths:  1,
			otherSeen: 1,
		},
		{
			name:      "allowed host after a 303 gets a GET without the body",
			spec:      orders("POST", "      body: {owner: \"{{ args.owner }}\"}\n      redirects: {allow: [\""+otherHost+"\"]}\n", toOther, "303"),
			out:       "other host",
			apiPaths:  1,
			otherSeen: 1,
		},
		{
			name:     "allowed host is not sent the body again (307)",
			spec:     orders("POST", "      body: {owner: \"{{ args.owner }}\"}\n      redirects: {allow: [\""+otherHost+"\"]}\n", toOther, "307"),
			err:      "the server asked to send the request body on to " + otherHost + "; this tool sends its body only to " + strings.TrimPrefix(api.URL, "http://"),
			apiPaths: 1,
		},
		{
			name:     "an allowed host without a port means its default port",
			spec:     orders("GET", "      redirects: {allow: [127.0.0.1]}\n", toOther, "302"),
			err:      "the server redirected to " + otherHost + ", which this tool may not follow",
			apiPaths: 1,
		},
		{
			name:     "redirect loop",
			spec:     "  - name: loop\n    http: {url: \"" + api.URL + "/loop\"}\n",
			err:      "stopped after 10 redirects",
			apiPaths: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := compileTool(t, tt.spec)
			out, err := h.Call(context.Background(), tool.Input{Args: map[string]any{"owner": "u-7"}, User: user, IdempotencyKey: "run-1/call-1"})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v\nwant %q", err, tt.err)
				}
			} else if err != nil || out != tt.out {
				t.Errorf("out %q, err %v; want %q", out, err, tt.out)
			}
			if got := api.take(); len(got) != tt.apiPaths {
				t.Errorf("the API received %d requests, want %d: %+v", len(got), tt.apiPaths, got)
			}
			seen := other.take()
			if len(seen) != tt.otherSeen {
				t.Fatalf("the other host received %d requests, want %d: %+v", len(seen), tt.otherSeen, seen)
			}
			for _, r := range seen {
				for _, k := range []string{"X-User-Id", "Authorization", "Referer", "Content-Type", "Idempotency-Key"} {
					if v := r.header.Get(k); v != "" {
						t.Errorf("the other host received %s: %s", k, v)
					}
				}
				if r.method != "GET" || r.body != "" || strings.Contains(r.path, "u-7") {
					t.Errorf("the other host received %s %s with body %q", r.method, r.path, r.body)
				}
			}
		})
	}
}

// The call's idempotency key goes out as the Idempotency-Key header, the same on
// every attempt; a header of that name in the spec wins, whatever its spelling.
func TestHTTPIdempotencyKey(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	orders := func(headers string) string {
		return "  - name: orders\n    parameters: {type: object, properties: {ref: {type: string}}}\n" +
			"    http:\n      method: POST\n      url: \"" + api.URL + "/orders\"\n" + headers
	}
	tests := []struct {
		name string
		spec string
		key  string
		want []string // the Idempotency-Key values the server received
	}{
		{name: "the key", spec: orders(""), key: "run-1/call-1", want: []string{"run-1/call-1"}},
		{name: "no key, no header", spec: orders(""), key: "", want: nil},
		{name: "the spec's header wins", spec: orders("      headers: {Idempotency-Key: \"order-{{ args.ref }}\"}\n"), key: "run-1/call-1", want: []string{"order-A1"}},
		{name: "in any spelling", spec: orders("      headers: {idempotency-key: \"order-{{ args.ref }}\"}\n"), key: "run-1/call-1", want: []string{"order-A1"}},
		{name: "the spec's header without a key", spec: orders("      headers: {Idempotency-Key: \"order-{{ args.ref }}\"}\n"), key: "", want: []string{"order-A1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := compileTool(t, tt.spec)
			in := tool.Input{Args: map[string]any{"ref": "A1"}, User: user, IdempotencyKey: tt.key}
			for attempt := 1; attempt <= 2; attempt++ { // a retried call sends the same key
				if out, err := h.Call(context.Background(), in); err != nil || out != "ok" {
					t.Fatalf("attempt %d: out %q, err %v", attempt, out, err)
				}
				got := api.take()
				if len(got) != 1 {
					t.Fatalf("attempt %d: the server received %d requests, want 1", attempt, len(got))
				}
				if v := got[0].header.Values("Idempotency-Key"); !slices.Equal(v, tt.want) {
					t.Errorf("attempt %d: Idempotency-Key %q, want %q", attempt, v, tt.want)
				}
			}
		})
	}
}

// A value rendered into the URL's path cannot make a segment the server reads as a
// step in the path, in any form it could decode; the server is never called.
func TestHTTPPathValues(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	h := compileTool(t, "  - name: order\n    parameters: {type: object, properties: {ref: {type: string}}}\n    bind: {owner: user.id}\n"+
		"    http: {url: \""+api.URL+"/users/{{ args.owner }}/orders/{{ args.ref }}/items\"}\n")
	suffixed := compileTool(t, "  - name: order\n    parameters: {type: object, properties: {ref: {type: string}}}\n"+
		"    http: {url: \""+api.URL+"/orders/v{{ args.ref }}.json?src=x\"}\n")
	tests := []struct {
		name, owner, ref string
		tool             tool.Tool
		err              string // "" for a call that reaches the server
		rawPath          string
	}{
		{name: "dot dot", ref: "..", err: `the value ".." cannot go into the URL's path, where it would make the segment ".."`},
		{name: "dot", ref: ".", err: `the value "." cannot go into the URL's path, where it would make the segment "."`},
		{name: "empty", ref: "", err: `the value "" cannot go into the URL's path, where it would make an empty segment`},
		{name: "slash walk", ref: "a/../b", err: `where it would make the segment ".."`},
		{name: "leading slash", ref: "/admin", err: "where it would make an empty segment"},
		{name: "backslash walk", ref: `..\admin`, err: `where it would make the segment ".."`},
		{name: "percent-encoded dots", ref: "%2e%2e", err: `where it would make the segment ".."`},
		{name: "encoded slash", ref: "a%2F..%2Fb", err: `where it would make the segment ".."`},
		{name: "path parameter", ref: "..;x", err: `where it would make the segment ".."`},
		{name: "bound user id", owner: "..", ref: "A1", err: `the value ".." cannot go into the URL's path`},
		{name: "dots inside a value", ref: "..a...b", rawPath: "/users/u-7/orders/..a...b/items"},
		{name: "a slash stays in its segment", ref: "a/b", rawPath: "/users/u-7/orders/a%2Fb/items"},
		{name: "percent stays literal", ref: "100%", rawPath: "/users/u-7/orders/100%25/items"},
		{name: "empty value inside a segment", ref: "", tool: suffixed, rawPath: "/orders/v.json"},
		{name: "dots inside a segment", ref: "..", tool: suffixed, rawPath: "/orders/v...json"},
		{name: "slash and dots inside a segment", ref: "/../x", tool: suffixed, err: `where it would make the segment ".."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := h
			if tt.tool != nil {
				call = tt.tool
			}
			owner := "u-7"
			if tt.owner != "" {
				owner = tt.owner
			}
			_, err := call.Call(context.Background(), tool.Input{Args: map[string]any{"ref": tt.ref, "owner": owner}, User: user})
			got := api.take()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err = %v\nwant %q", err, tt.err)
				}
				if len(got) != 0 {
					t.Errorf("the server was called: %+v", got)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("err %v, requests %+v", err, got)
			}
			if got[0].rawPath != tt.rawPath {
				t.Errorf("the server saw %s, want %s", got[0].rawPath, tt.rawPath)
			}
		})
	}
}

// A value after the URL's "?" is query-escaped, so it cannot add parameters; a value
// inside the host may hold only host characters, so it cannot move the request.
func TestHTTPQueryAndHostValues(t *testing.T) {
	var query url.Values
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { query = r.URL.Query() })
	port := api.URL[strings.LastIndex(api.URL, ":")+1:]
	q := compileTool(t, "  - name: search\n    parameters: {type: object, properties: {q: {type: string}}}\n"+
		"    http: {url: \""+api.URL+"/search?q={{ args.q }}&limit=5\"}\n")
	if _, err := q.Call(context.Background(), tool.Input{Args: map[string]any{"q": "x&admin=1 #y"}}); err != nil {
		t.Fatal(err)
	}
	if query.Get("q") != "x&admin=1 #y" || query.Has("admin") || query.Get("limit") != "5" {
		t.Errorf("the server saw the query %v", query)
	}
	host := compileTool(t, "  - name: h\n    parameters: {type: object, properties: {port: {type: string}}}\n"+
		"    http: {url: \"http://127.0.0.1:{{ args.port }}/x\"}\n")
	if _, err := host.Call(context.Background(), tool.Input{Args: map[string]any{"port": port}}); err != nil {
		t.Errorf("a port from an argument: %v", err)
	}
	for _, bad := range []string{port + "/evil", port + "@evil.example", port + "#", port + `\x`} {
		if _, err := host.Call(context.Background(), tool.Input{Args: map[string]any{"port": bad}}); err == nil || !strings.Contains(err.Error(), "cannot be part of the URL's host") {
			t.Errorf("port %q: err = %v", bad, err)
		}
	}
	if got := api.take(); len(got) != 2 {
		t.Errorf("the server received %d requests, want 2", len(got))
	}
}

func TestCheckPathValue(t *testing.T) {
	for _, v := range []string{"", ".", "..", "a/../b", "%2e%2e", "%252e%252e", "a/", `a\..`} {
		if kinds.CheckPathValue(v) == nil {
			t.Errorf("%q accepted", v)
		}
	}
	for _, v := range []string{"cli-user", "u-7", "alice@example.com", "a/b", "...", "100%", "DOMAIN\\alice"} {
		if err := kinds.CheckPathValue(v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}
