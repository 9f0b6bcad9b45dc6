package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/examples/shop-api/shop"
	"github.com/agentrun/agentrun/internal/nodetools"
)

// The web console in a real browser, against the real commands: headless
// Chromium (tools/node/console-e2e.mjs) opens the console of `agentrun dev`
// serving a copy of shop-support (on a scripted model, against the demo shop),
// chats, sees the answer and the timeline's tool call, approves the
// cancellation that waits and sees the run finish — in the inbox and in the
// chat — looks at every view, and sees the spec this test edits on disk
// reloaded by dev's watcher, then its diagnostics. A second command, `agentrun
// serve --ui` with two users' tokens, shows that the page with alice's token
// lists none of bob's runs or approvals. No request leaves the server's origin
// and the page logs no error.
func TestConsoleInABrowser(t *testing.T) {
	tools := nodetools.Dir(t)
	chromium := consoleChromium(t)
	artifacts := consoleArtifacts(t)

	backend := httptest.NewServer(shop.New())
	t.Cleanup(backend.Close)
	t.Setenv("SHOP_API", backend.URL) // both commands' specs read ${SHOP_API} from the environment

	dev, edit := startConsoleDev(t)
	desk := startConsoleDesk(t)
	cfg := map[string]any{
		"url": dev.url, "mode": "dev", "user": "u-42", "artifacts": artifacts,
		"isolation": map[string]any{"url": desk.url, "token": consoleAlice, "ownRun": desk.aliceRun, "foreignRun": desk.bobRun},
	}
	var skipped []string
	if skip := os.Getenv("AGENTRUN_CONSOLE_SKIP"); skip != "" { // steps to leave out while debugging one
		skipped = strings.Split(skip, ",")
		cfg["skip"] = skipped
	}
	if os.Getenv("AGENTRUN_SCREENSHOT_README") == "1" {
		readme, err := filepath.Abs("../../docs/console.png")
		if err != nil {
			t.Fatal(err)
		}
		cfg["readme"] = readme
	}
	seen := driveConsole(t, tools, chromium, cfg, edit)

	for step, check := range map[string]func(*testing.T, map[string]any){
		"chat": checkConsoleChat, "messages": checkConsoleMessages, "approval": checkConsoleApproval,
		"graph": checkConsoleGraph, "knowledge": checkConsoleKnowledge, "memory": checkConsoleMemory, "runs": checkConsoleRuns,
		"reload":    func(t *testing.T, seen map[string]any) { checkConsoleReload(t, seen, dev) },
		"isolation": func(t *testing.T, seen map[string]any) { checkConsoleIsolation(t, seen, desk) },
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
	consoleAlice = "e2e-token-alice"
	consoleBob   = "e2e-token-bob"
)

func consoleChromium(t *testing.T) string {
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

// consoleArtifacts is where the screenshots go: $AGENTRUN_ARTIFACTS, else a
// directory of the test's.
func consoleArtifacts(t *testing.T) string {
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

// startConsoleDev runs `agentrun dev` in this process on a copy of
// examples/agents/shop-support.yaml (with what it uses) and the scripted model,
// and answers it with the function that edits the copy on disk, as an editor
// saves: dev's watcher is what reloads it.
func startConsoleDev(t *testing.T) (*inProcess, func(string) error) {
	t.Helper()
	dir, state := t.TempDir(), t.TempDir()
	for _, name := range []string{"shop-support.yaml", "refund-specialist.yaml"} {
		copyConsoleFile(t, filepath.Join("../../examples/agents", name), filepath.Join(dir, name))
	}
	copyTree(t, "../../examples/agents/skills", filepath.Join(dir, "skills"))
	copyTree(t, "../../examples/agents/help-center", filepath.Join(dir, "help-center"))
	script, err := filepath.Abs("testdata/console/e2e.script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "shop-support.yaml")
	dev := startInProcess(t, regexp.MustCompile(`agentrun dev: console at http://(\S+)/ui/`),
		"dev", "--addr", "127.0.0.1:0", "--model", "script:"+script,
		"--store", "sqlite://"+filepath.Join(state, "state.db"), "--index", filepath.Join(state, "knowledge.db"), specPath)
	edits := map[string][2]string{
		"description": {"description: Customer service for a food-delivery shop.", "description: 小满外卖客服 — customer service for a food-delivery shop."},
		"invalid":     {"  max_turns: 8\n", "  max_turns: eight\n"},
	}
	edit := func(what string) error {
		e, ok := edits[what]
		if !ok {
			return fmt.Errorf("no edit %q", what)
		}
		data, err := os.ReadFile(specPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), e[0]) {
			return fmt.Errorf("edit %q: the spec has no %q", what, e[0])
		}
		tmp := specPath + ".tmp" // written beside it and renamed over it, as many editors save
		if err := os.WriteFile(tmp, []byte(strings.Replace(string(data), e[0], e[1], 1)), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, specPath)
	}
	return dev, edit
}

// consoleDesk is `agentrun serve --ui` serving testdata/console/desk.yaml to
// alice and bob, each with a run paused for approval.
type consoleDesk struct {
	*inProcess
	aliceRun, bobRun string
}

func startConsoleDesk(t *testing.T) *consoleDesk {
	t.Helper()
	config := writeFile(t, "serve.yaml", "auth:\n  tokens:\n"+
		"    - {sha256: "+tokenHash(consoleAlice)+", user: alice}\n"+
		"    - {sha256: "+tokenHash(consoleBob)+", user: bob}\n")
	srv := startInProcess(t, regexp.MustCompile(`agentrun serve: listening on http://(\S+)`),
		"serve", "--ui", "--config", config, "--addr", "127.0.0.1:0", "--store", "memory:", "testdata/console/desk.yaml")
	d := &consoleDesk{inProcess: srv}
	d.aliceRun = pausedDeskRun(t, srv.url, consoleAlice, "refund A1")
	d.bobRun = pausedDeskRun(t, srv.url, consoleBob, "refund B1")
	return d
}

// pausedDeskRun starts a run of desk as the token's user and answers its id
// once it paused for approval.
func pausedDeskRun(t *testing.T, url, token, input string) string {
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

// driveConsole runs tools/node/console-e2e.mjs with cfg, answering its
// requests to edit the spec, and answers what the page saw.
func driveConsole(t *testing.T, tools, chromium string, cfg map[string]any, edit func(string) error) map[string]any {
	t.Helper()
	arg, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute) // each wait in the page has its own timeout
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

func checkConsoleChat(t *testing.T, seen map[string]any) {
	if a, _ := seen["answer"].(string); !strings.Contains(a, "A1002") || !strings.Contains(a, "兰州拉面") {
		t.Errorf("the chat's answer is %q", seen["answer"])
	}
	if c, _ := seen["toolCall"].(string); !strings.Contains(c, "A1002") {
		t.Errorf("the timeline's tool call shows %q, not its arguments", c)
	}
}

func checkConsoleMessages(t *testing.T, seen map[string]any) {
	if n, _ := seen["requestMessages"].(float64); n < 2 {
		t.Errorf("a model request's messages show %v messages", seen["requestMessages"])
	}
}

func checkConsoleApproval(t *testing.T, seen map[string]any) {
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
	if a, _ := seen["chatResumedAnswer"].(string); !strings.Contains(a, "A1003") || !strings.Contains(a, "cancelled") {
		t.Errorf("the chat's bubble of the approved run shows %q, not its final answer", a)
	}
	if n, _ := seen["chatResumedPending"].(float64); n != 0 {
		t.Errorf("the chat's bubble of the approved run still says it waits for approval")
	}
	if n, _ := seen["chatResumedNote"].(string); !strings.Contains(n, "cancel_order approved") {
		t.Errorf("the chat's bubble of the approved run says %q, not what was decided", n)
	}
	if k := fmt.Sprint(seen["chatResumedKinds"]); !strings.Contains(k, "approval_decided") || strings.Count(k, "result") < 2 {
		t.Errorf("the chat's timeline of the approved run has %s, not the resumed execution", k)
	}
}

func checkConsoleGraph(t *testing.T, seen map[string]any) {
	path := fmt.Sprint(seen["graphPath"])
	for _, id := range []string{"intent:cancel_order", "tool:cancel_order", "tool:list_recent_orders"} {
		if !strings.Contains(path, id) {
			t.Errorf("the graph's path %s lacks %s", path, id)
		}
	}
}

func checkConsoleKnowledge(t *testing.T, seen map[string]any) {
	if p, _ := seen["probe"].(string); !strings.Contains(p, "FAQ cache") || !strings.Contains(p, "Retrieval") {
		t.Errorf("the knowledge probe shows %q", p)
	}
}

func checkConsoleMemory(t *testing.T, seen map[string]any) {
	if c, _ := seen["conversation"].(string); !strings.Contains(c, "A1003") {
		t.Errorf("the conversation shows %q", c)
	}
	if m, _ := seen["memory"].(string); !strings.Contains(m, "cancelled order A1003") {
		t.Errorf("the memory shows %q", m)
	}
}

func checkConsoleRuns(t *testing.T, seen map[string]any) {
	if n, _ := seen["runs"].(float64); n < 2 {
		t.Errorf("the runs list has %v runs", seen["runs"])
	}
	if k := fmt.Sprint(seen["replayedKinds"]); !strings.Contains(k, "tool_call") || !strings.Contains(k, "result") {
		t.Errorf("the replayed run's timeline has %s", k)
	}
}

// checkConsoleReload: the page showed the edit and then the diagnostics, and
// it was dev's watcher that reloaded (dev says so on stderr).
func checkConsoleReload(t *testing.T, seen map[string]any, dev *inProcess) {
	if d, _ := seen["description"].(string); !strings.Contains(d, "小满外卖客服") {
		t.Errorf("after the edit the description is %q", d)
	}
	if d, _ := seen["diagnostics"].(string); !strings.Contains(d, "max_turns") {
		t.Errorf("the diagnostics banner shows %q", d)
	}
	if s := dev.stderr.String(); !strings.Contains(s, "agentrun dev: reloaded\n") || !strings.Contains(s, "agentrun dev: kept the agents loaded before\n") {
		t.Errorf("dev's stderr tells no reload and no failed one:\n%s", s)
	}
}

func checkConsoleIsolation(t *testing.T, seen map[string]any, desk *consoleDesk) {
	t.Helper()
	runs := fmt.Sprint(seen["isolationRuns"], seen["isolationApprovals"])
	if strings.Contains(runs, desk.bobRun) || !strings.Contains(runs, desk.aliceRun) {
		t.Errorf("alice's page lists %s (bob's run is %s)", runs, desk.bobRun)
	}
	if s := fmt.Sprint(seen["isolationForeignStatus"]); s != "[404 404]" {
		t.Errorf("alice's page got %s for bob's run and its approvals, not 404", s)
	}
}

func copyConsoleFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, data, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}
