package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// providerWire is one provider's server as its API answers a one-turn question:
// where the spec points, the key it reads, the answer's bytes, and where in the
// request the attached image must be, in that API's own shape.
type providerWire struct {
	name, model, keyEnv, path string
	answer                    string
	// image finds the image of the request's last user message in the API's
	// native form and returns its media type and its base64 bytes.
	image func(t *testing.T, body map[string]any) (mediaType, data string)
	// refused is a file this API cannot take, and the start of why.
	refused refusedFile
}

type refusedFile struct {
	name string
	data []byte
	why  string
}

var (
	gifHeader = append([]byte("GIF89a\x01\x00\x01\x00\x80\x00\x00"), make([]byte, 20)...)
	bigPNG    = append(append([]byte(nil), pngHeader...), make([]byte, 6<<20)...)
)

var providerWires = []providerWire{
	{
		name: "openai chat", model: "model: {name: gpt-4o, base_url: URL/v1}", keyEnv: "LLM_API_KEY", path: "/v1/chat/completions",
		answer: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"A cat."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`,
		image: func(t *testing.T, body map[string]any) (string, string) {
			part := findPart(t, lastOf(t, body, "messages")["content"], "image_url")
			return splitDataURL(t, dig(t, part, "image_url", "url"))
		},
		refused: refusedFile{"notes.txt", []byte("remember the milk\n"), `file "notes.txt" is text/plain; OpenAI takes PDF files only`},
	},
	{
		name: "openai responses", model: "model: {name: gpt-4o, api: responses, base_url: URL/v1}", keyEnv: "LLM_API_KEY", path: "/v1/responses",
		answer: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"A cat.","annotations":[]}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}`,
		image: func(t *testing.T, body map[string]any) (string, string) {
			part := findPart(t, lastOf(t, body, "input")["content"], "input_image")
			return splitDataURL(t, dig(t, part, "image_url"))
		},
		refused: refusedFile{"notes.txt", []byte("remember the milk\n"), `file "notes.txt" is text/plain; OpenAI takes PDF files only`},
	},
	{
		name: "anthropic", model: "model: {provider: anthropic, name: claude-sonnet-4-5, base_url: URL}", keyEnv: "ANTHROPIC_API_KEY", path: "/v1/messages",
		answer: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A cat."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}`,
		image: func(t *testing.T, body map[string]any) (string, string) {
			part := findPart(t, lastOf(t, body, "messages")["content"], "image")
			if dig(t, part, "source", "type") != "base64" {
				t.Errorf("image source %v", part["source"])
			}
			return dig(t, part, "source", "media_type"), dig(t, part, "source", "data")
		},
		refused: refusedFile{"big.png", bigPNG, "big.png is 6.0 MiB: Anthropic models take images up to 5 MiB"},
	},
	{
		name: "gemini", model: "model: {provider: gemini, name: gemini-2.5-flash, base_url: URL}", keyEnv: "GEMINI_API_KEY", path: "/v1beta/models/gemini-2.5-flash:generateContent",
		answer: `{"candidates":[{"content":{"role":"model","parts":[{"text":"A cat."}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3,"totalTokenCount":13},"modelVersion":"gemini-2.5-flash"}`,
		image: func(t *testing.T, body map[string]any) (string, string) {
			parts, _ := lastOf(t, body, "contents")["parts"].([]any)
			for _, p := range parts {
				if m, _ := p.(map[string]any); m["inlineData"] != nil {
					return dig(t, m, "inlineData", "mimeType"), dig(t, m, "inlineData", "data")
				}
			}
			t.Fatalf("no inlineData part in %v", parts)
			return "", ""
		},
		refused: refusedFile{"anim.gif", gifHeader, "image/gif"},
	},
}

// An image given to exec --attach reaches every provider's request in that API's
// native form, its bytes unchanged; a part the API cannot take is refused before
// any request.
func TestExecAttachReachesEveryProviderNatively(t *testing.T) {
	for _, pw := range providerWires {
		t.Run(pw.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				if r.URL.Path != pw.path {
					t.Errorf("request to %s, want %s", r.URL.Path, pw.path)
					http.Error(w, "not found", http.StatusNotFound)
					return
				}
				var body map[string]any
				if err := json.Unmarshal(raw, &body); err != nil {
					t.Errorf("request body: %v", err)
				}
				mu.Lock()
				bodies = append(bodies, body)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, pw.answer)
			}))
			defer srv.Close()
			dir := t.TempDir()
			specPath := filepath.Join(dir, "agent.yaml")
			body := "version: 1\nname: looker\ninstructions: Describe what you are shown.\n" + strings.ReplaceAll(pw.model, "URL", srv.URL) + "\n"
			photo := filepath.Join(dir, "photo.png")
			if err := os.WriteFile(specPath, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(photo, pngHeader, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv(pw.keyEnv, "sk-test")
			refused := filepath.Join(dir, pw.refused.name)
			if err := os.WriteFile(refused, pw.refused.data, 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runCLI(t, "exec", "-q", specPath, "what is this?", "--attach", refused)
			if code != 1 || stdout != "" || !strings.Contains(stderr, "the agent's model cannot take it: ") || !strings.Contains(stderr, pw.refused.why) {
				t.Errorf("%s: exit %d, stdout %q, stderr %s", pw.refused.name, code, stdout, stderr)
			}
			if len(bodies) != 0 {
				t.Fatalf("the model was asked with a part it cannot take")
			}
			code, stdout, stderr = runCLI(t, "exec", "-q", specPath, "what is this?", "--attach", photo)
			if code != 0 || stdout != "A cat.\n" {
				t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
			}
			if len(bodies) != 1 {
				t.Fatalf("%d requests", len(bodies))
			}
			mediaType, data := pw.image(t, bodies[0])
			if mediaType != "image/png" || data != base64.StdEncoding.EncodeToString(pngHeader) {
				t.Errorf("the image went as %s %q", mediaType, data)
			}
		})
	}
}

// lastOf is the last element of the list under key, a JSON object.
func lastOf(t *testing.T, body map[string]any, key string) map[string]any {
	t.Helper()
	list, _ := body[key].([]any)
	if len(list) == 0 {
		t.Fatalf("no %s in %v", key, body)
	}
	last, _ := list[len(list)-1].(map[string]any)
	return last
}

// findPart is the content part of that type.
func findPart(t *testing.T, content any, typ string) map[string]any {
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

// dig is the string at the path of keys.
func dig(t *testing.T, v map[string]any, keys ...string) string {
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
func splitDataURL(t *testing.T, u string) (string, string) {
	t.Helper()
	head, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ";base64,")
	if !ok || !strings.HasPrefix(u, "data:") {
		t.Fatalf("not a base64 data URL: %.60s", u)
	}
	return head, data
}
