package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentrun/agentrun/runtime/model"
)

// turn is one answer of the API as it came, streamed or not, before it is read
// as a model.Response.
type turn struct {
	text     strings.Builder
	calls    []model.ToolCall
	thinking []string          // the readable text of each thinking block
	blocks   []json.RawMessage // the thinking and redacted_thinking blocks as they came
	raw      []json.RawMessage // every content block, to send a paused answer back
	stop     string
	usage    model.Usage
	model    string
}

// turnOf reads an unstreamed answer.
func turnOf(msg *sdk.Message) *turn {
	t := &turn{stop: string(msg.StopReason), usage: usageOf(msg.Usage.InputTokens, msg.Usage.CacheReadInputTokens,
		msg.Usage.CacheCreationInputTokens, msg.Usage.OutputTokens), model: string(msg.Model)}
	for _, b := range msg.Content {
		raw := json.RawMessage(b.RawJSON())
		t.raw = append(t.raw, raw)
		switch b.Type {
		case "text":
			t.text.WriteString(b.Text)
		case "thinking":
			t.thinking = append(t.thinking, b.Thinking)
			t.blocks = append(t.blocks, raw)
		case "redacted_thinking":
			t.blocks = append(t.blocks, raw)
		case "tool_use":
			t.calls = append(t.calls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: string(b.Input)})
		}
	}
	return t
}

// merge adds the continuation of a paused answer.
func (t *turn) merge(o *turn) {
	t.text.WriteString(o.text.String())
	t.calls = append(t.calls, o.calls...)
	t.thinking = append(t.thinking, o.thinking...)
	t.blocks = append(t.blocks, o.blocks...)
	t.raw = append(t.raw, o.raw...)
	t.stop = o.stop
	t.usage.Add(o.usage)
	if o.model != "" {
		t.model = o.model
	}
}

// usageOf counts the prompt as the runtime does: every prompt token, those read
// from the cache and those written to it included (the API counts them apart).
func usageOf(input, cacheRead, cacheWrite, output int64) model.Usage {
	prompt := input + cacheRead + cacheWrite
	return model.Usage{PromptTokens: prompt, CompletionTokens: output, TotalTokens: prompt + output,
		CachedPromptTokens: cacheRead, CacheWriteTokens: cacheWrite}
}

// finishReasons maps the API's stop reasons to the runtime's; others are passed on
// as they came.
var finishReasons = map[string]model.FinishReason{
	"end_turn":                      model.FinishStop,
	"stop_sequence":                 model.FinishStop,
	"tool_use":                      model.FinishToolCalls,
	"max_tokens":                    model.FinishLength,
	"model_context_window_exceeded": model.FinishLength,
	"refusal":                       model.FinishContentFilter,
}

func finishReason(stop string) model.FinishReason {
	if r, ok := finishReasons[stop]; ok {
		return r
	}
	return model.FinishReason(stop)
}

// response reads a finished turn: a call of the structured answer's tool becomes
// the answer's text, thinking becomes the message's Reasoning.
func (pl *plan) response(t *turn) (*model.Response, error) {
	msg := model.Message{Role: model.RoleAssistant, Content: t.text.String()}
	finish := finishReason(t.stop)
	answered := false
	for _, tc := range t.calls {
		if pl.answer != "" && tc.Name == pl.answer && !answered {
			text, err := pl.answerText(tc.Arguments)
			if err != nil {
				if finish == model.FinishLength {
					return nil, &model.Error{Err: fmt.Errorf("the structured answer was cut off at max_tokens"), Usage: t.usage, Refused: true}
				}
				return nil, &model.Error{Err: err, Usage: t.usage, Refused: true}
			}
			msg.Content, answered = text, true
			continue
		}
		if tc.Arguments == "" {
			tc.Arguments = "{}"
		}
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	if answered && len(msg.ToolCalls) == 0 && finish == model.FinishToolCalls {
		finish = model.FinishStop
	}
	if len(t.blocks) > 0 || len(t.thinking) > 0 {
		msg.Reasoning = &model.Reasoning{Field: "thinking", Text: strings.Join(t.thinking, "\n\n"),
			Provider: model.ProviderAnthropic, Blocks: t.blocks}
	}
	out := &model.Response{Message: msg, FinishReason: finish, Usage: t.usage, Model: t.model}
	if err := checkTruncated(out); err != nil {
		return nil, err
	}
	return out, nil
}

// answerText is the structured answer a call of its tool carries.
func (pl *plan) answerText(args string) (string, error) {
	if !json.Valid([]byte(args)) {
		return "", fmt.Errorf("the structured answer is not JSON")
	}
	if !pl.wrapped {
		return args, nil
	}
	var w struct {
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal([]byte(args), &w) != nil || w.Value == nil {
		return "", fmt.Errorf("the structured answer has no value")
	}
	return string(w.Value), nil
}

// checkTruncated refuses tool calls whose input max_tokens cut off: running a tool
// on half an argument object is worse than failing the turn.
func checkTruncated(r *model.Response) error {
	if r.FinishReason != model.FinishLength {
		return nil
	}
	for _, tc := range r.Message.ToolCalls {
		if !json.Valid([]byte(tc.Arguments)) {
			return &model.Error{Err: fmt.Errorf("the input of tool call %s (%s) was cut off at max_tokens", tc.ID, tc.Name), Usage: r.Usage, Refused: true}
		}
	}
	return nil
}
