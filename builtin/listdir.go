package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// listDir lists a directory of its root: directories with a trailing /, files with
// their size.
type listDir struct {
	name       string
	root       string
	maxEntries int
}

type listDirConfig struct {
	Root       string `with:"root"`
	MaxEntries int    `with:"max_entries"`
}

func newListDir(t *spec.Tool, dir string) (tool.Tool, error) {
	cfg := listDirConfig{Root: ".", MaxEntries: 500}
	if err := decodeWith("list_dir", t.With, &cfg); err != nil {
		return nil, err
	}
	root, err := resolveLimitedRoot(cfg.Root, dir, "max_entries", cfg.MaxEntries)
	if err != nil {
		return nil, err
	}
	return &listDir{name: toolName(t, "list_dir"), root: root, maxEntries: cfg.MaxEntries}, nil
}

func (l *listDir) Describe() tool.Info {
	return tool.Info{
		Description: "List a directory: subdirectories end with /, files show their size. " +
			"Paths are relative to the tool's root directory; \".\" is the root itself.",
		Parameters: objectSchema(map[string]any{
			"path": map[string]any{
				"type":        "string",
				"description": "Directory to list, relative to the root. Default \".\".",
				"default":     ".",
				"examples":    []any{"."},
			},
		}),
	}
}

func (l *listDir) Call(ctx context.Context, in tool.Input) (string, error) {
	p, ok, err := stringArg(in.Args, "path")
	if err != nil {
		return "", err
	}
	if !ok || p == "" {
		p = "."
	}
	rel, err := localPath(p)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(l.root)
	if err != nil {
		return "", fmt.Errorf("the tool's root is not available: %v", err)
	}
	defer root.Close()

	shown := displayPath(rel)
	st, err := root.Stat(rel)
	if err != nil {
		return "", pathError(shown, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is a file, not a directory", shown)
	}
	d, err := root.Open(rel)
	if err != nil {
		return "", pathError(shown, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return "", pathError(shown, err)
	}
	if len(entries) == 0 {
		return "(empty directory)", nil
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })

	var out strings.Builder
	for i, e := range entries {
		if i == l.maxEntries {
			fmt.Fprintf(&out, "[… %d more entries not shown; list a subdirectory to narrow it down]\n", len(entries)-i)
			break
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		out.WriteString(describeEntry(root, filepath.Join(rel, e.Name()), e))
		out.WriteByte('\n')
	}
	return out.String(), nil
}

// describeEntry renders one entry. A symbolic link shows what it leads to when that
// is inside the root, so the model knows whether it can list or read it.
func describeEntry(root *os.Root, rel string, e os.DirEntry) string {
	name := e.Name()
	switch {
	case e.IsDir():
		return name + "/"
	case e.Type()&os.ModeSymlink != 0:
		st, err := root.Stat(rel)
		switch {
		case escapesRoot(err):
			return name + "  (symbolic link leading outside the root)"
		case err != nil:
			return name + "  (broken symbolic link)"
		case st.IsDir():
			return name + "/  (symbolic link)"
		default:
			return fmt.Sprintf("%s  (%s, symbolic link)", name, byteCount(st.Size()))
		}
	case e.Type().IsRegular():
		info, err := e.Info()
		if err != nil {
			return name
		}
		return fmt.Sprintf("%s  (%s)", name, byteCount(info.Size()))
	default:
		return name + "  (special file)"
	}
}
