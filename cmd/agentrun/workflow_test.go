package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/nodetools"
)

const flowSpec = "testdata/workflow/flow.yaml"

// graph draws a workflow's conditions, branches and loops, and Mermaid's own parser
// accepts the result.
func TestGraphWorkflow(t *testing.T) {
	code, out, stderr := runCLI(t, "graph", flowSpec)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		`W_when_summary{"when len(steps.details.items) > 2"}`,
		`W_when_summary -- "yes" --> w_summary`,
		`W_when_summary -- "skip" --> w_checks`,
		`w_checks -- "branch 1" --> w_a`,
		`w_checks -- "branch 2" --> w_b`,
		`w_a2 --> W_join_checks`,
		`w_b --> W_join_checks`,
		`W_until_poll{"until steps.st.result.n >= 3"}`,
		`W_until_poll -- "no · again, at most 5 times" --> w_poll`,
		`w_details[["details<br/>tool detail · for_each steps.orders.result.ids · 3 at once · on_error fail (default)"]]`,
		`W_until_poll -- "yes" --> W_answer`,
		`· workflow_done" --> s_FINISHED`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("graph lacks %q:\n%s", want, out)
		}
	}
	checkMermaid(t, out)
}

// checkMermaid runs Mermaid's own parser on a graph and fails the test unless it
// accepts it as a flowchart.
func checkMermaid(t *testing.T, out string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "flow.mmd")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mermaidCheck(t, f)[f]; !r.OK || r.Type != "flowchart-v2" {
		t.Errorf("%+v\n%s", r, out)
	}
}

// mermaidResult is what Mermaid's parser made of one file.
type mermaidResult struct {
	OK    bool
	Type  string
	Error string
}

// mermaidCheck parses the files with Mermaid's own parser (tools/node).
func mermaidCheck(t *testing.T, files ...string) map[string]mermaidResult {
	t.Helper()
	tools := nodetools.Dir(t)
	out, err := exec.Command("node", append([]string{filepath.Join(tools, "mermaid-check.mjs")}, files...)...).Output()
	if err != nil {
		t.Fatalf("mermaid-check: %v\n%s", err, out)
	}
	var results map[string]mermaidResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatal(err)
	}
	return results
}

// Steps named like the nodes graph adds (start, answer, NAME_when, NAME_join,
// NAME_until) keep nodes of their own: no edge loops back on itself and every
// step's node is drawn once.
func TestGraphWorkflowNames(t *testing.T) {
	tests := []struct{ name, steps string }{
		{"start and answer", `
    - {name: start, tool: echo}
    - {name: answer, tool: echo}`},
		{"a when", `
    - {name: a, when: "input != ''", tool: echo}
    - {name: a_when, tool: echo}
    - {name: w_a_when, tool: echo}`},
		{"a join and an until", `
    - name: end
      parallel:
        - - name: lp
            loop: {until: "true", max: 2}
            steps: [{name: lp_until, tool: echo}]
        - - {name: end_join, tool: echo}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := `version: 1
name: names
tools:
  - name: echo
    parameters: {type: object, properties: {}}
    http: {url: "https://example.com/echo"}
workflow:
  steps:` + tt.steps + "\n"
			f := filepath.Join(t.TempDir(), "names.yaml")
			if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := runCLI(t, "graph", f)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			defined := map[string]int{}
			for _, line := range strings.Split(out, "\n") {
				line = strings.TrimSpace(line)
				if from, rest, ok := strings.Cut(line, " -"); ok {
					to := rest[strings.LastIndex(rest, "> ")+2:]
					if from == to {
						t.Errorf("self-loop %q", line)
					}
					continue
				}
				if id, _, ok := strings.Cut(line, "["); ok && strings.HasPrefix(id, "w_") {
					defined[id]++
				} else if id, _, ok := strings.Cut(line, "("); ok && strings.HasPrefix(id, "w_") {
					defined[id]++
				}
			}
			for id, n := range defined {
				if n > 1 {
					t.Errorf("node %s drawn %d times", id, n)
				}
			}
			checkMermaid(t, out)
		})
	}
}

// explain lists a workflow's steps with what decides how each runs.
func TestExplainWorkflow(t *testing.T) {
	code, out, stderr := runCLI(t, "explain", flowSpec)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := `workflow: 5 steps
  orders: tool list · on_error fail (default)
  details: tool detail · for_each steps.orders.result.ids · 3 at once · on_error fail (default)
  summary: model (JSON schema) · on_error fail (default)
    when len(steps.details.items) > 2 (else skipped)
  checks: parallel · 2 branches · on_error fail (default)
    branch 1:
      a: tool detail · on_error fail (default)
      a2: tool detail · on_error fail (default)
    branch 2:
      b: tool detail · on_error continue
  poll: loop until steps.st.result.n >= 3 · max 5 · on_error fail (default)
    st: tool status · on_error fail (default)
  answer: "{{ steps.summary.output.note }}"
`
	if !strings.Contains(out, want) {
		t.Errorf("explain lacks the steps:\n%s", out)
	}
}

// exec runs a workflow like an agent.
func TestExecWorkflow(t *testing.T) {
	code, out, stderr := runCLI(t, "exec", "--model", "test", "testdata/workflow/calc.yaml", "2 + 3")
	if code != 0 || strings.TrimSpace(out) != "The sum is 5." {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
	}
}
