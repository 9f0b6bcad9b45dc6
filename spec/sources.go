package spec

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ExpandSources returns the files a knowledge source pattern names, relative to dir
// (the spec's directory) and slash-separated, sorted. A pattern is a path or a
// path.Match glob; a segment "**" matches any number of directories, and hidden
// directories (starting with ".") and node_modules are not entered by it. (WalkDir
// does not follow symlinks to directories; a symlinked file goes on to ReadFile.) A pattern without glob
// characters names one file, returned whether it exists or not (whoever reads it says
// so); a glob matching no file is a warning whose Pos.File is the pattern.
//
// It lives in spec so the checker and the indexer expand sources alike. err is an
// absolute or empty pattern, a bad glob or an unreadable directory; it does not name
// the pattern, which the caller reports it with.
func ExpandSources(dir, pattern string) (files []string, warnings Diagnostics, err error) {
	p := filepath.ToSlash(pattern)
	if p == "" || path.IsAbs(p) || filepath.IsAbs(pattern) {
		return nil, nil, errors.New("a knowledge source must be a path relative to the spec's directory")
	}
	p = path.Clean(p)
	segs := strings.Split(p, "/")
	lit := 0
	for lit < len(segs) && !HasGlobMeta(segs[lit]) {
		lit++
	}
	if lit == len(segs) {
		return []string{p}, nil, nil
	}
	prefix := path.Join(segs[:lit]...)
	rest := segs[lit:]
	for _, s := range rest {
		if _, err := path.Match(s, ""); err != nil {
			return nil, nil, fmt.Errorf("bad glob: %w", err)
		}
	}
	base := filepath.Join(dir, filepath.FromSlash(prefix))
	fsys := os.DirFS(base)
	var matches []string
	if slices.Contains(rest, "**") {
		err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				if name == "." && errors.Is(err, fs.ErrNotExist) {
					return fs.SkipAll
				}
				return err
			}
			if d.IsDir() {
				if name != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
					return fs.SkipDir
				}
				return nil
			}
			if matchSegments(rest, strings.Split(name, "/")) {
				matches = append(matches, name)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	} else {
		var err error
		if matches, err = fs.Glob(fsys, strings.Join(rest, "/")); err != nil {
			return nil, nil, err
		}
	}
	realBase, _ := realPath(base)
	for _, m := range matches {
		// Directories that a glob happens to match are not sources; anything else
		// (FIFOs, devices, symlinks to them) goes on to ReadFile, which refuses it.
		if info, err := fs.Stat(fsys, m); err == nil && info.IsDir() {
			continue
		}
		// A link out of the directory the glob searches would index whatever it
		// points to, and serve it to users through retrieval.
		if target, err := realPath(filepath.Join(base, filepath.FromSlash(m))); err == nil && !within(realBase, target) {
			warnings = append(warnings, Diagnostic{Severity: Warning, Pos: Pos{File: p},
				Message: fmt.Sprintf("%s is a symlink out of %s: skipped", path.Join(prefix, m), cmp.Or(prefix, "."))})
			continue
		}
		files = append(files, path.Join(prefix, m))
	}
	if len(files) == 0 {
		return nil, append(warnings, Diagnostic{Severity: Warning, Pos: Pos{File: p}, Message: fmt.Sprintf("glob %q matches no file", pattern)}), nil
	}
	sort.Strings(files)
	return files, warnings, nil
}

// HasGlobMeta reports whether a knowledge source pattern (or one of its segments) has
// glob characters; without them it names one file.
func HasGlobMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// matchSegments matches path segments against pattern segments where "**" stands
// for zero or more whole segments.
func matchSegments(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegments(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], name[0])
	return ok && matchSegments(pat[1:], name[1:])
}
