package offline

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Generated values must satisfy the schema they were generated from.
func TestGenerateSatisfiesSchema(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   any
	}{
		{"example wins", `{"type":"string","examples":["README.md"]}`, "README.md"},
		{"default wins", `{"type":"integer","default":3,"examples":[9]}`, float64(3)},
		{"enum", `{"type":"string","enum":["unpaid","done"]}`, "unpaid"},
		{"min length", `{"type":"string","minLength":5}`, "aaaaa"},
		{"pattern", `{"type":"string","pattern":"^[A-Z]\\d{4}$"}`, "A0000"},
		{"pattern with repeats and alternatives", `{"type":"string","pattern":"^(?:ord|order)-[a-f0-9]+(_x)?$"}`, "ord-a"},
		{"pattern and minLength", `{"type":"string","pattern":"^[0-9]+$","minLength":3}`, "000"},
		{"pattern of a negated class", `{"type":"string","pattern":"^[^a0A]{2}@x\\.com$"}`, "  @x.com"},
		{"unanchored pattern", `{"type":"string","pattern":"[.]json"}`, ".json"},
		{"minimum", `{"type":"integer","minimum":2,"maximum":9}`, float64(2)},
		{"exclusive minimum", `{"type":"number","exclusiveMinimum":0}`, float64(1)},
		{"array", `{"type":"array","minItems":2,"items":{"type":"boolean"}}`, []any{true, true}},
		{"object with required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b"]}`, map[string]any{"b": float64(0)}},
		{"nested", `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"const":"k"}},"required":["x"]}},"required":["o"]}`, map[string]any{"o": map[string]any{"x": "k"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var schema map[string]any
			if err := json.Unmarshal([]byte(tt.schema), &schema); err != nil {
				t.Fatal(err)
			}
			got := Generate(schema)
			// Compare as JSON: the generator's numbers are float64 like decoded JSON.
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tt.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("Generate = %s, want %s", gotJSON, wantJSON)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("mem://s.json", schema); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("mem://s.json")
			if err != nil {
				t.Fatal(err)
			}
			var v any
			_ = json.Unmarshal(gotJSON, &v)
			if err := sch.Validate(v); err != nil {
				t.Errorf("generated value does not satisfy its schema: %v", err)
			}
		})
	}
}

func TestTestModel(t *testing.T) {
	tools := []model.ToolDef{
		{Name: "a", Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}}},
		{Name: "b", Parameters: map[string]any{"type": "object"}},
	}
	ctx := context.Background()
	first, err := Test{}.Complete(ctx, &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	calls := first.Message.ToolCalls
	if len(calls) != 2 || calls[0].Name != "a" || calls[0].Arguments != `{"q":"a"}` || calls[1].Arguments != `{}` || first.FinishReason != "tool_calls" {
		t.Fatalf("first turn %+v", first)
	}
	msgs := []model.Message{
		{Role: model.RoleUser, Content: "hi"},
		{Role: model.RoleAssistant, ToolCalls: calls},
		{Role: model.RoleTool, ToolCallID: calls[0].ID, Content: "result A"},
		{Role: model.RoleTool, ToolCallID: calls[1].ID, Content: "result\nB"},
	}
	var streamed strings.Builder
	second, err := Test{}.Complete(ctx, &model.Request{Messages: msgs, Tools: tools, OnDelta: func(s string) { streamed.WriteString(s) }})
	if err != nil {
		t.Fatal(err)
	}
	want := "test model: called a → result A; b → result B"
	if second.Message.Content != want || streamed.String() != want || len(second.Message.ToolCalls) != 0 {
		t.Errorf("second turn %q (streamed %q)", second.Message.Content, streamed.String())
	}
	// A new user message starts over: tools are called again.
	third, _ := Test{}.Complete(ctx, &model.Request{Messages: append(msgs, model.Message{Role: model.RoleAssistant, Content: want}, model.Message{Role: model.RoleUser, Content: "again"}), Tools: tools})
	if len(third.Message.ToolCalls) != 2 {
		t.Errorf("next user turn: %+v", third.Message)
	}
	js, _ := Test{}.Complete(ctx, &model.Request{JSONSchema: &model.JSONSchemaFormat{Name: "answer", Schema: map[string]any{
		"type": "object", "properties": map[string]any{"passed": map[string]any{"type": "boolean"}}, "required": []any{"passed"}}}})
	if js.Message.Content != `{"passed":true}` {
		t.Errorf("structured answer %q", js.Message.Content)
	}
	v, _ := Test{}.Complete(ctx, &model.Request{JSONSchema: &model.JSONSchemaFormat{Name: "verdict", Schema: map[string]any{"type": "object"}}})
	if v.Message.Content != `{"missing":"","passed":true}` {
		t.Errorf("the test model's judge should pass: %q", v.Message.Content)
	}
}

func TestScript(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "turns.yaml")
	os.WriteFile(file, []byte(`
turns:
  - tool_calls:
      - {name: read_file, arguments: {path: a.txt}}
      - {id: my-id, name: calculator, arguments: '{"expression": '}
  - text: done
`), 0o644)
	s, err := LoadScript(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	verdict := &model.Request{JSONSchema: &model.JSONSchemaFormat{Name: "verdict", Schema: map[string]any{"type": "object"}}}
	s.WithVerdicts(map[string]any{"passed": false, "missing": "numbers"})
	if r, _ := s.Complete(ctx, verdict); r.Message.Content != `{"missing":"numbers","passed":false}` {
		t.Errorf("first verdict %q", r.Message.Content)
	}
	if r, _ := s.Complete(ctx, verdict); r.Message.Content != `{"missing":"","passed":true}` {
		t.Errorf("verdicts past the list should pass: %q", r.Message.Content)
	}
	r1, err := s.Complete(ctx, &model.Request{})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.ToolCall{{ID: "call_1_1", Name: "read_file", Arguments: `{"path":"a.txt"}`}, {ID: "my-id", Name: "calculator", Arguments: `{"expression": `}}
	if !reflect.DeepEqual(r1.Message.ToolCalls, want) {
		t.Errorf("turn 1: %+v", r1.Message.ToolCalls)
	}
	if r2, _ := s.Complete(ctx, &model.Request{}); r2.Message.Content != "done" {
		t.Errorf("turn 2: %+v", r2.Message)
	}
	if _, err := s.Complete(ctx, &model.Request{}); err == nil || !strings.Contains(err.Error(), "called 3 times, but the script has only 2 turns") {
		t.Errorf("past the end: %v", err)
	}
	for name, src := range map[string]string{
		"unknown key": "turns:\n  - txt: hi\n",
		"no turns":    "turns: []\n",
	} {
		bad := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		os.WriteFile(bad, []byte(src), 0o644)
		if _, err := LoadScript(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A call past the last turn fails with ErrScriptExhausted, keeps its message, and
// leaves the script Exhausted; structured calls (judge, classifier) use no turns.
func TestScriptExhausted(t *testing.T) {
	ctx := context.Background()
	s := NewScript("short", []ScriptTurn{{Text: "one"}})
	verdict := &model.Request{JSONSchema: &model.JSONSchemaFormat{Name: model.SchemaVerdict, Schema: map[string]any{"type": "object"}}}
	if _, err := s.Complete(ctx, verdict); err != nil || s.Exhausted() {
		t.Fatalf("a judge call: err %v, exhausted %v", err, s.Exhausted())
	}
	if _, err := s.Complete(ctx, &model.Request{}); err != nil || s.Exhausted() || s.Unused() != 0 {
		t.Fatalf("the last turn: err %v, exhausted %v, unused %d", err, s.Exhausted(), s.Unused())
	}
	_, err := s.Complete(ctx, &model.Request{})
	if !errors.Is(err, ErrScriptExhausted) || !s.Exhausted() {
		t.Fatalf("past the end: err %v, exhausted %v", err, s.Exhausted())
	}
	if want := "script short: the model was called 2 times, but the script has only 1 turns"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	// A script error that is not about running out is not ErrScriptExhausted.
	bad := NewScript("bad", []ScriptTurn{{ToolCalls: []ScriptToolCall{{Name: "f", Arguments: func() {}}}}})
	if _, err := bad.Complete(ctx, &model.Request{}); err == nil || errors.Is(err, ErrScriptExhausted) || bad.Exhausted() {
		t.Errorf("bad arguments: err %v, exhausted %v", err, bad.Exhausted())
	}
}

// A pattern the generator cannot meet gets a value that says so, never a plain "a"
// that looks like the test model's choice.
func TestGenerateSaysWhenItCannotMatchAPattern(t *testing.T) {
	for _, pattern := range []string{`^(?=a)b$`, `^a{3}$`} {
		schema := map[string]any{"type": "string", "pattern": pattern, "maxLength": 2.0}
		got, _ := Generate(schema).(string)
		if !strings.Contains(got, "test model cannot generate a string matching the pattern") || !strings.Contains(got, pattern) {
			t.Errorf("pattern %s: Generate = %q", pattern, got)
		}
	}
}
