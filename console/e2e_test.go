package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/examples/shop-api/shop"
	"github.com/agentrun/agentrun/internal/nodetools"
	"github.com/agentrun/agentrun/serve"
)

// The console in a real browser: headless Chromium chats with shop-support (a
// copy of the example, on a scripted model, against the demo shop), sees the
// answer and the timeline's tool call, approves the cancellation that waits and
// sees the run finish, looks at every view, and sees the spec edited on disk
// reloaded, then its diagnostics. A second server, in serve mode with two
// users' tokens, shows that the page with one's token lists none of the
// other's runs or approvals. No request leaves the server's origin.
func TestConsoleInABrowser(t *testing.T) {
	tools := nodetools.Dir(t)
	chromium := findChromium(t)
	artifacts := artifactsDir(t)

	main := startShopSupport(t)
	iso := startDesk(t)
	cfg := map[string]any{
		"url": main.url, "mode": main.mode, "user": "u-42", "token": main.token, "artifacts": artifacts,
		"isolation": map[string]any{"url": iso.url, "token": aliceToken, "ownRun": iso.aliceRun, "foreignRun": iso.bobRun},
	}
	if skip := os.Getenv("AGENTRUN_CONSOLE_SKIP"); skip != "" { // steps to leave out while debugging one
		cfg["skip"] = strings.Split(skip, ",")
	}
	if os.Getenv("AGENTRUN_SCREENSHOT_README") == "1" {
		readme, err := filepath.Abs("../docs/console.png")
		if err != nil {
			t.Fatal(err)
		}
		cfg["readme"] = readme
	}
	seen := drive(t, tools, chromium, cfg, main.edit)

	skipped, _ := cfg["skip"].([]string)
	for step, check := range map[string]func(*testing.T, map[string]any){
		"chat": checkChat, "messages": checkMessages, "approval": checkApproval, "graph": checkGraph, "knowledge": checkKnowledge,
		"memory": checkMemory, "runs": checkRuns, "reload": checkReload,
		"isolation": func(t *testing.T, seen map[string]any) { checkIsolation(t, seen, iso) },
	} {
		if !slices.Contains(skipped, step) {
			check(t, seen)
		}
	}
	if out, _ := seen["outside"].([]any); len(out) > 0 {
		t.Errorf("requests left the server's origin: %v", out)
	}
	if p, _ := seen["problems"].([]any); len(p) > 0 {
		t.Errorf("the page logged errors: %v", p)
	}
}

const (
	aliceToken = "e2e-token-alice"
	bobToken   = "e2e-token-bob"
)

func findChromium(t *testing.T) string {
	t.Helper()
	if c := os.Getenv("CHROMIUM"); c != "" {
		return c
	}
	c, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed: .ci/run installs Debian's chromium")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	return c
}

// artifactsDir is where the screenshots go: $AGENTRUN_ARTIFACTS, else a
// directory of the test's.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTRUN_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "artifacts")
	}
	dir, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// server is a console's server under test: its URL, the page's mode and
// token, and how the test edits its spec on disk.
type server struct {
	url, mode, token string
	edit             func(what string) error
	aliceRun, bobRun string
}

// startShopSupport serves a copy of examples/agents/shop-support.yaml (with
// what it uses) from a temporary directory, on the scripted model, against the
// demo shop, as agentrun dev does: the page says who it is (u-42, the demo
// shop's user).
func startShopSupport(t *testing.T) *server {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"shop-support.yaml", "refund-specialist.yaml", "skills", "help-center"} {
		if err := os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join("../examples/agents", name))); err != nil {
			copyFile(t, filepath.Join("../examples/agents", name), filepath.Join(dir, name))
		}
	}
	script, err := filepath.Abs("testdata/e2e.script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "shop-support.yaml")
	backend := httptest.NewServer(shop.New())
	t.Cleanup(backend.Close)
	t.Setenv("SHOP_API", backend.URL) // the skill's ${SHOP_API} is read from the process's environment
	srv, url := start(t, serve.Options{Config: serve.Config{Addr: "127.0.0.1:0"}, Specs: []string{specPath},
		Store: "sqlite://" + filepath.Join(dir, "state.db"), Index: filepath.Join(dir, "knowledge.db"), Model: "script:" + script,
		Dev: true, UI: true})
	edit := func(what string) error {
		data, err := os.ReadFile(specPath)
		if err != nil {
			return err
		}
		text := string(data)
		switch what {
		case "description":
			text = strings.Replace(text, "description: Customer service for a food-delivery shop.", "description: 小满外卖客服 — customer service for a food-delivery shop.", 1)
		case "invalid":
			text = strings.Replace(text, "  max_turns: 8\n", "  max_turns: eight\n", 1)
		default:
			return fmt.Errorf("no edit %q", what)
		}
		if err := os.WriteFile(specPath, []byte(text), 0o644); err != nil {
			return err
		}
		srv.Reload(context.Background()) // its failure is what the page shows
		return nil
	}
	return &server{url: url, mode: "dev", edit: edit}
}

// startDesk serves testdata/desk.yaml in serve mode for alice and bob, each
// with a run paused for approval.
func startDesk(t *testing.T) *server {
	t.Helper()
	backend := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(backend.Close)
	cfg := serve.Config{Addr: "127.0.0.1:0", Auth: serve.AuthConfig{Tokens: []serve.TokenConfig{
		{SHA256: sha256Hex(aliceToken), User: "alice"}, {SHA256: sha256Hex(bobToken), User: "bob"},
	}}}
	_, url := start(t, serve.Options{Config: cfg, Specs: []string{"testdata/desk.yaml"}, Store: "memory:", UI: true,
		LookupEnv: func(k string) (string, bool) { return backend.URL, k == "SHOP_API" }})
	s := &server{url: url, mode: "serve"}
	s.aliceRun = pausedRun(t, url, aliceToken, "refund A1")
	s.bobRun = pausedRun(t, url, bobToken, "refund B1")
	return s
}

func start(t *testing.T, opts serve.Options) (*serve.Server, string) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := serve.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewUnstartedServer(nil)
	hs.Config = srv.HTTPServer()
	hs.Start()
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

// pausedRun starts a run of desk as the token's user and answers its id once
// it paused for approval.
func pausedRun(t *testing.T, url, token, input string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": input})
	req, _ := http.NewRequest("POST", url+"/v1/agents/desk/runs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v struct {
		ID     string
		Result struct{ Stop string }
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil || v.Result.Stop != "awaiting_approval" {
		t.Fatalf("the desk run of %q: %v %+v", input, err, v)
	}
	return v.ID
}

// drive runs tools/node/console-e2e.mjs with cfg, answering its requests to
// edit the spec, and answers what the page saw.
func drive(t *testing.T, tools, chromium string, cfg map[string]any, edit func(string) error) map[string]any {
	t.Helper()
	arg, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(tools, "console-e2e.mjs"), string(arg))
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var result string
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 4<<20)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "@edit "):
			answer := "ok"
			if err := edit(strings.TrimPrefix(line, "@edit ")); err != nil {
				answer = err.Error()
			}
			fmt.Fprintln(stdin, answer)
		case strings.HasPrefix(line, "@shot "):
			t.Logf("screenshot: %s", strings.TrimPrefix(line, "@shot "))
		case strings.HasPrefix(line, "@result "):
			result = strings.TrimPrefix(line, "@result ")
		default:
			t.Log(line)
		}
	}
	err := cmd.Wait()
	var seen map[string]any
	if jerr := json.Unmarshal([]byte(result), &seen); jerr != nil {
		t.Fatalf("console-e2e: %v (%v)\n%s", err, jerr, stderr.String())
	}
	if err != nil {
		t.Fatalf("console-e2e: %v\n%s\nthe page saw: %s", err, stderr.String(), result)
	}
	return seen
}

func checkChat(t *testing.T, seen map[string]any) {
	if a, _ := seen["answer"].(string); !strings.Contains(a, "A1002") || !strings.Contains(a, "兰州拉面") {
		t.Errorf("the chat's answer is %q", seen["answer"])
	}
	if c, _ := seen["toolCall"].(string); !strings.Contains(c, "A1002") {
		t.Errorf("the timeline's tool call shows %q, not its arguments", c)
	}
}

func checkMessages(t *testing.T, seen map[string]any) {
	if n, _ := seen["requestMessages"].(float64); n < 2 {
		t.Errorf("a model request's messages show %v messages", seen["requestMessages"])
	}
}

func checkApproval(t *testing.T, seen map[string]any) {
	if p, _ := seen["pending"].(string); !strings.Contains(p, "cancel_order") {
		t.Errorf("the paused run's bubble says %q", p)
	}
	if a, _ := seen["approval"].(string); !strings.Contains(a, "A1003") || !strings.Contains(a, "approval threshold") {
		t.Errorf("the inbox shows %q", a)
	}
	if seen["resumedStop"] != "completed" || !strings.Contains(fmt.Sprint(seen["resumedOutcome"]), "A1003") {
		t.Errorf("the approved run ended %v: %q", seen["resumedStop"], seen["resumedOutcome"])
	}
	if d, _ := seen["decided"].(string); !strings.Contains(d, "approved") {
		t.Errorf("the resumed run's decision shows %q", d)
	}
}

func checkGraph(t *testing.T, seen map[string]any) {
	path := fmt.Sprint(seen["graphPath"])
	for _, id := range []string{"intent:cancel_order", "tool:cancel_order", "tool:list_recent_orders"} {
		if !strings.Contains(path, id) {
			t.Errorf("the graph's path %s lacks %s", path, id)
		}
	}
}

func checkKnowledge(t *testing.T, seen map[string]any) {
	if p, _ := seen["probe"].(string); !strings.Contains(p, "FAQ cache") || !strings.Contains(p, "Retrieval") {
		t.Errorf("the knowledge probe shows %q", p)
	}
}

func checkMemory(t *testing.T, seen map[string]any) {
	if c, _ := seen["conversation"].(string); !strings.Contains(c, "A1003") {
		t.Errorf("the conversation shows %q", c)
	}
	if m, _ := seen["memory"].(string); !strings.Contains(m, "cancelled order A1003") {
		t.Errorf("the memory shows %q", m)
	}
}

func checkRuns(t *testing.T, seen map[string]any) {
	if n, _ := seen["runs"].(float64); n < 2 {
		t.Errorf("the runs list has %v runs", seen["runs"])
	}
	if k := fmt.Sprint(seen["replayedKinds"]); !strings.Contains(k, "tool_call") || !strings.Contains(k, "result") {
		t.Errorf("the replayed run's timeline has %s", k)
	}
}

func checkReload(t *testing.T, seen map[string]any) {
	if d, _ := seen["description"].(string); !strings.Contains(d, "小满外卖客服") {
		t.Errorf("after the edit the description is %q", d)
	}
	if d, _ := seen["diagnostics"].(string); !strings.Contains(d, "max_turns") {
		t.Errorf("the diagnostics banner shows %q", d)
	}
}

func checkIsolation(t *testing.T, seen map[string]any, iso *server) {
	t.Helper()
	runs := fmt.Sprint(seen["isolationRuns"], seen["isolationApprovals"])
	if strings.Contains(runs, iso.bobRun) || !strings.Contains(runs, iso.aliceRun) {
		t.Errorf("alice's page lists %s (bob's run is %s)", runs, iso.bobRun)
	}
	if s := fmt.Sprint(seen["isolationForeignStatus"]); s != "[404 404]" {
		t.Errorf("alice's page got %s for bob's run and its approvals, not 404", s)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
