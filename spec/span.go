package spec

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A diagnostic's range is [Pos, End): End is the position just past the text it is
// about, as in HCL's hcl.Range, so a one-character range ends one column on. The
// range is found from the source text at Pos, the way the file has it before any
// ${VAR} is expanded: a scalar's whole value (quotes included), a key, the first
// key of a mapping, the first line of a sequence item.

// endAt is where the token of the source at pos ends; the zero Pos when pos is not
// on a line of the file.
func (d *document) endAt(pos Pos) Pos {
	if pos.Line <= 0 || pos.Col <= 0 || (pos.File != "" && pos.File != d.file) {
		return Pos{}
	}
	line, ok := d.sourceLine(pos.Line)
	if !ok {
		return Pos{}
	}
	runes := []rune(line)
	start := pos.Col - 1
	if start > len(runes) {
		return Pos{}
	}
	end := start + 1
	if n := d.scalarAt(pos); n != nil && n.Style == 0 && !strings.ContainsAny(n.Value, "\n") &&
		strings.HasPrefix(string(runes[start:]), n.Value) && n.Value != "" {
		end = start + utf8.RuneCountInString(n.Value) // a plain scalar, also inside [ ] or { }
	} else if start < len(runes) {
		end = max(tokenEnd(runes, start), end)
	}
	return Pos{File: pos.File, Line: pos.Line, Col: end + 1}
}

// sourceLine is the 1-based line of the file, without its line break.
func (d *document) sourceLine(n int) (string, bool) {
	src := d.src
	for l := 1; l < n; l++ {
		i := bytes.IndexByte(src, '\n')
		if i < 0 {
			return "", false
		}
		src = src[i+1:]
	}
	if i := bytes.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	return strings.TrimSuffix(string(src), "\r"), true
}

// scalarAt is the scalar node that starts at pos, if any: the key rather than the
// mapping it begins.
func (d *document) scalarAt(pos Pos) *yaml.Node {
	if d.scalars == nil {
		d.scalars = map[[2]int]*yaml.Node{}
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode {
				d.scalars[[2]int{n.Line, n.Column}] = n
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		if d.root != nil {
			walk(d.root)
		}
	}
	return d.scalars[[2]int{pos.Line, pos.Col}]
}

// tokenEnd is the index just past the YAML token that starts at runes[i], on its
// line: a quoted scalar to its closing quote, a flow collection to its closing
// bracket, a sequence item or a block scalar's header to the end of the line
// (before a comment), a plain scalar or key to the ": " or " #" after it.
func tokenEnd(runes []rune, i int) int {
	switch r := runes[i]; {
	case r == '"' || r == '\'':
		return quotedEnd(runes, i)
	case r == '[' || r == '{':
		return flowEnd(runes, i)
	case (r == '-' || r == '?') && (i+1 == len(runes) || runes[i+1] == ' ' || runes[i+1] == '\t'):
		return lineEnd(runes, i)
	case r == '|' || r == '>' || r == '&' || r == '*' || r == '!':
		j := i
		for j < len(runes) && runes[j] != ' ' && runes[j] != '\t' {
			j++
		}
		return j
	}
	return plainEnd(runes, i)
}

// quotedEnd is past the quote that closes the one at runes[i]; the end of the line
// when it closes on a later line.
func quotedEnd(runes []rune, i int) int {
	q := runes[i]
	for j := i + 1; j < len(runes); j++ {
		switch {
		case q == '"' && runes[j] == '\\':
			j++
		case q == '\'' && runes[j] == '\'' && j+1 < len(runes) && runes[j+1] == '\'':
			j++ // '' is a quote inside single quotes
		case runes[j] == q:
			return j + 1
		}
	}
	return trimRight(runes, len(runes))
}

// flowEnd is past the bracket that closes the one at runes[i], skipping quoted
// text; the end of the line before a comment when it closes on a later line.
func flowEnd(runes []rune, i int) int {
	depth := 0
	for j := i; j < len(runes); j++ {
		switch runes[j] {
		case '"', '\'':
			if opensQuote(runes, j) {
				j = quotedEnd(runes, j) - 1
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return j + 1
			}
		case '#':
			if runes[j-1] == ' ' || runes[j-1] == '\t' {
				return trimRight(runes, j)
			}
		}
	}
	return trimRight(runes, len(runes))
}

// plainEnd is past a plain scalar: it stops at ": ", at " #" and, inside a flow
// collection, at the , ] or } after it.
func plainEnd(runes []rune, i int) int {
	flow := inFlow(runes[:i])
	j := i
	for ; j < len(runes); j++ {
		r := runes[j]
		if r == ':' && (j+1 == len(runes) || runes[j+1] == ' ' || runes[j+1] == '\t' || (flow && strings.ContainsRune(",]}", runes[j+1]))) {
			break
		}
		if r == '#' && j > i && (runes[j-1] == ' ' || runes[j-1] == '\t') {
			break
		}
		if flow && strings.ContainsRune(",]}", r) {
			break
		}
	}
	return trimRight(runes, j)
}

// lineEnd is the end of the line from runes[i], before a comment.
func lineEnd(runes []rune, i int) int {
	for j := i; j < len(runes); j++ {
		switch runes[j] {
		case '"', '\'':
			if opensQuote(runes, j) {
				j = quotedEnd(runes, j) - 1
			}
		case '#':
			if j > i && (runes[j-1] == ' ' || runes[j-1] == '\t') {
				return trimRight(runes, j)
			}
		}
	}
	return trimRight(runes, len(runes))
}

// inFlow reports whether the text before a token leaves a [ or { open.
func inFlow(before []rune) bool {
	depth := 0
	for j := 0; j < len(before); j++ {
		switch before[j] {
		case '"', '\'':
			if opensQuote(before, j) {
				j = quotedEnd(before, j) - 1
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
	}
	return depth > 0
}

// opensQuote reports whether the quote at runes[j] begins a quoted scalar rather
// than standing inside a plain one, as in "it's".
func opensQuote(runes []rune, j int) bool {
	return j == 0 || strings.ContainsRune(" \t[{,:-?", runes[j-1])
}

func trimRight(runes []rune, j int) int {
	for j > 0 && (runes[j-1] == ' ' || runes[j-1] == '\t') {
		j--
	}
	return j
}

// spanInScalar is the range of the bytes [from, to) of a scalar's value in the file,
// as posInScalar places them; a point (zero end) when there is no node.
func (d *document) spanInScalar(n *yaml.Node, from, to int) (Pos, Pos) {
	start := d.posInScalar(n, from)
	if n == nil {
		return start, Pos{}
	}
	end := d.posInScalar(n, max(to, from))
	if end.Line == start.Line && end.Col <= start.Col {
		end.Col = start.Col + 1
	}
	return start, end
}

// withEnd sets a diagnostic's end from the source when it has none yet.
func (d *document) withEnd(diag Diagnostic) Diagnostic {
	if diag.End.Line == 0 {
		diag.End = d.endAt(diag.Pos)
	}
	return diag
}

// wordEnd is past the name or number at src[i:], where an expression error points;
// one character on when no name starts there.
func wordEnd(src string, i int) int {
	j := i
	for j < len(src) && (src[j] == '_' || src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z') {
		j++
	}
	if j == i && i < len(src) {
		_, size := utf8.DecodeRuneInString(src[i:])
		j += size
	}
	return j
}

// FillEnds gives each diagnostic that has no end the end of the text it points at,
// read from its file as it is on disk: the diagnostics made after loading
// (runtime.Compile's, a knowledge source's, serve's own checks) carry a start only.
// A file that cannot be read leaves its diagnostics as they are.
func FillEnds(ds Diagnostics) Diagnostics {
	docs := map[string]*document{}
	for i := range ds {
		d := &ds[i]
		if d.End.Line != 0 || d.Pos.File == "" || d.Pos.Line == 0 {
			continue
		}
		doc, seen := docs[d.Pos.File]
		if !seen {
			doc = readDocument(d.Pos.File)
			docs[d.Pos.File] = doc
		}
		if doc != nil {
			*d = doc.withEnd(*d)
		}
	}
	return ds
}

// readDocument is path as a document whose ranges can be found; nil when it cannot
// be read as UTF-8 text. A file that is not valid YAML still has lines, and the
// ranges found from the text alone.
func readDocument(path string) *document {
	src, err := ReadFile(path, MaxFileSize)
	if err != nil || !utf8.Valid(src) {
		return nil
	}
	d := &document{file: path, src: src}
	var root yaml.Node
	if yaml.Unmarshal(src, &root) == nil && len(root.Content) > 0 {
		d.root = root.Content[0]
	}
	return d
}
