package serve_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/agentrun/agentrun/internal/openaitest"
)

const outputSchema = `output:
  schema:
    type: object
    properties: {orders: {type: integer}, note: {type: string}}
    required: [orders]
`

// outputReply answers the agent's calls, which ask for the answer schema along
// with the tools: a tool call, then a draft that does not match, then one that does.
func outputReply(req openaitest.Request) openaitest.Reply {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last["role"] == "tool":
		return openaitest.Reply{Content: `{"orders": "two"}`}
	case last["role"] == "user" && req.Messages[len(req.Messages)-2]["role"] == "assistant" && req.Messages[len(req.Messages)-2]["content"] == `{"orders": "two"}`:
		return openaitest.Reply{Content: "```json\n{\"orders\": 2, \"note\": \"both shipped\"}\n```"}
	}
	return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "list_orders", Arguments: `{"status":"any"}`}}}
}

// The run API's result carries the parsed value and its JSON text as the answer;
// the chat completion's content is that JSON. Every model call asked for the
// schema, through the provider's json_schema response format.
func TestServeStructuredOutput(t *testing.T) {
	e := newEnv(t, envOptions{reply: outputReply, editSpec: func(s string) string { return s + outputSchema }})
	r := e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": ordersInput})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var run struct {
		Result struct {
			Answer, Stop string
			Output       map[string]any
		}
	}
	if err := json.Unmarshal(r.Body, &run); err != nil {
		t.Fatal(err)
	}
	want := `{"note":"both shipped","orders":2}`
	if run.Result.Stop != "completed" || run.Result.Answer != want || run.Result.Output["orders"] != 2.0 || run.Result.Output["note"] != "both shipped" {
		t.Fatalf("result %+v\n%s", run.Result, r.Body)
	}
	for i, req := range e.model.Requests() {
		rf, _ := req.Body["response_format"].(map[string]any)
		js, _ := rf["json_schema"].(map[string]any)
		if rf["type"] != "json_schema" || js["name"] != "answer" || req.Body["tools"] == nil {
			t.Errorf("request %d: response_format %v, tools %v", i, req.Body["response_format"], req.Body["tools"] != nil)
		}
	}
	resp, err := e.openAIClient(aliceToken).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "support",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ordersInput)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0]; c.Message.Content != want || c.FinishReason != "stop" {
		t.Errorf("choice %+v, want the value's JSON", c)
	}
}
