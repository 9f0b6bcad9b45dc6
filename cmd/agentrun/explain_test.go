package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/openaitest"
)

func TestExplain(t *testing.T) {
	code, stdout, stderr := runCLI(t, "explain", shopSupport)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkGolden(t, "explain-shop.txt", stdout)

	code, stdout, _ = runCLI(t, "explain", shopSupport, "--intent", "cancel_order")
	for _, want := range []string{
		"intent cancel_order (task, memory summary)",
		"│ ## Skill: orders",
		"[summary memory of the user, added at run time]",
		"tools offered: 3 of 5",
		"saves ~139 tokens per model call (43%) against offering all 5 tools",
		"guards: max_turns 8",
		"judge: 1 criteria",
	} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("explain --intent lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "update_address") {
		t.Error("a tool outside the intent is listed")
	}

	code, stdout, _ = runCLI(t, "explain", shopSupport, "--question", "帮我取消订单", "--model", "test")
	if code != 0 || !strings.HasPrefix(stdout, `router: intent cancel_order, by rules (pattern "帮我取消|给我取消|取消吧|取消.*[A-Z]\\d{4}")`) {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "explain", codeAssistant)
	if code != 0 || !strings.Contains(stdout, "tools offered: 3 of 3") || !strings.Contains(stdout, "no saving: every tool is offered") {
		t.Errorf("an agent without intents: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCLI(t, "explain", shopSupport, "--intent", "cancel"); code != 2 || !strings.Contains(stderr, `did you mean "cancel_order"?`) {
		t.Errorf("unknown intent: exit %d, %s", code, stderr)
	}
}

// explain and graph show the settings the runtime uses, defaults included: once they
// showed max_tool_rounds 8 and max_retries 2 where the runtime used 3 and 0, and the
// graph's edges lacked triggers such as a timeout while tools run.
func TestExplainAndGraphShowEffectiveSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(path, []byte(`version: 1
name: effective
tools: [{builtin: calculator}]
guards: {max_turns: 3}
judge: {criteria: [Every question is answered.], max_retries: 0}
`), 0o644)
	code, explain, stderr := runCLI(t, "explain", path)
	if code != 0 {
		t.Fatalf("explain: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"max_turns 3 ·", "max_tool_rounds 3 (default)", "max_retries 0 ·", "max_parallel_tools 4 (default)"} {
		if !strings.Contains(explain, want) {
			t.Errorf("explain lacks %q:\n%s", want, explain)
		}
	}
	code, graph, stderr := runCLI(t, "graph", path)
	if code != 0 {
		t.Fatalf("graph: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		`s_THINKING -- "blocked · max_turns 3 · max_tool_rounds 3 (default) · model_error · truncated · content_filter · budget (none set) · timeout ≤ 10m0s (default) · canceled" --> s_STOPPED`,
		`s_TOOL_EXECUTING -- "duplicate_calls stop (default) · timeout ≤ 10m0s (default) · canceled" --> s_STOPPED`,
		`s_TOOL_EXECUTING -- "results · ≤ 4 (default) in parallel" --> s_THINKING`,
		`s_VALIDATING -- "judge feedback · max_retries 0" --> s_THINKING`,
	} {
		if !strings.Contains(graph, want) {
			t.Errorf("graph lacks %q:\n%s", want, graph)
		}
	}
}

// The graph of every example parses with Mermaid's own parser.
func TestGraphIsMermaid(t *testing.T) {
	code, stdout, stderr := runCLI(t, "graph", shopSupport)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkGolden(t, "graph-shop.mmd", stdout)
	for _, want := range []string{"i_cancel_order --> d_order", "i_cancel_order --> t_cancel_order", "d_account --> t_update_address", `s_THINKING -- "blocked · max_turns 8 · max_tool_rounds 4 · model_error · truncated · content_filter · budget (none set) · timeout ≤ 10m0s (default) · canceled · handoff stopped (its agent's stop reason)" --> s_STOPPED`,
		`i_refund_request -- "hands off" --> t_refund_specialist`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("graph lacks %q", want)
		}
	}
	dir := t.TempDir()
	files := []string{}
	examples := exampleAgents(t)
	for _, ex := range examples {
		_, out, _ := runCLI(t, "graph", ex)
		f := filepath.Join(dir, filepath.Base(ex)+".mmd")
		os.WriteFile(f, []byte(out), 0o644)
		files = append(files, f)
	}
	broken := filepath.Join(dir, "broken.mmd")
	os.WriteFile(broken, []byte("flowchart LR\n  a[\"x\" --> b\n"), 0o644)
	results := mermaidCheck(t, append([]string{broken}, files...)...)
	if results[broken].OK {
		t.Error("the parser accepted a broken diagram: the check checks nothing")
	}
	for _, f := range files {
		if r := results[f]; !r.OK || r.Type != "flowchart-v2" {
			t.Errorf("%s: %+v", filepath.Base(f), r)
		}
	}
}

func TestSkillsCommands(t *testing.T) {
	code, stdout, stderr := runCLI(t, "skills", "list")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"calculator  1.0.0", "files", "read_file, list_dir, write_file", "shell", "run_command", "time", "web"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("skills list lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCLI(t, "skills", "show", "web")
	for _, want := range []string{"skill web 1.0.0", "allow_hosts  array    required", `timeout      string   default "10s"`, "http_get — ", `"url"`, "# web"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("skills show web lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCLI(t, "skills", "show", "../../examples/agents/skills/orders")
	for _, want := range []string{"skill orders 1.0.0", "api ", "cancel_order — Cancel one of the user's unpaid orders.", "filters:", "on tool_result, error for list_recent_orders, get_order_detail when text startsWith \"FAIL:\""} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("skills show PATH lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, stderr := runCLI(t, "skills", "show", "calculater"); code != 2 || !strings.Contains(stderr, `did you mean "calculator"?`) {
		t.Errorf("unknown skill: exit %d\n%s", code, stderr)
	}
}

// explain --question runs the router; when no rule matches the LLM classifier's call
// is charged to the run, which once panicked (a nil mutex) with every kind of model.
func TestExplainQuestionThroughTheClassifier(t *testing.T) {
	fake := openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: `{"intent":"menu_advice","confidence":0.9}`}
	})
	handoff := openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: `{"intent":"refund_request","confidence":0.95}`}
	})
	failing := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Status: 500} })
	script := writeFile(t, "classifier.script.yaml", "turns:\n  - text: unused\nclassifier:\n  - {intent: menu_advice, confidence: 0.8}\n")
	tests := []struct {
		name, model, baseURL, want string
	}{
		{"test model", "test", "", "router: intent order_status, by llm (confidence 1.00)"},
		{"script model", "script:" + script, "", "router: intent menu_advice, by llm (confidence 0.80)"},
		{"openai model", "", fake.URL, "router: intent menu_advice, by llm (confidence 0.90)"},
		{"an intent of a sub-agent", "", handoff.URL, "router: intent refund_request, by llm (confidence 0.95)\n\nagent shop-support · intent refund_request"},
		{"a failing classifier falls back", "", failing.URL, "router: intent other, by fallback (the classifier failed: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LLM_BASE_URL", tt.baseURL)
			t.Setenv("LLM_API_KEY", "sk-test")
			args := []string{"explain", "--question", "recommend something spicy", shopSupport}
			if tt.model != "" {
				args = append(args, "--model", tt.model)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || !strings.HasPrefix(stdout, tt.want) {
				t.Fatalf("exit %d, want output starting %q:\n%s\n%s", code, tt.want, stdout, stderr)
			}
		})
	}
}

// A declared user attribute that is not given renders as "" in the prompt: explain
// says which one and how to give it (--set), and only for those the prompt shows.
func TestExplainWarnsOfUnsetAttributes(t *testing.T) {
	file := writeFile(t, "attrs.yaml", `
version: 1
name: attrs
model: {provider: test}
context:
  user: [tier, city, region]
instructions: |
  The user is a {{ user.tier }} customer in {{ user.region }}.
  {{ user.city == "x" ? "X" : "" }}
`)
	code, stdout, stderr := runCLI(t, "explain", file)
	if code != 0 || !strings.Contains(stdout, "The user is a  customer in .") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"user.tier is unset", "--set tier=VALUE", "user.region is unset", "--set region=VALUE"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "city") {
		t.Errorf("a warning for an attribute the prompt does not show:\n%s", stderr)
	}
	code, stdout, stderr = runCLI(t, "explain", "--set", "tier=gold", "--set", "region=north", file)
	if code != 0 || !strings.Contains(stdout, "The user is a gold customer in north.") || stderr != "" {
		t.Errorf("--set: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "explain", "--set", "nope=1", file); code != 2 || !strings.Contains(stderr, `declares no user attribute "nope"`) {
		t.Errorf("an undeclared attribute: exit %d\n%s", code, stderr)
	}
}

// explain's table of intents comes with validate's warning of a rule that takes
// FAQ questions from a cached intent.
func TestExplainWarnsOfStarvedCache(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kb/faq.yaml": "faq:\n  - question: How do I cancel an order?\n    variants: [\"Can I cancel my order?\"]\n    answer: Unpaid orders can be cancelled.\n",
		"agent.yaml": "version: 1\nname: shop\ninstructions: hi\nmodel: {provider: test}\nknowledge:\n  collections:\n    help: {sources: [kb/faq.yaml]}\n" +
			"intents:\n  cancel_order:\n    kind: task\n    patterns: [\"(?i)cancel\"]\n  faq:\n    kind: knowledge\n    cache: true\nrouting: {recognizer: rules, fallback: faq}\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCLI(t, "explain", filepath.Join(dir, "agent.yaml"))
	if code != 0 || !strings.Contains(stdout, "cancel_order") ||
		!strings.Contains(stderr, `warning: intents.cancel_order.patterns[0]: pattern "(?i)cancel" of intent cancel_order routes 2 FAQ questions of intent faq's cache away from it`) {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, _, stderr := runCLI(t, "explain", shopSupport); stderr != "" {
		t.Errorf("the shop's rules take no FAQ question, yet: %s", stderr)
	}
}

// graph --format json prints the graph Mermaid is drawn from; a format it does
// not know is a usage error.
func TestGraphJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "graph", "--format", "json", shopSupport)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var g struct {
		Agent string
		Nodes []struct{ ID, Kind string }
		Edges []struct{ From, To, Label, Kind string }
	}
	if err := json.Unmarshal([]byte(stdout), &g); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if g.Agent != "shop-support" || !slices.ContainsFunc(g.Nodes, func(n struct{ ID, Kind string }) bool { return n.ID == "agent:refund_specialist" && n.Kind == "agent" }) ||
		!slices.ContainsFunc(g.Edges, func(e struct{ From, To, Label, Kind string }) bool {
			return e.From == "state:THINKING" && e.To == "state:FINISHED" && e.Label == "cache_hit" && e.Kind == "transition"
		}) {
		t.Errorf("graph JSON:\n%s", stdout)
	}
	if code, _, stderr := runCLI(t, "graph", "--format", "dot", shopSupport); code != 2 || !strings.Contains(stderr, `unknown --format "dot"`) {
		t.Errorf("--format dot: exit %d, %s", code, stderr)
	}
}
