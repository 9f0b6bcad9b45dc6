package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/internal/providerwire"
)

// attachWorld is a spec on an OpenAI-compatible server that counts its requests,
// and files to attach.
type attachWorld struct {
	dir, spec string
	server    *openaitest.Server
}

func newAttachWorld(t *testing.T) *attachWorld {
	w := &attachWorld{dir: t.TempDir()}
	w.server = openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "A cat."} })
	w.spec = w.write(t, "agent.yaml", []byte("version: 1\nname: looker\ninstructions: Describe what you are shown.\n"+
		"model: {name: gpt-4o, base_url: "+w.server.URL+"/v1}\n"))
	t.Setenv("LLM_API_KEY", "sk-test")
	return w
}

func (w *attachWorld) write(t *testing.T, name string, data []byte) string {
	p := filepath.Join(w.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var pngHeader = providerwire.PNG

func TestExecAttachReachesTheRun(t *testing.T) {
	w := newAttachWorld(t)
	photo := w.write(t, "photo.png", pngHeader)
	code, stdout, stderr := runCLI(t, "exec", "--model", "test", "--json", "-q", w.spec, "what is this?",
		"--attach", photo, "--attach", "https://example.com/bill.pdf")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Messages []struct {
			Role  string
			Parts []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	parts := res.Messages[0].Parts
	if len(parts) != 2 || parts[0]["name"] != "photo.png" || parts[0]["media_type"] != "image/png" ||
		parts[0]["size"] != float64(len(pngHeader)) || parts[0]["data"] != nil ||
		parts[1]["url"] != "https://example.com/bill.pdf" || parts[1]["kind"] != "file" {
		t.Errorf("the run's user message has parts %v", parts)
	}
}

func TestExecAttachRefusedBeforeAnyModelCall(t *testing.T) {
	w := newAttachWorld(t)
	photo := w.write(t, "photo.png", pngHeader)
	jpegNamedPNG := w.write(t, "fake.png", append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), make([]byte, 20)...))
	notes := w.write(t, "notes.txt", []byte("remember the milk\n"))
	zip := w.write(t, "a.zip", []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"))
	big := w.write(t, "big.txt", []byte(strings.Repeat("a", 20<<20+1)))
	var many []string
	for range 11 {
		many = append(many, "--attach", photo)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing file", []string{"--attach", filepath.Join(w.dir, "nope.png")}, 2, "--attach: attachment " + filepath.Join(w.dir, "nope.png") + ": no such file or directory"},
		{"mismatched name", []string{"--attach", jpegNamedPNG}, 2, "--attach: attachment fake.png: its name says image/png but its content is image/jpeg"},
		{"unsupported", []string{"--attach", zip}, 2, "--attach: attachment a.zip: application/zip is not a type that can be attached (accepted: image/png, image/jpeg, image/gif, image/webp, application/pdf, text/plain)"},
		{"oversized", []string{"--attach", big}, 2, "--attach: attachment big.txt: 20971521 bytes is over the limit of 20 MB a part"},
		{"too many", many, 2, "--attach: attachment: 11 attachments are more than the limit of 10"},
		// attach accepts text files, but OpenAI takes only images and PDFs, and
		// chat completions take a PDF only as bytes (model.PartTaker): the run is
		// refused, not sent without them.
		{"a type the model cannot take", []string{"--attach", notes}, 1, "attachment notes.txt (text/plain): the agent's model cannot take it: file \"notes.txt\" is text/plain; OpenAI takes PDF files only"},
		{"a PDF by URL on chat completions", []string{"--attach", "https://example.com/bill.pdf"}, 1, "the agent's model cannot take it: file \"bill.pdf\" comes by URL; chat completions take files only as data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"exec", "-q", w.spec, "what is this?"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tc.code, tc.want)
			}
		})
	}
	if n := len(w.server.Requests()); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
}
