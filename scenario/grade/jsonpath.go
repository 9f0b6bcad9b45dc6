package grade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/agentrun/agentrun/internal/jsonpath"
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
// path, internal/jsonpath's small subset of JSONPath: $ is the whole answer, .name,
// ['name'] or ["name"] a key of an object, [N] the N-th element of an array (from
// 0), and .* or [*] every key or element.
type JSONPath struct {
	path     jsonpath.Path
	wildcard bool
	op       JSONOp
	want     any // decoded from JSON, as an answer's values are
}

// NewJSONPath compiles path once; want is the value op compares with (nil for
// JSONExists), any value encoding/json can encode.
func NewJSONPath(path string, op JSONOp, want any) (*JSONPath, error) {
	p, err := jsonpath.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("json path %q: %w", path, err)
	}
	j := &JSONPath{path: p, wildcard: p.Wildcard(), op: op}
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

// Grade implements TextGrader.
func (j *JSONPath) Grade(answer string) Grade {
	doc, err := decodeAnswer(answer)
	if err != nil {
		return fail(fmt.Sprintf("the answer is not JSON (%v): %q", err, clip(strings.TrimSpace(answer), 80)))
	}
	values, missing := j.path.Select(doc)
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
