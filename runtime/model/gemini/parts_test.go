package gemini

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	pdfBytes = []byte("%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n%%EOF\n")
)

func TestPartsRequestShape(t *testing.T) {
	f := newFake(t, reply{file: "generate_text.json"})
	m, _ := testModel(t, f, spec.Model{})
	msgs := []model.Message{{Role: model.RoleUser, Content: "What is in these?", Parts: []model.Part{
		{Kind: model.PartImage, MediaType: "image/png", Name: "dot.png", Data: pngBytes},
		{Kind: model.PartFile, MediaType: "application/pdf", Name: "spec.pdf", Data: pdfBytes},
		{Kind: model.PartFile, MediaType: "application/pdf", URL: "gs://bucket/report.pdf"},
		{Kind: model.PartImage, MediaType: "image/jpeg", URL: "https://generativelanguage.googleapis.com/v1beta/files/abc123"},
	}}}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	want := `{"parts":[{"text":"What is in these?"},` +
		`{"inlineData":{"data":"` + base64.StdEncoding.EncodeToString(pngBytes) + `","mimeType":"image/png"}},` +
		`{"inlineData":{"data":"` + base64.StdEncoding.EncodeToString(pdfBytes) + `","mimeType":"application/pdf"}},` +
		`{"fileData":{"fileUri":"gs://bucket/report.pdf","mimeType":"application/pdf"}},` +
		`{"fileData":{"fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc123","mimeType":"image/jpeg"}}],"role":"user"}`
	if got := asJSON(jsonPath(t, f.requests()[0].body, "contents", 0)); got != want {
		t.Errorf("user turn\n%s\nwant\n%s", got, want)
	}
}

func TestTakesPart(t *testing.T) {
	m := &Model{}
	cases := []struct {
		part model.Part
		want string // "" means taken
	}{
		{model.Part{Kind: model.PartImage, MediaType: "image/webp", Data: pngBytes}, ""},
		{model.Part{Kind: model.PartImage, MediaType: "image/heic", Size: 5 << 20}, ""},
		{model.Part{Kind: model.PartFile, MediaType: "text/plain; charset=utf-8", Data: []byte("notes")}, ""},
		{model.Part{Kind: model.PartFile, MediaType: "application/pdf", URL: "gs://b/o.pdf"}, ""},
		{model.Part{Kind: model.PartImage, MediaType: "image/gif", Data: pngBytes}, "does not take image image/gif"},
		{model.Part{Kind: model.PartFile, MediaType: "application/zip", Data: pngBytes}, "does not take file application/zip"},
		{model.Part{Kind: "audio", MediaType: "audio/wav", Data: pngBytes}, `not "audio"`},
		{model.Part{Kind: model.PartImage, MediaType: "image/png", URL: "https://example.com/cat.png"}, `does not fetch "https://example.com/cat.png"`},
		{model.Part{Kind: model.PartFile, MediaType: "application/pdf", Name: "big.pdf", Size: 21 << 20}, "at most 20 MiB inline"},
	}
	for _, c := range cases {
		err := m.TakesPart(c.part)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: refused: %v", c.part.Kind, c.part.MediaType, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v, want it to say %q", c.part.Kind, c.part.MediaType, err, c.want)
		}
	}
}

// Parts are checked again when a request is built: an unsupported one, or
// inline files adding up to more than a request takes, are refused before
// anything is sent.
func TestPartsRefusedBeforeSending(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 11<<20)
	cases := map[string][]model.Part{
		"a web URL": {{Kind: model.PartImage, MediaType: "image/png", URL: "http://example.com/a.png"}},
		"too much inline": {{Kind: model.PartFile, MediaType: "text/plain", Data: big},
			{Kind: model.PartFile, MediaType: "text/plain", Data: big}},
		"no bytes, no URL": {{Kind: model.PartImage, MediaType: "image/png", Ref: "blob:abc"}},
	}
	for name, parts := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			m, _ := testModel(t, f, spec.Model{})
			_, err := m.Complete(context.Background(), &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "look", Parts: parts}}})
			var me *model.Error
			if !errors.As(err, &me) || !me.Refused || me.Retryable() {
				t.Fatalf("err %v, want a refusal", err)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

func TestStructuredOutput(t *testing.T) {
	f := newFake(t, reply{body: candidate(`{"text":"{\"verdict\":\"pass\",\"score\":0.9}"}`, "STOP")})
	m, _ := testModel(t, f, spec.Model{})
	schema := map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"type": "string", "enum": []any{"pass", "fail"}},
		"score": map[string]any{"type": "number"}}, "required": []any{"verdict", "score"}, "additionalProperties": false}
	resp, err := m.Complete(context.Background(), &model.Request{Messages: hello, Tools: []model.ToolDef{weatherTool},
		JSONSchema: &model.JSONSchemaFormat{Name: model.SchemaVerdict, Schema: schema}})
	if err != nil {
		t.Fatal(err)
	}
	body := f.requests()[0].body
	if got := jsonPath(t, body, "generationConfig", "responseMimeType"); got != "application/json" {
		t.Errorf("responseMimeType %v", got)
	}
	if got, want := asJSON(jsonPath(t, body, "generationConfig", "responseJsonSchema")), asJSON(schema); got != want {
		t.Errorf("responseJsonSchema %s, want %s (as given: additionalProperties included)", got, want)
	}
	if jsonPath(t, body, "tools", 0, "functionDeclarations", 0, "name") != "get_weather" {
		t.Errorf("the tools must go with the schema: %s", body)
	}
	if resp.Message.Content != `{"verdict":"pass","score":0.9}` {
		t.Errorf("content %q", resp.Message.Content)
	}

	// JSONObject asks only for JSON.
	f.then(reply{body: candidate(`{"text":"{}"}`, "STOP")})
	if _, err := m.Complete(context.Background(), &model.Request{Messages: hello, JSONObject: true, JSONSchema: &model.JSONSchemaFormat{Schema: schema}}); err != nil {
		t.Fatal(err)
	}
	if got := asJSON(jsonPath(t, f.requests()[1].body, "generationConfig")); got != `{"responseMimeType":"application/json"}` {
		t.Errorf("generationConfig %s", got)
	}
}
