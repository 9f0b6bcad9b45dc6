package offline

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// TestScriptKeys plays testdata/turns/keys.yaml, one turn per key of a script turn,
// and checks each response: reasoning as text and as a provider's native blocks
// (a mapping in key order, a string verbatim), providers' finish reasons mapped to
// the runtime's, scripted usage, structured output as its JSON text, and the
// judge still answered from its own list between turns.
func TestScriptKeys(t *testing.T) {
	s, err := LoadScript("testdata/turns/keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	output := &model.JSONSchemaFormat{Name: "output", Schema: map[string]any{"type": "object"}}
	verdict := &model.JSONSchemaFormat{Name: model.SchemaVerdict, Schema: map[string]any{"type": "object"}}
	call := func(id, args string) []model.ToolCall {
		return []model.ToolCall{{ID: id, Name: "lookup", Arguments: args}}
	}
	tests := []struct {
		name   string
		schema *model.JSONSchemaFormat
		want   model.Message
		finish model.FinishReason
		usage  *model.Usage
	}{
		{name: "reasoning as text", want: model.Message{ToolCalls: call("c1", `{"order":"A1"}`),
			Reasoning: &model.Reasoning{Field: "reasoning_content", Text: "I should look the order up."}}, finish: model.FinishToolCalls},
		{name: "reasoning in another field", want: model.Message{Content: "It is on its way.",
			Reasoning: &model.Reasoning{Field: "reasoning", Text: "Looked it up."}}, finish: model.FinishStop},
		{name: "native blocks, anthropic's tool_use", want: model.Message{ToolCalls: call("toolu_1", `{"order":"A1"}`),
			Reasoning: &model.Reasoning{Text: "The user wants A1.", Provider: model.ProviderAnthropic, Blocks: []json.RawMessage{
				json.RawMessage(`{"type":"thinking","thinking":"The user wants A1.","signature":"EqQBCkYIAxgCIkB=="}`),
				json.RawMessage(`{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}`)}}}, finish: model.FinishToolCalls},
		{name: "max_tokens is length", want: model.Message{Content: "The answer was cut"}, finish: model.FinishLength},
		{name: "refusal is content_filter", want: model.Message{}, finish: model.FinishContentFilter},
		{name: "SAFETY is content_filter", want: model.Message{Content: "blocked"}, finish: model.FinishContentFilter},
		{name: "judge between turns", schema: verdict, want: model.Message{Content: `{"missing":"the ETA","passed":false}`}, finish: model.FinishStop},
		{name: "end_turn is stop", want: model.Message{Content: "Done."}, finish: model.FinishStop},
		{name: "usage with cache tokens", want: model.Message{Content: "Cached."}, finish: model.FinishStop,
			usage: &model.Usage{PromptTokens: 1200, CompletionTokens: 30, TotalTokens: 1230, CachedPromptTokens: 1024, CacheWriteTokens: 100}},
		{name: "output as JSON in key order", schema: output, finish: model.FinishStop,
			want: model.Message{Content: `{"status":"shipped","eta_days":2,"items":["a","b"],"note":"<fragile> & heavy","price":1.50}`}},
		{name: "output with tool calls", schema: output, finish: model.FinishToolCalls,
			want: model.Message{Content: `{"status":"pending"}`, ToolCalls: call("c2", `{"order":"A2"}`)}},
		{name: "output a number", want: model.Message{Content: "42"}, finish: model.FinishStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.Complete(context.Background(), &model.Request{JSONSchema: tt.schema})
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Role = model.RoleAssistant
			if !reflect.DeepEqual(resp.Message, tt.want) {
				t.Errorf("message\n got %s\nwant %s", jsonOf(resp.Message), jsonOf(tt.want))
			}
			if resp.FinishReason != tt.finish {
				t.Errorf("finish %q, want %q", resp.FinishReason, tt.finish)
			}
			if tt.usage != nil && resp.Usage != *tt.usage {
				t.Errorf("usage %+v, want %+v", resp.Usage, *tt.usage)
			}
		})
	}
	if s.Unused() != 0 {
		t.Errorf("%d turns unused", s.Unused())
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The script vocabulary spec keeps (spec cannot import model) names the model's
// own finish reasons and reasoning providers.
func TestScriptVocabularyIsTheModels(t *testing.T) {
	ours := map[string]bool{string(model.FinishStop): true, string(model.FinishToolCalls): true, string(model.FinishLength): true, string(model.FinishContentFilter): true}
	for name, f := range spec.ScriptFinishReasons {
		if !ours[f] {
			t.Errorf("finish reason %s maps to %s, not a model.FinishReason the runtime acts on", name, f)
		}
		if got := finishReason(name); string(got) != f {
			t.Errorf("finishReason(%s) = %s, want %s", name, got, f)
		}
	}
	if want := []string{model.ProviderAnthropic, model.ProviderGemini, model.ProviderResponses}; !reflect.DeepEqual(spec.ReasoningProviders, want) {
		t.Errorf("spec.ReasoningProviders %v, model's %v", spec.ReasoningProviders, want)
	}
}
