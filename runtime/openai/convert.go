package openai

import (
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"

	"github.com/agentrun/agentrun/runtime"
)

// params builds the request body for req.
func (m *Model) params(req *runtime.ModelRequest) (oai.ChatCompletionNewParams, error) {
	msgs, err := messages(req.Messages)
	if err != nil {
		return oai.ChatCompletionNewParams{}, err
	}
	p := oai.ChatCompletionNewParams{Model: m.name, Messages: msgs}
	if m.temperature != nil {
		p.Temperature = oai.Float(*m.temperature)
	}
	if m.maxTokens > 0 {
		// max_tokens rather than max_completion_tokens: every compatible server
		// takes it, though OpenAI's reasoning models only take the latter.
		p.MaxTokens = oai.Int(int64(m.maxTokens))
	}
	for _, t := range req.Tools {
		def := oai.FunctionDefinitionParam{Name: t.Name, Parameters: oai.FunctionParameters(t.Parameters)}
		if t.Parameters == nil {
			def.Parameters = oai.FunctionParameters{"type": "object", "properties": map[string]any{}}
		}
		if t.Description != "" {
			def.Description = oai.String(t.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(def))
	}
	switch f := req.JSONSchema; {
	case f != nil && req.JSONObject:
		p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &oai.ResponseFormatJSONObjectParam{}}
	case f != nil:
		p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &oai.ResponseFormatJSONSchemaParam{
			JSONSchema: oai.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: f.Schema, Strict: oai.Bool(true)},
		}}
	}
	return p, nil
}

func messages(in []runtime.Message) ([]oai.ChatCompletionMessageParamUnion, error) {
	out := make([]oai.ChatCompletionMessageParamUnion, 0, len(in))
	for i, msg := range in {
		switch msg.Role {
		case runtime.RoleSystem:
			out = append(out, oai.SystemMessage(msg.Content))
		case runtime.RoleUser:
			out = append(out, oai.UserMessage(msg.Content))
		case runtime.RoleTool:
			out = append(out, oai.ToolMessage(msg.Content, msg.ToolCallID))
		case runtime.RoleAssistant:
			out = append(out, assistantMessage(msg))
		default:
			return nil, fmt.Errorf("openai: message %d has unknown role %q", i, msg.Role)
		}
	}
	return out, nil
}

// assistantMessage is built by hand: ChatCompletionMessage.ToParam drops every tool
// call whose "type" the server left out, sending "tool_calls":[null].
func assistantMessage(msg runtime.Message) oai.ChatCompletionMessageParamUnion {
	a := &oai.ChatCompletionAssistantMessageParam{}
	if msg.Content != "" || len(msg.ToolCalls) == 0 {
		a.Content.OfString = oai.String(msg.Content)
	}
	for _, tc := range msg.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID,
				Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      tc.Name,
					Arguments: tc.Arguments,
				},
			},
		})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: a}
}

// toolCall normalises one tool call of a response: servers that omit the id get one
// (tool results are paired by it), and empty arguments mean no arguments.
func toolCall(i int, id, name, args string) runtime.ToolCall {
	if id == "" {
		id = fmt.Sprintf("call_%d", i)
	}
	if args == "" {
		args = "{}"
	}
	return runtime.ToolCall{ID: id, Name: name, Arguments: args}
}

func usage(u oai.CompletionUsage) runtime.Usage {
	return runtime.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

// checkTruncated refuses tool calls whose arguments max_tokens cut off: running a
// tool on half an argument object is worse than failing the turn.
func checkTruncated(r *runtime.ModelResponse) error {
	if r.FinishReason != "length" {
		return nil
	}
	for _, tc := range r.Message.ToolCalls {
		if !json.Valid([]byte(tc.Arguments)) {
			return &runtime.ModelError{Err: fmt.Errorf("the arguments of tool call %s (%s) were cut off at max_tokens", tc.ID, tc.Name)}
		}
	}
	return nil
}
