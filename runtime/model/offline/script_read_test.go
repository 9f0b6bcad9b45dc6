//go:build unix

package offline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/spec"
)

// TestLoadScriptSpecialFiles: `--model script:/dev/zero` or a FIFO fails at once with
// an error that names the file, and a script past MaxScriptSize is refused before
// it is parsed.
func TestLoadScriptSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "turns.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	content := "turns: [{text: hi}]\n#" + strings.Repeat("x", MaxScriptSize)
	if err := os.WriteFile(big, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path, err string }{
		{"device", "/dev/zero", "/dev/zero is a character device, not a regular file"},
		{"FIFO", fifo, fifo + " is a named pipe (FIFO), not a regular file"},
		{"over the cap", big, big + " is larger than 16 MiB, the most agentrun reads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := LoadScript(tt.path)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				var notRegular *spec.NotRegularError
				var tooLarge *spec.TooLargeError
				if !errors.As(err, &notRegular) && !errors.As(err, &tooLarge) {
					t.Errorf("error %T is neither *spec.NotRegularError nor *spec.TooLargeError", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("LoadScript still reading after a minute")
			}
		})
	}
}
