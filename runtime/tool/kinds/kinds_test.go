package kinds_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/kinds"
	"github.com/agentrun/agentrun/spec"
)

// tool loads a one-tool spec and builds its tool through the registry.
func compileTool(t *testing.T, toolYAML string) tool.Tool {
	t.Helper()
	return toolWithEnv(t, nil, toolYAML)
}

// toolWithEnv is tool with env as the environment that ${VAR} reads.
func toolWithEnv(t *testing.T, env map[string]string, toolYAML string) tool.Tool {
	t.Helper()
	l, err := spec.NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	l.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	src := "version: 1\nname: k\ncontext: {user: [tenant]}\ntools:\n" + toolYAML
	s, diags := l.Load(filepath.Join(t.TempDir(), "agent.yaml"), []byte(src))
	if diags.HasErrors() {
		t.Fatalf("spec: %v", diags)
	}
	reg := tool.Registry{}
	kinds.Register(reg)
	tl, err := reg[tool.Key(&s.Tools[0])](&s.Tools[0], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

var user = tool.User{ID: "u-7", Attributes: map[string]string{"tenant": "acme"}}

func TestCommandGetsJSONOnStdin(t *testing.T) {
	cat := compileTool(t, "  - name: cat\n    command: {run: [cat]}\n")
	out, err := cat.Call(context.Background(), tool.Input{Args: map[string]any{"q": "x; rm -rf / $(id)"}, User: user})
	if err != nil {
		t.Fatal(err)
	}
	if out != `{"q":"x; rm -rf / $(id)"}` {
		t.Errorf("stdin was %q: arguments must arrive as JSON, uninterpreted", out)
	}
}

// The command's environment holds only the basics, the run context and what the
// spec declares: never agentrun's own secrets.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("LLM_API_KEY", "sk-secret")
	env := compileTool(t, "  - name: env\n    command:\n      run: [env]\n      env: {TENANT: \"{{ user.tenant }}\"}\n")
	out, err := env.Call(context.Background(), tool.Input{Args: map[string]any{}, User: user, Conversation: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TENANT=acme", "AGENTRUN_USER_ID=u-7", "AGENTRUN_CONVERSATION_ID=c-1", "PATH="} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sk-secret") || strings.Contains(out, "LLM_API_KEY") {
		t.Errorf("the API key leaked into the command's environment:\n%s", out)
	}
}

// The command gets the call's idempotency key in AGENTRUN_IDEMPOTENCY_KEY, beside
// the rest of its environment; without a key the variable is not set.
func TestCommandIdempotencyKey(t *testing.T) {
	t.Setenv("LLM_API_KEY", "sk-secret")
	script := filepath.Join(t.TempDir(), "show")
	body := "#!/bin/sh\nprintf %s \"${AGENTRUN_IDEMPOTENCY_KEY-unset}|$AGENTRUN_USER_ID|$TENANT|${LLM_API_KEY-}\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	show := compileTool(t, "  - name: show\n    command:\n      run: ["+script+"]\n      env: {TENANT: \"{{ user.tenant }}\"}\n")
	tests := []struct {
		name, key, want string
	}{
		{"a key", "run-1/call-1", "run-1/call-1|u-7|acme|"},
		{"no key", "", "unset|u-7|acme|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := show.Call(context.Background(), tool.Input{Args: map[string]any{}, User: user, IdempotencyKey: tt.key})
			if err != nil || out != tt.want {
				t.Errorf("out %q, err %v; want %q", out, err, tt.want)
			}
		})
	}
}

func TestCommandExitStatus(t *testing.T) {
	fail := compileTool(t, "  - name: fail\n    command: {run: [ls, /no/such/dir]}\n")
	_, err := fail.Call(context.Background(), tool.Input{Args: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "ls exited with status 2") || !strings.Contains(err.Error(), "No such file") {
		t.Errorf("err = %v", err)
	}
	missing := compileTool(t, "  - name: nope\n    command: {run: [./no-such-program]}\n")
	if _, err := missing.Call(context.Background(), tool.Input{}); err == nil || !strings.Contains(err.Error(), "cannot run no-such-program") {
		t.Errorf("err = %v", err)
	}
}

// A timeout kills the whole process group: a grandchild must not keep the call open.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "spawn")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 30 &\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spawn := compileTool(t, "  - name: spawn\n    command: {run: ["+script+"]}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := spawn.Call(ctx, tool.Input{})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("err = %v after %s", err, time.Since(start))
	}
}

func TestCommandOutputCap(t *testing.T) {
	yes := compileTool(t, "  - name: yes\n    command: {run: [head, -c, \"3000000\", /dev/zero]}\n")
	out, err := yes.Call(context.Background(), tool.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 1<<20+100 || !strings.Contains(out, "more bytes not read") {
		t.Errorf("output of %d bytes, tail %q", len(out), out[len(out)-60:])
	}
}

func TestHTTP(t *testing.T) {
	type seen struct {
		method, path, rawPath, query, tenant, body, ctype string
	}
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Header.Get("X-Tenant"), string(b), r.Header.Get("Content-Type")}
		if strings.HasSuffix(r.URL.Path, "/missing") {
			http.Error(w, `{"error":"no such order"}`, http.StatusNotFound)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	spec := func(extra string) string {
		return "  - name: orders\n    parameters: {type: object, properties: {ref: {type: string}, q: {type: string}}}\n" +
			"    bind: {owner: user.id}\n    http:\n      url: " + srv.URL + "/users/{{ args.owner }}/orders/{{ args.ref }}\n" + extra
	}
	tests := []struct {
		name  string
		extra string
		args  map[string]any
		want  seen
		err   string
	}{
		{
			name:  "get with query and header",
			extra: "      query: {q: \"{{ args.q }}\"}\n      headers: {X-Tenant: \"{{ user.tenant }}\"}\n",
			args:  map[string]any{"ref": "A1", "q": "late & cold", "owner": "u-7"},
			want:  seen{method: "GET", path: "/users/u-7/orders/A1", query: "q=late+%26+cold", tenant: "acme"},
		},
		{
			name: "path values are escaped",
			args: map[string]any{"ref": "a b/c?x=1#f", "owner": "u-7"},
			want: seen{method: "GET", path: "/users/u-7/orders/a b/c?x=1#f", rawPath: "/users/u-7/orders/a%20b%2Fc%3Fx=1%23f"},
		},
		{
			name:  "post sends the arguments",
			extra: "      method: POST\n",
			args:  map[string]any{"ref": "A1", "owner": "u-7"},
			want:  seen{method: "POST", path: "/users/u-7/orders/A1", body: `{"owner":"u-7","ref":"A1"}`, ctype: "application/json"},
		},
		{
			name:  "body template",
			extra: "      method: PUT\n      body: {note: \"by {{ user.id }}\", n: [1, \"{{ args.ref }}\"]}\n",
			args:  map[string]any{"ref": "A1", "owner": "u-7"},
			want:  seen{method: "PUT", path: "/users/u-7/orders/A1", body: `{"n":[1,"A1"],"note":"by u-7"}`, ctype: "application/json"},
		},
		{
			name: "error status",
			args: map[string]any{"ref": "missing", "owner": "u-7"},
			want: seen{method: "GET", path: "/users/u-7/orders/missing"},
			err:  `HTTP 404 Not Found: {"error":"no such order"}`,
		},
		{
			name:  "header injection",
			extra: "      headers: {X-Note: \"{{ args.q }}\"}\n",
			args:  map[string]any{"ref": "A1", "q": "a\r\nX-Admin: 1", "owner": "u-7"},
			err:   "may not contain line breaks",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = seen{}
			h := compileTool(t, spec(tt.extra))
			out, err := h.Call(context.Background(), tool.Input{Args: tt.args, User: user})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
			} else if err != nil || out != `{"ok":true}` {
				t.Fatalf("out %q, err %v", out, err)
			}
			if got != tt.want {
				t.Errorf("server saw %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestHTTPRespectsContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	h := compileTool(t, "  - name: slow\n    http: {url: \""+srv.URL+"\"}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.Call(ctx, tool.Input{Args: map[string]any{}}); err == nil {
		t.Error("no error after the deadline")
	}
}
