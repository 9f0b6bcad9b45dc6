package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// JSONPath is a parsed path into a JSON value: `$` then steps `.key`, `["key"]`
// or `[index]`. It is deliberately small — no wildcards or filters — so a
// grader's path means one value.
type JSONPath []JSONPathStep

// JSONPathStep is an object key or, when IsIndex, an array index.
type JSONPathStep struct {
	Key     string
	Index   int
	IsIndex bool
}

// ParseJSONPath parses a path such as $.items[0]["unit price"].
func ParseJSONPath(s string) (JSONPath, error) {
	if !strings.HasPrefix(s, "$") {
		return nil, fmt.Errorf("%q does not start with $", s)
	}
	var p JSONPath
	for i := 1; i < len(s); {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("empty key at offset %d", i+1)
			}
			if k := strings.IndexAny(s[i+1:j], `]"`); k >= 0 {
				return nil, fmt.Errorf("unexpected %q at offset %d: quote such a key, [\"a]b\"]", s[i+1+k], i+1+k)
			}
			p = append(p, JSONPathStep{Key: s[i+1 : j]})
			i = j
		case '[':
			step, n, err := parseBracket(s[i:])
			if err != nil {
				return nil, fmt.Errorf("%v at offset %d", err, i)
			}
			p = append(p, step)
			i += n
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d: want . or [", s[i], i)
		}
	}
	return p, nil
}

// parseBracket reads ["key"] or [index] at the start of s, returning its length.
func parseBracket(s string) (JSONPathStep, int, error) {
	end := strings.IndexByte(s, ']')
	if strings.HasPrefix(s, `["`) {
		// A quoted key may hold ]; it ends at the closing quote.
		q := strings.Index(s[2:], `"]`)
		if q < 0 {
			return JSONPathStep{}, 0, fmt.Errorf(`unclosed ["`)
		}
		key, err := strconv.Unquote(s[1 : q+3])
		if err != nil {
			return JSONPathStep{}, 0, fmt.Errorf("bad quoted key %s", s[1:q+3])
		}
		return JSONPathStep{Key: key}, q + 4, nil
	}
	if end < 0 {
		return JSONPathStep{}, 0, fmt.Errorf("unclosed [")
	}
	n, err := strconv.Atoi(s[1:end])
	if err != nil || n < 0 || strings.HasPrefix(s[1:end], "+") {
		return JSONPathStep{}, 0, fmt.Errorf("[%s] is not an index (0, 1, …) or a quoted key", s[1:end])
	}
	return JSONPathStep{Index: n, IsIndex: true}, end + 1, nil
}

// Lookup is the value at the path in v (decoded by encoding/json), and whether
// it is there.
func (p JSONPath) Lookup(v any) (any, bool) {
	for _, step := range p {
		switch x := v.(type) {
		case map[string]any:
			if step.IsIndex {
				return nil, false
			}
			var ok bool
			if v, ok = x[step.Key]; !ok {
				return nil, false
			}
		case []any:
			if !step.IsIndex || step.Index >= len(x) {
				return nil, false
			}
			v = x[step.Index]
		default:
			return nil, false
		}
	}
	return v, true
}

func (p JSONPath) String() string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range p {
		switch {
		case s.IsIndex:
			fmt.Fprintf(&b, "[%d]", s.Index)
		case s.Key != "" && !strings.ContainsAny(s.Key, `.[]"' `):
			b.WriteString("." + s.Key)
		default:
			b.WriteString("[" + strconv.Quote(s.Key) + "]")
		}
	}
	return b.String()
}
