package builtin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/tool"
)

// fsFixture lays out base/root (the tools' root) beside base/outside, with symbolic
// links inside the root that lead out of it and one that stays inside.
func fsFixture(t *testing.T) (base, root string) {
	t.Helper()
	base = t.TempDir()
	root = filepath.Join(base, "root")
	writeFiles(t, base, map[string]string{
		"root/README.md":      "first\nsecond\nthird\n",
		"root/src/main.go":    "package main\n",
		"root/empty.txt":      "",
		"root/crlf.txt":       "one\r\ntwo\r\n",
		"root/bin.dat":        "ELF\x00\x01\x02",
		"root/emptydir/":      "",
		"outside/secret.txt":  "top secret\n",
		"outside/dir/x.txt":   "x\n",
		"root/notes/keep.txt": "keep\n",
	})
	symlink(t, "../outside/secret.txt", filepath.Join(root, "link_out"))
	symlink(t, "../outside", filepath.Join(root, "dirlink_out"))
	symlink(t, "README.md", filepath.Join(root, "link_in"))
	symlink(t, "src", filepath.Join(root, "dirlink_in"))
	symlink(t, filepath.Join(base, "outside", "secret.txt"), filepath.Join(root, "abslink_out"))
	return base, root
}

func TestFileToolsStayInsideTheRoot(t *testing.T) {
	base, root := fsFixture(t)
	read := mustBuild(t, "read_file", map[string]any{"root": root}, "")
	list := mustBuild(t, "list_dir", map[string]any{"root": root}, "")
	write := mustBuild(t, "write_file", map[string]any{"root": root}, "")
	tests := []struct {
		name string
		tool tool.Tool
		args map[string]any
	}{
		{"read parent", read, map[string]any{"path": "../outside/secret.txt"}},
		{"read parent via a subdirectory", read, map[string]any{"path": "src/../../outside/secret.txt"}},
		{"read absolute", read, map[string]any{"path": "/etc/passwd"}},
		{"read absolute path of a file inside", read, map[string]any{"path": filepath.Join(root, "README.md")}},
		{"read symlink leading out", read, map[string]any{"path": "link_out"}},
		{"read absolute symlink leading out", read, map[string]any{"path": "abslink_out"}},
		{"read through a symlinked directory that escapes", read, map[string]any{"path": "dirlink_out/secret.txt"}},
		{"list parent", list, map[string]any{"path": ".."}},
		{"list absolute", list, map[string]any{"path": "/etc"}},
		{"list a symlinked directory that escapes", list, map[string]any{"path": "dirlink_out"}},
		{"list through a symlinked directory that escapes", list, map[string]any{"path": "dirlink_out/dir"}},
		{"write parent", write, map[string]any{"path": "../x", "content": "pwned"}},
		{"write absolute", write, map[string]any{"path": "/etc/passwd", "content": "pwned"}},
		{"write over a symlink leading out", write, map[string]any{"path": "link_out", "content": "pwned"}},
		{"write through a symlinked directory that escapes", write, map[string]any{"path": "dirlink_out/new.txt", "content": "pwned"}},
		{"write a new directory through an escaping symlink", write, map[string]any{"path": "dirlink_out/sub/new.txt", "content": "pwned"}},
		{"write into an existing directory through an escaping symlink", write, map[string]any{"path": "dirlink_out/dir/x.txt", "content": "pwned"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := call(tt.tool, tt.args)
			if err == nil {
				t.Fatalf("want a refusal, got %q", out)
			}
			wantErrContains(t, err, "outside the tool's root")
			// The root's location is none of the model's business, unless it gave it.
			if strings.Contains(err.Error(), base) && !strings.Contains(tt.args["path"].(string), base) {
				t.Errorf("error reveals the absolute path: %v", err)
			}
		})
	}
	// Nothing outside the root changed.
	for name, want := range map[string]string{"secret.txt": "top secret\n", "dir/x.txt": "x\n"} {
		got, err := os.ReadFile(filepath.Join(base, "outside", name))
		if err != nil || string(got) != want {
			t.Errorf("outside/%s = %q, %v", name, got, err)
		}
	}
	for _, name := range []string{"new.txt", "sub", "../x"} {
		if _, err := os.Lstat(filepath.Join(base, "outside", name)); err == nil {
			t.Errorf("outside/%s was created", name)
		}
	}
	if fi, err := os.Lstat(filepath.Join(root, "link_out")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link_out was replaced: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	_, root := fsFixture(t)
	long := strings.Repeat("x", 300)
	writeFiles(t, root, map[string]string{
		"ten.txt":     "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
		"long.txt":    long + "\nafter\n",
		"utf8.txt":    strings.Repeat("é", 100) + "\n",
		"latenul.txt": strings.Repeat("a\n", 5000) + "b\x00c\n",
	})
	tests := []struct {
		name     string
		maxBytes int
		args     map[string]any
		want     string // exact output
	}{
		{"numbered lines", 0, map[string]any{"path": "README.md"}, "   1\tfirst\n   2\tsecond\n   3\tthird\n"},
		{"./ and inner .. are fine", 0, map[string]any{"path": "./src/../README.md", "limit": 1.0},
			"   1\tfirst\n[… lines 1-1 shown, the file goes on; to read on, call read_file with offset=2]\n"},
		{"offset and limit", 0, map[string]any{"path": "ten.txt", "offset": 4.0, "limit": 2.0},
			"   4\t4\n   5\t5\n[… lines 4-5 shown, the file goes on; to read on, call read_file with offset=6]\n"},
		{"limit reaching the end has no marker", 0, map[string]any{"path": "ten.txt", "offset": 9.0, "limit": 2.0},
			"   9\t9\n  10\t10\n"},
		{"max_bytes cuts with a marker; a line that just fits is kept", 28, map[string]any{"path": "ten.txt"},
			"   1\t1\n   2\t2\n   3\t3\n   4\t4\n[… cut at 28 bytes: lines 1-4 shown, the file goes on; to read on, call read_file with offset=5]\n"},
		{"max_bytes cut after an offset", 20, map[string]any{"path": "ten.txt", "offset": 5.0},
			"   5\t5\n   6\t6\n[… cut at 20 bytes: lines 5-6 shown, the file goes on; to read on, call read_file with offset=7]\n"},
		{"one line longer than max_bytes", 20, map[string]any{"path": "long.txt"},
			"   1\t" + long[:15] + "\n[… line 1 is longer than 20 bytes and was cut; to read on, call read_file with offset=2]\n"},
		{"a cut never splits a character", 10, map[string]any{"path": "utf8.txt"},
			"   1\téé\n[… line 1 is longer than 10 bytes and was cut]\n"},
		{"CRLF line endings", 0, map[string]any{"path": "crlf.txt"}, "   1\tone\n   2\ttwo\n"},
		{"empty file", 0, map[string]any{"path": "empty.txt"}, "(empty file)"},
		{"symlink inside the root", 0, map[string]any{"path": "link_in", "limit": 1.0},
			"   1\tfirst\n[… lines 1-1 shown, the file goes on; to read on, call read_file with offset=2]\n"},
		{"through a symlinked directory inside the root", 0, map[string]any{"path": "dirlink_in/main.go"}, "   1\tpackage main\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			with := map[string]any{"root": root}
			if tt.maxBytes > 0 {
				with["max_bytes"] = tt.maxBytes
			}
			got, err := call(mustBuild(t, "read_file", with, ""), tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestReadFileErrors(t *testing.T) {
	_, root := fsFixture(t)
	writeFiles(t, root, map[string]string{"latenul.txt": strings.Repeat("a\n", 5000) + "b\x00c\n"})
	read := mustBuild(t, "read_file", map[string]any{"root": root}, "")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"binary file", map[string]any{"path": "bin.dat"}, "bin.dat is a binary file; read_file reads text files only"},
		{"NUL after the sniffed head", map[string]any{"path": "latenul.txt"}, "binary file (NUL byte on line 5001)"},
		{"directory", map[string]any{"path": "src"}, "src is a directory, not a file"},
		{"missing file", map[string]any{"path": "nope.txt"}, "nope.txt does not exist"},
		{"offset past the end", map[string]any{"path": "README.md", "offset": 10.0}, "offset 10 is past the end: README.md has 3 lines"},
		{"offset zero", map[string]any{"path": "README.md", "offset": 0.0}, "argument offset must be at least 1"},
		{"fractional limit", map[string]any{"path": "README.md", "limit": 1.5}, "argument limit must be an integer"},
		{"no path", map[string]any{}, "argument path is required"},
		{"empty path", map[string]any{"path": ""}, "the path is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(read, tt.args)
			wantErrContains(t, err, tt.want)
		})
	}
}

func TestReadFileUsesTheSpecName(t *testing.T) {
	_, root := fsFixture(t)
	tool := mustBuild(t, "read_file", map[string]any{"root": root}, "")
	tool.(*readFile).name = "read_docs" // as newReadFile sets it from the spec's name
	out, err := call(tool, map[string]any{"path": "README.md", "limit": 1.0})
	if err != nil || !strings.Contains(out, "call read_docs with offset=2") {
		t.Errorf("got %q, %v", out, err)
	}
}

func TestReadFileHonoursCancellation(t *testing.T) {
	_, root := fsFixture(t)
	tl := mustBuild(t, "read_file", map[string]any{"root": root}, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tl.Call(ctx, tool.Input{Args: map[string]any{"path": "README.md"}})
	wantErrContains(t, err, "canceled")
}

func TestListDir(t *testing.T) {
	_, root := fsFixture(t)
	tests := []struct {
		name       string
		maxEntries int
		args       map[string]any
		want       string
	}{
		{"root by default", 0, map[string]any{}, strings.Join([]string{
			"README.md  (19 bytes)",
			"abslink_out  (symbolic link leading outside the root)",
			"bin.dat  (6 bytes)",
			"crlf.txt  (10 bytes)",
			"dirlink_in/  (symbolic link)",
			"dirlink_out  (symbolic link leading outside the root)",
			"empty.txt  (0 bytes)",
			"emptydir/",
			"link_in  (19 bytes, symbolic link)",
			"link_out  (symbolic link leading outside the root)",
			"notes/",
			"src/",
		}, "\n") + "\n"},
		{"subdirectory", 0, map[string]any{"path": "src"}, "main.go  (13 bytes)\n"},
		{"through a symlink inside the root", 0, map[string]any{"path": "dirlink_in"}, "main.go  (13 bytes)\n"},
		{"empty directory", 0, map[string]any{"path": "emptydir"}, "(empty directory)"},
		{"max_entries cuts with a marker", 2, map[string]any{"path": "."},
			"README.md  (19 bytes)\nabslink_out  (symbolic link leading outside the root)\n" +
				"[… 10 more entries not shown; list a subdirectory to narrow it down]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			with := map[string]any{"root": root}
			if tt.maxEntries > 0 {
				with["max_entries"] = tt.maxEntries
			}
			got, err := call(mustBuild(t, "list_dir", with, ""), tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestListDirErrors(t *testing.T) {
	_, root := fsFixture(t)
	list := mustBuild(t, "list_dir", map[string]any{"root": root}, "")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"a file", map[string]any{"path": "README.md"}, "README.md is a file, not a directory"},
		{"missing", map[string]any{"path": "nope"}, "nope does not exist"},
		{"wrong type", map[string]any{"path": 1.0}, "argument path must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(list, tt.args)
			wantErrContains(t, err, tt.want)
		})
	}
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		content string
		want    string // the tool's answer
		file    string // where the content must land, relative to the root
	}{
		{"new file", "out.txt", "hello\n", "created out.txt (6 bytes)", "out.txt"},
		{"creates parent directories", "a/b/c.txt", "deep", "created a/b/c.txt (4 bytes)", "a/b/c.txt"},
		{"replaces a file", "notes/keep.txt", "new", "replaced notes/keep.txt (3 bytes)", "notes/keep.txt"},
		{"empty content", "empty.md", "", "created empty.md (0 bytes)", "empty.md"},
		{"through a symlinked directory inside the root", "dirlink_in/gen.go", "package main // gen\n", "created dirlink_in/gen.go (20 bytes)", "src/gen.go"},
		{"a clean path", "./x/../y.txt", "y", "created y.txt (1 byte)", "y.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, root := fsFixture(t)
			write := mustBuild(t, "write_file", map[string]any{"root": root}, "")
			got, err := call(write, map[string]any{"path": tt.path, "content": tt.content})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(tt.file)))
			if err != nil || string(data) != tt.content {
				t.Errorf("%s holds %q, %v; want %q", tt.file, data, err, tt.content)
			}
			// The temporary file is gone after the rename.
			entries, _ := os.ReadDir(filepath.Dir(filepath.Join(root, filepath.FromSlash(tt.file))))
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
		})
	}
}

func TestWriteFileKeepsPermissions(t *testing.T) {
	_, root := fsFixture(t)
	p := filepath.Join(root, "run.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o750); err != nil {
		t.Fatal(err)
	}
	write := mustBuild(t, "write_file", map[string]any{"root": root}, "")
	if _, err := call(write, map[string]any{"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("mode %v, %v; want 0750", fi.Mode(), err)
	}
}

func TestWriteFileErrors(t *testing.T) {
	_, root := fsFixture(t)
	write := mustBuild(t, "write_file", map[string]any{"root": root, "max_bytes": 10}, "")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"content over max_bytes", map[string]any{"path": "big.txt", "content": "12345678901"}, "the content is 11 bytes; write_file writes at most 10 bytes"},
		{"a directory", map[string]any{"path": "src", "content": "x"}, "src is a directory, not a file"},
		{"the root itself", map[string]any{"path": ".", "content": "x"}, "the path names the root directory"},
		{"a symlink inside the root", map[string]any{"path": "link_in", "content": "x"}, "link_in is a symbolic link; write to the file it points to instead"},
		{"a parent that is a file", map[string]any{"path": "README.md/x.txt", "content": "x"}, "cannot create the directory README.md for README.md/x.txt: part of that path is a file"},
		{"missing content", map[string]any{"path": "a.txt"}, "argument content is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(write, tt.args)
			wantErrContains(t, err, tt.want)
		})
	}
	if _, err := os.Stat(filepath.Join(root, "big.txt")); err == nil {
		t.Error("big.txt was written despite the size limit")
	}
	if data, _ := os.ReadFile(filepath.Join(root, "README.md")); string(data) != "first\nsecond\nthird\n" {
		t.Errorf("README.md changed: %q", data)
	}
}
