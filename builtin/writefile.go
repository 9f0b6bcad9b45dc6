package builtin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// writeFile creates or replaces a file of its root. The root has no default: a spec
// that wants the model to write must say where.
type writeFile struct{ fileTool }

func newWriteFile(t *spec.Tool, dir string) (tool.Tool, error) {
	// No default root: a spec that wants the model to write must say where.
	ft, err := newFileTool(t, dir, "write_file", fileConfig{MaxBytes: 1 << 20}, true)
	if err != nil {
		return nil, err
	}
	return &writeFile{ft}, nil
}

func (w *writeFile) Describe() tool.Info {
	return tool.Info{
		Description: fmt.Sprintf("Create or replace a text file with the given content. Paths are "+
			"relative to the tool's root directory; missing parent directories are created. "+
			"The whole file is written at once (at most %s).", byteCount(int64(w.maxBytes))),
		Parameters: objectSchema(map[string]any{
			"path": pathParameter("file", "notes.txt"),
			"content": map[string]any{
				"type":        "string",
				"description": "The complete new content of the file.",
				"examples":    []any{"Hello, world!\n"},
			},
		}, "path", "content"),
	}
}

func (w *writeFile) Call(ctx context.Context, in tool.Input) (string, error) {
	p, err := requiredString(in.Args, "path")
	if err != nil {
		return "", err
	}
	content, err := requiredString(in.Args, "content")
	if err != nil {
		return "", err
	}
	if len(content) > w.maxBytes {
		return "", fmt.Errorf("the content is %s; %s writes at most %s per file",
			byteCount(int64(len(content))), w.name, byteCount(int64(w.maxBytes)))
	}
	rel, err := localPath(p)
	if err != nil {
		return "", err
	}
	shown := displayPath(rel)
	if rel == "." {
		return "", errors.New("the path names the root directory; give a file name, like notes.txt")
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(w.root)
	if err != nil {
		return "", fmt.Errorf("the tool's root is not available: %v", err)
	}
	defer root.Close()

	if parent := filepath.Dir(rel); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
				return "", fmt.Errorf("cannot create the directory %s for %s: part of that path is a file",
					displayPath(parent), shown)
			}
			return "", pathError(shown, err)
		}
	}
	perm, existed, err := w.target(root, rel, shown)
	if err != nil {
		return "", err
	}
	if err := writeAtomic(root, rel, []byte(content), perm, existed); err != nil {
		return "", pathError(shown, err)
	}
	verb := "created"
	if existed {
		verb = "replaced"
	}
	return fmt.Sprintf("%s %s (%s)", verb, shown, byteCount(int64(len(content)))), nil
}

// target checks what is at rel now and returns the permissions to keep. A symbolic
// link is refused: renaming over it would replace the link, not the file it names.
func (w *writeFile) target(root *os.Root, rel, shown string) (perm fs.FileMode, existed bool, err error) {
	st, err := root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0o644, false, nil
	case err != nil:
		return 0, false, pathError(shown, err)
	case st.Mode()&fs.ModeSymlink != 0:
		if _, err := root.Stat(rel); escapesRoot(err) {
			return 0, false, pathError(shown, err)
		}
		return 0, false, fmt.Errorf("%s is a symbolic link; write to the file it points to instead", shown)
	case st.IsDir():
		return 0, false, fmt.Errorf("%s is a directory, not a file", shown)
	case !st.Mode().IsRegular():
		return 0, false, fmt.Errorf("%s is not a regular file", shown)
	}
	return st.Mode().Perm(), true, nil
}

// writeAtomic writes a temporary file beside rel and renames it into place, so a
// reader never sees half a file and a failed write leaves the old one intact.
// keepPerm applies perm exactly, for a file that is replaced.
func writeAtomic(root *os.Root, rel string, data []byte, perm fs.FileMode, keepPerm bool) (err error) {
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".tmp-"+rand.Text()[:12])
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			root.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// OpenFile's permissions pass through the umask; a replaced file keeps its own.
	if keepPerm {
		if err := root.Chmod(tmp, perm); err != nil {
			return err
		}
	}
	return root.Rename(tmp, rel)
}
