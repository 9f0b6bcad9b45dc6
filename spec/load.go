package spec

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Loader loads and checks spec files. It is safe for concurrent use; build it once.
type Loader struct {
	schemas *schemas
	// LookupEnv resolves ${VAR}; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// Bundled holds the bundled skill packs, one directory per skill with its
	// skill.yaml; nil for none.
	Bundled fs.FS
	// FAQQuestions reads the questions and variants of an FAQ source file, for
	// the warning of routing rules that take them from a cached intent; nil skips
	// that check (the spec package cannot read knowledge sources itself).
	FAQQuestions func(file string) ([]string, error)
}

// NewLoader compiles the embedded schema.
func NewLoader() (*Loader, error) {
	s, err := compileSchemas()
	if err != nil {
		return nil, err
	}
	return &Loader{schemas: s}, nil
}

// Result is one loaded file: the spec (nil when it could not be decoded at all) and
// every problem found in it, sorted by position.
type Result struct {
	File        string
	Spec        *Spec
	Diagnostics Diagnostics
	// ReadErr is set when the file could not be read; Diagnostics then says so too.
	ReadErr error
}

// LoadFile reads and loads one file: a regular file of at most MaxFileSize.
func (l *Loader) LoadFile(path string) Result {
	src, err := ReadFile(path, MaxFileSize)
	if err != nil {
		return Result{File: path, ReadErr: err, Diagnostics: Diagnostics{{Severity: Error, Pos: Pos{File: path}, Message: ioMessage(err)}}}
	}
	spec, diags := l.Load(path, src)
	return Result{File: path, Spec: spec, Diagnostics: diags}
}

// ioMessage is a read error for a diagnostic, which names the file already.
func ioMessage(err error) string {
	if e, ok := errors.AsType[*NotRegularError](err); ok {
		return e.describe(filepath.Base(e.Path))
	}
	if e, ok := errors.AsType[*TooLargeError](err); ok {
		return e.describe(filepath.Base(e.Path))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("cannot %s: %v", pe.Op, pe.Err)
	}
	return err.Error()
}

// LoadFiles loads many files in parallel and returns the results in input order.
func (l *Loader) LoadFiles(paths []string) []Result {
	results := make([]Result, len(paths))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(paths)) {
		wg.Go(func() {
			for i := range next {
				results[i] = l.LoadFile(paths[i])
			}
		})
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// yamlLineRe and parserErrorRe read yaml.v3's error messages. They are compiled on
// the first syntax error, not when every run of the program starts.
var yamlLineRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: (?:line (\d+): )?`) })

// Load parses, validates and checks one spec, and loads its sub-agents (agents) the
// same way. The spec is returned whenever the file could be decoded, even with
// errors, so callers can show more than the first problem.
func (l *Loader) Load(file string, src []byte) (*Spec, Diagnostics) {
	r := l.load(file, src, []string{agentKey(file)}, map[string]loadedSpec{})
	return r.spec, r.diags
}

// load is Load for a file reached through stack: the real paths of the specs from
// the one being loaded down to this one, which is last. seen holds the sub-specs
// this Load has loaded so far (see loadAgents).
func (l *Loader) load(file string, src []byte, stack []string, seen map[string]loadedSpec) loadedSpec {
	d := newDocument(file, src, agentFile)
	root, ok := l.prepare(d, l.schemas.agent, nil)
	if !ok {
		d.diags.Sort()
		return loadedSpec{diags: d.diags}
	}
	lookup := l.lookupEnv()
	spec := &Spec{}
	if err := root.Decode(spec); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) { // not a partial decode: checking the rest would mislead
			d.errorf(d.at(), "", "%v", strings.TrimPrefix(err.Error(), "yaml: "))
			d.diags.Sort()
			return loadedSpec{diags: d.diags}
		}
		if !d.diags.HasErrors() {
			d.errorf(d.at(), "", "decoding: %v", err) // the schema let through what the types cannot hold
		}
	}
	spec.Source = Source{Pos: d.posOf(root)}
	if isFalse(d.at("plan").node) {
		spec.Plan = nil // plan: false is plan mode off, as if the key were absent
	}
	for n, ref := range d.unset {
		for _, v := range ref.vars {
			spec.Unset = append(spec.Unset, UnsetVar{Name: v, Pos: d.posOf(n), Path: ref.path})
		}
	}
	slices.SortStableFunc(spec.Unset, func(a, b UnsetVar) int { return cmp.Or(comparePos(a.Pos, b.Pos), cmp.Compare(a.Name, b.Name)) })
	d.recordSecrets(spec.Tools, spec.MCPServers) // the agent's own, before the skills' tools join them
	c := checker{document: d, spec: spec, loader: l, ownTools: len(spec.Tools), ownFilters: len(spec.Filters), disabled: map[string]bool{}}
	packs := l.loadSkills(d, spec, lookup)
	causes := l.loadAgents(d, spec, stack, seen)
	c.check()
	mergeInstructions(spec, packs)
	dropDisabled(spec)
	d.diags.Sort()
	return loadedSpec{spec: spec, diags: d.diags, causes: causes}
}

func (l *Loader) lookupEnv() func(string) (string, bool) {
	if l.LookupEnv != nil {
		return l.LookupEnv
	}
	return os.LookupEnv
}

// validator is a compiled schema, or one compiled on its first use.
type validator interface {
	Validate(v any) error
}

// prepare parses a document, lets before rewrite its tree (a skill's options),
// expands ${VAR} and validates it against a schema. It returns false when nothing
// more can be checked: the file does not parse, or aliases blow it up.
func (l *Loader) prepare(d *document, sch validator, before func(root *yaml.Node)) (*yaml.Node, bool) {
	root, ok := d.parse()
	if !ok {
		return nil, false
	}
	d.root = root
	if before != nil {
		before(root)
	}
	d.interpolateTree(root, "", l.lookupEnv())
	inst, _ := d.toJSON(root, "")
	if d.budget < 0 { // what was converted is truncated: checking it would mislead
		return nil, false
	}
	if err := sch.Validate(inst); err != nil {
		d.schemaErrors(err, l.schemas, nil)
	}
	return root, true
}

// parse reads exactly one YAML document holding a mapping.
func (d *document) parse() (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(d.src))
	var doc yaml.Node
	err := dec.Decode(&doc)
	switch {
	case errors.Is(err, io.EOF):
		d.errorf(location{pos: Pos{File: d.file, Line: 1, Col: 1}}, d.kind.start, "empty file: expected %s", d.kind.noun)
		return nil, false
	case err != nil:
		d.syntaxError(err)
		return nil, false
	}
	if len(doc.Content) == 0 {
		d.errorf(location{pos: Pos{File: d.file, Line: 1, Col: 1}}, d.kind.start, "empty file: expected %s", d.kind.noun)
		return nil, false
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		what := map[yaml.Kind]string{yaml.SequenceNode: "a list", yaml.ScalarNode: "a single value", yaml.AliasNode: "an alias"}[root.Kind]
		d.errorf(location{pos: d.posOf(root)}, d.kind.mapping, "expected a mapping at the top of the file, got %s", what)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		at := location{pos: d.posOf(&extra)}
		if len(extra.Content) > 0 {
			at.pos = d.posOf(extra.Content[0])
		}
		d.errorf(at, d.kind.one, "more than one YAML document: a file holds one %s", d.kind.short)
	case !errors.Is(err, io.EOF):
		d.syntaxError(err)
		return nil, false
	}
	return root, true
}

func (d *document) syntaxError(err error) {
	d.diags = append(d.diags, YAMLSyntax(d.file, err))
}

// YAMLSyntax is the diagnostic for a yaml.v3 syntax error in file, at the line the
// problem is on and with a hint; spec files and FAQ sources report theirs alike.
func YAMLSyntax(file string, err error) Diagnostic {
	msg := err.Error()
	line := 0
	if m := yamlLineRe().FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	hint := ""
	if m := parserErrorRe().FindStringSubmatch(msg); m != nil {
		// yaml.v3 prints a 0-based line for parser errors: the line where the
		// enclosing mapping, list or document starts.
		line++
		what := map[string]string{"key": "mapping", "',' or ']'": "list", "',' or '}'": "mapping"}[m[1]]
		hint = "the problem is inside the " + cmp.Or(what, "part") + " that starts on this line; check its indentation and quoting"
		if what == "list" {
			// yaml.v3 refuses a "?" anywhere in an unquoted item of a [a, b] list.
			hint += `; in [a, b] lists quote items holding ?, as in ["Where is it?"]`
		}
	}
	return Diagnostic{Severity: Error, Pos: Pos{File: file, Line: max(line, 1), Col: 1}, Message: "YAML syntax: " + msg, Hint: hint}
}

var parserErrorRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:did not find expected (key|',' or '\]'|',' or '\}'|node content|'-' indicator|<document start>|<stream-start>)|found (?:duplicate %|incompatible YAML|undefined tag))`)
})

// SpecFiles expands the arguments of serve and worker into the agent specs among
// the files YAMLFiles finds; the other kinds are left out, a file that is no kind is
// an error diagnostic.
func SpecFiles(args []string) ([]string, Diagnostics, error) {
	return SpecFilesSkipping(args, func(File) {})
}

// SpecFilesSkipping is SpecFiles telling skipped about each file left out for
// being of another kind.
func SpecFilesSkipping(args []string, skipped func(File)) ([]string, Diagnostics, error) {
	found, diags, err := YAMLFiles(args)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	for _, f := range found {
		switch f.Kind {
		case KindAgent:
			files = append(files, f.Path)
		case KindUnknown:
			diags = append(diags, f.UnknownKind())
		default:
			skipped(f)
		}
	}
	if len(files) == 0 && !diags.HasErrors() {
		return nil, nil, fmt.Errorf("%s: no agent specs found", strings.Join(args, ", "))
	}
	return files, diags, nil
}

// TestFiles expands the arguments of `agentrun test` into *.test.yaml files.
func TestFiles(args []string) ([]string, Diagnostics, error) {
	return FindFiles(args, func(name string) bool {
		return strings.HasSuffix(name, ".test.yaml") || strings.HasSuffix(name, ".test.yml")
	}, "scenario tests (*.test.yaml)")
}

// FindFiles takes files as they are and searches directories for the regular files
// whose name matches. A committed repository can hold anything, so the walk does not
// enter hidden directories or node_modules, skips devices, FIFOs and sockets and
// symlinks that leave the directory with a warning, and reports an unreadable
// directory or broken symlink as an error for its path while still walking the rest.
// A directory without any match is an error naming what was looked for: the returned
// error when the walk found nothing else to say, otherwise a diagnostic beside what
// it said. The returned error is for arguments that do not exist.
func FindFiles(args []string, match func(name string) bool, what string) ([]string, Diagnostics, error) {
	var files []string
	var diags Diagnostics
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, nil, err
		}
		if !info.IsDir() {
			files = append(files, arg) // named on purpose; the reader refuses what is not a regular file
			continue
		}
		w := walker{root: arg, match: match}
		if w.realRoot, err = realPath(arg); err != nil {
			return nil, nil, err
		}
		if err := filepath.WalkDir(arg, w.visit); err != nil {
			return nil, nil, err
		}
		if len(w.files) == 0 {
			if len(w.diags) == 0 {
				return nil, nil, fmt.Errorf("%s: no %s found", arg, what)
			}
			w.diags = append(w.diags, Diagnostic{Severity: Error, Pos: Pos{File: arg}, Message: fmt.Sprintf("no %s found", what)})
		}
		files = append(files, w.files...)
		diags = append(diags, w.diags...)
	}
	return files, diags, nil
}

// walker collects the matching files under one directory argument.
type walker struct {
	root     string // as given
	realRoot string // its realPath, to tell where a symlink points
	match    func(name string) bool
	files    []string
	diags    Diagnostics
}

func (w *walker) visit(path string, e fs.DirEntry, err error) error {
	switch {
	case err != nil: // a directory that cannot be read; its siblings still can
		w.diags = append(w.diags, Diagnostic{Severity: Error, Pos: Pos{File: path}, Message: ioMessage(err)})
		return nil
	case e.IsDir():
		if path != w.root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		return nil
	case !w.match(e.Name()):
		return nil
	case e.Type().IsRegular():
		w.files = append(w.files, path)
	case e.Type()&fs.ModeSymlink != 0:
		w.symlink(path)
	default:
		w.skip(path, "skipped: "+modeNoun(e.Type())+", not a regular file", "agentrun reads only regular files")
	}
	return nil
}

// symlink takes a symlink to a regular file inside the walked directory.
func (w *walker) symlink(path string) {
	target, err := realPath(path)
	var info fs.FileInfo
	if err == nil {
		info, err = os.Stat(target)
	}
	switch {
	case err != nil:
		w.diags = append(w.diags, Diagnostic{Severity: Error, Pos: Pos{File: path}, Message: "a symlink that cannot be followed: " + err.Error()})
	case !info.Mode().IsRegular():
		w.skip(path, fmt.Sprintf("skipped: a symlink to %s, %s, not a regular file", target, modeNoun(info.Mode())), "agentrun reads only regular files")
	case !within(w.realRoot, target):
		w.skip(path, fmt.Sprintf("skipped: a symlink to %s, outside %s", target, w.root),
			"a directory walk does not follow symlinks out of the directory; name the file itself to check it")
	default:
		w.files = append(w.files, path)
	}
}

func (w *walker) skip(path, msg, hint string) {
	w.diags = append(w.diags, Diagnostic{Severity: Warning, Pos: Pos{File: path}, Message: msg, Hint: hint})
}

// realPath is path made absolute with every symlink resolved, the working directory's
// too, so two of them can be compared.
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// within reports whether path is dir or lies under it (both real paths).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
