// Package providerwire is, for tests, each model API as it answers a one-turn
// question — OpenAI chat completions, the Responses API, Anthropic's Messages and
// Gemini's generateContent — and where in its request an attached image must
// be, in that API's own shape: so one test can show a file reaching every
// provider natively, whether it came by exec --attach or through serve.
package providerwire

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Wire is one provider's API.
type Wire struct {
	Name string
	// Model is the spec's model line, with URL where the server's address goes.
	Model  string
	KeyEnv string // the key the provider reads
	Path   string // where its request goes
	Answer string // its whole reply to a question: "A cat."
	// Image finds the image of the request's last user message in the API's
	// native form and returns its media type and base64 bytes.
	Image func(t testing.TB, body map[string]any) (mediaType, data string)
	// Refused is a file this API cannot take, and part of why.
	Refused File
}

// File is a named file.
type File struct {
	Name string
	Data []byte
	Why  string
}

// PNG is the start of a PNG file: what content sniffing takes for image/png.
var PNG = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 40)...)

var (
	gif    = append([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00"), make([]byte, 20)...)
	bigPNG = append(append([]byte(nil), PNG...), make([]byte, 6<<20)...)
)

// Wires are the APIs a spec's model can speak.
var Wires = []Wire{
	{
		Name: "openai chat", Model: "model: {name: gpt-4o, base_url: URL/v1}", KeyEnv: "LLM_API_KEY", Path: "/v1/chat/completions",
		Answer: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"A cat."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`,
		Image: func(t testing.TB, body map[string]any) (string, string) {
			part := findPart(t, lastOf(t, body, "messages")["content"], "image_url")
			return splitDataURL(t, Dig(t, part, "image_url", "url"))
		},
		Refused: File{"notes.txt", []byte("remember the milk\n"), `file "notes.txt" is text/plain; OpenAI takes PDF files only`},
	},
	{
		Name: "openai responses", Model: "model: {name: gpt-4o, api: responses, base_url: URL/v1}", KeyEnv: "LLM_API_KEY", Path: "/v1/responses",
		Answer: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"A cat.","annotations":[]}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}`,
		Image: func(t testing.TB, body map[string]any) (string, string) {
			part := findPart(t, lastOf(t, body, "input")["content"], "input_image")
			return splitDataURL(t, Dig(t, part, "image_url"))
		},
		Refused: File{"notes.txt", []byte("remember the milk\n"), `file "notes.txt" is text/plain; OpenAI takes PDF files only`},
	},
	{
		Name: "anthropic", Model: "model: {provider: anthropic, name: claude-sonnet-4-5, base_url: URL}", KeyEnv: "ANTHROPIC_API_KEY", Path: "/v1/messages",
		Answer: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A cat."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}`,
		Image: func(t testing.TB, body map[string]any) (string, string) {
			part := findPart(t, lastOf(t, body, "messages")["content"], "image")
			if Dig(t, part, "source", "type") != "base64" {
				t.Errorf("image source %v", part["source"])
			}
			return Dig(t, part, "source", "media_type"), Dig(t, part, "source", "data")
		},
		Refused: File{"big.png", bigPNG, "big.png is 6.0 MiB: Anthropic models take images up to 5 MiB"},
	},
	{
		Name: "gemini", Model: "model: {provider: gemini, name: gemini-2.5-flash, base_url: URL}", KeyEnv: "GEMINI_API_KEY", Path: "/v1beta/models/gemini-2.5-flash:generateContent",
		Answer: `{"candidates":[{"content":{"role":"model","parts":[{"text":"A cat."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3,"totalTokenCount":13},"modelVersion":"gemini-2.5-flash"}`,
		Image: func(t testing.TB, body map[string]any) (string, string) {
			parts, _ := lastOf(t, body, "contents")["parts"].([]any)
			for _, p := range parts {
				if m, _ := p.(map[string]any); m["inlineData"] != nil {
					return Dig(t, m, "inlineData", "mimeType"), Dig(t, m, "inlineData", "data")
				}
			}
			t.Fatalf("no inlineData part in %v", parts)
			return "", ""
		},
		Refused: File{"anim.gif", gif, "image/gif"},
	},
}

// Server is a Wire's API on a local port, keeping the body of every request.
type Server struct {
	URL string

	mu     sync.Mutex
	bodies []map[string]any
}

// Serve starts w's API for the test.
func Serve(t testing.TB, w Wire) *Server {
	s := &Server{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if r.URL.Path != w.Path {
			t.Errorf("request to %s, want %s", r.URL.Path, w.Path)
			http.Error(rw, "not found", http.StatusNotFound)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body: %v", err)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(rw, w.Answer)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Bodies are the requests' bodies so far.
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// Spec is a one-agent spec named name on w's API at s.
func (s *Server) Spec(w Wire, name string) string {
	return "version: 1\nname: " + name + "\ninstructions: Describe what you are shown.\n" + strings.ReplaceAll(w.Model, "URL", s.URL) + "\n"
}

// lastOf is the last element of the list under key, a JSON object.
func lastOf(t testing.TB, body map[string]any, key string) map[string]any {
	t.Helper()
	list, _ := body[key].([]any)
	if len(list) == 0 {
		t.Fatalf("no %s in %v", key, body)
	}
	last, _ := list[len(list)-1].(map[string]any)
	return last
}

// findPart is the content part of that type.
func findPart(t testing.TB, content any, typ string) map[string]any {
	t.Helper()
	parts, _ := content.([]any)
	for _, p := range parts {
		if m, _ := p.(map[string]any); m["type"] == typ {
			return m
		}
	}
	t.Fatalf("no %s part in %v", typ, content)
	return nil
}

// Dig is the string at the path of keys.
func Dig(t testing.TB, v map[string]any, keys ...string) string {
	t.Helper()
	var cur any = v
	for _, k := range keys {
		m, _ := cur.(map[string]any)
		cur = m[k]
	}
	s, ok := cur.(string)
	if !ok {
		t.Fatalf("%s: %v is not a string", strings.Join(keys, "."), cur)
	}
	return s
}

// splitDataURL is a base64 data: URL's media type and data.
func splitDataURL(t testing.TB, u string) (string, string) {
	t.Helper()
	head, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ";base64,")
	if !ok || !strings.HasPrefix(u, "data:") {
		t.Fatalf("not a base64 data URL: %.60s", u)
	}
	return head, data
}
