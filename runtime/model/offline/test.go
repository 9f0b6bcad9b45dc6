package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
)

// Test is the built-in offline model. On a user's message it calls every offered tool
// once, with arguments generated from the tool's JSON schema (a parameter's default
// or first example when it has one); once the results are in, it answers with a
// summary of them. It is deterministic.
type Test struct{}

var _ model.Model = Test{}

func (Test) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.JSONSchema != nil {
		out, _ := json.Marshal(offlineStructured(req.JSONSchema))
		return respond(model.Message{Role: model.RoleAssistant, Content: string(out)}, req), nil
	}
	results := toolResultsSinceUser(req.Messages)
	if results == nil && len(req.Tools) > 0 {
		msg := model.Message{Role: model.RoleAssistant}
		for i, t := range req.Tools {
			args, _ := json.Marshal(Generate(t.Parameters))
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: fmt.Sprintf("call_test_%d", i+1), Name: t.Name, Arguments: string(args)})
		}
		return respond(msg, req), nil
	}
	var b strings.Builder
	if len(results) == 0 {
		b.WriteString("test model: no tools were called.")
	} else {
		b.WriteString("test model: called ")
		for i, r := range results {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s → %s", r.name, oneLine(r.content, 160))
		}
	}
	text := b.String()
	if req.OnDelta != nil {
		req.OnDelta(text)
	}
	return respond(model.Message{Role: model.RoleAssistant, Content: text}, req), nil
}

// offlineStructured is the offline models' JSON answer: the judge passes, the
// classifier picks the first intent with full confidence, anything else is generated
// from its schema.
func offlineStructured(f *model.JSONSchemaFormat) any {
	v := Generate(f.Schema)
	switch f.Name {
	case model.SchemaVerdict:
		return map[string]any{"passed": true, "missing": ""}
	case model.SchemaIntent:
		if m, ok := v.(map[string]any); ok {
			m["confidence"] = 1.0
		}
	}
	return v
}

func respond(msg model.Message, req *model.Request) *model.Response {
	finish := model.FinishStop
	if len(msg.ToolCalls) > 0 {
		finish = model.FinishToolCalls
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content) / 4
	}
	completion := len(msg.Content)/4 + 10*len(msg.ToolCalls)
	return &model.Response{
		Message:      msg,
		FinishReason: finish,
		Model:        "test",
		Usage:        model.Usage{PromptTokens: int64(prompt), CompletionTokens: int64(completion), TotalTokens: int64(prompt + completion)},
	}
}

type toolResult struct{ name, content string }

// toolResultsSinceUser returns the tool results after the last user message, or nil
// when the model has not called tools since then.
func toolResultsSinceUser(msgs []model.Message) []toolResult {
	names := map[string]string{}
	var out []toolResult
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == model.RoleUser {
			break
		}
		if m.Role == model.RoleAssistant {
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
		}
	}
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != model.RoleUser; i-- {
		if msgs[i].Role == model.RoleTool {
			out = append(out, toolResult{names[msgs[i].ToolCallID], msgs[i].Content})
		}
	}
	if out == nil && len(names) == 0 {
		return nil
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if out == nil {
		out = []toolResult{}
	}
	return out
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

// Generate builds a value that satisfies a JSON schema's common keywords: a default
// or first example wins, then const and enum, then a value of the declared type that
// meets its minimums (a string its pattern, see patternString). Objects get their
// required properties.
func Generate(schema map[string]any) any {
	if v, ok := schema["default"]; ok {
		return v
	}
	if ex, ok := schema["examples"].([]any); ok && len(ex) > 0 {
		return ex[0]
	}
	if v, ok := schema["const"]; ok {
		return v
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch typ {
	case "string":
		if p, ok := schema["pattern"].(string); ok {
			maxLen := -1
			if _, ok := number(schema["maxLength"]); ok {
				maxLen = intOf(schema["maxLength"])
			}
			return patternString(p, intOf(schema["minLength"]), maxLen)
		}
		return strings.Repeat("a", max(1, intOf(schema["minLength"])))
	case "integer":
		return minNumber(schema, 0)
	case "number":
		return minNumber(schema, 0)
	case "boolean":
		return true
	case "null":
		return nil
	case "array":
		items, _ := schema["items"].(map[string]any)
		out := make([]any, intOf(schema["minItems"]))
		for i := range out {
			out[i] = Generate(items)
		}
		return out
	case "object", "":
		props, _ := schema["properties"].(map[string]any)
		if typ == "" && props == nil {
			return "a"
		}
		out := map[string]any{}
		var required []string
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					required = append(required, s)
				}
			}
		}
		sort.Strings(required)
		for _, name := range required {
			sub, _ := props[name].(map[string]any)
			out[name] = Generate(sub)
		}
		return out
	}
	return "a"
}

func minNumber(schema map[string]any, def float64) any {
	v := def
	if m, ok := number(schema["minimum"]); ok {
		v = m
	}
	if m, ok := number(schema["exclusiveMinimum"]); ok {
		v = m + 1
	}
	if m, ok := number(schema["maximum"]); ok && v > m {
		v = m
	}
	return v
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func intOf(v any) int {
	f, _ := number(v)
	return int(f)
}
