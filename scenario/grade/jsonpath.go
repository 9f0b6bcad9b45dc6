package grade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// JSONOp is what a JSONPath grader checks of the value its path selects.
type JSONOp string

const (
	// JSONExists: the path selects a value (any, null too); with a wildcard, at
	// least one.
	JSONExists JSONOp = "exists"
	// JSONEquals: the value equals the wanted one as JSON (1 equals 1.0, objects
	// compare by their keys); with a wildcard, the list of every value selected
	// equals the wanted list.
	JSONEquals JSONOp = "equals"
	// JSONContains: a string value contains the wanted text, or an array value
	// (or, with a wildcard, the values selected) holds an element equal to the
	// wanted value.
	JSONContains JSONOp = "contains"
)

// JSONPath grades an answer that is JSON (a structured output) by the value at a
// path. The path is a small subset of JSONPath: $ is the whole answer, .name or
// ['name'] a key of an object, [N] the N-th element of an array (from 0), and .*
// or [*] every key or element.
type JSONPath struct {
	path     string
	segments []segment
	wildcard bool
	op       JSONOp
	want     any // decoded from JSON, as an answer's values are
}

// segment is one step of a path: a key, an index, or every element.
type segment struct {
	key   string
	index int // -1 for a key
	all   bool
}

func (s segment) String() string {
	switch {
	case s.all:
		return "[*]"
	case s.index >= 0:
		return "[" + strconv.Itoa(s.index) + "]"
	case isPlainKey(s.key):
		return "." + s.key
	}
	return "[" + strconv.Quote(s.key) + "]"
}

// NewJSONPath compiles path once; want is the value op compares with (nil for
// JSONExists), any value encoding/json can encode.
func NewJSONPath(path string, op JSONOp, want any) (*JSONPath, error) {
	segs, err := parsePath(path)
	if err != nil {
		return nil, fmt.Errorf("json path %q: %w", path, err)
	}
	j := &JSONPath{path: path, segments: segs, op: op}
	for _, s := range segs {
		j.wildcard = j.wildcard || s.all
	}
	switch op {
	case JSONExists:
		if want != nil {
			return nil, fmt.Errorf("json path %q: exists takes no value", path)
		}
	case JSONEquals, JSONContains:
		b, err := json.Marshal(want)
		if err != nil {
			return nil, fmt.Errorf("json path %q: the value to compare is not JSON: %w", path, err)
		}
		if err := json.Unmarshal(b, &j.want); err != nil {
			return nil, fmt.Errorf("json path %q: the value to compare is not JSON: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("json path %q: unknown check %q (exists, equals or contains)", path, op)
	}
	return j, nil
}

// parsePath reads the path subset NewJSONPath describes.
func parsePath(path string) ([]segment, error) {
	rest, ok := strings.CutPrefix(path, "$")
	if !ok {
		return nil, errors.New("a path starts with $")
	}
	var segs []segment
	for rest != "" {
		var s segment
		var err error
		switch rest[0] {
		case '.':
			s, rest, err = parseDot(rest[1:])
		case '[':
			s, rest, err = parseBracket(rest[1:])
		default:
			err = fmt.Errorf("expected . or [ at %q", rest)
		}
		if err != nil {
			return nil, err
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// parseDot reads what follows a dot: * or a key up to the next . or [.
func parseDot(rest string) (segment, string, error) {
	end := strings.IndexAny(rest, ".[")
	if end < 0 {
		end = len(rest)
	}
	name := rest[:end]
	switch {
	case name == "":
		return segment{}, "", errors.New("a . is followed by no key")
	case name == "*":
		return segment{all: true, index: -1}, rest[end:], nil
	case strings.ContainsAny(name, "]'\" "):
		return segment{}, "", fmt.Errorf("key %q needs brackets: ['key']", name)
	}
	return segment{key: name, index: -1}, rest[end:], nil
}

// parseBracket reads what follows a [: *, an index or a quoted key, then the ].
func parseBracket(rest string) (segment, string, error) {
	if q := rest[:min(1, len(rest))]; q == "'" || q == `"` {
		end := strings.Index(rest[1:], q+"]")
		if end < 0 {
			return segment{}, "", fmt.Errorf("the key at [%s has no closing %s]", rest, q)
		}
		key := rest[1 : 1+end]
		if key == "" {
			return segment{}, "", errors.New("an empty key in brackets")
		}
		return segment{key: key, index: -1}, rest[1+end+2:], nil
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return segment{}, "", fmt.Errorf("[%s has no closing ]", rest)
	}
	inside := rest[:end]
	if inside == "*" {
		return segment{all: true, index: -1}, rest[end+1:], nil
	}
	n, err := strconv.Atoi(inside)
	if err != nil || n < 0 || strings.HasPrefix(inside, "+") {
		return segment{}, "", fmt.Errorf("[%s] is not an index (0, 1, …), * or a quoted key", inside)
	}
	return segment{index: n}, rest[end+1:], nil
}

func isPlainKey(k string) bool { return k != "" && k != "*" && !strings.ContainsAny(k, ".[]'\" ") }

// Grade implements TextGrader.
func (j *JSONPath) Grade(answer string) Grade {
	doc, err := decodeAnswer(answer)
	if err != nil {
		return fail(fmt.Sprintf("the answer is not JSON (%v): %q", err, clip(strings.TrimSpace(answer), 80)))
	}
	values, missing := j.selectFrom(doc)
	if missing != "" {
		return fail(missing)
	}
	var got any
	switch {
	case j.wildcard:
		got = values
	case len(values) == 1:
		got = values[0]
	}
	switch j.op {
	case JSONExists:
		if j.wildcard && len(values) == 0 {
			return fail(fmt.Sprintf("%s selects nothing in the answer", j.path))
		}
		return pass(fmt.Sprintf("%s is %s", j.path, show(got)))
	case JSONEquals:
		if reflect.DeepEqual(got, j.want) {
			return pass(fmt.Sprintf("%s is %s", j.path, show(got)))
		}
		return fail(fmt.Sprintf("%s is %s, not %s", j.path, show(got), show(j.want)))
	}
	return j.contains(got)
}

// contains is the JSONContains check of the value selected.
func (j *JSONPath) contains(got any) Grade {
	switch v := got.(type) {
	case string:
		if w, ok := j.want.(string); ok {
			if strings.Contains(v, w) {
				return pass(fmt.Sprintf("%s contains %s", j.path, show(w)))
			}
			return fail(fmt.Sprintf("%s is %s, which does not contain %s", j.path, show(v), show(w)))
		}
	case []any:
		for _, e := range v {
			if reflect.DeepEqual(e, j.want) {
				return pass(fmt.Sprintf("%s holds %s", j.path, show(j.want)))
			}
		}
		return fail(fmt.Sprintf("%s is %s, which holds no %s", j.path, show(v), show(j.want)))
	}
	return fail(fmt.Sprintf("%s is %s: contains %s needs a string or an array there", j.path, show(got), show(j.want)))
}

// decodeAnswer reads an answer as one JSON value, allowing the ```json fence some
// models wrap structured answers in.
func decodeAnswer(answer string) (any, error) {
	s := strings.TrimSpace(answer)
	if body, ok := strings.CutPrefix(s, "```"); ok {
		body = strings.TrimPrefix(body, "json")
		if body, ok = strings.CutSuffix(body, "```"); ok {
			s = strings.TrimSpace(body)
		}
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value")
	}
	return v, nil
}

// selectFrom follows the path through doc: the values it selects, or, for a path
// without a wildcard that leads nowhere, a reason saying where it stopped.
func (j *JSONPath) selectFrom(doc any) ([]any, string) {
	values := []any{doc}
	at := "$"
	for _, s := range j.segments {
		var next []any
		for _, v := range values {
			got, why := step(v, s)
			if why != "" && !j.wildcard {
				return nil, fmt.Sprintf("%s: %s at %s", j.path, why, at)
			}
			next = append(next, got...)
		}
		values = next
		at += s.String()
	}
	return values, ""
}

// step applies one segment to one value.
func step(v any, s segment) ([]any, string) {
	switch {
	case s.all:
		switch c := v.(type) {
		case []any:
			return c, ""
		case map[string]any:
			// Keys in order, so a wildcard over an object selects the same list each time.
			keys := make([]string, 0, len(c))
			for k := range c {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			out := make([]any, len(keys))
			for i, k := range keys {
				out[i] = c[k]
			}
			return out, ""
		}
		return nil, "no array or object (" + show(v) + ")"
	case s.index >= 0:
		a, ok := v.([]any)
		if !ok {
			return nil, "no array (" + show(v) + ")"
		}
		if s.index >= len(a) {
			return nil, fmt.Sprintf("no element %d (the array has %d)", s.index, len(a))
		}
		return []any{a[s.index]}, ""
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, "no object (" + show(v) + ")"
	}
	e, ok := o[s.key]
	if !ok {
		return nil, fmt.Sprintf("no key %q", s.key)
	}
	return []any{e}, ""
}

// show writes a JSON value for a reason, short, with its characters as they are.
func show(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return clip(strings.TrimSpace(b.String()), 120)
}
