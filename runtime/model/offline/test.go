package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentrun/agentrun/runtime/model"
)

// Test is the built-in offline model. On a user's message it calls every offered tool
// once, with arguments generated from the tool's JSON schema (a parameter's default
// or first example when it has one); once the results are in, it answers with a
// summary of them, or, when the request asks for a JSON schema, with a value
// generated from it. It is deterministic.
type Test struct{}

var _ model.Model = Test{}

func (Test) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	results := toolResultsSinceUser(req.Messages)
	// A structured answer comes once the offered tools ran: an agent's output
	// schema rides along with its tools, as providers take them together.
	if req.JSONSchema != nil && (results != nil || len(req.Tools) == 0) {
		out, _ := json.Marshal(offlineStructured(req.JSONSchema))
		return respond(model.Message{Role: model.RoleAssistant, Content: string(out)}, req), nil
	}
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
// meets its bounds (a string its pattern, see patternString, or its format; a
// number its minimum, maximum and multipleOf; an array its minItems, prefixItems,
// contains and uniqueItems). Objects get their required properties (and more up to
// minProperties); allOf is merged, anyOf and oneOf take their first branch.
func Generate(schema map[string]any) any { return generate(schema, 0) }

// generate builds the n-th value of a schema: for n > 0 one that differs from the
// first where the schema allows, for the items of an array with uniqueItems.
func generate(schema map[string]any, n int) any {
	schema = flatten(schema)
	if v, ok := schema["default"]; ok && n == 0 {
		return v
	}
	if ex, ok := schema["examples"].([]any); ok && len(ex) > n {
		return ex[n]
	}
	if v, ok := schema["const"]; ok {
		return v
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[n%len(enum)]
	}
	switch typ := schemaType(schema); typ {
	case "string":
		return generateString(schema, n)
	case "integer":
		return minNumber(schema, true, n)
	case "number":
		return minNumber(schema, false, n)
	case "boolean":
		return n%2 == 0
	case "null":
		return nil
	case "array":
		return generateArray(schema, n)
	case "object":
		return generateObject(schema, n)
	}
	if n > 0 {
		return fmt.Sprintf("a%d", n)
	}
	return "a"
}

// schemaType is the type a value is generated as: the declared one (the first
// that is not null, of a list), else the one the keywords imply, else "".
func schemaType(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, _ := e.(string); s != "" && s != "null" {
				return s
			}
		}
		if len(t) > 0 {
			return "null"
		}
	}
	for _, k := range []struct{ key, typ string }{
		{"properties", "object"}, {"required", "object"}, {"minProperties", "object"},
		{"items", "array"}, {"prefixItems", "array"}, {"minItems", "array"},
		{"minLength", "string"}, {"pattern", "string"}, {"format", "string"},
		{"minimum", "number"}, {"maximum", "number"}, {"multipleOf", "number"},
	} {
		if _, ok := schema[k.key]; ok {
			return k.typ
		}
	}
	return ""
}

// flatten merges allOf's schemas, and the first branch of anyOf and oneOf, into
// one schema: properties and required add up, other keywords keep the first value.
func flatten(schema map[string]any) map[string]any {
	var parts []map[string]any
	if all, ok := schema["allOf"].([]any); ok {
		for _, p := range all {
			if m, ok := p.(map[string]any); ok {
				parts = append(parts, m)
			}
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if branches, ok := schema[key].([]any); ok && len(branches) > 0 {
			if m, ok := branches[0].(map[string]any); ok {
				parts = append(parts, m)
			}
		}
	}
	if len(parts) == 0 {
		return schema
	}
	out := map[string]any{}
	for k, v := range schema {
		if k != "allOf" && k != "anyOf" && k != "oneOf" {
			out[k] = v
		}
	}
	for _, p := range parts {
		p = flatten(p)
		for k, v := range p {
			switch k {
			case "properties":
				props, _ := out[k].(map[string]any)
				merged := map[string]any{}
				for name, s := range props {
					merged[name] = s
				}
				for name, s := range v.(map[string]any) {
					if _, ok := merged[name]; !ok {
						merged[name] = s
					}
				}
				out[k] = merged
			case "required":
				req, _ := out[k].([]any)
				more, _ := v.([]any)
				out[k] = append(append([]any(nil), req...), more...)
			default:
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return out
}

// formats are values of the string formats JSON schema names.
var formats = map[string]string{
	"date-time": "2024-01-01T00:00:00Z", "date": "2024-01-01", "time": "00:00:00Z", "duration": "P1D",
	"email": "a@example.com", "idn-email": "a@example.com", "hostname": "example.com", "idn-hostname": "example.com",
	"ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "uri": "https://example.com/", "uri-reference": "https://example.com/",
	"iri": "https://example.com/", "iri-reference": "https://example.com/", "uuid": "00000000-0000-4000-8000-000000000000",
	"json-pointer": "/a", "regex": "a",
}

func generateString(schema map[string]any, n int) string {
	minLen, maxLen := intOf(schema["minLength"]), -1
	if _, ok := number(schema["maxLength"]); ok {
		maxLen = intOf(schema["maxLength"])
	}
	if p, ok := schema["pattern"].(string); ok {
		return patternString(p, minLen, maxLen)
	}
	if f, ok := formats[fmt.Sprint(schema["format"])]; ok && n == 0 {
		return f
	}
	s := "a"
	if n > 0 {
		s = fmt.Sprintf("a%d", n)
	}
	if r := utf8.RuneCountInString(s); r < minLen {
		s += strings.Repeat("a", minLen-r)
	}
	if maxLen >= 0 && len(s) > maxLen {
		s = s[:maxLen]
	}
	return s
}

// minNumber is the n-th smallest number the schema's bounds allow (the maximum
// when they allow none above it).
func minNumber(schema map[string]any, integer bool, n int) float64 {
	v := 0.0
	if m, ok := number(schema["minimum"]); ok {
		v = m
	}
	if m, ok := number(schema["exclusiveMinimum"]); ok {
		if integer {
			v = math.Floor(m) + 1
		} else {
			v = m + 1
		}
	}
	if integer {
		v = math.Ceil(v)
	}
	step := 1.0
	if m, ok := number(schema["multipleOf"]); ok && m > 0 {
		step = m
		v = math.Ceil(v/m) * m
	}
	v += float64(n) * step
	if m, ok := number(schema["maximum"]); ok && v > m {
		v = m
	}
	if m, ok := number(schema["exclusiveMaximum"]); ok && v >= m {
		if integer {
			v = math.Ceil(m) - 1
		} else {
			v = m - step/2
		}
	}
	return v
}

func generateArray(schema map[string]any, n int) []any {
	items, _ := schema["items"].(map[string]any)
	prefix, _ := schema["prefixItems"].([]any)
	contains, hasContains := schema["contains"].(map[string]any)
	count := intOf(schema["minItems"])
	if hasContains && count == 0 {
		count = 1
	}
	unique := schema["uniqueItems"] == true
	out := make([]any, count)
	for i := range out {
		sub := items
		if i < len(prefix) {
			sub, _ = prefix[i].(map[string]any)
		}
		if i == 0 && hasContains {
			sub = contains
		}
		k := n
		if unique {
			k = n*count + i
		}
		out[i] = generate(sub, k)
	}
	return out
}

func generateObject(schema map[string]any, n int) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	extra, _ := schema["additionalProperties"].(map[string]any)
	var names []string
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok && !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
	}
	sort.Strings(names)
	want := intOf(schema["minProperties"])
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if len(names) >= want {
			break
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for i := 1; len(names) < want && schema["additionalProperties"] != false; i++ {
		if name := fmt.Sprintf("p%d", i); props[name] == nil {
			names = append(names, name)
		}
	}
	out := map[string]any{}
	for i, name := range names {
		sub, ok := props[name].(map[string]any)
		if !ok {
			sub = extra
		}
		k := 0
		if i == 0 {
			k = n // the n-th object differs in its first property
		}
		out[name] = generate(sub, k)
	}
	return out
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
