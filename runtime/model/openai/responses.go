package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentrun/agentrun/runtime/model"
)

// completeResponses is Complete on the Responses API.
func (m *Model) completeResponses(ctx context.Context, req *model.Request) (*model.Response, error) {
	params, err := m.responsesParams(req)
	if err != nil {
		return nil, err
	}
	if req.OnDelta != nil {
		return m.streamResponses(ctx, params, req.OnDelta)
	}
	var httpRes *http.Response
	resp, err := m.responses.New(ctx, params, option.WithResponseInto(&httpRes))
	if err != nil {
		return nil, m.fail(ctx, err, httpRes)
	}
	raws := make([]string, len(resp.Output))
	for i, item := range resp.Output {
		raws[i] = item.RawJSON()
	}
	out, err := finishResponse(resp, raws)
	return out, m.redactErr(err)
}

// responsesParams builds the request body for req. Nothing is stored on the
// server (store: false): each request carries the whole conversation, and the
// reasoning comes back encrypted so the next request of a tool round can carry it
// too.
func (m *Model) responsesParams(req *model.Request) (responses.ResponseNewParams, error) {
	instructions, input, err := inputItems(req.Messages)
	if err != nil {
		return responses.ResponseNewParams{}, err
	}
	p := responses.ResponseNewParams{
		Model:   m.name,
		Input:   responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Store:   oai.Bool(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	}
	if instructions != "" {
		p.Instructions = oai.String(instructions)
	}
	if m.temperature != nil {
		p.Temperature = oai.Float(*m.temperature)
	}
	if n := cmp.Or(req.MaxTokens, m.maxTokens); n > 0 {
		p.MaxOutputTokens = oai.Int(int64(n)) // counts the reasoning tokens too
	}
	if m.effort != "" {
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(m.effort)}
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		// The Responses API makes a function strict unless told otherwise, and
		// refuses a strict one whose schema strict mode cannot take.
		fn := &responses.FunctionToolParam{Name: t.Name, Parameters: params, Strict: oai.Bool(strictCompatible(params))}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	switch f := req.JSONSchema; {
	case f != nil && req.JSONObject:
		p.Text.Format = responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	case f != nil:
		p.Text.Format = responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: f.Name, Schema: f.Schema, Strict: oai.Bool(strictCompatible(f.Schema))}}
	}
	return p, nil
}

// inputItems turns the conversation into the Responses API's input: the system
// messages before the first other one become the instructions, later ones system
// message items.
func inputItems(msgs []model.Message) (string, responses.ResponseInputParam, error) {
	var system []string
	for len(msgs) > 0 && msgs[0].Role == model.RoleSystem {
		system = append(system, msgs[0].Content)
		msgs = msgs[1:]
	}
	skipped := len(system)
	out := make(responses.ResponseInputParam, 0, len(msgs))
	for i, msg := range msgs {
		switch msg.Role {
		case model.RoleSystem:
			out = append(out, responses.ResponseInputItemParamOfMessage(msg.Content, responses.EasyInputMessageRoleSystem))
		case model.RoleUser:
			out = append(out, userItem(msg))
		case model.RoleTool:
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: oai.String(msg.ToolCallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(msg.Content)},
			}})
		case model.RoleAssistant:
			out = append(out, assistantItems(msg)...)
		default:
			return "", nil, fmt.Errorf("openai: message %d has unknown role %q", skipped+i, msg.Role)
		}
	}
	return strings.Join(system, "\n\n"), out, nil
}

// userItem is a user message: its text as input_text and its parts as
// input_image and input_file content.
func userItem(msg model.Message) responses.ResponseInputItemUnionParam {
	if len(msg.Parts) == 0 {
		return responses.ResponseInputItemParamOfMessage(msg.Content, responses.EasyInputMessageRoleUser)
	}
	content := make(responses.ResponseInputMessageContentListParam, 0, len(msg.Parts)+1)
	if msg.Content != "" {
		content = append(content, responses.ResponseInputContentParamOfInputText(msg.Content))
	}
	for _, p := range msg.Parts {
		switch p.Kind {
		case model.PartImage:
			content = append(content, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				Detail: responses.ResponseInputImageDetailAuto, ImageURL: oai.String(partURL(p))}})
		case model.PartFile:
			f := &responses.ResponseInputFileParam{}
			if len(p.Data) > 0 {
				f.FileData = oai.String(dataURL(p))
			} else {
				f.FileURL = oai.String(p.URL)
			}
			if p.Name != "" {
				f.Filename = oai.String(p.Name)
			}
			content = append(content, responses.ResponseInputContentUnionParam{OfInputFile: f})
		}
	}
	return responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser)
}

// assistantItems are an assistant message's items in the order the model made
// them: its reasoning items exactly as they came (the API checks that each
// function call's reasoning is there and that its encrypted content is intact),
// its text, then its function calls with their item ids.
func assistantItems(msg model.Message) []responses.ResponseInputItemUnionParam {
	var out []responses.ResponseInputItemUnionParam
	if r := msg.Reasoning; r != nil && r.Provider == model.ProviderResponses {
		for _, b := range r.Blocks {
			if json.Valid(b) {
				out = append(out, param.Override[responses.ResponseInputItemUnionParam](b))
			}
		}
	}
	if msg.Content != "" {
		out = append(out, responses.ResponseInputItemParamOfMessage(msg.Content, responses.EasyInputMessageRoleAssistant))
	}
	for _, tc := range msg.ToolCalls {
		fc := &responses.ResponseFunctionToolCallParam{CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
		var id string
		if raw, ok := tc.Extra["id"]; ok && json.Unmarshal(raw, &id) == nil && id != "" {
			fc.ID = oai.String(id)
		}
		out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: fc})
	}
	return out
}

// outputItem is the part of an output item this package reads; the SDK's union
// types are not used so that an item is read the same from a stream and from a
// whole response.
type outputItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// finishResponse turns a finished response and its output items (raw JSON, in
// order) into what Complete returns.
func finishResponse(resp *responses.Response, items []string) (*model.Response, error) {
	u := usageOfResponse(resp.Usage)
	switch resp.Status {
	case responses.ResponseStatusFailed:
		return nil, failedResponse(string(resp.Error.Code), resp.Error.Message, u)
	case responses.ResponseStatusCompleted, responses.ResponseStatusIncomplete:
	default:
		return nil, &model.Error{Err: fmt.Errorf("the response ended with status %q", resp.Status), Usage: u, Refused: true}
	}
	msg, err := outputMessage(items)
	if err != nil {
		return nil, &model.Error{Err: err, Usage: u, Refused: true}
	}
	out := &model.Response{Message: msg, Usage: u, Model: resp.Model}
	switch reason := resp.IncompleteDetails.Reason; {
	case resp.Status == responses.ResponseStatusIncomplete && reason == "max_output_tokens":
		out.FinishReason = model.FinishLength
	case resp.Status == responses.ResponseStatusIncomplete && reason == "content_filter":
		out.FinishReason = model.FinishContentFilter
	case resp.Status == responses.ResponseStatusIncomplete:
		out.FinishReason = model.FinishReason(cmp.Or(reason, "incomplete"))
	case len(msg.ToolCalls) > 0:
		out.FinishReason = model.FinishToolCalls
	default:
		out.FinishReason = model.FinishStop
	}
	if err := checkTruncated(out); err != nil {
		return nil, err
	}
	return out, nil
}

// outputMessage assembles the assistant message from the output items: text from
// message items, calls from function_call items, and the reasoning items kept
// whole (compacted, which changes no value) to go back on the next request.
func outputMessage(items []string) (model.Message, error) {
	msg := model.Message{Role: model.RoleAssistant}
	var text, refusal, summary []string
	var blocks []json.RawMessage
	for _, raw := range items {
		var it outputItem
		if err := json.Unmarshal([]byte(raw), &it); err != nil {
			return msg, fmt.Errorf("an output item is not JSON: %v", err)
		}
		switch it.Type {
		case "reasoning":
			var b bytes.Buffer
			if err := json.Compact(&b, []byte(raw)); err != nil {
				return msg, fmt.Errorf("reasoning item %s: %v", it.ID, err)
			}
			blocks = append(blocks, b.Bytes())
			for _, s := range it.Summary {
				summary = append(summary, s.Text)
			}
		case "message":
			for _, c := range it.Content {
				text = append(text, c.Text)
				refusal = append(refusal, c.Refusal)
			}
		case "function_call":
			idJSON, _ := json.Marshal(it.ID)
			msg.ToolCalls = append(msg.ToolCalls, toolCall(it.CallID, it.Name, it.Arguments, map[string]json.RawMessage{"id": idJSON}))
		}
	}
	msg.Content = cmp.Or(strings.Join(text, ""), strings.Join(refusal, "")) // a refusal is the model's answer too
	if len(blocks) > 0 {
		msg.Reasoning = &model.Reasoning{Field: "reasoning", Text: strings.Join(summary, "\n\n"),
			Provider: model.ProviderResponses, Blocks: blocks}
	}
	return msg, nil
}

// usageOfResponse reads the Responses API's token counts; the reasoning tokens
// are part of output_tokens.
func usageOfResponse(u responses.ResponseUsage) model.Usage {
	return model.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
		CachedPromptTokens: u.InputTokensDetails.CachedTokens}
}

// failedResponse is the error of a response that failed on the server (status
// failed, or an error event in the stream). Only a server fault or a rate limit
// may pass on another try.
func failedResponse(code, message string, u model.Usage) error {
	err := errors.New("the response failed")
	if code != "" || message != "" {
		err = fmt.Errorf("the response failed: %s", strings.TrimPrefix(code+": "+message, ": "))
	}
	retry := code == "" || code == "server_error" || code == "rate_limit_exceeded"
	return &model.Error{Err: err, Usage: u, Refused: !retry}
}
