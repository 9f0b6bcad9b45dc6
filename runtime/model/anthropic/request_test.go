package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

func TestPartsInNativeShape(t *testing.T) {
	f := newFake(t, msg("message_answer.json"))
	m := newModel(t, f, nil)
	png := []byte("\x89PNG\r\n\x1a\n-image-")
	pdf := []byte("%PDF-1.7 a page")
	parts := []model.Part{
		{Kind: model.PartImage, MediaType: "image/png", Data: png, Size: int64(len(png))},
		{Kind: model.PartImage, MediaType: "image/jpeg", URL: "https://example.com/a.jpg"},
		{Kind: model.PartFile, MediaType: "application/pdf", Name: "report.pdf", Data: pdf},
		{Kind: model.PartFile, MediaType: "application/pdf", URL: "https://example.com/b.pdf"},
		{Kind: model.PartFile, MediaType: "text/plain", Name: "notes.txt", Data: []byte("line one\nline two")},
	}
	for _, p := range parts {
		if err := m.TakesPart(p); err != nil {
			t.Fatalf("TakesPart(%s %s): %v", p.Kind, p.MediaType, err)
		}
	}
	msgs := []model.Message{{Role: model.RoleUser, Content: "What is in these?", Parts: parts}}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct{ Content json.RawMessage }
	}
	json.Unmarshal(f.request(t, 0).body, &body)
	var got, want any
	json.Unmarshal(body.Messages[0].Content, &got)
	json.Unmarshal([]byte(`[
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgotaW1hZ2Ut"}},
		{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
		{"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjcgYSBwYWdl"}},
		{"type":"document","source":{"type":"url","url":"https://example.com/b.pdf"}},
		{"type":"document","title":"notes.txt","source":{"type":"text","media_type":"text/plain","data":"line one\nline two"}},
		{"type":"text","text":"What is in these?"}
	]`), &want)
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("content =\n%s", g)
	}
}

func TestTakesPartRefusals(t *testing.T) {
	m := &Model{}
	for name, tc := range map[string]struct {
		part model.Part
		want string // in the error
	}{
		"a BMP":            {model.Part{Kind: model.PartImage, MediaType: "image/bmp", Name: "a.bmp"}, "a.bmp is image/bmp: Anthropic models take PNG, JPEG, GIF and WebP"},
		"a large image":    {model.Part{Kind: model.PartImage, MediaType: "image/png", Size: 6 << 20}, "the image is 6.0 MiB: Anthropic models take images up to 5 MiB"},
		"a large PDF":      {model.Part{Kind: model.PartFile, MediaType: "application/pdf", Name: "big.pdf", Size: 33 << 20}, "big.pdf is 33.0 MiB: Anthropic models take PDFs up to 32 MiB"},
		"a zip":            {model.Part{Kind: model.PartFile, MediaType: "application/zip", Name: "x.zip"}, "x.zip is application/zip: Anthropic models take PDF and plain text"},
		"text by URL":      {model.Part{Kind: model.PartFile, MediaType: "text/plain", URL: "https://example.com/a.txt"}, "plain text by URL"},
		"no media type":    {model.Part{Kind: model.PartImage}, "of no media type"},
		"an unknown kind":  {model.Part{Kind: "audio", MediaType: "audio/wav"}, `kind "audio"`},
		"an image as file": {model.Part{Kind: model.PartFile, MediaType: "image/png"}, "take PDF and plain text"},
	} {
		err := m.TakesPart(tc.part)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	for _, ok := range []model.Part{
		{Kind: model.PartImage, MediaType: "image/webp", Size: 5 << 20},
		{Kind: model.PartImage, MediaType: "image/gif", URL: "https://example.com/a.gif"},
		{Kind: model.PartFile, MediaType: "application/pdf", Size: 32 << 20},
		{Kind: model.PartFile, MediaType: "text/plain", Data: []byte("hi")},
	} {
		if err := m.TakesPart(ok); err != nil {
			t.Errorf("%s %s: %v", ok.Kind, ok.MediaType, err)
		}
	}
}

var verdictSchema = &model.JSONSchemaFormat{Name: model.SchemaVerdict, Schema: map[string]any{"type": "object",
	"properties": map[string]any{"pass": map[string]any{"type": "boolean"}, "reason": map[string]any{"type": "string"}},
	"required":   []any{"pass", "reason"}}}

func TestStructuredOutputByForcedTool(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*spec.Model)
		tools  []model.ToolDef
		choice map[string]any
	}{
		{"alone", nil, nil, map[string]any{"type": "tool", "name": "verdict"}},
		{"with tools", nil, weatherTools, map[string]any{"type": "any"}},
		{"with thinking", withThinking, nil, map[string]any{"type": "auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, msg("message_structured.json"))
			resp, err := newModel(t, f, tc.edit).Complete(context.Background(), &model.Request{Messages: question(), Tools: tc.tools, JSONSchema: verdictSchema})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != `{"pass":true,"reason":"The answer names the city."}` || len(resp.Message.ToolCalls) != 0 || resp.FinishReason != model.FinishStop {
				t.Errorf("resp = %+v, want the tool's input as the answer", resp)
			}
			body := f.body(t, 0)
			if !reflect.DeepEqual(body["tool_choice"], tc.choice) {
				t.Errorf("tool_choice = %v, want %v", body["tool_choice"], tc.choice)
			}
			tools := body["tools"].([]any)
			last := tools[len(tools)-1].(map[string]any)
			if len(tools) != len(tc.tools)+1 || last["name"] != "verdict" || !reflect.DeepEqual(last["input_schema"].(map[string]any)["required"], []any{"pass", "reason"}) {
				t.Errorf("tools = %v, want the verdict tool last with its schema", tools)
			}
		})
	}
}

func TestStructuredOutputNotAnObject(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"facts","input":{"value":["a","b"]}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}`
	f := newFake(t, reply{status: 200, body: body})
	schema := &model.JSONSchemaFormat{Name: "facts", Schema: map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}
	resp, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question(), JSONSchema: schema})
	if err != nil || resp.Message.Content != `["a","b"]` {
		t.Fatalf("%v %v, want the array unwrapped", resp, err)
	}
	in := f.body(t, 0)["tools"].([]any)[0].(map[string]any)["input_schema"].(map[string]any)
	if in["type"] != "object" || in["properties"].(map[string]any)["value"].(map[string]any)["type"] != "array" {
		t.Errorf("input_schema = %v, want the array wrapped in an object", in)
	}
}

func TestPauseTurnContinued(t *testing.T) {
	f := newFake(t, msg("message_pause.json"), msg("message_answer.json"))
	resp, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question()})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Let me look that up. It is 18 °C in Paris, and 14:05 there." || resp.FinishReason != model.FinishStop {
		t.Errorf("resp = %q %q", resp.Message.Content, resp.FinishReason)
	}
	if resp.Usage.PromptTokens != 30+1280 || resp.Usage.CompletionTokens != 20+16 {
		t.Errorf("usage = %+v, want both calls", resp.Usage)
	}
	var sent struct {
		Messages []struct {
			Role    string
			Content []json.RawMessage
		}
	}
	json.Unmarshal(f.request(t, 1).body, &sent)
	last := sent.Messages[len(sent.Messages)-1]
	file, _ := os.ReadFile(filepath.Join("testdata", "message_pause.json"))
	if last.Role != "assistant" || len(last.Content) != 2 || !bytes.Contains(file, last.Content[1]) {
		t.Errorf("the continuation ends with %s %s, want the paused content as it came", last.Role, last.Content)
	}

	// A server that keeps pausing is asked again only maxPauses times.
	f = newFake(t, msg("message_pause.json"))
	resp, err = newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question()})
	if err != nil || resp.FinishReason != "pause_turn" || f.count() != 1+maxPauses {
		t.Errorf("%v %v after %d requests", resp, err, f.count())
	}
	json.Unmarshal(f.request(t, maxPauses).body, &sent)
	if n := len(sent.Messages); n != 2 || len(sent.Messages[1].Content) != 2*maxPauses {
		t.Errorf("the last continuation has %d messages, the paused one %d blocks: want one assistant message extended", n, len(sent.Messages[n-1].Content))
	}
}

// The results of parallel calls go in one user message, and a user message that
// follows them joins it; otherwise the fake refuses the request.
func TestParallelResultsInOneMessage(t *testing.T) {
	f := newFake(t, msg("message_answer.json"))
	a := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
		{ID: "toolu_a", Name: "get_weather", Arguments: `{"location":"Oslo"}`},
		{ID: "toolu_b", Name: "get_time", Arguments: `{}`}}}
	msgs := append(question(), a,
		model.Message{Role: model.RoleTool, ToolCallID: "toolu_a", Content: "3 °C"},
		model.Message{Role: model.RoleTool, ToolCallID: "toolu_b", Content: "09:00"},
		model.Message{Role: model.RoleUser, Content: "And tomorrow?"})
	if _, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: msgs, Tools: weatherTools}); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Messages []struct {
			Role    string
			Content []wireBlock
		}
	}
	json.Unmarshal(f.request(t, 0).body, &sent)
	if len(sent.Messages) != 3 {
		t.Fatalf("%d messages", len(sent.Messages))
	}
	c := sent.Messages[2].Content
	if len(c) != 3 || c[0].ToolUseID != "toolu_a" || c[1].ToolUseID != "toolu_b" || c[2].Text != "And tomorrow?" {
		t.Errorf("the results message = %+v", c)
	}
}
