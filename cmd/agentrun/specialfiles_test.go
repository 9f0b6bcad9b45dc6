//go:build unix

package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/unprivileged"
)

// hostileTree builds the directory a hostile pull request could commit for CI to
// validate: a symlink agent.yaml to /dev/zero, a FIFO and a socket named like specs,
// a symlink out of the tree, specs under node_modules, .git and a hidden directory,
// a directory nobody may read (when locked), one valid spec, one in-tree symlink to it
// and one spec with a typo. It returns the tree's root.
func hostileTree(t *testing.T, locked bool) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "repo")
	files := map[string]string{
		"sub/good.yaml":               "version: 1\nname: good\nmodel: {provider: test}\ntools: [{builtin: calculator}]\n",
		"sub/typo.yaml":               "version: 1\nname: typo\nmodle: {provider: test}\n",
		"node_modules/pkg/agent.yaml": "not: a spec\n",
		".git/agent.yaml":             "not: a spec\n",
		".hidden/agent.yaml":          "not: a spec\n",
		"../outside/agent.yaml":       "not: a spec\n",
	}
	if locked {
		files["locked/agent.yaml"] = "not: a spec\n"
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"agent.yaml": "/dev/zero", "out.yaml": "../outside/agent.yaml", "in.yaml": "sub/good.yaml"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "x.yaml"), 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	l, err := net.Listen("unix", filepath.Join(root, "s.yaml"))
	if err != nil {
		t.Skipf("cannot make a socket here: %v", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if locked {
		dir := filepath.Join(root, "locked")
		if err := os.Chmod(dir, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	return root
}

// runBounded runs the CLI unprivileged (so chmod 000 stops it even as root) and fails
// the test if it has not finished after a minute or allocated 100 MB: before the
// fix, /dev/zero took gigabytes and the FIFO never returned.
func runBounded(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	type outcome struct {
		code           int
		stdout, stderr string
		err            error
	}
	done := make(chan outcome, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	go func() {
		var o outcome
		o.err = unprivileged.Run(func() { o.code, o.stdout, o.stderr = runCLI(t, args...) })
		done <- o
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("agentrun %s still running after a minute", strings.Join(args, " "))
	}
	if o.err != nil {
		t.Fatalf("cannot drop root's file permission override: %v", o.err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 100<<20 {
		t.Errorf("agentrun %s allocated %d MB", strings.Join(args, " "), alloc>>20)
	}
	t.Logf("allocated %.1f MB", float64(alloc)/(1<<20))
	return o.code, o.stdout, o.stderr
}

// canLock reports whether a chmod 000 directory stops this test process: always as a
// user; as root only where unprivileged can drop the override (Linux).
func canLock() bool { return unprivileged.Run(func() {}) == nil }

// TestValidateHostileDirectory is the acceptance test of issue 14's special files:
// validate finishes in bounded time and memory, warns with the path of each special
// file, reports the unreadable directory as an error, never looks into node_modules,
// .git or hidden directories, and still checks the specs, in all three formats.
func TestValidateHostileDirectory(t *testing.T) {
	locked := canLock()
	if !locked {
		t.Log("chmod 000 does not stop this process: the unreadable directory is left out")
	}
	root := hostileTree(t, locked)
	at := func(name string) string { return filepath.Join(root, name) }
	wantCode := 1 // the typo
	if locked {
		wantCode = 2 // an unreadable directory is an I/O error, like an unreadable file
	}
	type diag struct{ file, severity, message string }
	want := []diag{
		{at("agent.yaml"), "warning", "skipped: a symlink to /dev/zero, a character device, not a regular file"},
		{at("out.yaml"), "warning", "skipped: a symlink to "},
		{at("s.yaml"), "warning", "skipped: a socket, not a regular file"},
		{at("x.yaml"), "warning", "skipped: a named pipe (FIFO), not a regular file"},
		{at("sub/typo.yaml"), "error", `unknown key "modle"`},
	}
	if locked {
		want = append(want, diag{at("locked"), "error", "cannot open: permission denied"})
	}
	// Every file that must stay unread holds "not: a spec", which would be an error.
	checkNotEntered := func(t *testing.T, out string) {
		for _, bad := range []string{"node_modules", ".git", ".hidden", `\"not\"`, `"not"`} {
			if strings.Contains(out, bad) {
				t.Errorf("output mentions %s:\n%s", bad, out)
			}
		}
	}

	t.Run("text", func(t *testing.T) {
		code, stdout, stderr := runBounded(t, "validate", root)
		if code != wantCode {
			t.Errorf("exit %d, want %d; stderr: %s", code, wantCode, stderr)
		}
		for _, d := range want {
			found := false
			for line := range strings.Lines(stdout) {
				// file: or file:line:col:, then the severity and the message
				found = found || strings.HasPrefix(line, d.file+":") && strings.Contains(line, ": "+d.severity+": "+d.message)
			}
			if !found {
				t.Errorf("no %s %q for %s in:\n%s", d.severity, d.message, d.file, stdout)
			}
		}
		// good.yaml and the in-tree symlink to it are checked, and so is typo.yaml.
		if !strings.Contains(stdout, "3 files checked: ") {
			t.Errorf("want 3 files checked:\n%s", stdout)
		}
		checkNotEntered(t, stdout)
	})

	t.Run("json", func(t *testing.T) {
		code, stdout, _ := runBounded(t, "validate", "--format", "json", root)
		if code != wantCode {
			t.Errorf("exit %d, want %d", code, wantCode)
		}
		var out struct {
			Files       int
			Diagnostics []struct{ File, Severity, Message string }
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("%v:\n%s", err, stdout)
		}
		if out.Files != 3 {
			t.Errorf("files: %d, want 3", out.Files)
		}
		for _, d := range want {
			found := false
			for _, g := range out.Diagnostics {
				found = found || g.File == d.file && g.Severity == d.severity && strings.Contains(g.Message, d.message)
			}
			if !found {
				t.Errorf("no %s %q for %s in:\n%s", d.severity, d.message, d.file, stdout)
			}
		}
		checkNotEntered(t, stdout)
	})

	t.Run("github", func(t *testing.T) {
		code, stdout, _ := runBounded(t, "validate", "--format", "github", root)
		if code != wantCode {
			t.Errorf("exit %d, want %d", code, wantCode)
		}
		for _, d := range want {
			if prefix := "::" + d.severity + " file=" + ghProperty(d.file) + ","; !strings.Contains(stdout, prefix) {
				t.Errorf("no %q in:\n%s", prefix, stdout)
			}
		}
		checkNotEntered(t, stdout)
	})
}

// TestSpecialFilesOnTheCommandLine: a device, a FIFO or an oversized file named
// directly fails fast with an error that says what it is, for exec (the spec and the
// script), validate and test.
func TestSpecialFilesOnTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "agent.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("version: 1\n#"+strings.Repeat("x", 4<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	testsDir := filepath.Join(dir, "tests")
	if err := os.Mkdir(testsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(testsDir, "x.test.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := writeFile(t, "agent.yaml", "version: 1\nname: a\nmodel: {provider: test}\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stream string // "stdout" or "stderr"
		want   string
	}{
		{"exec /dev/zero", []string{"exec", "/dev/zero", "hi"}, 2, "stderr", "/dev/zero is a character device, not a regular file; agentrun reads only regular files"},
		{"exec a FIFO", []string{"exec", fifo, "hi"}, 2, "stderr", fifo + " is a named pipe (FIFO), not a regular file"},
		{"exec a script that is /dev/zero", []string{"exec", "--model", "script:/dev/zero", spec, "hi"}, 1, "stderr", "/dev/zero is a character device, not a regular file"},
		{"validate a FIFO", []string{"validate", fifo}, 2, "stdout", fifo + ": error: agent.yaml is a named pipe (FIFO), not a regular file"},
		{"validate past the cap", []string{"validate", big}, 2, "stdout", big + ": error: big.yaml is larger than 4 MiB, the most agentrun reads"},
		{"test a directory with a FIFO", []string{"test", testsDir}, 2, "stderr", filepath.Join(testsDir, "x.test.yaml") + ": warning: skipped: a named pipe (FIFO), not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runBounded(t, tt.args...)
			got := map[string]string{"stdout": stdout, "stderr": stderr}[tt.stream]
			if code != tt.code || !strings.Contains(got, tt.want) {
				t.Errorf("exit %d, %s:\n%s\nwant exit %d and %q (stdout: %s)", code, tt.stream, got, tt.code, tt.want, stdout)
			}
		})
	}
}
