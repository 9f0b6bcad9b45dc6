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
		`w_summary_when{"when len(steps.details.items) > 2"}`,
		`w_summary_when -- "yes" --> w_summary`,
		`w_summary_when -- "skip" --> w_checks`,
		`w_checks -- "branch 1" --> w_a`,
		`w_checks -- "branch 2" --> w_b`,
		`w_a2 --> w_checks_join`,
		`w_b --> w_checks_join`,
		`w_poll_until{"until steps.st.result.n >= 3"}`,
		`w_poll_until -- "no · again, at most 5 times" --> w_poll`,
		`w_details[["details<br/>tool detail · for_each steps.orders.result.ids · 3 at once · on_error fail (default)"]]`,
		`w_poll_until -- "yes" --> w_answer`,
		`· workflow_done" --> s_FINISHED`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("graph lacks %q:\n%s", want, out)
		}
	}
	tools := nodetools.Dir(t)
	f := filepath.Join(t.TempDir(), "flow.mmd")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Command("node", filepath.Join(tools, "mermaid-check.mjs"), f).Output()
	if err != nil {
		t.Fatalf("mermaid-check: %v\n%s", err, res)
	}
	var results map[string]struct {
		OK    bool
		Type  string
		Error string
	}
	if err := json.Unmarshal(res, &results); err != nil {
		t.Fatal(err)
	}
	if r := results[f]; !r.OK || r.Type != "flowchart-v2" {
		t.Errorf("%+v\n%s", r, out)
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
