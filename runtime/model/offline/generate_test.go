package offline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The test model answers any JSON schema with a value that schema accepts.
func TestTestModelAnswersAnySchemaWithAValidValue(t *testing.T) {
	tests := []struct{ name, schema string }{
		{"types", `{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},"z":{"type":"null"}},"required":["s","i","n","b","z"]}`},
		{"enum and const", `{"type":"object","properties":{"e":{"enum":["low","high"]},"c":{"const":{"k":[1,2]}}},"required":["e","c"]}`},
		{"string bounds", `{"type":"object","properties":{"s":{"type":"string","minLength":4,"maxLength":6}},"required":["s"]}`},
		{"max length under the default", `{"type":"object","properties":{"s":{"type":"string","maxLength":0}},"required":["s"]}`},
		{"formats", `{"type":"object","properties":{"d":{"type":"string","format":"date-time"},"m":{"type":"string","format":"email"},"u":{"type":"string","format":"uuid"}},"required":["d","m","u"]}`},
		{"number bounds", `{"type":"object","properties":{"i":{"type":"integer","exclusiveMinimum":1.5},"m":{"type":"integer","minimum":7,"multipleOf":5},"x":{"type":"number","minimum":1,"exclusiveMaximum":1.5}},"required":["i","m","x"]}`},
		{"unique items", `{"type":"object","properties":{"tags":{"type":"array","minItems":3,"uniqueItems":true,"items":{"type":"string"}},"ns":{"type":"array","minItems":2,"uniqueItems":true,"items":{"type":"integer","minimum":1}},"es":{"type":"array","minItems":2,"uniqueItems":true,"items":{"enum":["a","b","c"]}}},"required":["tags","ns","es"]}`},
		{"unique objects", `{"type":"object","properties":{"rows":{"type":"array","minItems":2,"uniqueItems":true,"items":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}},"required":["rows"]}`},
		{"nested objects and arrays", `{"type":"object","properties":{"order":{"type":"object","properties":{"lines":{"type":"array","minItems":1,"items":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-\\d{2}$"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"],"additionalProperties":false}}},"required":["lines"]}},"required":["order"],"additionalProperties":false}`},
		{"prefix items and contains", `{"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"minItems":2},"c":{"type":"array","contains":{"const":"x"}}},"required":["p","c"]}`},
		{"min properties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"boolean"}},"minProperties":2}`},
		{"min properties beyond the declared", `{"type":"object","minProperties":2,"additionalProperties":{"type":"integer"}}`},
		{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":3}},"required":["b"]}]}`},
		{"anyOf and oneOf", `{"type":"object","properties":{"x":{"anyOf":[{"type":"string","minLength":2},{"type":"null"}]},"y":{"oneOf":[{"type":"integer","minimum":10},{"type":"string"}]}},"required":["x","y"]}`},
		{"nullable type list", `{"type":"object","properties":{"v":{"type":["null","string"],"minLength":3}},"required":["v"]}`},
		{"implied types", `{"properties":{"s":{"minLength":2},"a":{"items":{"type":"boolean"},"minItems":1}},"required":["s","a"]}`},
		{"verdict-like name", `{"type":"object","properties":{"passed":{"type":"boolean"}},"required":["passed"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var decl map[string]any
			if err := json.Unmarshal([]byte(tt.schema), &decl); err != nil {
				t.Fatal(err)
			}
			resp, err := Test{}.Complete(context.Background(), &model.Request{
				Messages:   []model.Message{{Role: model.RoleUser, Content: "go"}},
				JSONSchema: &model.JSONSchemaFormat{Name: model.SchemaAnswer, Schema: decl},
			})
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddResource("mem://s.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("mem://s.json")
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(resp.Message.Content))
			if err != nil {
				t.Fatalf("answer %q is not JSON: %v", resp.Message.Content, err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("answer %s does not validate: %v", resp.Message.Content, err)
			}
		})
	}
}

// Asked for a structured answer along with tools, the test model calls the tools
// first and answers with the JSON value once their results are in.
func TestTestModelCallsToolsBeforeItsStructuredAnswer(t *testing.T) {
	schema := &model.JSONSchemaFormat{Name: model.SchemaAnswer, Schema: map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}}
	tools := []model.ToolDef{{Name: "lookup", Parameters: map[string]any{"type": "object"}}}
	msgs := []model.Message{{Role: model.RoleUser, Content: "go"}}
	first, err := Test{}.Complete(context.Background(), &model.Request{Messages: msgs, Tools: tools, JSONSchema: schema})
	if err != nil || len(first.Message.ToolCalls) != 1 || first.Message.Content != "" {
		t.Fatalf("first answer %+v, %v: want a call of lookup", first, err)
	}
	msgs = append(msgs, first.Message, model.Message{Role: model.RoleTool, ToolCallID: first.Message.ToolCalls[0].ID, Content: "ok"})
	second, err := Test{}.Complete(context.Background(), &model.Request{Messages: msgs, Tools: tools, JSONSchema: schema})
	if err != nil || len(second.Message.ToolCalls) != 0 || second.Message.Content != `{"n":0}` {
		t.Fatalf("second answer %+v, %v: want the JSON value", second, err)
	}
}
