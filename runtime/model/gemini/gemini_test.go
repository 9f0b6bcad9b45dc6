package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

const (
	parisSig  = "z9d3hZ/MF4NJxkYzfSfhfqdictmzy4Hb+IXis6Si20/YUz2oIh6snQ/lEC471K1G"
	answerSig = "2Zd8LF5Zm2HsNzYZY0dJ83ujKVZlURp+KVWP7GJ5KiLfOuGi"
	textSig   = "gVjPEy4mSmaoaKEJuWCL4hBmBoLg0IXkNW57bc/4N1nuUemaVCNJxw=="
)

var weatherTool = model.ToolDef{Name: "get_weather", Description: "The weather in a city.", Parameters: map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}}},
	"required":   []any{"city"},
}}

// toolRound streams the first turn of a tool round: two parallel calls, the
// first signed (Gemini 3 signs only the first of parallel calls).
func toolRound(t *testing.T, f *fakeGemini, m *Model) ([]model.Message, *model.Response) {
	t.Helper()
	msgs := []model.Message{
		{Role: model.RoleSystem, Content: "You are a weather assistant."},
		{Role: model.RoleUser, Content: "Weather in Paris and Tokyo?"},
	}
	var deltas []string
	resp, err := m.Complete(context.Background(), &model.Request{Messages: msgs, Tools: []model.ToolDef{weatherTool},
		OnDelta: func(s string) { deltas = append(deltas, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, "|"); got != "I'll check |both cities." {
		t.Errorf("deltas %q: the thought must not stream as text", got)
	}
	return msgs, resp
}

func TestStreamedToolRound(t *testing.T) {
	f := newFake(t, reply{file: "stream_tool_calls.sse"})
	m, _ := testModel(t, f, spec.Model{})
	msgs, resp := toolRound(t, f, m)

	req := f.requests()[0]
	if req.path != "/v1beta/models/gemini-3-pro-preview:streamGenerateContent" || req.query != "alt=sse" {
		t.Errorf("request to %s?%s", req.path, req.query)
	}
	if got := jsonPath(t, req.body, "systemInstruction", "parts", 0, "text"); got != "You are a weather assistant." {
		t.Errorf("systemInstruction %v", got)
	}
	if got := asJSON(jsonPath(t, req.body, "contents")); got != `[{"parts":[{"text":"Weather in Paris and Tokyo?"}],"role":"user"}]` {
		t.Errorf("contents %s: the system message belongs in systemInstruction", got)
	}
	if got := asJSON(jsonPath(t, req.body, "tools", 0, "functionDeclarations", 0, "parametersJsonSchema", "required")); got != `["city"]` {
		t.Errorf("the tool's JSON schema went as %s", asJSON(jsonPath(t, req.body, "tools")))
	}

	if resp.FinishReason != model.FinishToolCalls {
		t.Errorf("finish %q, want tool_calls (STOP with calls)", resp.FinishReason)
	}
	if resp.Message.Content != "I'll check both cities." || resp.Model != "gemini-3-pro-preview" {
		t.Errorf("content %q model %q", resp.Message.Content, resp.Model)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].Arguments != `{"city":"Paris","unit":"celsius"}` || calls[1].Arguments != `{"city":"Tokyo","unit":"celsius"}` {
		t.Fatalf("calls %+v", calls)
	}
	if calls[0].ID == calls[1].ID || !strings.HasPrefix(calls[0].ID, madeIDPrefix) {
		t.Errorf("ids %q %q: calls without an id need distinct made-up ids", calls[0].ID, calls[1].ID)
	}
	if got := string(calls[0].Extra[sigKey]); got != `"`+parisSig+`"` {
		t.Errorf("first call's signature %s, want the wire string", got)
	}
	if _, ok := calls[1].Extra[sigKey]; ok {
		t.Errorf("the unsigned call got a signature: %s", calls[1].Extra[sigKey])
	}
	r := resp.Message.Reasoning
	if r == nil || r.Provider != model.ProviderGemini || r.Field != "thought" || !strings.HasPrefix(r.Text, "**Planning the lookups**") || len(r.Blocks) != 2 {
		t.Fatalf("reasoning %+v", r)
	}
	if want := (model.Usage{PromptTokens: 96, CompletionTokens: 41 + 152, TotalTokens: 289}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v (thoughts count as completion)", resp.Usage, want)
	}

	// The follow-up: the calls go back with their signature, the results in one
	// user turn. The server refuses anything else.
	follow := append(msgs, resp.Message,
		model.Message{Role: model.RoleTool, ToolCallID: calls[0].ID, Content: `{"temp_c":18,"sky":"sunny"}`},
		model.Message{Role: model.RoleTool, ToolCallID: calls[1].ID, Content: "22°C, cloudy"})
	f.then(reply{file: "stream_answer.sse"})
	var deltas []string
	final, err := m.Complete(context.Background(), &model.Request{Messages: follow, Tools: []model.ToolDef{weatherTool},
		OnDelta: func(s string) { deltas = append(deltas, s) }})
	if err != nil {
		t.Fatalf("the follow-up was refused: %v", err)
	}
	body := f.requests()[1].body
	if got := asJSON(jsonPath(t, body, "contents", 1)); got != `{"parts":[`+
		`{"text":"**Planning the lookups**\n\nThe user asks about two cities, so I can query both at once.","thought":true},`+
		`{"text":"I'll check both cities."},`+
		`{"functionCall":{"args":{"city":"Paris","unit":"celsius"},"name":"get_weather"},"thoughtSignature":"`+parisSig+`"},`+
		`{"functionCall":{"args":{"city":"Tokyo","unit":"celsius"},"name":"get_weather"}}],"role":"model"}` {
		t.Errorf("model turn sent back as\n%s", got)
	}
	if got := asJSON(jsonPath(t, body, "contents", 2)); got != `{"parts":[`+
		`{"functionResponse":{"name":"get_weather","response":{"sky":"sunny","temp_c":18}}},`+
		`{"functionResponse":{"name":"get_weather","response":{"result":"22°C, cloudy"}}}],"role":"user"}` {
		t.Errorf("tool results sent as\n%s", got)
	}
	if final.Message.Content != "Paris is 18°C and sunny; Tokyo is 22°C and cloudy." || final.FinishReason != model.FinishStop {
		t.Errorf("final %q %q", final.Message.Content, final.FinishReason)
	}
	if want := (model.Usage{PromptTokens: 161, CompletionTokens: 17 + 71, TotalTokens: 249, CachedPromptTokens: 64}); final.Usage != want {
		t.Errorf("usage %+v, want %+v", final.Usage, want)
	}
	// The answer's signature came on an empty text part at the end: it belongs
	// to the text, and goes back with it.
	if r := final.Message.Reasoning; r == nil || len(r.Blocks) != 1 ||
		string(r.Blocks[0]) != `{"text":"Paris is 18°C and sunny; Tokyo is 22°C and cloudy.","thoughtSignature":"`+answerSig+`"}` {
		t.Errorf("answer reasoning %+v", final.Message.Reasoning)
	}
}

// The server refuses a tool round whose signatures or results are wrong, the way
// the API does, and the refusal is a 400 no retry or fallback repeats.
func TestToolRoundRefusals(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(msgs []model.Message) []model.Message
		want   string
	}{
		{"signature missing", func(msgs []model.Message) []model.Message {
			msgs[2].ToolCalls[0].Extra = nil
			return msgs
		}, "missing a thought_signature"},
		{"signature altered", func(msgs []model.Message) []model.Message {
			msgs[2].ToolCalls[0].Extra = map[string]json.RawMessage{sigKey: json.RawMessage(`"` + strings.Replace(parisSig, "z9", "z8", 1) + `"`)}
			return msgs
		}, "Corrupted thought signature"},
		{"one result missing", func(msgs []model.Message) []model.Message {
			return msgs[:len(msgs)-1]
		}, "number of function response parts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, reply{file: "stream_tool_calls.sse"})
			m, waits := testModel(t, f, spec.Model{})
			msgs, resp := toolRound(t, f, m)
			calls := resp.Message.ToolCalls
			follow := append(msgs, resp.Message,
				model.Message{Role: model.RoleTool, ToolCallID: calls[0].ID, Content: "18°C"},
				model.Message{Role: model.RoleTool, ToolCallID: calls[1].ID, Content: "22°C"})
			_, err := m.Complete(context.Background(), &model.Request{Messages: c.break_(follow)})
			var me *model.Error
			if !errors.As(err, &me) || me.Status != 400 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "INVALID_ARGUMENT") {
				t.Fatalf("err %v, want a 400 INVALID_ARGUMENT saying %q", err, c.want)
			}
			if me.Retryable() || me.Misconfigured() || len(*waits) != 0 {
				t.Errorf("a 400 must not be retried (waits %v) nor be a configuration error", *waits)
			}
		})
	}
}

func TestNotStreamed(t *testing.T) {
	f := newFake(t, reply{file: "generate_text.json"})
	temp := 0.25
	m, _ := testModel(t, f, spec.Model{Name: "gemini-2.5-flash", Temperature: &temp, MaxTokens: 900,
		Reasoning: &spec.ModelReasoning{BudgetTokens: 2048}})
	msgs := []model.Message{{Role: model.RoleUser, Content: "Capital of France?"}}
	resp, err := m.Complete(context.Background(), &model.Request{Messages: msgs, MaxTokens: 300})
	if err != nil {
		t.Fatal(err)
	}
	req := f.requests()[0]
	if req.path != "/v1beta/models/gemini-2.5-flash:generateContent" || req.query != "" {
		t.Errorf("request to %s?%s", req.path, req.query)
	}
	if got := asJSON(jsonPath(t, req.body, "generationConfig")); got != `{"maxOutputTokens":300,"temperature":0.25,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":2048}}` {
		t.Errorf("generationConfig %s (the call's max_tokens wins over the spec's)", got)
	}
	if resp.Message.Content != "The capital of France is Paris." || resp.FinishReason != model.FinishStop || resp.Model != "gemini-2.5-flash" {
		t.Errorf("response %+v", resp)
	}
	if want := (model.Usage{PromptTokens: 12, CompletionTokens: 45, TotalTokens: 57}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	// The text part's signature goes back on it, byte for byte.
	f.then(reply{file: "generate_text.json"})
	msgs = append(msgs, resp.Message, model.Message{Role: model.RoleUser, Content: "And of Italy?"})
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if got := asJSON(jsonPath(t, f.requests()[1].body, "contents", 1)); got != `{"parts":[{"text":"The capital of France is Paris.","thoughtSignature":"`+textSig+`"}],"role":"model"}` {
		t.Errorf("model turn sent back as %s", got)
	}
}

// Reasoning from another provider is not Gemini's: it is left out, and the text
// goes as text.
func TestOtherProvidersReasoningIgnored(t *testing.T) {
	f := newFake(t, reply{file: "generate_text.json"})
	m, _ := testModel(t, f, spec.Model{Reasoning: &spec.ModelReasoning{Effort: spec.EffortLow}})
	msgs := []model.Message{
		{Role: model.RoleUser, Content: "Hi"},
		{Role: model.RoleAssistant, Content: "Hello!", Reasoning: &model.Reasoning{Field: "thinking", Text: "greet", Provider: model.ProviderAnthropic,
			Blocks: []json.RawMessage{json.RawMessage(`{"type":"thinking","thinking":"greet","signature":"EqQB"}`)}}},
		{Role: model.RoleUser, Content: "Capital of France?"},
	}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	body := f.requests()[0].body
	if got := asJSON(jsonPath(t, body, "contents", 1)); got != `{"parts":[{"text":"Hello!"}],"role":"model"}` {
		t.Errorf("assistant turn %s", got)
	}
	if got := asJSON(jsonPath(t, body, "generationConfig", "thinkingConfig")); got != `{"includeThoughts":true,"thinkingLevel":"LOW"}` {
		t.Errorf("thinkingConfig %s", got)
	}
}

// A call that came with an id goes back with it, and so does its response.
func TestCallIDsGoBack(t *testing.T) {
	f := newFake(t, reply{body: candidate(`{"functionCall":{"id":"fc-7x2","name":"get_weather","args":{"city":"Oslo"}},"thoughtSignature":"`+textSig+`"}`, "STOP")})
	m, _ := testModel(t, f, spec.Model{})
	resp, err := m.Complete(context.Background(), &model.Request{Messages: hello, Tools: []model.ToolDef{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].ID != "fc-7x2" {
		t.Fatalf("calls %+v", resp.Message.ToolCalls)
	}
	f.then(reply{file: "generate_text.json"})
	msgs := append(append([]model.Message(nil), hello...), resp.Message, model.Message{Role: model.RoleTool, ToolCallID: "fc-7x2", Content: "-3°C"})
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	body := f.requests()[1].body
	if got := asJSON(jsonPath(t, body, "contents", 1, "parts", 0)); got != `{"functionCall":{"args":{"city":"Oslo"},"id":"fc-7x2","name":"get_weather"},"thoughtSignature":"`+textSig+`"}` {
		t.Errorf("call sent back as %s", got)
	}
	if got := asJSON(jsonPath(t, body, "contents", 2, "parts", 0)); got != `{"functionResponse":{"id":"fc-7x2","name":"get_weather","response":{"result":"-3°C"}}}` {
		t.Errorf("response sent as %s", got)
	}

	// A result for a call the conversation never made is an error, not a guess.
	msgs[len(msgs)-1].ToolCallID = "fc-nope"
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err == nil || !strings.Contains(err.Error(), `call "fc-nope" follows no call`) {
		t.Errorf("err %v", err)
	}
}

// An empty answer (a blocked one) and an empty message have nothing Gemini
// would take: they are left out rather than sent as a part without data.
func TestEmptyMessagesLeftOut(t *testing.T) {
	f := newFake(t, reply{file: "generate_text.json"})
	m, _ := testModel(t, f, spec.Model{})
	msgs := []model.Message{
		{Role: model.RoleSystem, Content: ""},
		{Role: model.RoleUser, Content: "Something blocked"},
		{Role: model.RoleAssistant},
		{Role: model.RoleUser, Content: ""},
		{Role: model.RoleUser, Content: "Capital of France?"},
	}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	body := f.requests()[0].body
	if got := asJSON(jsonPath(t, body, "contents")); got != `[{"parts":[{"text":"Something blocked"}],"role":"user"},{"parts":[{"text":"Capital of France?"}],"role":"user"}]` {
		t.Errorf("contents %s", got)
	}
	if jsonPath(t, body, "systemInstruction") != nil {
		t.Errorf("an empty system instruction was sent")
	}
}
