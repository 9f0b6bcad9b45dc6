package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxJSONNodes bounds the size of a document after alias expansion, so a small file
// full of nested aliases ("billion laughs") cannot exhaust memory or time.
const maxJSONNodes = 200_000

// document is one parsed spec file: its source, its YAML tree and the diagnostics
// found so far. Every later stage asks it for positions.
type document struct {
	kind  fileKind
	file  string
	src   []byte
	root  *yaml.Node // the top-level mapping
	diags Diagnostics

	// unset maps scalar nodes to the environment variables they named that were not
	// set, so a schema error there can say so instead of "got null, want number".
	unset map[*yaml.Node]unsetRef
	// secrets maps scalar nodes to the values they took from the environment.
	secrets map[*yaml.Node][]Secret
	// failed holds the paths the schema already reported an error for; semantic
	// checks stay quiet there rather than repeat the problem.
	failed map[string]bool
	budget int
	// expanding holds the aliased nodes being converted, to catch an alias inside
	// the value it names, which would expand forever.
	expanding map[*yaml.Node]bool
	// scalars indexes the scalar nodes by where they start, built on the first
	// diagnostic, to find the extent of the one a diagnostic points at.
	scalars map[[2]int]*yaml.Node
}

func (d *document) report(sev Severity, at location, msg, hint string) {
	end := at.end
	if end.Line == 0 {
		end = d.endAt(at.pos)
	}
	d.diags = append(d.diags, Diagnostic{Severity: sev, Pos: at.pos, End: end, Path: at.path, Message: msg, Hint: hint})
}

func (d *document) errorf(at location, hint, format string, args ...any) {
	d.report(Error, at, fmt.Sprintf(format, args...), hint)
}

func (d *document) warnf(at location, hint, format string, args ...any) {
	d.report(Warning, at, fmt.Sprintf(format, args...), hint)
}

// fileKind words the messages about a file's overall shape for agents and skills.
type fileKind struct {
	noun, short, start, mapping, one string
}

var (
	agentFile = fileKind{noun: "an agent spec", short: "agent", start: "start with `version: 1` and `name: …`",
		mapping: "an agent spec is a mapping of keys such as version, name and instructions", one: "put each agent in a file of its own"}
	skillFile = fileKind{noun: "a skill pack", short: "skill", start: "start with `name: …`",
		mapping: "a skill.yaml is a mapping of keys such as name, instructions and tools", one: "put each skill in a directory of its own"}
)

var testFile = fileKind{noun: "scenario tests", short: "test file", start: "start with `agent: …` and `cases:`",
	mapping: "a test file is a mapping with agent and cases", one: "put each agent's cases in one file"}

func newDocument(file string, src []byte, kind fileKind) *document {
	return &document{kind: kind, file: file, src: src, unset: map[*yaml.Node]unsetRef{}, secrets: map[*yaml.Node][]Secret{}, failed: map[string]bool{},
		budget: maxJSONNodes, expanding: map[*yaml.Node]bool{}}
}

type unsetRef struct {
	path string
	vars []string
}

// location is a place in the document: the YAML path and the position to show.
type location struct {
	path string
	pos  Pos
	end  Pos        // just past the text at pos when known; else found from the source
	key  *yaml.Node // the mapping key that names the value, when there is one
	node *yaml.Node // the value itself; nil when the path does not exist
}

// keyPos is the position of the key naming this value, or of the value itself.
func (l location) keyPos(file string) location {
	if l.key != nil {
		l.pos = Pos{File: file, Line: l.key.Line, Col: l.key.Column}
		l.end = Pos{}
	}
	return l
}

// at walks tokens (mapping keys and sequence indexes) from the root. When a token does
// not exist it stops at the deepest node that does, so a missing key is reported on
// the mapping that lacks it.
func (d *document) at(tokens ...string) location {
	loc := location{node: d.root, pos: d.posOf(d.root)}
	n := d.root
	for _, tok := range tokens {
		n = resolveAlias(n)
		if n == nil {
			break
		}
		var next, key *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					key, next = n.Content[i], n.Content[i+1]
				}
			}
			loc.path = joinKey(loc.path, tok)
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
			loc.path += "[" + tok + "]"
		default:
			loc.path = joinKey(loc.path, tok)
		}
		if next == nil {
			loc.node, loc.key = nil, nil
			n = nil
			continue
		}
		n = next
		loc.node, loc.key = next, key
		loc.pos = d.posOf(next)
	}
	return loc
}

func (d *document) posOf(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: d.file, Line: 1, Col: 1}
	}
	return Pos{File: d.file, Line: n.Line, Col: n.Column}
}

func joinKey(path, key string) string {
	if strings.ContainsAny(key, ". []\"") || key == "" {
		key = strconv.Quote(key)
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// toJSON converts the YAML tree into the values the JSON-schema validator takes,
// reporting what JSON cannot hold: duplicate or non-string keys, merge keys,
// binary data, infinities.
func (d *document) toJSON(n *yaml.Node, path string) (any, bool) {
	d.budget--
	if d.budget < 0 {
		if d.budget == -1 { // report it once, on the top-level key whose value grew too large
			top, _, _ := strings.Cut(path, ".")
			top, _, _ = strings.Cut(top, "[")
			at := d.at(top).keyPos(d.file)
			d.errorf(at, "remove the nested aliases", "document is too large after alias expansion (more than %d values)", maxJSONNodes)
		}
		return nil, false
	}
	if n.Anchor != "" {
		d.expanding[n] = true
		defer delete(d.expanding, n)
	}
	switch n.Kind {
	case yaml.AliasNode:
		target := resolveAlias(n)
		if target == nil || d.expanding[target] {
			d.errorf(location{pos: d.posOf(n), path: path}, "an alias cannot stand inside the value it names", "alias *%s refers to itself", n.Value)
			d.budget = -2 // stop converting: the document has no finite value
			return nil, false
		}
		return d.toJSON(target, path)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		seen := make(map[string]*yaml.Node, len(n.Content)/2)
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			at := location{pos: d.posOf(k), path: path}
			if k.Kind != yaml.ScalarNode {
				d.errorf(at, "", "mapping keys must be plain strings")
				ok = false
				continue
			}
			if k.ShortTag() == "!!merge" {
				d.errorf(at, "repeat the keys, or put an anchor on the whole value", "merge keys (<<) are not supported")
				ok = false
				continue
			}
			at.path = joinKey(at.path, k.Value)
			if first, dup := seen[k.Value]; dup {
				d.errorf(at, fmt.Sprintf("the first %q is at line %d", k.Value, first.Line), "duplicate key %q", k.Value)
				ok = false
				continue
			}
			seen[k.Value] = k
			val, vok := d.toJSON(v, at.path)
			ok = ok && vok
			m[k.Value] = val
		}
		return m, ok
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			var vok bool
			s[i], vok = d.toJSON(c, path+"["+strconv.Itoa(i)+"]")
			ok = ok && vok
		}
		return s, ok
	case yaml.ScalarNode:
		return d.scalar(n, location{pos: d.posOf(n), path: path, node: n})
	}
	return nil, true
}

func (d *document) scalar(n *yaml.Node, at location) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, true
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, true
		}
		var f float64 // larger than int64: keep it as a number
		if err := n.Decode(&f); err == nil {
			return f, true
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				d.errorf(at, "", "%s is not a number JSON can hold", n.Value)
				return nil, false
			}
			return f, true
		}
	case "!!binary":
		d.errorf(at, "", "binary values are not supported")
		return nil, false
	}
	return n.Value, true
}
