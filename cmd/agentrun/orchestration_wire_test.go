package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
)

func writeSpec(t *testing.T, dir, name, src string) string {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Plan mode over the wire: an answer while steps are open is sent back with the
// plan gate's feedback and never shown; once the steps are done the answer is
// accepted, and the plan is in --json and in the stored history.
func TestWirePlanGate(t *testing.T) {
	dir := t.TempDir()
	file := writeSpec(t, dir, "planner.yaml", `
version: 1
name: planner
model: {api_key_env: LLM_API_KEY}
instructions: Plan, then work.
plan: {required: true}
skills: [calculator]
`)
	plan := func(id, steps string) reply {
		return calls(toolCall(id, "update_plan", `{"steps":[`+steps+`]}`))
	}
	f := newFakeOpenAI(t,
		plan("call_p1", `{"step":"Add the numbers","status":"in_progress"},{"step":"Check the sum","status":"pending"}`),
		answer("It is 5."), // steps open: refused
		calls(toolCall("call_c", "calculator", `{"expression":"2+3"}`)),
		plan("call_p2", `{"step":"Add the numbers","status":"done"},{"step":"Check the sum","status":"done"}`),
		answer("2 + 3 = 5, checked."),
	)
	store := "sqlite:" + filepath.Join(dir, "state.db")
	code, stdout, stderr := runCLI(t, "exec", "--json", "--store", store, "--user", "u-1", "--conversation", "c-1", file, "What is 2+3?")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	f.checkRequests()
	var res runtime.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if res.Answer != "2 + 3 = 5, checked." || len(res.Plan) != 2 || res.Plan[1].Status != runtime.PlanDone {
		t.Fatalf("answer %q, plan %+v", res.Answer, res.Plan)
	}
	// The request after the early answer ends with the gate's feedback.
	third := f.messages(2)
	last := third[len(third)-1]
	content, _ := last["content"].(string)
	if last["role"] != "user" || !strings.HasPrefix(content, runtime.PlanFeedbackPrefix) ||
		!strings.Contains(content, `"Add the numbers" (in progress)`) || !strings.Contains(content, `"Check the sum" (pending)`) {
		t.Fatalf("the request after the early answer ends with %v", last)
	}
	for _, m := range third {
		if m["content"] == "It is 5." {
			t.Fatal("the refused answer went back to the model as if accepted")
		}
	}
	if !strings.Contains(stderr, "plan_open") || !strings.Contains(stderr, "☰ plan · 2/2 done") {
		t.Errorf("the progress lines lack the plan:\n%s", stderr)
	}
	st, err := agentrun.OpenStore(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conv, err := st.Conversation(context.Background(), "c-1", 10)
	if err != nil {
		t.Fatal(err)
	}
	var stored strings.Builder
	for _, m := range conv.Messages {
		stored.WriteString(m.Content + "\n")
		for _, tc := range m.ToolCalls {
			stored.WriteString(tc.Name + " " + tc.Arguments + "\n")
		}
	}
	for _, want := range []string{"update_plan", "[x] Check the sum", "2 + 3 = 5, checked."} {
		if !strings.Contains(stored.String(), want) {
			t.Errorf("the stored history lacks %q:\n%s", want, stored.String())
		}
	}
	for _, never := range []string{"It is 5.", runtime.PlanFeedbackPrefix} {
		if strings.Contains(stored.String(), never) {
			t.Errorf("the stored history holds %q", never)
		}
	}
}

// refundsSpec is a specialist whose refund tool binds the user's id into a header
// of the shop's API (${SHOP}).
const refundsSpec = `
version: 1
name: refunds
description: Refunds one order of the user.
model: {api_key_env: LLM_API_KEY}
instructions: You handle refunds.
tools:
  - name: refund
    parameters: {type: object, properties: {order: {type: string}}, required: [order]}
    bind: {user_id: user.id}
    http: {method: POST, url: "${SHOP}/orders/{{ args.order }}/refund", headers: {X-User-Id: "{{ args.user_id }}"}}
`

// shopBackend serves the shop's API at ${SHOP}, answering every call that it was
// refunded — with the user it was made for, when showUser is set; calls lists "path
// user body" of each call so far.
func shopBackend(t *testing.T, showUser bool) (calls func() []string) {
	var mu sync.Mutex
	var got []string
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("X-User-Id")+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if showUser {
			io.WriteString(w, `{"refunded":true,"user":"`+r.Header.Get("X-User-Id")+`"}`)
			return
		}
		io.WriteString(w, `{"refunded":true}`)
	}))
	t.Cleanup(shop.Close)
	t.Setenv("SHOP", shop.URL)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// A sub-agent over the wire: the desk hands a task to the refund specialist, which
// runs on its own whitelist (the desk's tool is refused to it), binds the user's id
// into its http tool where its model never sees it, and answers; its events nest
// under the desk's run in the trace.
func TestWireSubAgent(t *testing.T) {
	backend := shopBackend(t, false)
	dir := t.TempDir()
	writeSpec(t, dir, "refunds.yaml", refundsSpec)
	desk := writeSpec(t, dir, "desk.yaml", `
version: 1
name: desk
model: {api_key_env: LLM_API_KEY}
instructions: You run the help desk.
agents:
  - {name: refunds, spec: ./refunds.yaml}
tools:
  - name: lookup
    parameters: {type: object, properties: {order: {type: string}}}
    http: {url: "${SHOP}/lookup/{{ args.order }}"}
`)
	f := newFakeOpenAI(t,
		calls(toolCall("call_sub", "refunds", `{"task":"Refund order A1."}`)), // the desk
		calls(toolCall("call_l", "lookup", `{"order":"A1"}`)),                 // the specialist tries the desk's tool
		calls(toolCall("call_r", "refund", `{"order":"A1","user_id":"mallory"}`)),
		answer("Order A1 is refunded."),
		answer("Your order A1 is refunded."), // the desk
	)
	trace := filepath.Join(dir, "trace.jsonl")
	code, stdout, stderr := runCLI(t, "exec", "--trace", trace, "--user", "u-1", desk, "refund A1")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if stdout != "Your order A1 is refunded.\n" {
		t.Fatalf("stdout %q", stdout)
	}
	f.checkRequests()
	if got := backend(); len(got) != 1 || !strings.HasPrefix(got[0], "/orders/A1/refund u-1") {
		t.Fatalf("the shop got %q: want one refund for u-1 and no lookup", got)
	}
	for i, req := range f.requests {
		raw, _ := json.Marshal(req)
		if strings.Contains(string(raw), "u-1") {
			t.Errorf("model request %d shows the bound user: %s", i, raw)
		}
	}
	// The specialist was offered its own tool only, and told the desk's is not there.
	subTools, _ := json.Marshal(f.requests[1]["tools"])
	if strings.Contains(string(subTools), `"lookup"`) || !strings.Contains(string(subTools), `"refund"`) {
		t.Errorf("the specialist was offered %s", subTools)
	}
	third := f.messages(2)
	if tool := third[len(third)-1]; !strings.Contains(tool["content"].(string), `there is no tool "lookup"`) {
		t.Errorf("the desk's tool was not refused to the specialist: %v", tool)
	}
	// Nesting in the trace: the specialist's events name the desk's run as parent.
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var top, sub string
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var e runtime.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Depth {
		case 0:
			top = e.Run
		case 1:
			sub = e.Run
			if e.Parent != top || e.Agent != "refunds" {
				t.Fatalf("nested event %s: parent %q agent %q, want parent %q agent refunds", sc.Text(), e.Parent, e.Agent, top)
			}
		}
	}
	if top == "" || sub == "" || top == sub {
		t.Fatalf("trace runs: top %q, sub %q", top, sub)
	}
	if !strings.Contains(stderr, "│ ") || !strings.Contains(stderr, "▶ agent refunds") {
		t.Errorf("the progress lines do not nest the specialist:\n%s", stderr)
	}
}

// --record saves the sub-agents' model calls too, in the order they happened, so the
// script replays the whole run with one model for every agent.
func TestRecordReplaysSubAgents(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "refunds.yaml", "version: 1\nname: refunds\ndescription: Refunds.\nmodel: {provider: test}\nskills: [calculator]\n")
	desk := writeSpec(t, dir, "desk.yaml", "version: 1\nname: desk\nmodel: {provider: test}\nagents: [{name: refunds, spec: ./refunds.yaml}]\n")
	script := filepath.Join(dir, "run.script.yaml")
	code, recorded, stderr := runCLI(t, "exec", "-q", "--record", script, desk, "refund it")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	raw, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(raw), "\n    - ") != 4 { // desk calls refunds, refunds calls calculator, refunds answers, desk answers
		t.Fatalf("the script holds:\n%s", raw)
	}
	code, replayed, stderr := runCLI(t, "exec", "-q", "--model", "script:"+script, desk, "refund it")
	if code != 0 || replayed != recorded {
		t.Fatalf("replay: exit %d, %q, want %q\n%s", code, replayed, recorded, stderr)
	}
}

// A handoff over the wire: the refund intent's turn is answered by the specialist,
// whose exchange — its tool call with the result — is stored whole, so the next turn's
// request (another intent, the desk's own model call) carries it in a shape the API
// accepts.
func TestWireHandoff(t *testing.T) {
	shopBackend(t, true)
	dir := t.TempDir()
	writeSpec(t, dir, "refunds.yaml", refundsSpec)
	desk := writeSpec(t, dir, "desk.yaml", `
version: 1
name: desk
model: {api_key_env: LLM_API_KEY}
instructions: You run the help desk.
agents:
  - {name: refunds, spec: ./refunds.yaml}
intents:
  refund: {description: Refunds, keywords: [refund], agent: refunds}
  other: {description: Anything else, kind: chat}
routing: {recognizer: rules, fallback: other}
`)
	f := newFakeOpenAI(t,
		calls(toolCall("call_r", "refund", `{"order":"A1"}`)), // the specialist
		answer("A1 is refunded."),
		answer("You're welcome."), // the desk, next turn
	)
	store := "sqlite:" + filepath.Join(dir, "state.db")
	args := []string{"exec", "-q", "--json", "--store", store, "--user", "u-1", "--conversation", "c-1", desk}
	code, stdout, stderr := runCLI(t, append(args, "refund A1 please")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res runtime.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Answer != "A1 is refunded." || res.Intent != "refund" || res.Handoff == nil || res.Handoff.Agent != "refunds" ||
		len(res.Steps) != 1 || !strings.Contains(res.Steps[0].Result, `"user":"u-1"`) {
		t.Fatalf("result %s", stdout)
	}
	if code, stdout, stderr = runCLI(t, append(args, "thanks")...); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	f.checkRequests()
	third := f.messages(2)
	var roles []string
	for _, m := range third {
		roles = append(roles, m["role"].(string))
	}
	if strings.Join(roles, " ") != "system user assistant tool assistant user" {
		t.Fatalf("the next turn's request has %v", roles)
	}
	if sys := third[0]["content"].(string); !strings.Contains(sys, "help desk") {
		t.Fatalf("the next turn went to %q, want the desk", sys)
	}
}
