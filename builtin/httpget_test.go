package builtin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testServer serves fixed routes on 127.0.0.1 and counts the requests per path, so a
// test can tell that a refused request never left the tool.
type testServer struct {
	*httptest.Server
	hits map[string]*atomic.Int32
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	s := &testServer{hits: map[string]*atomic.Int32{}}
	for _, p := range []string{"/", "/big", "/missing", "/to-localhost", "/to-ok", "/to-ftp", "/slow", "/binary", "/target", "/chain"} {
		s.hits[p] = &atomic.Int32{}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		s.hits["/"].Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "hello from the server")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/big"].Add(1)
		fmt.Fprint(w, strings.Repeat("a", 1000))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/missing"].Add(1)
		http.Error(w, "no such page\n  (try /)", http.StatusNotFound)
	})
	mux.HandleFunc("/to-localhost", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/to-localhost"].Add(1)
		// Same server under a host name the allow list does not hold.
		http.Redirect(w, r, "http://localhost:"+s.port()+"/target", http.StatusFound)
	})
	mux.HandleFunc("/to-ok", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/to-ok"].Add(1)
		http.Redirect(w, r, "/", http.StatusFound)
	})
	mux.HandleFunc("/to-ftp", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/to-ftp"].Add(1)
		http.Redirect(w, r, "ftp://127.0.0.1/file", http.StatusFound)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/target"].Add(1)
		fmt.Fprint(w, "target")
	})
	// /chain?n=3 redirects n times before answering.
	mux.HandleFunc("/chain", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/chain"].Add(1)
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n > 0 {
			http.Redirect(w, r, "/chain?n="+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		fmt.Fprint(w, "end of chain")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/slow"].Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		s.hits["/binary"].Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\x00\x00"))
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) port() string {
	u, _ := url.Parse(s.URL)
	return u.Port()
}

func (s *testServer) hitCount(path string) int32 { return s.hits[path].Load() }

func TestHTTPGet(t *testing.T) {
	srv := newTestServer(t)
	tests := []struct {
		name string
		with map[string]any
		path string
		want []string // substrings of the answer
	}{
		{"allowed host", nil, "/",
			[]string{"HTTP 200 OK, Content-Type: text/plain; charset=utf-8\n\nhello from the server"}},
		{"redirect to an allowed host", nil, "/to-ok",
			[]string{"redirected to " + srv.URL + "/", "hello from the server"}},
		{"five redirects are followed", nil, "/chain?n=5", []string{"end of chain"}},
		{"size cap with a marker", map[string]any{"max_bytes": 100}, "/big",
			[]string{"\n\n" + strings.Repeat("a", 100) + "\n[… cut at 100 bytes; the response is longer]"}},
		{"a body of exactly max_bytes is not cut", map[string]any{"max_bytes": 1000}, "/big",
			[]string{strings.Repeat("a", 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			with := map[string]any{"allow_hosts": []any{"127.0.0.1"}}
			for k, v := range tt.with {
				with[k] = v
			}
			got, err := call(mustBuild(t, "http_get", with, ""), map[string]any{"url": srv.URL + tt.path})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("answer %q does not contain %q", got, w)
				}
			}
			if tt.name == "a body of exactly max_bytes is not cut" && strings.Contains(got, "cut at") {
				t.Errorf("answer has a cut marker: %q", got)
			}
		})
	}
}

func TestHTTPGetRefuses(t *testing.T) {
	srv := newTestServer(t)
	tests := []struct {
		name   string
		allow  []any
		url    string
		want   []string
		silent []string // paths the server must never have seen
	}{
		{"host not in the allow list, before any request", []any{"example.com", "*.example.org"}, srv.URL + "/",
			[]string{"host 127.0.0.1 is not allowed; http_get may fetch only from example.com, *.example.org"}, []string{"/"}},
		{"same server under another name", []any{"127.0.0.1"}, "http://localhost:" + srv.port() + "/",
			[]string{"host localhost is not allowed"}, []string{"/"}},
		{"redirect to a host not in the allow list", []any{"127.0.0.1"}, srv.URL + "/to-localhost",
			[]string{"refused the redirect to http://localhost:", "host localhost is not allowed"}, []string{"/target"}},
		{"redirect to another scheme", []any{"127.0.0.1"}, srv.URL + "/to-ftp",
			[]string{"refused the redirect to ftp://127.0.0.1/file", "only http and https"}, nil},
		{"more than five redirects", []any{"127.0.0.1"}, srv.URL + "/chain?n=6",
			[]string{"stopped after 5 redirects"}, nil},
		{"a 404 is an error with the status and an excerpt", []any{"127.0.0.1"}, srv.URL + "/missing",
			[]string{"GET " + srv.URL + "/missing: 404 Not Found: no such page (try /)"}, nil},
		{"binary content", []any{"127.0.0.1"}, srv.URL + "/binary",
			[]string{"returned binary content (image/png); http_get returns text only"}, nil},
		{"another scheme", []any{"127.0.0.1"}, "file:///etc/passwd",
			[]string{`only http and https URLs can be fetched, not "file:"`}, nil},
		{"no host", []any{"127.0.0.1"}, "http:///x", []string{"has no host"}, nil},
		{"not a URL", []any{"127.0.0.1"}, "http://[::1", []string{"is not a valid URL"}, nil},
		{"wildcard does not match the bare domain", []any{"*.127.0.0.1"}, srv.URL + "/",
			[]string{"host 127.0.0.1 is not allowed"}, []string{"/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := mustBuild(t, "http_get", map[string]any{"allow_hosts": tt.allow}, "")
			got, err := call(tool, map[string]any{"url": tt.url})
			if err == nil {
				t.Fatalf("want an error, got %q", got)
			}
			wantErrContains(t, err, tt.want...)
			for _, p := range tt.silent {
				if n := srv.hitCount(p); n != 0 {
					t.Errorf("the server saw %d requests for %s", n, p)
				}
			}
		})
	}
}

func TestHTTPGetTimeout(t *testing.T) {
	srv := newTestServer(t)
	tool := mustBuild(t, "http_get", map[string]any{"allow_hosts": []any{"127.0.0.1"}, "timeout": "100ms"}, "")
	start := time.Now()
	_, err := call(tool, map[string]any{"url": srv.URL + "/slow"})
	wantErrContains(t, err, "no response within 100ms")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s despite the 100ms timeout", d)
	}
}

func TestHostRuleMatches(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		host  string
		want  bool
	}{
		{"exact", "api.example.com", "api.example.com", true},
		{"exact is not a suffix", "example.com", "api.example.com", false},
		{"case and trailing dot", "API.Example.COM.", "api.example.com", true},
		{"wildcard matches a subdomain", "*.example.com", "api.example.com", true},
		{"wildcard matches deeper subdomains", "*.example.com", "a.b.example.com", true},
		{"wildcard does not match the domain itself", "*.example.com", "example.com", false},
		{"wildcard needs a dot boundary", "*.example.com", "badexample.com", false},
		{"IPv6 in brackets", "[::1]", "::1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseHostRule(tt.entry)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.matches(tt.host); got != tt.want {
				t.Errorf("%s matches %s = %v, want %v", tt.entry, tt.host, got, tt.want)
			}
		})
	}
}

func TestHTTPGetURLHostIsNormalised(t *testing.T) {
	// The check sees the host as the request will: case and a trailing dot do not
	// slip a URL past the list.
	tool := mustBuild(t, "http_get", map[string]any{"allow_hosts": []any{"api.example.com"}}, "")
	h := tool.(*httpGet)
	tests := []struct {
		name string
		url  string
		ok   bool
	}{
		{"upper case", "https://API.EXAMPLE.COM/x", true},
		{"trailing dot", "https://api.example.com./x", true},
		{"user info before another host", "https://api.example.com@evil.test/", false},
		{"port", "https://api.example.com:8443/", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.checkURL(u); (err == nil) != tt.ok {
				t.Errorf("checkURL(%s) = %v, want ok=%v", tt.url, err, tt.ok)
			}
		})
	}
}
