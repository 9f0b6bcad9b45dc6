package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/internal/openaitest"
)

// These tests run `agentrun serve` as real processes: the built binary, a config
// file, the wire-level fake model (internal/openaitest) behind LLM_BASE_URL, and
// real signals.

const concierge = "testdata/serve/concierge.yaml"

// serveOptions say how to start one serve process.
type serveOptions struct {
	store  string // --store
	model  *openaitest.Server
	grace  string // grace_period in the config; "" is 5s
	tokens map[string]string
	env    []string // more KEY=VALUE
	specs  []string
	args   []string // more flags
}

// serveProc is one agentrun serve process.
type serveProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // host:port it listens on
	url    string // http://addr
	client *http.Client

	mu     sync.Mutex
	stderr bytes.Buffer

	exited chan struct{} // closed when the process has exited
	err    error         // Wait's error, once exited
}

var (
	raceBuild    sync.Once
	raceBinary   string
	raceBuildErr error
)

// serveBinary is the agentrun binary for serve's processes: built with the race
// detector when the tests are, so a data race in the server fails the test that
// made it (the process reports it on stderr and exits 66).
func serveBinary(t *testing.T) string {
	t.Helper()
	if !raceEnabled() {
		return agentrunBinary(t)
	}
	raceBuild.Do(func() {
		raceBinary = filepath.Join(testTemp, "agentrun-race")
		out, err := exec.Command("go", "build", "-race", "-o", raceBinary, ".").CombinedOutput()
		if err != nil {
			raceBuildErr = fmt.Errorf("go build -race: %v\n%s", err, out)
		}
	})
	if raceBuildErr != nil {
		t.Fatal(raceBuildErr)
	}
	return raceBinary
}

func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// randomID is a random hex string, for ids shared with other tests (Redis).
func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// startServe starts a serve process listening on a free loopback port (--addr
// 127.0.0.1:0, the address read back from its "listening on" line) and waits until
// it listens. When the test ends a process still running is killed.
func startServe(t *testing.T, o serveOptions) *serveProc {
	t.Helper()
	bin := serveBinary(t)
	dir := t.TempDir()
	grace := o.grace
	if grace == "" {
		grace = "5s"
	}
	var cfg strings.Builder
	cfg.WriteString("auth:\n  tokens:\n")
	for token, user := range o.tokens {
		fmt.Fprintf(&cfg, "    - {sha256: %s, user: %q, attributes: {tier: gold}}\n", tokenHash(token), user)
	}
	fmt.Fprintf(&cfg, "grace_period: %s\n", grace)
	config := filepath.Join(dir, "serve.yaml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--config", config, "--addr", "127.0.0.1:0", "--model", "openai:fake", "--store", o.store}, o.args...)
	for _, s := range o.specs {
		abs, err := filepath.Abs(s)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, abs)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"LLM_BASE_URL="+o.model.URL, "LLM_API_KEY=sk-fake", "LLM_MODEL_NAME=fake",
		"AGENTRUN_STORE=", "AGENTRUN_INDEX="+filepath.Join(dir, "knowledge.db"))
	cmd.Env = append(cmd.Env, o.env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, cmd: cmd, exited: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	listening := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		listen := regexp.MustCompile(`listening on http://(\S+)`)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listen.FindStringSubmatch(line); m != nil {
				listening <- m[1]
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it all first
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if strings.Contains(p.Stderr(), "DATA RACE") {
			t.Error("the race detector reported a data race in serve")
		}
		if t.Failed() {
			t.Logf("serve's stderr:\n%s", p.Stderr())
		}
	})
	select {
	case p.addr = <-listening:
		p.url = "http://" + p.addr
	case <-p.exited:
		t.Fatalf("serve exited before listening: %v\n%s", p.err, p.Stderr())
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not listen within 15s:\n%s", p.Stderr())
	}
	return p
}

func (p *serveProc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// wait waits up to d for the process to exit and returns its exit code.
func (p *serveProc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		p.t.Fatalf("serve still running %s later:\n%s", d, p.Stderr())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("serve: %v", p.err)
	}
	return 0
}

// call sends a request with a JSON body (nil: none) and returns the status and body.
func (p *serveProc) call(ctx context.Context, method, path, token string, body any, header map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// mustCall is call that fails the test on a transport error or another status.
func (p *serveProc) mustCall(method, path, token string, body any, want int, out any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, b, err := p.call(ctx, method, path, token, body, nil)
	if err != nil || status != want {
		p.t.Fatalf("%s %s: %v, status %d (want %d): %s", method, path, err, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			p.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// runReply is the body of POST /v1/agents/{name}/runs.
type runReply struct {
	ID           string `json:"id"`
	Conversation string `json:"conversation"`
	Result       struct {
		Answer string `json:"answer"`
		Stop   string `json:"stop"`
	} `json:"result"`
}

// inFlight reads agentrun_runs_in_flight of an agent from /metrics.
func (p *serveProc) inFlight(agent string) string {
	resp, err := p.client.Get(p.url + "/metrics")
	if err != nil {
		return "unreachable"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := `agentrun_runs_in_flight{agent="` + agent + `"} `
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return "none"
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kitchen is the concierge's tool backend: every user's favourite is mapo tofu. It
// records the paths it was asked for.
type kitchen struct {
	URL   string
	mu    sync.Mutex
	paths []string
}

func newKitchen(t *testing.T) *kitchen {
	k := &kitchen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.paths = append(k.paths, r.URL.Path)
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"dish":"mapo tofu"}`))
	}))
	t.Cleanup(srv.Close)
	k.URL = srv.URL
	return k
}

func (k *kitchen) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.paths...)
}

// conciergeModel answers the concierge: with the favourite in its memory (the
// system message) at once, after a tool result with it, else it looks it up.
func conciergeModel(req openaitest.Request) openaitest.Reply {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last["role"] == "tool":
		return openaitest.Reply{Content: "Have the mapo tofu."}
	case strings.Contains(fmt.Sprint(req.Messages[0]["content"]), "mapo tofu"):
		return openaitest.Reply{Content: "Mapo tofu again, you like it."}
	default:
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "lookup_favourite", Arguments: "{}"}}}
	}
}

// redisForServe returns the Redis server's URL (REDIS_URL, else the local default)
// and a client for cleaning up, skipping when no server answers (failing in CI).
func redisForServe(t *testing.T) (string, *goredis.Client) {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	c := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis at %s does not answer: %v", url, err)
		}
		t.Skipf("redis at %s does not answer: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return url, c
}

// The store names a conversation of serve's by its user and the client's id
// ("u/c"): memory show and the Redis keys use that name.

// deleteRedisKeys deletes the keys of a user and a conversation (the default
// prefix: serve has no prefix option; the ids are random).
func deleteRedisKeys(t *testing.T, c *goredis.Client, user, conversation string) {
	ctx := context.Background()
	for _, pattern := range []string{"agentrun:user:" + user + ":*", "agentrun:conv:" + user + "/" + conversation + ":*"} {
		var keys []string
		iter := c.Scan(ctx, 0, pattern, 100).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
}

// Two serve processes on one Redis: a conversation started on A continues on B with
// its history, and the fact a tool rule wrote on A is B's too.
func TestServeReplicasShareRedis(t *testing.T) {
	url, rc := redisForServe(t)
	id := randomID()
	user, conversation, token := "u-serve-"+id, "c-"+id, "tok-"+id
	t.Cleanup(func() { deleteRedisKeys(t, rc, user, conversation) })
	k := newKitchen(t)
	fakeA, fakeB := openaitest.New(t, conciergeModel), openaitest.New(t, conciergeModel)
	opts := func(model *openaitest.Server) serveOptions {
		return serveOptions{store: url, model: model, tokens: map[string]string{token: user},
			env: []string{"KITCHEN_API=" + k.URL}, specs: []string{concierge}}
	}
	a, b := startServe(t, opts(fakeA)), startServe(t, opts(fakeB))

	var first, second runReply
	a.mustCall("POST", "/v1/agents/concierge/runs", token, map[string]any{"input": "What should I eat tonight?", "conversation": conversation}, 200, &first)
	if first.Result.Answer != "Have the mapo tofu." || first.Result.Stop != "completed" {
		t.Fatalf("on A: %+v", first)
	}
	if got := k.seen(); len(got) != 1 || got[0] != "/users/"+user+"/favourite" {
		t.Errorf("the kitchen saw %v: the tool must run for the principal", got)
	}

	// B knows the fact before running anything.
	var mem struct {
		User  string `json:"user"`
		Facts []struct{ Key, Value, Source string }
	}
	b.mustCall("GET", "/v1/me/memory", token, nil, 200, &mem)
	if mem.User != user || len(mem.Facts) != 1 || mem.Facts[0].Key != "favourite" || mem.Facts[0].Value != "mapo tofu" || mem.Facts[0].Source != "tool" {
		t.Errorf("B's /v1/me/memory: %+v", mem)
	}

	b.mustCall("POST", "/v1/agents/concierge/runs", token, map[string]any{"input": "And tomorrow?", "conversation": conversation}, 200, &second)
	if second.Result.Answer != "Mapo tofu again, you like it." {
		t.Fatalf("on B: %+v", second)
	}
	reqs := fakeB.Requests()
	if len(reqs) != 1 {
		t.Fatalf("B's model got %d requests", len(reqs))
	}
	var roles, texts []string
	for _, m := range reqs[0].Messages {
		roles = append(roles, fmt.Sprint(m["role"]))
		texts = append(texts, fmt.Sprint(m["content"]))
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,assistant,user" {
		t.Errorf("B's model request roles %s", got)
	}
	if len(texts) == 6 && (texts[1] != "What should I eat tonight?" || texts[4] != "Have the mapo tofu." || texts[5] != "And tomorrow?") {
		t.Errorf("B's model request lacks A's turn: %q", texts)
	}
	if !strings.Contains(texts[0], "mapo tofu") {
		t.Errorf("B's system message lacks the fact A wrote:\n%s", texts[0])
	}

	// Both see the whole conversation.
	for name, p := range map[string]*serveProc{"A": a, "B": b} {
		var conv struct{ Turns int }
		p.mustCall("GET", "/v1/conversations/"+conversation, token, nil, 200, &conv)
		if conv.Turns != 2 {
			t.Errorf("%s: the conversation has %d turns", name, conv.Turns)
		}
	}
}

// sigtermSetup starts a serve process on a SQLite file with a 1.5s model, and a
// run in flight: it returns when the model has the run's request.
func sigtermSetup(t *testing.T, grace string) (p *serveProc, fake *openaitest.Server, store, user, conversation string, answered chan httpReply) {
	fake = openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "Pasta tonight."} })
	fake.Latency = 1500 * time.Millisecond
	store = "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	user, conversation = "u-term", "c-"+randomID()
	p = startServe(t, serveOptions{store: store, model: fake, grace: grace, tokens: map[string]string{"tok-term": user}, specs: []string{concierge}})
	answered = make(chan httpReply, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		status, body, err := p.call(ctx, "POST", "/v1/agents/concierge/runs", "tok-term", map[string]any{"input": "Dinner?", "conversation": conversation}, nil)
		answered <- httpReply{status, body, err}
	}()
	eventually(t, 5*time.Second, "the model has the run's request", func() bool { return len(fake.Requests()) == 1 })
	return p, fake, store, user, conversation, answered
}

type httpReply struct {
	status int
	body   []byte
	err    error
}

// refused waits until a new connection to addr is refused.
func refused(t *testing.T, addr string) {
	t.Helper()
	eventually(t, 2*time.Second, "new connections are refused", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
		c.Close()
		return false
	})
}

// memoryShow runs agentrun memory show on a store.
func memoryShow(t *testing.T, store string, args ...string) string {
	t.Helper()
	out, err := exec.Command(serveBinary(t), append([]string{"memory", "show", "--store", store}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("memory show: %v\n%s", err, out)
	}
	return string(out)
}

// SIGTERM in the middle of a run: no new connections, the run finishes and is
// stored, exit 0.
func TestServeSIGTERMFinishesRunInFlight(t *testing.T) {
	p, fake, store, user, conversation, answered := sigtermSetup(t, "5s")
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	refused(t, p.addr)
	select {
	case r := <-answered:
		t.Fatalf("the run answered before new connections were refused: %d %s %v", r.status, r.body, r.err)
	default:
	}
	r := <-answered
	var res runReply
	if r.err != nil || r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.Result.Answer != "Pasta tonight." || res.Result.Stop != "completed" {
		t.Fatalf("the run in flight: %v, status %d: %s", r.err, r.status, r.body)
	}
	if code := p.wait(5 * time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if fake.Canceled() != 0 {
		t.Errorf("the model saw %d canceled requests", fake.Canceled())
	}
	if out := memoryShow(t, store, "--user", user, "--conversation", user+"/"+conversation); !strings.Contains(out, "conversation "+user+"/"+conversation+": 1 turn\n") || !strings.Contains(out, "Pasta tonight.") {
		t.Errorf("the run is not stored:\n%s", out)
	}
}

// With a grace period shorter than the model call, SIGTERM cancels the run: the
// model request is aborted, nothing is stored, and the process still exits 0.
func TestServeSIGTERMGraceOverCancelsRun(t *testing.T) {
	p, fake, store, user, conversation, answered := sigtermSetup(t, "200ms")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	refused(t, p.addr)
	r := <-answered
	if r.err == nil && r.status == 200 {
		var res runReply
		if json.Unmarshal(r.body, &res) != nil || res.Result.Stop != "canceled" || res.Result.Answer == "Pasta tonight." {
			t.Errorf("a canceled run answered %s", r.body)
		}
	}
	t.Logf("the client got: %v, status %d: %s", r.err, r.status, bytes.TrimSpace(r.body))
	if code := p.wait(5 * time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	if fake.Canceled() != 1 {
		t.Errorf("the model saw %d canceled requests, want 1", fake.Canceled())
	}
	if out := memoryShow(t, store, "--user", user, "--conversation", user+"/"+conversation); out != "conversation "+user+"/"+conversation+": 0 turns\n" {
		t.Errorf("a canceled run left something:\n%s", out)
	}
}

// A client that leaves in the middle of a run cancels it: the model request in
// flight is aborted, and nothing is stored, not even the fact the run's tool call
// wrote before. The same through the run API and the OpenAI endpoint with a
// server-side conversation.
func TestServeClientDisconnectCancelsRun(t *testing.T) {
	fake := openaitest.New(t, conciergeModel)
	fake.Latency = 700 * time.Millisecond
	k := newKitchen(t)
	tokens := map[string]string{"tok-gone-run": "u-gone-run", "tok-gone-chat": "u-gone-chat"}
	p := startServe(t, serveOptions{store: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), model: fake,
		tokens: tokens, env: []string{"KITCHEN_API=" + k.URL}, specs: []string{concierge}})
	conversation := "c-" + randomID()
	tests := []struct {
		name, token, path string
		body              map[string]any
		header            map[string]string
	}{
		{name: "run API", token: "tok-gone-run", path: "/v1/agents/concierge/runs",
			body: map[string]any{"input": "What should I eat?", "conversation": conversation}},
		{name: "chat completions", token: "tok-gone-chat", path: "/v1/chat/completions",
			body:   map[string]any{"model": "concierge", "messages": []any{map[string]any{"role": "user", "content": "What should I eat?"}}},
			header: map[string]string{"X-Agentrun-Conversation": conversation}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			gone := make(chan error, 1)
			go func() {
				_, _, err := p.call(ctx, "POST", tt.path, tt.token, tt.body, tt.header)
				gone <- err
			}()
			// Leave during the second model call: after the tool ran.
			eventually(t, 5*time.Second, "the model has the run's second request", func() bool { return len(fake.Requests()) == 2*i+2 })
			cancel()
			if err := <-gone; !errors.Is(err, context.Canceled) {
				t.Errorf("the client: %v", err)
			}
			eventually(t, 5*time.Second, "the model sees its request canceled", func() bool { return fake.Canceled() == i+1 })
			eventually(t, 5*time.Second, "the run is over", func() bool { return p.inFlight("concierge") == "0" })
			if n := len(fake.Requests()); n != 2*i+2 {
				t.Errorf("the model got %d requests: the canceled run went on", n)
			}
			if got := k.seen(); len(got) != i+1 || got[i] != "/users/"+tokens[tt.token]+"/favourite" {
				t.Errorf("the kitchen saw %v", got)
			}
			p.mustCall("GET", "/v1/conversations/"+conversation, tt.token, nil, 404, nil)
			var mem struct{ Facts []any }
			p.mustCall("GET", "/v1/me/memory", tt.token, nil, 200, &mem)
			if len(mem.Facts) != 0 {
				t.Errorf("facts after a canceled run: %v", mem.Facts)
			}
			var convs struct{ Conversations []string }
			p.mustCall("GET", "/v1/conversations", tt.token, nil, 200, &convs)
			if len(convs.Conversations) != 0 {
				t.Errorf("conversations after a canceled run: %v", convs.Conversations)
			}
		})
	}
}

// The official openai npm client talks to serve running the shop example: models
// lists the agent, the streamed and the plain reply carry the agent's final answer,
// the agent's own tool call never reaches the client, and the usage arrives.
func TestServeOpenAINodeClient(t *testing.T) {
	tools := nodetools.Dir(t)
	const answer = "Your order A1001 is on its way."
	fake := openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		switch {
		case req.Judge:
			return openaitest.Reply{Content: `{"passed":true,"missing":""}`}
		case req.Messages[len(req.Messages)-1]["role"] == "tool":
			return openaitest.Reply{Content: answer}
		default:
			return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "list_recent_orders", Arguments: `{"status":"any"}`}}}
		}
	})
	var mu sync.Mutex
	var shopSaw []string
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		shopSaw = append(shopSaw, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"orders":[{"number":"A1001","status":"delivering"}]}`))
	}))
	t.Cleanup(shop.Close)
	p := startServe(t, serveOptions{store: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), model: fake,
		tokens: map[string]string{"tok-node": "u-node"}, env: []string{"SHOP_API=" + shop.URL}, specs: []string{shopSupport}})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "openai-check.mjs"), p.url+"/v1", "tok-node", "shop-support", "Where is my order?")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai-check: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Models          []string
		Answer          string
		Finish          string
		Streamed        string
		StreamFinish    string
		Usage           map[string]int
		CompletionUsage map[string]int
		ToolCallsSeen   int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Models) != 1 || got.Models[0] != "shop-support" {
		t.Errorf("models %v", got.Models)
	}
	if got.Answer != answer || got.Streamed != answer {
		t.Errorf("answer %q, streamed %q; want %q", got.Answer, got.Streamed, answer)
	}
	if got.Finish != "stop" || got.StreamFinish != "stop" {
		t.Errorf("finish reasons %q and %q", got.Finish, got.StreamFinish)
	}
	if got.ToolCallsSeen != 0 {
		t.Errorf("%d tool calls reached the client", got.ToolCallsSeen)
	}
	// Each run is two agent calls and a judge call of 20+5 tokens.
	for name, u := range map[string]map[string]int{"stream": got.Usage, "completion": got.CompletionUsage} {
		if u["prompt_tokens"] < 40 || u["completion_tokens"] < 10 || u["total_tokens"] != u["prompt_tokens"]+u["completion_tokens"] {
			t.Errorf("%s usage %v", name, u)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(shopSaw) != 2 || shopSaw[0] != "GET /users/u-node/orders" || shopSaw[1] != shopSaw[0] {
		t.Errorf("the shop saw %v: one lookup per run, for the principal", shopSaw)
	}
}

// A streamed run outlives its reader for the resume grace (a client may come back
// with Last-Event-ID), so it is a run in flight: SIGTERM gives it the grace period
// like any other, and it is stored.
func TestServeSIGTERMFinishesOrphanedStream(t *testing.T) {
	fake := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "Pasta tonight."} })
	fake.Latency = 1500 * time.Millisecond
	store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	user, conversation := "u-orphan", "c-"+randomID()
	p := startServe(t, serveOptions{store: store, model: fake, tokens: map[string]string{"tok-orphan": user}, specs: []string{concierge}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url+"/v1/agents/concierge/runs",
		strings.NewReader(`{"input":"Dinner?","conversation":"`+conversation+`","stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok-orphan")
	resp, err := p.client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	eventually(t, 5*time.Second, "the model has the run's request", func() bool { return len(fake.Requests()) == 1 })
	cancel() // the reader leaves; the run goes on for the resume grace
	resp.Body.Close()
	time.Sleep(100 * time.Millisecond) // the server notices the reader left
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(5 * time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	if fake.Canceled() != 0 {
		t.Errorf("the model request was canceled: the run got no grace period")
	}
	if out := memoryShow(t, store, "--user", user, "--conversation", user+"/"+conversation); !strings.Contains(out, ": 1 turn\n") {
		t.Errorf("the streamed run is not stored:\n%s", out)
	}
}
