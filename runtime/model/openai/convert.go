package openai

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentrun/agentrun/runtime/model"
)

// params builds the request body for req.
func (m *Model) params(req *model.Request) (oai.ChatCompletionNewParams, error) {
	msgs, err := messages(req.Messages)
	if err != nil {
		return oai.ChatCompletionNewParams{}, err
	}
	p := oai.ChatCompletionNewParams{Model: m.name, Messages: msgs}
	if m.temperature != nil {
		p.Temperature = oai.Float(*m.temperature)
	}
	if m.effort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(m.effort)
	}
	if n := cmp.Or(req.MaxTokens, m.maxTokens); n > 0 {
		// OpenAI's reasoning models refuse max_tokens and take only
		// max_completion_tokens (which counts the reasoning tokens too), while many
		// compatible servers (older vLLM, llama.cpp, gateways) know only
		// max_tokens. A spec that sets reasoning.effort names a reasoning model,
		// so it gets the new field; every other model keeps the one every server
		// takes.
		if m.effort != "" {
			p.MaxCompletionTokens = oai.Int(int64(n))
		} else {
			p.MaxTokens = oai.Int(int64(n))
		}
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
			JSONSchema: oai.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: f.Schema, Strict: oai.Bool(strictCompatible(f.Schema))},
		}}
	}
	return p, nil
}

func messages(in []model.Message) ([]oai.ChatCompletionMessageParamUnion, error) {
	out := make([]oai.ChatCompletionMessageParamUnion, 0, len(in))
	for i, msg := range in {
		switch msg.Role {
		case model.RoleSystem:
			out = append(out, oai.SystemMessage(msg.Content))
		case model.RoleUser:
			out = append(out, userMessage(msg))
		case model.RoleTool:
			out = append(out, oai.ToolMessage(msg.Content, msg.ToolCallID))
		case model.RoleAssistant:
			out = append(out, assistantMessage(msg))
		default:
			return nil, fmt.Errorf("openai: message %d has unknown role %q", i, msg.Role)
		}
	}
	return out, nil
}

// assistantMessage is built by hand: ChatCompletionMessage.ToParam drops every tool
// call whose "type" the server left out, sending "tool_calls":[null]. What the
// provider sent besides the standard fields goes back as it came: the reasoning
// under its own field (DeepSeek answers 400 without it) and each call's extra
// fields (Gemini's thought signature in extra_content).
func assistantMessage(msg model.Message) oai.ChatCompletionMessageParamUnion {
	a := &oai.ChatCompletionAssistantMessageParam{}
	if msg.Content != "" || len(msg.ToolCalls) == 0 {
		a.Content.OfString = oai.String(msg.Content)
	}
	if r := msg.Reasoning; r != nil && isReasoningField(r.Field) {
		a.SetExtraFields(map[string]any{r.Field: r.Text})
	}
	for _, tc := range msg.ToolCalls {
		fn := &oai.ChatCompletionMessageFunctionToolCallParam{
			ID: tc.ID,
			Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
				Name:      tc.Name,
				Arguments: tc.Arguments,
			},
		}
		if extra := extraFields(tc.Extra); extra != nil {
			fn.SetExtraFields(extra)
		}
		a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{OfFunction: fn})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: a}
}

// extraFields is a tool call's provider fields as SetExtraFields takes them; a
// standard field never comes from there, so a stored call cannot override its id.
func extraFields(extra map[string]json.RawMessage) map[string]any {
	var out map[string]any
	for k, v := range extra {
		if standardCallFields[k] || !json.Valid(v) {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(extra))
		}
		out[k] = v
	}
	return out
}

// standardCallFields are the tool call fields of the chat completions protocol
// ("index" only in streamed deltas); every other field is the provider's own.
var standardCallFields = map[string]bool{"id": true, "type": true, "function": true, "index": true, "custom": true}

// reasoningFields are the wire names reasoning text comes in, the first preferred:
// DeepSeek's (and older vLLM's) reasoning_content, and reasoning (vLLM, OpenRouter,
// Ollama).
var reasoningFields = [...]string{"reasoning_content", "reasoning"}

func isReasoningField(name string) bool {
	for _, f := range reasoningFields {
		if name == f {
			return true
		}
	}
	return false
}

// reasoningOf finds the reasoning text among a message's non-standard fields. A
// field that is null, empty or not a string (OpenRouter's reasoning_details, say)
// is not reasoning text.
func reasoningOf(extra map[string]respjson.Field) *model.Reasoning {
	for _, name := range reasoningFields {
		if text := jsonString(extra[name]); text != "" {
			return &model.Reasoning{Field: name, Text: text}
		}
	}
	return nil
}

// jsonString is the value of a JSON string field, or "" for anything else.
func jsonString(f respjson.Field) string {
	raw := f.Raw()
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s
}

// callExtra is the non-standard fields of a tool call given as its raw JSON, or
// nil when it has none.
func callExtra(raw string) map[string]json.RawMessage {
	if raw == "" {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &fields) != nil {
		return nil
	}
	for k, v := range fields {
		if standardCallFields[k] || string(v) == "null" {
			delete(fields, k)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return fields
}

// toolCall normalises one tool call of a response: servers that omit the id get a
// new one (tool results are paired by it, and a made-up id must not repeat in later
// rounds of the conversation), and empty arguments mean no arguments.
func toolCall(id, name, args string, extra map[string]json.RawMessage) model.ToolCall {
	if id == "" {
		id = newCallID()
	}
	if args == "" {
		args = "{}"
	}
	return model.ToolCall{ID: id, Name: name, Arguments: args, Extra: extra}
}

// newCallID is a random tool call id: 96 bits make a repeat within one
// conversation practically impossible.
func newCallID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return "call_" + hex.EncodeToString(b[:])
}

// usage reads a response's token counts. The prompt tokens served from the
// provider's prompt cache are prompt_tokens_details.cached_tokens (OpenAI and most
// compatible servers) or prompt_cache_hit_tokens (DeepSeek); a server that reports
// neither cached nothing as far as its price is concerned.
func usage(u oai.CompletionUsage) model.Usage {
	out := model.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		CachedPromptTokens: u.PromptTokensDetails.CachedTokens}
	if f, ok := u.JSON.ExtraFields["prompt_cache_hit_tokens"]; ok && !u.PromptTokensDetails.JSON.CachedTokens.Valid() {
		var n int64
		if json.Unmarshal([]byte(f.Raw()), &n) == nil && n >= 0 && n <= u.PromptTokens {
			out.CachedPromptTokens = n
		}
	}
	return out
}

// checkTruncated refuses tool calls whose arguments max_tokens cut off: running a
// tool on half an argument object is worse than failing the turn.
func checkTruncated(r *model.Response) error {
	if r.FinishReason != "length" {
		return nil
	}
	for _, tc := range r.Message.ToolCalls {
		if !json.Valid([]byte(tc.Arguments)) {
			return &model.Error{Err: fmt.Errorf("the arguments of tool call %s (%s) were cut off at max_tokens", tc.ID, tc.Name), Usage: r.Usage, Refused: true}
		}
	}
	return nil
}
