package openai

import (
	"context"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

func TestChatReasoningEffort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		effort    spec.ReasoningEffort
		specMax   int
		callMax   int
		want      map[string]string
		wantUnset []string
	}{
		{"no reasoning keeps max_tokens", "", 300, 0, map[string]string{"max_tokens": "300"},
			[]string{"max_completion_tokens", "reasoning_effort"}},
		{"reasoning takes max_completion_tokens", spec.EffortMedium, 300, 0,
			map[string]string{"max_completion_tokens": "300", "reasoning_effort": `"medium"`}, []string{"max_tokens"}},
		{"a call's own cap wins", spec.EffortHigh, 300, 120,
			map[string]string{"max_completion_tokens": "120", "reasoning_effort": `"high"`}, []string{"max_tokens"}},
		{"effort without a cap", spec.EffortMinimal, 0, 0, map[string]string{"reasoning_effort": `"minimal"`},
			[]string{"max_tokens", "max_completion_tokens"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, completion("stop", `{"role":"assistant","content":"ok"}`))
			m := newModel(t, s, func(sm *spec.Model) {
				sm.MaxTokens = tc.specMax
				if tc.effort != "" {
					sm.Reasoning = &spec.ModelReasoning{Effort: tc.effort}
				}
			})
			req := userAsks("hi")
			req.MaxTokens = tc.callMax
			if _, err := m.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			body := s.body(t, 0)
			for k, v := range tc.want {
				jsonEqual(t, k, body[k], v)
			}
			for _, k := range tc.wantUnset {
				if v, ok := body[k]; ok {
					t.Errorf("%s = %v sent", k, v)
				}
			}
		})
	}
}

func TestChatParts(t *testing.T) {
	s := newServer(t, completion("stop", `{"role":"assistant","content":"A cat and a report."}`))
	req := userAsks("What is in these?")
	req.Messages[1].Parts = []model.Part{
		{Kind: model.PartImage, MediaType: "image/webp", Data: []byte("RIFF")},
		{Kind: model.PartImage, MediaType: "image/jpeg", URL: "https://example.com/cat.jpg"},
		{Kind: model.PartFile, MediaType: "application/pdf", Name: "report.pdf", Data: []byte("%PDF-1.7")},
	}
	if _, err := newModel(t, s).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "messages", s.body(t, 0)["messages"], `[{"role":"system","content":"You are terse."},
		{"role":"user","content":[
			{"type":"text","text":"What is in these?"},
			{"type":"image_url","image_url":{"url":"data:image/webp;base64,UklGRg=="}},
			{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}},
			{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjc=","filename":"report.pdf"}}]}]`)
}

func TestTakesPart(t *testing.T) {
	chat := &Model{api: spec.APIChat}
	resp := &Model{api: spec.APIResponses}
	png := []byte("\x89PNG")
	for _, tc := range []struct {
		name string
		m    *Model
		p    model.Part
		want string // "" when taken
	}{
		{"png bytes", chat, model.Part{Kind: model.PartImage, MediaType: "image/png", Data: png}, ""},
		{"gif by URL", chat, model.Part{Kind: model.PartImage, MediaType: "image/gif", URL: "https://x/a.gif"}, ""},
		{"stored image", chat, model.Part{Kind: model.PartImage, MediaType: "image/jpeg", Ref: "sha256:ab", Size: 1 << 20}, ""},
		{"pdf bytes on chat", chat, model.Part{Kind: model.PartFile, MediaType: "application/pdf", Data: []byte("%PDF")}, ""},
		{"pdf by URL on responses", resp, model.Part{Kind: model.PartFile, MediaType: "application/pdf", URL: "https://x/a.pdf"}, ""},
		{"pdf by URL on chat", chat, model.Part{Kind: model.PartFile, MediaType: "application/pdf", Name: "a.pdf", URL: "https://x/a.pdf"},
			`file "a.pdf" comes by URL; chat completions take files only as data (send its bytes, or set model.api: responses)`},
		{"svg", chat, model.Part{Kind: model.PartImage, MediaType: "image/svg+xml", Name: "logo.svg", Data: png},
			`image "logo.svg" is image/svg+xml; OpenAI takes png, jpeg, gif or webp images`},
		{"image too large", resp, model.Part{Kind: model.PartImage, MediaType: "image/png", Ref: "sha256:ab", Size: MaxImageBytes + 1},
			"is 20.1 MiB; OpenAI takes images of at most 20 MiB"},
		{"pdf too large", chat, model.Part{Kind: model.PartFile, MediaType: "application/pdf", Data: make([]byte, MaxPDFBytes+1)},
			"OpenAI takes PDFs of at most 32 MiB"},
		{"text file", resp, model.Part{Kind: model.PartFile, MediaType: "text/plain", Name: "a.txt", Data: []byte("hi")},
			`file "a.txt" is text/plain; OpenAI takes PDF files only`},
		{"no type", chat, model.Part{Kind: model.PartImage, Data: png}, "image (unnamed) is of no stated type"},
		{"unknown kind", chat, model.Part{Kind: "audio", MediaType: "audio/wav", Data: png}, `is of kind "audio"; OpenAI takes images and PDF files`},
		{"nothing in it", chat, model.Part{Kind: model.PartImage, MediaType: "image/png"}, "has neither data nor a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.TakesPart(tc.p)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A request with a part the model cannot take fails before anything is sent,
// and no retry or fallback would help it.
func TestPartsRefusedBeforeSending(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  model.Message
		want string
	}{
		{"unsupported type", model.Message{Role: model.RoleUser, Content: "see", Parts: []model.Part{
			{Kind: model.PartImage, MediaType: "image/tiff", Name: "scan.tiff", Data: []byte("II*")}}}, "message 1: image \"scan.tiff\" is image/tiff"},
		{"bytes not loaded", model.Message{Role: model.RoleUser, Content: "see", Parts: []model.Part{
			{Kind: model.PartImage, MediaType: "image/png", Ref: "sha256:ab", Size: 10}}}, "is only a reference (sha256:ab): its bytes were not loaded"},
		{"part on an assistant message", model.Message{Role: model.RoleAssistant, Content: "see", Parts: []model.Part{
			{Kind: model.PartImage, MediaType: "image/png", Data: []byte("x")}}}, "is on a message of role assistant; only user messages carry parts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, completion("stop", `{"role":"assistant","content":"ok"}`))
			req := &model.Request{Messages: []model.Message{{Role: model.RoleSystem, Content: "sys"}, tc.msg}}
			_, err := newModel(t, s).Complete(context.Background(), req)
			me := modelError(t, err)
			if !strings.Contains(err.Error(), tc.want) || !me.Refused || me.Retryable() {
				t.Errorf("error %v (refused %v), want a refusal saying %q", err, me.Refused, tc.want)
			}
			if s.count() != 0 {
				t.Errorf("%d requests sent", s.count())
			}
		})
	}
}

func TestStrictCompatible(t *testing.T) {
	obj := func(extra map[string]any) map[string]any {
		m := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"type": "string"}}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		schema map[string]any
		want   bool
	}{
		{"closed object, all required", obj(nil), true},
		{"required as []string", obj(map[string]any{"required": []string{"a"}}), true},
		{"no schema", nil, false},
		{"additionalProperties missing", map[string]any{"type": "object", "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"type": "string"}}}, false},
		{"additionalProperties true", obj(map[string]any{"additionalProperties": true}), false},
		{"a property not required", obj(map[string]any{"properties": map[string]any{
			"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "string"}}}), false},
		{"open nested object", obj(map[string]any{"properties": map[string]any{"a": map[string]any{"type": "object"}}}), false},
		{"open object in array items", obj(map[string]any{"properties": map[string]any{
			"a": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{}}}}}), false},
		{"closed object in array items", obj(map[string]any{"properties": map[string]any{
			"a": map[string]any{"type": "array", "items": obj(nil)}}}), true},
		{"open object in anyOf", obj(map[string]any{"properties": map[string]any{
			"a": map[string]any{"anyOf": []any{map[string]any{"type": "null"}, map[string]any{"type": []any{"object", "null"}}}}}}), false},
		{"open object in $defs", obj(map[string]any{"$defs": map[string]any{"x": map[string]any{"properties": map[string]any{}}}}), false},
		{"not an object", map[string]any{"type": "string"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strictCompatible(tc.schema); got != tc.want {
				t.Errorf("strictCompatible = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestChatJSONSchemaNotStrict(t *testing.T) {
	s := newServer(t, completion("stop", `{"role":"assistant","content":"{}"}`))
	req := userAsks("facts")
	req.JSONSchema = &model.JSONSchemaFormat{Name: "facts", Schema: map[string]any{
		"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}
	if _, err := newModel(t, s).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "response_format", s.body(t, 0)["response_format"], `{"type":"json_schema","json_schema":{
		"name":"facts","strict":false,"schema":{"type":"object","properties":{"name":{"type":"string"}}}}}`)
}
