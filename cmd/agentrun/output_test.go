package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const outputAgent = `version: 1
name: order-answer
tools:
  - name: calculator
    builtin: calculator
output:
  schema:
    type: object
    properties:
      total: {type: number}
      status: {enum: [paid, unpaid]}
      lines: {type: array, minItems: 1, items: {type: object, properties: {sku: {type: string, minLength: 3}}, required: [sku]}}
    required: [total, status, lines]
`

func outputDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := outputAgent
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exec --json shows the structured answer parsed, beside its text; the test
// model calls the tool, then answers with a value of the schema.
func TestExecJSONShowsTheOutput(t *testing.T) {
	dir := outputDir(t)
	code, stdout, stderr := runCLI(t, "exec", "--json", "--model", "test", filepath.Join(dir, "agent.yaml"), "What do I owe?")
	var res struct {
		Answer, Stop string
		Steps        []struct{ Tool string }
		Output       struct {
			Total  *float64
			Status string
			Lines  []struct{ SKU string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, stdout, stderr)
	}
	if code != 0 || res.Stop != "completed" || len(res.Steps) != 1 || res.Output.Total == nil || res.Output.Status != "paid" ||
		len(res.Output.Lines) != 1 || len(res.Output.Lines[0].SKU) < 3 || !json.Valid([]byte(res.Answer)) {
		t.Errorf("exit %d, result %+v\n%s", code, res, stdout)
	}
}

// A scenario's expect.output passes when the value has what it lists, and fails
// with where they differ.
func TestAgentrunTestExpectOutput(t *testing.T) {
	dir := outputDir(t)
	cases := `agent: agent.yaml
cases:
  - name: the value matches
    input: What do I owe?
    model:
      - tool_calls: [{name: calculator, arguments: {expression: 2 * 4.5}}]
      - text: '{"total": 9, "status": "unpaid", "lines": [{"sku": "TEA-1"}]}'
    expect:
      stop: completed
      output: {total: 9, lines: [{sku: TEA-1}]}
  - name: the value differs
    input: What do I owe?
    model:
      - text: '{"total": 9, "status": "paid", "lines": [{"sku": "TEA-1"}]}'
    expect:
      output: {status: unpaid}
  - name: never valid
    input: What do I owe?
    model:
      - text: 'nine'
      - text: '{"total": "9"}'
      - text: '{"total": 9, "status": "due", "lines": []}'
    expect:
      stop: output_invalid
      guards: [output_invalid]
`
	if err := os.WriteFile(filepath.Join(dir, "agent.test.yaml"), []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "test", dir)
	if code != 1 || !strings.Contains(stdout, "2 passed, 1 failed") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"the value differs",
		`✗ output: expected {"status":"unpaid"}, got {"lines":[{"sku":"TEA-1"}],"status":"paid","total":9} (they differ at /status)`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q\n%s", want, stdout)
		}
	}
}
