package jsonpath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Path is a parsed path. Its zero value is $, the whole document.
type Path struct {
	src   string
	steps []step
}

// step is one step of a path: a key, an index, or every key or element.
type step struct {
	key   string
	index int // -1 for a key or a wildcard
	all   bool
	end   int // the offset in the path's text just after the step
}

// Error is a path that does not parse: Msg about the step at Offset (a byte
// offset into the path).
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string {
	if e.Offset == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s at offset %d", e.Msg, e.Offset)
}

// Parse reads a path such as $.items[0]["unit price"] or $.items[*].sku. Its
// error is an *Error.
func Parse(s string) (Path, error) {
	if !strings.HasPrefix(s, "$") {
		return Path{}, &Error{Msg: "a path starts with $"}
	}
	p := Path{src: s}
	for i := 1; i < len(s); {
		var st step
		var n int
		var msg string
		switch s[i] {
		case '.':
			st, n, msg = parseDot(s[i+1:])
		case '[':
			st, n, msg = parseBracket(s[i+1:])
		default:
			msg = fmt.Sprintf("expected . or [ at %q", s[i:])
		}
		if msg != "" {
			return Path{}, &Error{Offset: i, Msg: msg}
		}
		i += 1 + n
		st.end = i
		p.steps = append(p.steps, st)
	}
	return p, nil
}

// parseDot reads what follows a dot: * or a key up to the next . or [; n is the
// length read.
func parseDot(rest string) (s step, n int, msg string) {
	end := strings.IndexAny(rest, ".[")
	if end < 0 {
		end = len(rest)
	}
	name := rest[:end]
	switch {
	case name == "":
		return step{}, 0, "a . is followed by no key"
	case name == "*":
		return step{all: true, index: -1}, end, ""
	case strings.ContainsAny(name, "]'\" "):
		return step{}, 0, fmt.Sprintf("key %q needs brackets: ['key']", name)
	}
	return step{key: name, index: -1}, end, ""
}

// parseBracket reads what follows a [: *, an index or a quoted key, then the ];
// n is the length read. A quoted key may hold ] and ends at its quote and ]; in
// double quotes it may use Go's (and JSON's) escapes.
func parseBracket(rest string) (s step, n int, msg string) {
	if q := rest[:min(1, len(rest))]; q == "'" || q == `"` {
		end := strings.Index(rest[1:], q+"]")
		if end < 0 {
			return step{}, 0, fmt.Sprintf("the key at [%s has no closing %s]", rest, q)
		}
		key := rest[1 : 1+end]
		if q == `"` {
			var err error
			if key, err = strconv.Unquote(rest[:end+2]); err != nil {
				return step{}, 0, fmt.Sprintf("bad quoted key %s", rest[:end+2])
			}
		}
		return step{key: key, index: -1}, end + 3, ""
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return step{}, 0, fmt.Sprintf("[%s has no closing ]", rest)
	}
	inside := rest[:end]
	if inside == "*" {
		return step{all: true, index: -1}, end + 1, ""
	}
	i, err := strconv.Atoi(inside)
	if err != nil || i < 0 || strings.HasPrefix(inside, "+") {
		return step{}, 0, fmt.Sprintf("[%s] is not an index (0, 1, …), * or a quoted key", inside)
	}
	return step{index: i}, end + 1, ""
}

// String is the path as it was written.
func (p Path) String() string {
	if p.src == "" {
		return "$"
	}
	return p.src
}

// MarshalText writes the path as its text, so that a decoded file shows it.
func (p Path) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Wildcard reports whether the path has a .* or [*] step, so that it selects a
// list of values (perhaps none) rather than one.
func (p Path) Wildcard() bool {
	return slices.ContainsFunc(p.steps, func(s step) bool { return s.all })
}

// Select follows the path through doc (as encoding/json decodes into an any): the
// values it selects, in order (an object's keys sorted). A path without a
// wildcard selects one value or, when it leads nowhere, none and a reason saying
// where it stopped, such as
//
//	$.order.items[5].name: no element 5 (the array has 2) at $.order.items
//
// A wildcard path skips what does not fit and never gives a reason.
func (p Path) Select(doc any) ([]any, string) {
	wildcard := p.Wildcard()
	values := []any{doc}
	at := 1
	for _, s := range p.steps {
		var next []any
		for _, v := range values {
			got, why := s.apply(v)
			if why != "" && !wildcard {
				return nil, fmt.Sprintf("%s: %s at %s", p, why, p.src[:at])
			}
			next = append(next, got...)
		}
		values = next
		at = s.end
	}
	return values, ""
}

// apply takes one step from one value.
func (s step) apply(v any) ([]any, string) {
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
	s := fmt.Sprint(v)
	if err := enc.Encode(v); err == nil {
		s = strings.TrimSpace(b.String())
	}
	if utf8.RuneCountInString(s) <= 120 {
		return s
	}
	return string([]rune(s)[:120]) + "…"
}
