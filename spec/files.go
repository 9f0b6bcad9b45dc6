package spec

import (
	"path/filepath"
	"slices"
	"strings"
)

// Files lists what on disk a loaded spec is made of, for a watcher that reloads it
// when one changes: the spec file; each skill's skill.yaml and instructions_file
// (not a bundled skill's); every file its knowledge sources name (FAQ files
// included) and, for a glob, the directory it searches, where a new file may
// appear; the script file of each scripted model (model, fallback, routing.model,
// judge.model); and, recursively and once each, the same for every sub-agent's
// spec (an agents entry whose spec did not load still lists its file). Paths are
// absolute, cleaned, sorted and unique.
//
// Left out are what the loader does not read: the knowledge index (written, not
// read, by indexing), and the programs of command tools and a skill's requires,
// which run afresh on every call.
func Files(sp *Spec) []string {
	f := fileSet{seen: map[string]bool{}}
	f.spec(sp)
	return f.sorted()
}

type fileSet struct {
	seen  map[string]bool
	specs []string // the spec files walked, so each is walked once
}

func (f *fileSet) add(p string) {
	if p == "" || strings.HasPrefix(p, BundledPrefix) {
		return
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	f.seen[filepath.Clean(p)] = true
}

// fromDir is p relative to dir unless it is absolute.
func fromDir(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, filepath.FromSlash(p))
}

func (f *fileSet) spec(sp *Spec) {
	if sp == nil {
		return
	}
	file := sp.Pos.File
	if abs, err := filepath.Abs(file); err == nil && file != "" {
		file = abs
	}
	if slices.Contains(f.specs, file) {
		return
	}
	f.specs = append(f.specs, file)
	f.add(file)
	dir := filepath.Dir(file)
	for _, ref := range sp.Skills {
		f.skill(dir, ref)
	}
	for _, col := range sp.Knowledge.Collections {
		f.sources(dir, col.Sources)
	}
	f.model(dir, &sp.Model)
	f.model(dir, sp.Routing.Model)
	if sp.Judge != nil {
		f.model(dir, sp.Judge.Model)
	}
	for _, a := range sp.Agents {
		switch {
		case a.Loaded != nil:
			f.spec(a.Loaded)
		case a.Spec != "":
			f.add(fromDir(dir, a.Spec))
		}
	}
}

func (f *fileSet) skill(dir string, ref SkillRef) {
	if p := ref.Pack; p != nil {
		if strings.HasPrefix(p.Dir, BundledPrefix) {
			return
		}
		f.add(p.Pos.File)
		if p.InstructionsFile != "" {
			f.add(fromDir(p.Dir, p.InstructionsFile))
		}
		return
	}
	if isSkillPath(ref.Use) { // not loaded: its file, once it is fixed or made
		f.add(filepath.Join(fromDir(dir, ref.Use), "skill.yaml"))
	}
}

// sources adds the files knowledge source patterns name now, and the directory a
// glob searches, where a file it would match may appear.
func (f *fileSet) sources(dir string, patterns []string) {
	for _, p := range patterns {
		files, _, err := ExpandSources(dir, p)
		if err != nil {
			continue
		}
		for _, name := range files {
			f.add(fromDir(dir, name))
		}
		if HasGlobMeta(p) {
			f.add(fromDir(dir, globBase(p)))
		}
	}
}

// globBase is the part of a glob pattern before its first segment with glob
// characters: the directory it searches ("." for none).
func globBase(pattern string) string {
	segs := strings.Split(filepath.ToSlash(filepath.Clean(pattern)), "/")
	var lit []string
	for _, s := range segs {
		if HasGlobMeta(s) {
			break
		}
		lit = append(lit, s)
	}
	if len(lit) == 0 {
		return "."
	}
	return strings.Join(lit, "/")
}

func (f *fileSet) model(dir string, m *Model) {
	if m == nil {
		return
	}
	if m.Script != "" {
		f.add(fromDir(dir, m.Script))
	}
	for i := range m.Fallback {
		f.model(dir, &m.Fallback[i])
	}
}

func (f *fileSet) sorted() []string {
	out := make([]string, 0, len(f.seen))
	for p := range f.seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
