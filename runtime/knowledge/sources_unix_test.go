//go:build unix

package knowledge

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

// A glob skips a symlink out of the directory it searches, with a warning: it would
// put whatever the link points to into the index.
func TestGlobSkipsSymlinksOutOfItsDirectory(t *testing.T) {
	dir := writeFiles(t, map[string]string{"docs/ok.md": "# A\n\ntext\n", "secret.md": "# Secret\n\nkey\n"})
	for link, target := range map[string]string{"docs/zero.md": "/dev/zero", "docs/secret.md": filepath.Join(dir, "secret.md")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Skipf("symlink: %v", err)
		}
	}
	chunks, warnings, err := ReadSources(dir, []string{"docs/*.md"}, ChunkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 1 || chunks[0].Source != "docs/ok.md" {
		t.Fatalf("chunks %+v", chunks)
	}
	if len(warnings) != 2 || !strings.Contains(warnings.Error(), "docs/secret.md is a symlink out of docs: skipped") {
		t.Fatalf("warnings %v", warnings)
	}
}

// TestReadSourcesRefusesSpecialFiles checks that a FIFO (which would block a read
// forever) or a symlink to /dev/zero (which never ends) is refused at once, named
// directly or matched by a glob.
func TestReadSourcesRefusesSpecialFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{"docs/ok.md": "# A\n\ntext\n"})
	if err := syscall.Mkfifo(filepath.Join(dir, "docs/pipe.md"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.txt")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	tests := []struct {
		name     string
		patterns []string
		want     string
	}{
		{"fifo named", []string{"docs/pipe.md"}, "docs/pipe.md: it is a named pipe (FIFO), not a regular file"},
		{"fifo by glob", []string{"docs/*.md"}, "docs/pipe.md: it is a named pipe (FIFO), not a regular file"},
		{"dev zero symlink", []string{"zero.txt"}, "zero.txt: it is a symlink to /dev/zero, a character device, not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type result struct{ err error }
			done := make(chan result, 1)
			go func() {
				_, _, err := ReadSources(dir, tt.patterns, ChunkOptions{})
				done <- result{err}
			}()
			select {
			case r := <-done:
				if r.err == nil || !strings.HasPrefix(r.err.Error(), tt.want) {
					t.Fatalf("error %v, want one starting %q", r.err, tt.want)
				}
				var nr *spec.NotRegularError
				if !errors.As(r.err, &nr) {
					t.Errorf("%v is not a *spec.NotRegularError", r.err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("ReadSources blocked on a special file")
			}
		})
	}
}
