package kinds_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/tool"
)

const (
	weatherKey = "wk-0123456789abcdef"
	shortKey   = "k3y9" // too short for the general mask: the URL must not show it at all
	headerKey  = "hk-fedcba9876543210"
)

var secretEnv = map[string]string{"WEATHER_KEY": weatherKey, "SHORT_KEY": shortKey, "HEADER_KEY": headerKey}

// closedPort is the address of a listener that was closed: a connection to it is
// refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// resetting is a server that accepts each request's connection and resets it
// without an answer.
func resetting(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // close with a RST
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// An http tool's error, which the model receives as "Error: …", never shows a
// query value, a header value or a value of the tool's environment, wherever it
// sits in the configuration; it still names the method, host and path.
func TestHTTPErrorsHideSecrets(t *testing.T) {
	refused := closedPort(t)
	reset := resetting(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid key "+r.URL.Query().Get("appid")+" or "+r.Header.Get("X-Api-Key")+" for "+r.URL.RequestURI(), http.StatusUnauthorized)
	}))
	defer echo.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/moved?"+r.URL.RawQuery, http.StatusFound)
	}))
	defer redirect.Close()
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	weather := func(http string) string {
		return "  - name: weather\n    parameters: {type: object, properties: {city: {type: string}}}\n    http:\n" + http
	}
	tests := []struct {
		name  string
		spec  string
		want  string   // the error holds this
		never []string // and none of these
	}{
		{
			name:  "query key, connection refused",
			spec:  weather("      url: http://" + refused + "/weather\n      query: {appid: \"${WEATHER_KEY}\", q: \"{{ args.city }}\"}\n"),
			want:  "GET http://" + refused + "/weather?appid=…&q=…: dial tcp " + refused + ": connect: connection refused",
			never: []string{weatherKey, "Copenhagen"},
		},
		{
			name:  "a short key in the URL's query",
			spec:  weather("      url: \"http://" + refused + "/weather?appid=${SHORT_KEY}&q={{ args.city }}\"\n"),
			want:  "GET http://" + refused + "/weather?appid=…&q=…: dial tcp",
			never: []string{shortKey, "Copenhagen"},
		},
		{
			name:  "key in the path",
			spec:  weather("      url: \"http://" + refused + "/${WEATHER_KEY}/weather/{{ args.city }}\"\n"),
			want:  "GET http://" + refused + "/[secret WEATHER_KEY]/weather/Copenhagen: dial tcp",
			never: []string{weatherKey},
		},
		{
			name:  "key as the URL's user",
			spec:  weather("      url: \"http://${WEATHER_KEY}@" + refused + "/weather\"\n"),
			want:  "GET http://" + refused + "/weather: dial tcp",
			never: []string{weatherKey},
		},
		{
			name:  "header key, connection reset",
			spec:  weather("      url: http://" + reset + "/weather\n      headers: {X-Api-Key: \"${HEADER_KEY}\"}\n      query: {appid: \"${WEATHER_KEY}\"}\n"),
			want:  "GET http://" + reset + "/weather?appid=…: ",
			never: []string{weatherKey, headerKey},
		},
		{
			name:  "a status error whose body echoes the request",
			spec:  weather("      url: \"" + echo.URL + "/weather?appid=${SHORT_KEY}\"\n      headers: {X-Api-Key: \"Bearer ${HEADER_KEY}\"}\n      query: {q: \"{{ args.city }}\"}\n"),
			want:  "HTTP 401 Unauthorized: invalid key k3y9 or … for /weather?appid=k3y9&q=…",
			never: []string{headerKey, "Copenhagen"},
		},
		{
			name:  "a refused redirect",
			spec:  weather("      url: " + redirect.URL + "/weather\n      query: {appid: \"${WEATHER_KEY}\"}\n"),
			want:  "GET " + redirect.URL + "/weather?appid=…: the server redirected to " + host(other.URL) + ", which this tool may not follow",
			never: []string{weatherKey},
		},
		{
			name:  "a query template that fails to render",
			spec:  weather("      url: http://" + refused + "/weather\n      query: {appid: \"${SHORT_KEY}-{{ int(args.city) }}\"}\n"),
			want:  "query appid: ",
			never: []string{shortKey},
		},
		{
			name:  "a header template that fails to render",
			spec:  weather("      url: http://" + refused + "/weather\n      headers: {X-Api-Key: \"${SHORT_KEY}{{ int(args.city) }}\"}\n"),
			want:  "header X-Api-Key: ",
			never: []string{shortKey},
		},
		{
			name:  "a URL that is not http(s)",
			spec:  weather("      url: \"{{ 'ftp' }}://${WEATHER_KEY}@" + refused + "/weather?appid=${WEATHER_KEY}\"\n"),
			want:  "url: ftp://" + refused + "/weather?appid=… is not an http(s) URL",
			never: []string{weatherKey},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := toolWithEnv(t, secretEnv, tt.spec)
			_, err := h.Call(context.Background(), tool.Input{Args: map[string]any{"city": "Copenhagen"}})
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant it to hold %q", err, tt.want)
			}
			for _, s := range tt.never {
				if strings.Contains(err.Error(), s) {
					t.Errorf("err = %v\nshows %q", err, s)
				}
			}
		})
	}
}

// A failing command that prints its environment and arguments to its standard
// error does not hand the tool's secrets to the model.
func TestCommandErrorsHideSecrets(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fail")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv >&2\necho \"args: $*\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": "tok-secret-0123", "ARG_TOKEN": "arg-secret-4567"}
	c := toolWithEnv(t, env, "  - name: fail\n    command:\n      run: [\""+script+"\", \"--token=${ARG_TOKEN}\"]\n      env: {TOKEN: \"${TOKEN}\"}\n")
	_, err := c.Call(context.Background(), tool.Input{Args: map[string]any{}, User: user})
	if err == nil {
		t.Fatal("the call succeeded")
	}
	for _, want := range []string{"fail exited with status 3", "TOKEN=[secret TOKEN]", "args: --token=[secret ARG_TOKEN]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to hold %q", err, want)
		}
	}
	for _, secret := range env {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("err = %v\nshows %q", err, secret)
		}
	}
}
