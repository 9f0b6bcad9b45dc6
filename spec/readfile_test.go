//go:build unix

package spec

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/unprivileged"
)

// finishes fails the test when f has not returned after a minute: reading a FIFO or
// /dev/zero must end, and a generous deadline says so without timing anything.
func finishes(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("still reading after a minute: a special file was read without limit or blocked")
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
}

// mksocket leaves a Unix socket file at path.
func mksocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("cannot make a socket here: %v", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	writeFile(t, at("small.yaml"), "name: x\n")
	writeFile(t, at("at-cap.yaml"), strings.Repeat("x", 1024))
	writeFile(t, at("over-cap.yaml"), strings.Repeat("x", 1025))
	mkfifo(t, at("fifo.yaml"))
	mksocket(t, at("sock.yaml"))
	if err := os.Symlink("/dev/zero", at("zero.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("small.yaml", at("link.yaml")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       string // the content read, when no error is expected
		err        string // the error's text
	}{
		{name: "regular file", path: at("small.yaml"), want: "name: x\n"},
		{name: "symlink to a regular file", path: at("link.yaml"), want: "name: x\n"},
		{name: "exactly at the cap", path: at("at-cap.yaml"), want: strings.Repeat("x", 1024)},
		{name: "one byte over the cap", path: at("over-cap.yaml"), err: at("over-cap.yaml") + " is larger than 1 KiB, the most agentrun reads"},
		{name: "FIFO", path: at("fifo.yaml"), err: at("fifo.yaml") + " is a named pipe (FIFO), not a regular file; agentrun reads only regular files"},
		{name: "socket", path: at("sock.yaml"), err: at("sock.yaml") + " is a socket, not a regular file"},
		{name: "device", path: "/dev/zero", err: "/dev/zero is a character device, not a regular file"},
		{name: "symlink to a device", path: at("zero.yaml"), err: at("zero.yaml") + " is a symlink to /dev/zero, a character device, not a regular file"},
		{name: "directory", path: dir, err: dir + " is a directory, not a regular file"},
		{name: "missing", path: at("nope.yaml"), err: "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			var err error
			finishes(t, func() { got, err = ReadFile(tt.path, 1024) })
			if tt.err == "" {
				if err != nil || string(got) != tt.want {
					t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, len(tt.want))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// TestReadFileCapsTheRead reads a file whose size on disk says nothing of its
// content: /proc files stat as empty. The cap must hold for what is read, not only
// for what stat said.
func TestReadFileCapsTheRead(t *testing.T) {
	const proc = "/proc/self/status"
	if info, err := os.Stat(proc); err != nil || info.Size() != 0 {
		t.Skip("no /proc with empty-looking files here")
	}
	_, err := ReadFile(proc, 16)
	if _, ok := errors.AsType[*TooLargeError](err); !ok {
		t.Fatalf("error %v, want a *TooLargeError", err)
	}
	if b, err := ReadFile(proc, 1<<20); err != nil || len(b) == 0 {
		t.Fatalf("below the cap: %d bytes, %v", len(b), err)
	}
}

// TestLoadFileSizeCap proves the cap a spec gets: a spec of exactly MaxFileSize loads,
// one byte more is refused with a message that says the limit.
func TestLoadFileSizeCap(t *testing.T) {
	const spec = "version: 1\nname: big\nmodel: {provider: test}\n"
	dir := t.TempDir()
	padded := func(size int) string {
		line := "# " + strings.Repeat("x", 97) + "\n" // 100 bytes: a spec with a long comment
		pad := size - len(spec)
		return spec + strings.Repeat(line, pad/len(line)) + "#" + strings.Repeat("x", pad%len(line)-1)
	}
	l := newTestLoader(t)

	atCap := filepath.Join(dir, "at-cap", "agent.yaml")
	writeFile(t, atCap, padded(MaxFileSize))
	r := l.LoadFile(atCap)
	if r.ReadErr != nil || r.Spec == nil || r.Diagnostics.HasErrors() {
		t.Fatalf("a spec of exactly %d bytes: %v %v", MaxFileSize, r.ReadErr, r.Diagnostics)
	}

	over := filepath.Join(dir, "over", "agent.yaml")
	writeFile(t, over, padded(MaxFileSize+1))
	r = l.LoadFile(over)
	if _, ok := errors.AsType[*TooLargeError](r.ReadErr); !ok {
		t.Fatalf("read error %v, want a *TooLargeError", r.ReadErr)
	}
	want := Diagnostics{{Severity: Error, Pos: Pos{File: over}, Message: "agent.yaml is larger than 4 MiB, the most agentrun reads"}}
	if r.Diagnostics.Error() != want.Error() {
		t.Errorf("diagnostics:\n%v\nwant:\n%v", r.Diagnostics, want)
	}
}

// TestSpecialFilesInSkillsAndTests gives the other readers of the spec package a
// FIFO and /dev/zero: each is refused at once with an error in its place.
func TestSpecialFilesInSkillsAndTests(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	// A skill whose skill.yaml is /dev/zero, and one whose instructions_file is a FIFO.
	if err := os.MkdirAll(at("zero-skill"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", at("zero-skill/skill.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, at("fifo-skill/skill.yaml"), "name: fifo\ndescription: Reads a FIFO.\ninstructions_file: notes.md\n")
	mkfifo(t, at("fifo-skill/notes.md"))
	writeFile(t, at("agent.yaml"), "version: 1\nname: a\nmodel: {provider: test}\nskills: [./zero-skill, ./fifo-skill]\n")
	mkfifo(t, at("fifo.test.yaml"))

	l := newTestLoader(t)
	var r Result
	var testDiags Diagnostics
	finishes(t, func() {
		r = l.LoadFile(at("agent.yaml"))
		_, testDiags = l.LoadTestFile(at("fifo.test.yaml"))
	})
	for _, want := range []string{
		`skill "./zero-skill": skill.yaml is a symlink to /dev/zero, a character device, not a regular file`,
		"notes.md is a named pipe (FIFO), not a regular file",
	} {
		if !strings.Contains(r.Diagnostics.Error(), want) {
			t.Errorf("agent diagnostics lack %q:\n%v", want, r.Diagnostics)
		}
	}
	if len(testDiags) != 1 || testDiags[0].Pos.File != at("fifo.test.yaml") ||
		testDiags[0].Message != "fifo.test.yaml is a named pipe (FIFO), not a regular file; agentrun reads only regular files" {
		t.Errorf("test file diagnostics: %v", testDiags)
	}
}

// TestFindFiles walks a directory holding what a hostile pull request could commit:
// only the regular files inside the tree are taken, each special file is a warning
// with its path, and nothing under node_modules, .git or hidden directories is seen.
func TestFindFiles(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "repo")
	at := func(name string) string { return filepath.Join(root, name) }
	writeFile(t, at("sub/good.yaml"), "version: 1\n")
	writeFile(t, at("node_modules/pkg/agent.yaml"), "x\n")
	writeFile(t, at(".git/agent.yaml"), "x\n")
	writeFile(t, at(".hidden/agent.yaml"), "x\n")
	writeFile(t, at("sub/checks.yaml"), "agent: good.yaml\ncases: []\n") // a scenario test by its keys: left out, no warning
	writeFile(t, filepath.Join(base, "outside.yaml"), "version: 1\n")
	for link, target := range map[string]string{
		"agent.yaml": "/dev/zero",
		"out.yaml":   "../outside.yaml",
		"in.yaml":    "sub/good.yaml",
		"dir.yaml":   "sub",
	} {
		if err := os.Symlink(target, at(link)); err != nil {
			t.Fatal(err)
		}
	}
	mkfifo(t, at("x.yaml"))
	mkfifo(t, at("not-yaml.txt")) // not matched: no warning either
	mksocket(t, at("s.yaml"))

	var files []string
	var diags Diagnostics
	var err error
	finishes(t, func() { files, diags, err = SpecFiles([]string{root}) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{at("in.yaml"), at("sub/good.yaml")}; strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Errorf("files:\n%v\nwant:\n%v", files, want)
	}
	want := Diagnostics{
		{Severity: Warning, Pos: Pos{File: at("agent.yaml")}, Message: "skipped: a symlink to /dev/zero, a character device, not a regular file", Hint: "agentrun reads only regular files"},
		{Severity: Warning, Pos: Pos{File: at("dir.yaml")}, Message: "skipped: a symlink to " + realOf(t, at("sub")) + ", a directory, not a regular file", Hint: "agentrun reads only regular files"},
		{Severity: Warning, Pos: Pos{File: at("out.yaml")}, Message: "skipped: a symlink to " + realOf(t, filepath.Join(base, "outside.yaml")) + ", outside " + root,
			Hint: "a directory walk does not follow symlinks out of the directory; name the file itself to check it"},
		{Severity: Warning, Pos: Pos{File: at("s.yaml")}, Message: "skipped: a socket, not a regular file", Hint: "agentrun reads only regular files"},
		{Severity: Warning, Pos: Pos{File: at("x.yaml")}, Message: "skipped: a named pipe (FIFO), not a regular file", Hint: "agentrun reads only regular files"},
	}
	if got := diagLines(diags); got != diagLines(want) {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, diagLines(want))
	}

	// Named on the command line, a file is taken as it is: the reader decides.
	files, diags, err = SpecFiles([]string{at("out.yaml"), at("x.yaml")})
	if err != nil || len(diags) != 0 || len(files) != 2 {
		t.Errorf("explicit files: %v %v %v", files, diags, err)
	}
}

func realOf(t *testing.T, path string) string {
	t.Helper()
	p, err := realPath(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func diagLines(ds Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String() + " | hint: " + d.Hint + "\n")
	}
	return b.String()
}

// TestFindFilesNothingLeft: a directory whose only candidates were skipped is an
// error beside the warnings (CI must not pass on a tree it could not check); a
// directory without candidates at all stays the plain error it was; a hidden
// directory named on the command line is walked.
func TestFindFilesNothingLeft(t *testing.T) {
	dir := t.TempDir()
	onlyFIFO := filepath.Join(dir, "only-fifo")
	if err := os.Mkdir(onlyFIFO, 0o755); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, filepath.Join(onlyFIFO, "agent.yaml"))
	files, diags, err := SpecFiles([]string{onlyFIFO})
	if err != nil || len(files) != 0 || len(diags) != 2 || diags[1].Severity != Error ||
		diags[1].Pos.File != onlyFIFO || diags[1].Message != "no agent specs (*.yaml, *.yml) found" {
		t.Errorf("only a FIFO: %v %v %v", files, diags, err)
	}

	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := SpecFiles([]string{empty}); err == nil || !strings.Contains(err.Error(), "no agent specs") {
		t.Errorf("empty directory: %v", err)
	}

	hidden := filepath.Join(dir, ".agents")
	writeFile(t, filepath.Join(hidden, "a.yaml"), "version: 1\n")
	if files, _, err := SpecFiles([]string{hidden}); err != nil || len(files) != 1 {
		t.Errorf("hidden directory named on the command line: %v %v", files, err)
	}
}

// TestFindFilesUnreadableDirectory: a directory the walk cannot read is an error for
// its path, like an unreadable file, and its siblings are still found. CI runs as
// root, which chmod 000 does not stop; unprivileged drops root's override for the
// walking thread (Linux), and the test is skipped where that is impossible.
func TestFindFilesUnreadableDirectory(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a/agent.yaml"), "version: 1\n")
	writeFile(t, filepath.Join(root, "locked/agent.yaml"), "version: 1\n")
	writeFile(t, filepath.Join(root, "z/agent.yaml"), "version: 1\n")
	locked := filepath.Join(root, "locked")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })

	var files []string
	var diags Diagnostics
	var err error
	if perr := unprivileged.Run(func() { files, diags, err = SpecFiles([]string{root}) }); perr != nil {
		t.Skipf("cannot make a directory unreadable to this process: %v", perr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(root, "a/agent.yaml"), filepath.Join(root, "z/agent.yaml")}; strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Errorf("files: %v, want %v", files, want)
	}
	if len(diags) != 1 || diags[0].Severity != Error || diags[0].Pos.File != locked || diags[0].Message != "cannot open: permission denied" {
		t.Errorf("diagnostics: %v", diags)
	}
}
