package serve_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/providerwire"
	"github.com/agentrun/agentrun/serve"
	"github.com/openai/openai-go/v3"
)

func dataURL(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

var pdf = []byte("%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n")

// An image sent by the official OpenAI client as an image_url part reaches every
// provider's request in that API's native form, its bytes unchanged; a file the
// agent's model cannot take is refused with a 4xx before any model request.
func TestChatImageReachesEveryProvider(t *testing.T) {
	for _, pw := range providerwire.Wires {
		t.Run(pw.Name, func(t *testing.T) {
			wire := providerwire.Serve(t, pw)
			e := newEnv(t, envOptions{model: "-", env: map[string]string{pw.KeyEnv: "sk-test"},
				editSpec: func(string) string { return wire.Spec(pw, "looker") }})
			client := e.openAIClient(aliceToken)
			refused := openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{
				FileData: openai.String(dataURL(http.DetectContentType(pw.Refused.Data), pw.Refused.Data)), Filename: openai.String(pw.Refused.Name)})
			_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "looker",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart("what is this?"), refused})}})
			var apiErr *openai.Error
			wantStatus := http.StatusUnsupportedMediaType
			if strings.Contains(pw.Refused.Why, "MiB") {
				wantStatus = http.StatusRequestEntityTooLarge
			}
			if !errors.As(err, &apiErr) || apiErr.StatusCode != wantStatus || !strings.Contains(apiErr.Message, pw.Refused.Why) {
				t.Errorf("%s: %v, want a %d naming %q", pw.Refused.Name, err, wantStatus, pw.Refused.Why)
			}
			if n := len(wire.Bodies()); n != 0 {
				t.Fatalf("%d model requests for a file the model cannot take", n)
			}

			resp, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "looker",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart("what is this?"),
					openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL("image/png", providerwire.PNG)}),
				})}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Choices[0].Message.Content; got != "A cat." {
				t.Errorf("answer %q", got)
			}
			bodies := wire.Bodies()
			if len(bodies) != 1 {
				t.Fatalf("%d model requests", len(bodies))
			}
			mediaType, data := pw.Image(t, bodies[0])
			if mediaType != "image/png" || data != base64.StdEncoding.EncodeToString(providerwire.PNG) {
				t.Errorf("the image went as %s %q", mediaType, data)
			}
		})
	}
}

// A file of an earlier message is told to the model as a note, its bytes not
// sent again; the files of the last message are sent whole.
func TestChatEarlierFilesAreNotes(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do("POST", "/v1/chat/completions", aliceToken, chatBody(
		msg("user", []any{
			map[string]any{"type": "text", "text": "here is my bill"},
			map[string]any{"type": "file", "file": map[string]any{"filename": "bill.pdf", "file_data": dataURL("application/pdf", pdf)}},
		}),
		msg("assistant", "Thanks, I have it."),
		msg("user", []any{
			map[string]any{"type": "text", "text": "hi"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL("image/png", providerwire.PNG), "detail": "low"}},
		}),
	))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	reqs := e.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var earlier, last map[string]any
	for _, m := range reqs[0].Messages {
		if m["role"] == "user" {
			earlier, last = last, m
		}
	}
	note, _ := earlier["content"].(string)
	if !strings.HasPrefix(note, "here is my bill\n[earlier attachment: bill.pdf, application/pdf, ") {
		t.Errorf("the earlier message went as %v", earlier["content"])
	}
	if body, _ := json.Marshal(reqs[0].Body); strings.Contains(string(body), base64.StdEncoding.EncodeToString(pdf)) {
		t.Error("the earlier PDF's bytes were sent again")
	}
	if parts, _ := last["content"].([]any); len(parts) != 2 {
		t.Errorf("the last message went as %v, want its text and its image", last["content"])
	}
}

// The run API takes attachments — base64 data or a URL, named or not — and tells
// each kind of bad one with its own status.
func TestRunAttachments(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{MaxAttachmentBytes: 64 << 10}})
	png := base64.StdEncoding.EncodeToString(providerwire.PNG)
	for _, c := range []struct {
		name        string
		input       string
		attachments []map[string]any
		status      int
		code        string
		mention     string
	}{
		{name: "named image", input: "hi", attachments: []map[string]any{{"name": "cat.png", "media_type": "image/png", "data": png}}, status: 200},
		{name: "only a file", attachments: []map[string]any{{"data": base64.StdEncoding.EncodeToString(pdf)}}, status: 200},
		{name: "image by URL", input: "hi", attachments: []map[string]any{{"url": "https://example.com/cat.png"}}, status: 200},
		{name: "data URL", input: "hi", attachments: []map[string]any{{"url": dataURL("image/png", providerwire.PNG)}}, status: 200},
		{name: "data and url", input: "hi", attachments: []map[string]any{{"data": png, "url": "https://example.com/cat.png"}}, status: 400, code: "invalid_attachment", mention: "attachments[0]"},
		{name: "neither", input: "hi", attachments: []map[string]any{{"name": "x.png"}}, status: 400, code: "invalid_attachment", mention: "x.png"},
		{name: "not base64", input: "hi", attachments: []map[string]any{{"data": "%%%"}}, status: 400, code: "invalid_attachment", mention: "base64"},
		{name: "type and content differ", input: "hi", attachments: []map[string]any{{"media_type": "application/pdf", "data": png}}, status: 400, code: "invalid_attachment", mention: "image/png"},
		{name: "a zip", input: "hi", attachments: []map[string]any{{"name": "a.zip", "data": base64.StdEncoding.EncodeToString([]byte("PK\x03\x04" + strings.Repeat("\x00", 30)))}}, status: 415, code: "unsupported_attachment", mention: "application/zip"},
		{name: "text the model cannot take", input: "hi", attachments: []map[string]any{{"name": "notes.txt", "data": base64.StdEncoding.EncodeToString([]byte("milk\n"))}}, status: 415, code: "unsupported_attachment", mention: "OpenAI takes PDF files only"},
		{name: "too large", input: "hi", attachments: []map[string]any{{"name": "big.pdf", "data": base64.StdEncoding.EncodeToString(append(pdf, make([]byte, 70<<10)...))}}, status: 413, code: "attachment_too_large", mention: "64 KB a part"},
		{name: "too many", input: "hi", attachments: repeat(map[string]any{"data": png}, 11), status: 413, code: "attachment_too_large", mention: "10"},
		{name: "no input, no file", attachments: nil, status: 400, code: "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.model.Requests())
			r := e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": c.input, "attachments": c.attachments})
			if !r.wantError(t, c.status, c.code, c.mention) {
				return
			}
			if len(e.model.Requests()) != before {
				t.Error("a refused request reached the model")
			}
		})
	}
}

// A streamed request with a file the model cannot take is refused before its
// stream starts: the client gets the 415, not a 200 with an error event.
func TestStreamedChatRefusesAFileFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	stream := e.openAIClient(aliceToken).Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "support",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("read this"),
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(dataURL("text/plain", []byte("milk\n"))), Filename: openai.String("notes.txt")}),
		})}})
	for stream.Next() {
		t.Errorf("a chunk: %v", stream.Current())
	}
	var apiErr *openai.Error
	if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnsupportedMediaType || apiErr.Code != "unsupported_attachment" {
		t.Errorf("%v, want a 415 unsupported_attachment", err)
	}
}

// The body of an endpoint that takes files may be as much larger than
// max_body_bytes as max_attachment_bytes take in base64; others' may not.
func TestAttachmentsRaiseTheBodyCap(t *testing.T) {
	e := newEnv(t, envOptions{limits: serve.Limits{MaxBodyBytes: 4096, MaxAttachmentBytes: 64 << 10}})
	file := append(append([]byte(nil), pdf...), make([]byte, 40<<10)...)
	r := e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi",
		"attachments": []any{map[string]any{"name": "a.pdf", "data": base64.StdEncoding.EncodeToString(file)}}})
	if r.Status != http.StatusOK {
		t.Errorf("a 53 KiB body with a 40 KiB file: %d %s", r.Status, r.Body)
	}
	r = e.do("POST", "/v1/agents/support/runs", aliceToken, map[string]any{"input": "hi", "pad": strings.Repeat("x", 100<<10)})
	if r.Status != http.StatusRequestEntityTooLarge || r.errorCode(t) != "body_too_large" {
		t.Errorf("a body over the raised cap: %d %s", r.Status, r.Body)
	}
	r = e.do("POST", "/v1/runs/run_x/approvals/call_1", aliceToken, `{"decision":"approve","reason":"`+strings.Repeat("x", 5000)+`"}`)
	if r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5000-byte body where no file goes: %d %s", r.Status, r.Body)
	}
}

func repeat(v map[string]any, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}
