package anthropic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentrun/agentrun/runtime/model"
)

// answerDescription tells the model what the synthetic tool of a structured answer
// is for.
const answerDescription = "Give your final answer as this tool's input. Call it once, with nothing else."

// plan is what a request asked for that its response is read with: the name of the
// synthetic tool a structured answer comes as, and whether its schema was wrapped
// in an object (the API takes only object input schemas).
type plan struct {
	answer  string
	wrapped bool
}

// params builds the request body for req.
func (m *Model) params(req *model.Request) (sdk.MessageNewParams, *plan, error) {
	system, msgs, err := messages(req.Messages)
	if err != nil {
		return sdk.MessageNewParams{}, nil, err
	}
	p := sdk.MessageNewParams{Model: sdk.Model(m.name), Messages: msgs}
	if len(system) > 0 {
		if m.cache {
			system[len(system)-1].CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		p.System = system
	}
	budget := m.budget
	if budget > 0 && !thinkingFits(req.Messages) {
		budget = 0
	}
	maxTokens := cmp.Or(req.MaxTokens, m.maxTokens)
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens + budget
	}
	if budget >= maxTokens { // a run's budget left less than the thinking budget
		budget = maxTokens - 1
		if budget < MinThinkingBudget {
			budget = 0
		}
	}
	p.MaxTokens = int64(maxTokens)
	if budget > 0 {
		p.Thinking = sdk.ThinkingConfigParamUnion{OfEnabled: &sdk.ThinkingConfigEnabledParam{BudgetTokens: int64(budget)}}
	}
	if m.temperature != nil {
		// This SDK version has no temperature field; the API still takes it.
		p.SetExtraFields(map[string]any{"temperature": *m.temperature})
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, toolParam(t.Name, t.Description, t.Parameters))
	}
	pl := &plan{}
	if f := req.JSONSchema; f != nil {
		if err := pl.offerAnswer(&p, f, req.Tools, budget > 0); err != nil {
			return sdk.MessageNewParams{}, nil, err
		}
	}
	if m.cache && len(p.Tools) > 0 {
		p.Tools[len(p.Tools)-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return p, pl, nil
}

// offerAnswer asks for a structured answer the way the Messages API gives one: as
// the input of a tool whose input schema is the answer's schema. The model is made
// to call it when it has no other tools; with other tools it must call one of them
// or it. Extended thinking refuses a forced tool choice, so then it is only offered.
func (pl *plan) offerAnswer(p *sdk.MessageNewParams, f *model.JSONSchemaFormat, tools []model.ToolDef, thinking bool) error {
	name := cmp.Or(f.Name, "answer")
	for _, t := range tools {
		if t.Name == name {
			return &model.Error{Err: fmt.Errorf("anthropic: the structured answer %q has the name of a tool", name), Refused: true}
		}
	}
	schema := f.Schema
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	if schema["type"] != "object" {
		schema = map[string]any{"type": "object", "properties": map[string]any{"value": schema}, "required": []string{"value"}}
		pl.wrapped = true
	}
	pl.answer = name
	p.Tools = append(p.Tools, toolParam(name, answerDescription, schema))
	switch {
	case thinking:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
	case len(tools) == 0:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: name}}
	default:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	}
	return nil
}

func toolParam(name, description string, schema map[string]any) sdk.ToolUnionParam {
	s := maps.Clone(schema)
	if s == nil {
		s = map[string]any{}
	}
	if _, ok := s["type"]; !ok {
		s["type"] = "object"
	}
	if s["type"] == "object" && s["properties"] == nil {
		s["properties"] = map[string]any{}
	}
	t := &sdk.ToolParam{Name: name, InputSchema: param.Override[sdk.ToolInputSchemaParam](s)}
	if description != "" {
		t.Description = param.NewOpt(description)
	}
	return sdk.ToolUnionParam{OfTool: t}
}

// thinkingFits reports whether a request may have extended thinking on: the API
// refuses it when the last assistant message made tool calls without the thinking
// block that came with them, as when a fallback model of another provider wrote
// it. That request goes without thinking rather than fail.
func thinkingFits(msgs []model.Message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleAssistant {
			return len(msgs[i].ToolCalls) == 0 || len(ownBlocks(msgs[i].Reasoning)) > 0
		}
	}
	return true
}

// ownBlocks are a message's reasoning blocks if they are Anthropic's.
func ownBlocks(r *model.Reasoning) []json.RawMessage {
	if r == nil || r.Provider != model.ProviderAnthropic {
		return nil
	}
	return r.Blocks
}

// messages turns the conversation into the system prompt and the messages. The
// results of one round's tool calls go in one user message, as the API requires
// of parallel calls; a user message that follows them joins it.
func messages(in []model.Message) ([]sdk.TextBlockParam, []sdk.MessageParam, error) {
	var system []sdk.TextBlockParam
	var out []sdk.MessageParam
	user := func(blocks ...sdk.ContentBlockParamUnion) {
		if n := len(out); n > 0 && out[n-1].OfUser != nil {
			out[n-1].OfUser.Content = append(out[n-1].OfUser.Content, blocks...)
			return
		}
		out = append(out, sdk.MessageParam{OfUser: &sdk.UserMessageParam{Content: blocks}})
	}
	for i, msg := range in {
		switch msg.Role {
		case model.RoleSystem:
			if msg.Content != "" {
				system = append(system, sdk.TextBlockParam{Text: msg.Content})
			}
		case model.RoleUser:
			blocks, err := userBlocks(msg)
			if err != nil {
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			user(blocks...)
		case model.RoleTool:
			r := &sdk.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
			if msg.Content != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: msg.Content}}}
			}
			user(sdk.ContentBlockParamUnion{OfToolResult: r})
		case model.RoleAssistant:
			blocks, err := assistantBlocks(msg)
			if err != nil {
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			if len(blocks) > 0 { // an empty answer has nothing the API would take
				out = append(out, sdk.MessageParam{OfAssistant: &sdk.AssistantMessageParam{Content: blocks}})
			}
		default:
			return nil, nil, fmt.Errorf("anthropic: message %d has unknown role %q", i, msg.Role)
		}
	}
	return system, out, nil
}

// userBlocks are a user message's parts (first, as the API advises for images and
// documents) and its text.
func userBlocks(msg model.Message) ([]sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	for _, p := range msg.Parts {
		b, err := partBlock(p)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	if msg.Content != "" || len(blocks) == 0 {
		if strings.TrimSpace(msg.Content) == "" && len(blocks) == 0 {
			return nil, fmt.Errorf("a user message with no text and no parts")
		}
		blocks = append(blocks, sdk.NewTextBlock(msg.Content))
	}
	return blocks, nil
}

// assistantBlocks are an assistant message's thinking blocks, as they came and
// first, then its text and its tool calls. Reasoning of another provider is not
// Anthropic's to read and stays out.
func assistantBlocks(msg model.Message) ([]sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	for _, raw := range ownBlocks(msg.Reasoning) {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("a stored thinking block is not JSON")
		}
		blocks = append(blocks, param.Override[sdk.ContentBlockParamUnion](raw))
	}
	if msg.Content != "" {
		blocks = append(blocks, sdk.NewTextBlock(msg.Content))
	}
	for _, tc := range msg.ToolCalls {
		input := json.RawMessage(tc.Arguments)
		if strings.TrimSpace(tc.Arguments) == "" {
			input = json.RawMessage("{}")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(input, &obj) != nil || obj == nil {
			return nil, fmt.Errorf("the arguments of tool call %s (%s) are not a JSON object", tc.ID, tc.Name)
		}
		blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{ID: tc.ID, Name: tc.Name, Input: input}})
	}
	return blocks, nil
}

// continuePaused sends a paused answer back as the last assistant message, which
// the API continues: the first pause adds it, later ones extend it. It returns
// the message's index.
func continuePaused(p *sdk.MessageNewParams, at int, raw []json.RawMessage) int {
	blocks := make([]sdk.ContentBlockParamUnion, 0, len(raw))
	for _, b := range raw {
		blocks = append(blocks, param.Override[sdk.ContentBlockParamUnion](b))
	}
	if at >= 0 {
		a := p.Messages[at].OfAssistant
		a.Content = append(a.Content, blocks...)
		return at
	}
	p.Messages = append(p.Messages, sdk.MessageParam{OfAssistant: &sdk.AssistantMessageParam{Content: blocks}})
	return len(p.Messages) - 1
}
