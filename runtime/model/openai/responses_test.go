package openai

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// newResponsesModel points a model with api: responses at a.
func newResponsesModel(t *testing.T, a *responsesAPI, edit ...func(*spec.Model)) *Model {
	t.Helper()
	sm := spec.Model{Name: "o4-mini", BaseURL: a.URL, APIKeyEnv: "TEST_KEY", Retries: ptr(0), API: spec.APIResponses}
	for _, e := range edit {
		e(&sm)
	}
	m, err := New(sm, mapEnv(map[string]string{"TEST_KEY": testKey}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reasoningHigh(sm *spec.Model) {
	sm.Reasoning = &spec.ModelReasoning{Effort: spec.EffortHigh}
	sm.MaxTokens = 500
}

// strictWeather is weatherTool with a schema strict mode takes.
var strictWeather = model.ToolDef{
	Name: "get_weather", Description: "Weather in a city.",
	Parameters: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"city"},
		"properties": map[string]any{"city": map[string]any{"type": "string"}}},
}

// toolRound runs the first, streamed call of a tool round: reasoning and two
// parallel function calls.
func toolRound(t *testing.T, m *Model) (*model.Request, *model.Response) {
	t.Helper()
	req := &model.Request{
		Messages: []model.Message{
			{Role: model.RoleSystem, Content: "You are terse."},
			{Role: model.RoleUser, Content: "Weather in Paris and Rome?"},
		},
		Tools:   []model.ToolDef{strictWeather, weatherTool},
		OnDelta: func(string) {},
	}
	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return req, resp
}

// followUp is the next request of the round: the answer and both results.
func followUp(req *model.Request, resp *model.Response) *model.Request {
	next := *req
	next.Messages = append(append([]model.Message(nil), req.Messages...), resp.Message)
	for _, tc := range resp.Message.ToolCalls {
		next.Messages = append(next.Messages, model.Message{Role: model.RoleTool, ToolCallID: tc.ID, Content: `{"city":` + strings.TrimPrefix(tc.Arguments, `{"city":`)})
	}
	return &next
}

func TestResponsesToolRound(t *testing.T) {
	a := newResponsesAPI(t, "tool_round.sse", "tool_round_answer.sse")
	m := newResponsesModel(t, a, reasoningHigh)
	req, resp := toolRound(t, m)

	first := a.body(t, 0)
	for k, want := range map[string]string{
		"model": `"o4-mini"`, "instructions": `"You are terse."`, "store": `false`, "stream": `true`,
		"include": `["reasoning.encrypted_content"]`, "reasoning": `{"effort":"high"}`, "max_output_tokens": `500`,
		"input": `[{"role":"user","content":"Weather in Paris and Rome?"}]`,
		"tools": `[{"type":"function","name":"get_weather","description":"Weather in a city.","strict":true,
			"parameters":{"type":"object","additionalProperties":false,"required":["city"],"properties":{"city":{"type":"string"}}}},
			{"type":"function","name":"get_weather","description":"Weather in a city.","strict":false,
			"parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}]`,
	} {
		jsonEqual(t, k, first[k], want)
	}

	if resp.FinishReason != model.FinishToolCalls {
		t.Errorf("finish %q, want tool_calls", resp.FinishReason)
	}
	items := fixtureItems(t, "tool_round.sse")
	r := resp.Message.Reasoning
	if r == nil || r.Provider != model.ProviderResponses || len(r.Blocks) != 1 || string(r.Blocks[0]) != string(items[0]) {
		t.Fatalf("reasoning %+v, want the reasoning item as it came:\n%s", r, items[0])
	}
	if !strings.HasPrefix(r.Text, "**Checking two cities**") {
		t.Errorf("reasoning text %q, want the summary", r.Text)
	}
	checkCalls(t, resp.Message.ToolCalls, []model.ToolCall{
		{ID: "call_Wq2cFX6JkzPTs3bTjxNyb1Gk", Name: "get_weather", Arguments: `{"city":"Paris"}`,
			Extra: map[string]json.RawMessage{"id": json.RawMessage(`"fc_68af4033a0e08193b1b29bc0ef1e1e4805438e46b5f69a3b"`)}},
		{ID: "call_r5UedyU0gd8bXDlBEhWSvVn2", Name: "get_weather", Arguments: `{"city":"Rome"}`,
			Extra: map[string]json.RawMessage{"id": json.RawMessage(`"fc_68af4033b7a481939a4eb0a5c2f7f35c05438e46b5f69a3b"`)}},
	})
	wantUsage := model.Usage{PromptTokens: 1536, CompletionTokens: 212, TotalTokens: 1748, CachedPromptTokens: 1280}
	if resp.Usage != wantUsage || resp.Model != "o4-mini-2025-04-16" {
		t.Errorf("usage %+v model %q, want %+v o4-mini-2025-04-16", resp.Usage, resp.Model, wantUsage)
	}

	// The follow-up carries the reasoning item byte for byte, then both calls
	// with their item ids, then both outputs; the server accepts it.
	next := followUp(req, resp)
	var text strings.Builder
	next.OnDelta = func(s string) { text.WriteString(s) }
	answer, err := m.Complete(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Input []json.RawMessage `json:"input"`
	}
	b, _ := json.Marshal(a.body(t, 1))
	json.Unmarshal(b, &sent)
	if len(sent.Input) != 6 {
		t.Fatalf("follow-up input has %d items, want 6: %s", len(sent.Input), b)
	}
	jsonEqual(t, "reasoning item", a.body(t, 1)["input"].([]any)[1], string(items[0]))
	jsonEqual(t, "calls and outputs", a.body(t, 1)["input"].([]any)[2:], `[
		{"type":"function_call","id":"fc_68af4033a0e08193b1b29bc0ef1e1e4805438e46b5f69a3b","call_id":"call_Wq2cFX6JkzPTs3bTjxNyb1Gk","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call","id":"fc_68af4033b7a481939a4eb0a5c2f7f35c05438e46b5f69a3b","call_id":"call_r5UedyU0gd8bXDlBEhWSvVn2","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},
		{"type":"function_call_output","call_id":"call_Wq2cFX6JkzPTs3bTjxNyb1Gk","output":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"call_r5UedyU0gd8bXDlBEhWSvVn2","output":"{\"city\":\"Rome\"}"}]`)
	const want = "Paris is sunny, 24°C; Rome is rainy, 18°C."
	if answer.Message.Content != want || text.String() != want || answer.FinishReason != model.FinishStop {
		t.Errorf("answer %q (streamed %q), finish %q; want %q, stop", answer.Message.Content, text.String(), answer.FinishReason, want)
	}
	if answer.Usage.CachedPromptTokens != 1536 {
		t.Errorf("cached tokens %d, want 1536", answer.Usage.CachedPromptTokens)
	}
}

// TestResponsesRefusals shows the fake refuses what the real API refuses, so
// that the accepted follow-up above means something: a follow-up that drops or
// alters the reasoning, or answers a call it does not carry, gets a 400.
func TestResponsesRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*model.Request)
		want string
	}{
		{"reasoning dropped", func(r *model.Request) { r.Messages[2].Reasoning = nil },
			"Item 'fc_68af4033a0e08193b1b29bc0ef1e1e4805438e46b5f69a3b' of type 'function_call' was provided without its required 'reasoning' item: 'rs_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b'."},
		{"reasoning from another provider", func(r *model.Request) { r.Messages[2].Reasoning.Provider = model.ProviderAnthropic },
			"without its required 'reasoning' item"},
		{"encrypted content altered", func(r *model.Request) {
			b := r.Messages[2].Reasoning.Blocks[0]
			r.Messages[2].Reasoning.Blocks[0] = []byte(strings.Replace(string(b), `"encrypted_content":"gAAAAABp`, `"encrypted_content":"gAAAAABq`, 1))
		}, "The encrypted content for item rs_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b could not be verified."},
		{"output without its call", func(r *model.Request) { r.Messages[2].ToolCalls = r.Messages[2].ToolCalls[:1] },
			"No tool call found for function call output with call_id call_r5UedyU0gd8bXDlBEhWSvVn2."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newResponsesAPI(t, "tool_round.sse", "tool_round_answer.sse")
			m := newResponsesModel(t, a, reasoningHigh)
			req, resp := toolRound(t, m)
			next := followUp(req, resp)
			r := *next.Messages[2].Reasoning
			r.Blocks = append([]json.RawMessage(nil), r.Blocks...)
			next.Messages[2].Reasoning = &r
			tc.edit(next)
			_, err := m.Complete(context.Background(), next)
			if err == nil {
				t.Fatal("the server accepted the follow-up")
			}
			me := modelError(t, err)
			if me.Status != 400 || !strings.Contains(err.Error(), tc.want) || me.Retryable() {
				t.Errorf("error %v (status %d, retryable %v), want a 400 saying %q", err, me.Status, me.Retryable(), tc.want)
			}
		})
	}
}

func TestResponsesNotStreamed(t *testing.T) {
	a := newResponsesAPI(t, "answer.json")
	m := newResponsesModel(t, a, func(sm *spec.Model) { sm.Reasoning = &spec.ModelReasoning{Effort: spec.EffortLow} })
	resp, err := m.Complete(context.Background(), userAsks("Weather?"))
	if err != nil {
		t.Fatal(err)
	}
	body := a.body(t, 0)
	if _, ok := body["stream"]; ok {
		t.Error("an unstreamed request asked for a stream")
	}
	if _, ok := body["max_output_tokens"]; ok {
		t.Error("max_output_tokens sent without max_tokens")
	}
	jsonEqual(t, "reasoning", body["reasoning"], `{"effort":"low"}`)
	items := fixtureItems(t, "answer.json")
	if resp.Message.Content != "It is sunny." || resp.FinishReason != model.FinishStop {
		t.Errorf("answer %q finish %q", resp.Message.Content, resp.FinishReason)
	}
	// The reasoning item came indented; it is kept compacted, every value as it was.
	if r := resp.Message.Reasoning; r == nil || len(r.Blocks) != 1 || string(r.Blocks[0]) != string(items[0]) {
		t.Errorf("reasoning %+v, want %s", r, items[0])
	}
	want := model.Usage{PromptTokens: 42, CompletionTokens: 70, TotalTokens: 112}
	if resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	// Sent back in a later turn, the reasoning item passes the server's check.
	next := userAsks("Weather?")
	next.Messages = append(next.Messages, resp.Message, model.Message{Role: model.RoleUser, Content: "And tomorrow?"})
	if _, err := m.Complete(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "second input", a.body(t, 1)["input"], `[{"role":"user","content":"Weather?"},`+string(items[0])+
		`,{"role":"assistant","content":"It is sunny."},{"role":"user","content":"And tomorrow?"}]`)
}

func TestResponsesIncomplete(t *testing.T) {
	a := newResponsesAPI(t, "incomplete.json")
	m := newResponsesModel(t, a, func(sm *spec.Model) { sm.MaxTokens = 16 })
	resp, err := m.Complete(context.Background(), userAsks("Weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishLength || resp.Message.Content != "" {
		t.Errorf("finish %q content %q, want length and no text", resp.FinishReason, resp.Message.Content)
	}
	jsonEqual(t, "max_output_tokens", a.body(t, 0)["max_output_tokens"], `16`)
	if _, ok := a.body(t, 0)["reasoning"]; ok {
		t.Error("reasoning sent without reasoning.effort")
	}
}

// responseBody is a whole response with the given status, details and output.
func responseBody(status, incomplete, output string) string {
	return `{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","error":null,
		"incomplete_details":` + incomplete + `,"model":"o4-mini-2025-04-16","output":[` + output + `],
		"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}}`
}

func TestResponsesFinish(t *testing.T) {
	const text = `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}`
	const refusal = `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]}`
	const cut = `{"id":"fc_1","type":"function_call","status":"incomplete","call_id":"call_1","name":"get_weather","arguments":"{\"ci"}`
	for _, tc := range []struct {
		name, status, incomplete, output string
		finish                           model.FinishReason
		content, err                     string
	}{
		{"completed", "completed", "null", text, model.FinishStop, "Hi", ""},
		{"refusal", "completed", "null", refusal, model.FinishStop, "I can't help with that.", ""},
		{"content filter", "incomplete", `{"reason":"content_filter"}`, text, model.FinishContentFilter, "Hi", ""},
		{"max output tokens", "incomplete", `{"reason":"max_output_tokens"}`, text, model.FinishLength, "Hi", ""},
		{"arguments cut off", "incomplete", `{"reason":"max_output_tokens"}`, cut, "", "", "cut off at max_tokens"},
		{"failed", "failed", "null", "", "", "", "the response failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, reply(200, responseBody(tc.status, tc.incomplete, tc.output)))
			m := newModel(t, s, func(sm *spec.Model) { sm.API = spec.APIResponses })
			resp, err := m.Complete(context.Background(), userAsks("hi"))
			if tc.err != "" {
				if me := modelError(t, err); !strings.Contains(err.Error(), tc.err) || me.Usage.TotalTokens != 15 {
					t.Errorf("error %v (usage %+v), want %q with the usage", err, me.Usage, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != tc.finish || resp.Message.Content != tc.content {
				t.Errorf("finish %q content %q, want %q %q", resp.FinishReason, resp.Message.Content, tc.finish, tc.content)
			}
			if s.request(t, 0).path != "/responses" {
				t.Errorf("path %s", s.request(t, 0).path)
			}
		})
	}
}

func TestResponsesStreamFailures(t *testing.T) {
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`
	delta := `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"}`
	failed := `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"failed","output":[],"error":{"code":"server_error","message":"The model failed to generate a response."}}}`
	errEvent := `{"type":"error","sequence_number":2,"code":"invalid_prompt","message":"Invalid prompt: ` + testKey + `","param":null}`
	for _, tc := range []struct {
		name      string
		events    []string
		want      string
		retryable bool
	}{
		{"response.failed", []string{created, delta, failed}, "server_error: The model failed to generate a response.", true},
		{"error event", []string{created, delta, errEvent}, "invalid_prompt: Invalid prompt: [redacted]", false},
		{"no response.completed", []string{created, delta}, "the stream ended before the response was complete (no response.completed)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, sse(tc.events...))
			m := newModel(t, s, func(sm *spec.Model) { sm.API = spec.APIResponses })
			req := userAsks("hi")
			var got strings.Builder
			req.OnDelta = func(s string) { got.WriteString(s) }
			_, err := m.Complete(context.Background(), req)
			me := modelError(t, err)
			if !strings.Contains(err.Error(), tc.want) || me.Retryable() != tc.retryable {
				t.Errorf("error %v (retryable %v), want %q (retryable %v)", err, me.Retryable(), tc.want, tc.retryable)
			}
			if got.String() != "Hel" {
				t.Errorf("deltas %q, want the text before the failure", got.String())
			}
		})
	}
}

func TestResponsesParts(t *testing.T) {
	a := newResponsesAPI(t, "answer.json")
	m := newResponsesModel(t, a)
	req := userAsks("What is in these?")
	req.Messages[1].Parts = []model.Part{
		{Kind: model.PartImage, MediaType: "image/png", Data: []byte("\x89PNG")},
		{Kind: model.PartImage, MediaType: "image/jpeg", URL: "https://example.com/cat.jpg"},
		{Kind: model.PartFile, MediaType: "application/pdf", Name: "report.pdf", Data: []byte("%PDF-1.7")},
		{Kind: model.PartFile, MediaType: "application/pdf", URL: "https://example.com/paper.pdf"},
	}
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "input", a.body(t, 0)["input"], `[{"role":"user","content":[
		{"type":"input_text","text":"What is in these?"},
		{"type":"input_image","detail":"auto","image_url":"data:image/png;base64,iVBORw=="},
		{"type":"input_image","detail":"auto","image_url":"https://example.com/cat.jpg"},
		{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0xLjc=","filename":"report.pdf"},
		{"type":"input_file","file_url":"https://example.com/paper.pdf"}]}]`)
}

func TestResponsesJSONSchema(t *testing.T) {
	a := newResponsesAPI(t, "answer.json")
	m := newResponsesModel(t, a)
	req := userAsks("judge")
	req.JSONSchema = &model.JSONSchemaFormat{Name: "verdict", Schema: map[string]any{
		"type": "object", "properties": map[string]any{"passed": map[string]any{"type": "boolean"}}}}
	if _, err := m.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "text", a.body(t, 0)["text"], `{"format":{"type":"json_schema","name":"verdict","strict":false,
		"schema":{"type":"object","properties":{"passed":{"type":"boolean"}}}}}`)
}
