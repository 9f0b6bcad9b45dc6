package spec

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

var serveFile = fileKind{noun: "a serve config", short: "serve config", start: "start with `auth:` or `limits:`",
	mapping: "serve.yaml is a mapping of keys such as auth and limits", one: "put the server's whole config in one file"}

// ConfigFile is a loaded serve.yaml, kept so that the checks which know its Go type
// (in package serve) can report at its lines as the spec checks do.
type ConfigFile struct {
	doc *document
}

// Errorf reports an error at the key that path leads to (or the nearest existing
// node along it), unless the schema already reported one there.
func (f *ConfigFile) Errorf(path []string, hint, format string, args ...any) {
	at := f.doc.at(path...)
	if !f.doc.failed[at.path] {
		f.doc.errorf(at.keyPos(f.doc.file), hint, format, args...)
	}
}

// Diagnostics are the problems found so far, sorted by position.
func (f *ConfigFile) Diagnostics() Diagnostics {
	f.doc.diags.Sort()
	return f.doc.diags
}

// LoadServeConfig checks serve.yaml the way specs are checked — YAML, then its JSON
// schema, with every problem at its line and "did you mean" for unknown keys — and
// decodes it into out (a *serve.Config). ${VAR} is not expanded: serve.yaml names
// variables (hs256_secret_env) but never takes values from them. decoded is false
// when nothing more can be checked; the file's Diagnostics say why.
func (l *Loader) LoadServeConfig(file string, src []byte, out any) (f *ConfigFile, decoded bool) {
	d := newDocument(file, src, serveFile)
	f = &ConfigFile{doc: d}
	root, ok := d.parse()
	if !ok {
		return f, false
	}
	d.root = root
	inst, _ := d.toJSON(root, "")
	if d.budget < 0 {
		return f, false
	}
	if err := l.schemas.serve.Validate(inst); err != nil {
		d.schemaErrors(err, l.schemas, nil)
	}
	if err := root.Decode(out); err != nil {
		var typeErr *yaml.TypeError
		switch {
		case errors.As(err, &typeErr):
			d.typeErrors(typeErr)
		default:
			d.errorf(d.at(), "", "%v", strings.TrimPrefix(err.Error(), "yaml: "))
			return f, false
		}
	}
	return f, true
}

var (
	typeErrorRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+): (.*)$`) })
	durationRe  = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("^cannot unmarshal !!str `.*` into time.Duration$")
	})
)

// typeErrors reports what the schema let through but the Go types cannot hold — a
// duration or a number out of range — at its line, when the schema found nothing
// there (its errors explain a value better).
func (d *document) typeErrors(e *yaml.TypeError) {
	for _, msg := range e.Errors {
		line := 0
		if m := typeErrorRe().FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		if slices.ContainsFunc(d.diags, func(x Diagnostic) bool { return x.Pos.Line == line }) {
			continue
		}
		at := location{pos: Pos{File: d.file, Line: max(line, 1), Col: 1}}
		if durationRe().MatchString(msg) { // yaml.v3 cuts the value short in msg
			d.errorf(at, "a duration is at most 2562047h", "invalid duration: out of range")
			continue
		}
		d.errorf(at, "", "%s", msg)
	}
}
