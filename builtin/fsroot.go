package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// resolveLimitedRoot checks a file tool's size or count limit, then resolves its root.
func resolveLimitedRoot(root, dir, limitKey string, limit int) (string, error) {
	if limit < 1 {
		return "", fmt.Errorf("with.%s must be at least 1, not %d", limitKey, limit)
	}
	return resolveRoot(root, dir)
}

// fileTool is what read_file and write_file share: the name the model calls, the
// root they stay inside (absolute; opened per call so no descriptor outlives a run)
// and the most bytes a call reads or writes.
type fileTool struct {
	name     string
	root     string
	maxBytes int
}

// fileConfig is the with: of read_file and write_file.
type fileConfig struct {
	Root     string `with:"root"`
	MaxBytes int    `with:"max_bytes"`
}

// newFileTool reads a file tool's with: over its defaults. A tool that writes has
// no default root: the spec must say where, so writing is never enabled by accident.
func newFileTool(t *spec.Tool, dir, builtin string, cfg fileConfig, writes bool) (fileTool, error) {
	if err := decodeWith(builtin, t.With, &cfg); err != nil {
		return fileTool{}, err
	}
	if writes && cfg.Root == "" {
		return fileTool{}, fmt.Errorf("%s needs with.root, the directory it may write in; "+
			"there is no default, so that writing is never enabled by accident", builtin)
	}
	root, err := resolveLimitedRoot(cfg.Root, dir, "max_bytes", cfg.MaxBytes)
	return fileTool{name: toolName(t, builtin), root: root, maxBytes: cfg.MaxBytes}, err
}

// pathParameter is the path argument of the file tools.
func pathParameter(what, example string) map[string]any {
	return map[string]any{
		"type":        "string",
		"description": "Path of the " + what + ", relative to the root, with / as separator.",
		"examples":    []any{example},
	}
}

// resolveRoot turns a configured root into an absolute directory that exists. A
// relative root is relative to the spec file's directory, not to wherever agentrun
// runs, so a spec means the same files from any working directory.
func resolveRoot(root, dir string) (string, error) {
	if root == "" {
		return "", errors.New("with.root must not be empty")
	}
	p := root
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("with.root %q: %v", root, err)
	}
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("with.root: directory %q does not exist (relative paths start at the spec file's directory)", root)
	case err != nil:
		return "", fmt.Errorf("with.root %q: %v", root, errors.Unwrap(err))
	case !st.IsDir():
		return "", fmt.Errorf("with.root: %q is not a directory", root)
	}
	r, err := os.OpenRoot(p)
	if err != nil {
		return "", fmt.Errorf("with.root: %v", err)
	}
	r.Close()
	return p, nil
}

// localPath checks a path the model gave before anything touches the disk, so the
// common escapes get a clear message. os.Root enforces the same rule again, and also
// for symlinks, which no lexical check can see.
func localPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("the path is empty; give a path relative to the tool's root, like README.md")
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%s is outside the tool's root: absolute paths are not allowed; give a path relative to the root", p)
	}
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%s is outside the tool's root; give a path inside it, without leading ..", p)
	}
	return filepath.Clean(p), nil
}

// pathError turns an error of an os.Root operation on p into a message for the model,
// without the absolute path of the root.
func pathError(p string, err error) error {
	switch {
	case escapesRoot(err):
		return fmt.Errorf("%s is outside the tool's root (a symbolic link leads out of it)", p)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", p, pe.Err)
	}
	return fmt.Errorf("%s: %v", p, err)
}

// escapesRoot reports whether os.Root refused a path for leaving the root. The os
// package does not export that error, so its text is the only way to tell.
func escapesRoot(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// displayPath shows a cleaned relative path with forward slashes, as the model wrote it.
func displayPath(rel string) string {
	return filepath.ToSlash(rel)
}
