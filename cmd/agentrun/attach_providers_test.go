package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/providerwire"
)

// An image given to exec --attach reaches every provider's request in that API's
// native form, its bytes unchanged; a part the API cannot take is refused before
// any request.
func TestExecAttachReachesEveryProviderNatively(t *testing.T) {
	for _, pw := range providerwire.Wires {
		t.Run(pw.Name, func(t *testing.T) {
			srv := providerwire.Serve(t, pw)
			dir := t.TempDir()
			specPath := filepath.Join(dir, "agent.yaml")
			photo := filepath.Join(dir, "photo.png")
			refused := filepath.Join(dir, pw.Refused.Name)
			for path, data := range map[string][]byte{specPath: []byte(srv.Spec(pw, "looker")), photo: pngHeader, refused: pw.Refused.Data} {
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(pw.KeyEnv, "sk-test")
			code, stdout, stderr := runCLI(t, "exec", "-q", specPath, "what is this?", "--attach", refused)
			if code != 1 || stdout != "" || !strings.Contains(stderr, "the agent's model cannot take it: ") || !strings.Contains(stderr, pw.Refused.Why) {
				t.Errorf("%s: exit %d, stdout %q, stderr %s", pw.Refused.Name, code, stdout, stderr)
			}
			if len(srv.Bodies()) != 0 {
				t.Fatalf("the model was asked with a part it cannot take")
			}
			code, stdout, stderr = runCLI(t, "exec", "-q", specPath, "what is this?", "--attach", photo)
			if code != 0 || stdout != "A cat.\n" {
				t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
			}
			bodies := srv.Bodies()
			if len(bodies) != 1 {
				t.Fatalf("%d requests", len(bodies))
			}
			mediaType, data := pw.Image(t, bodies[0])
			if mediaType != "image/png" || data != base64.StdEncoding.EncodeToString(pngHeader) {
				t.Errorf("the image went as %s %q", mediaType, data)
			}
		})
	}
}
