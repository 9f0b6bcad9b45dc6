package builtin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// decodeWith copies a builtin's `with:` mapping into dst, a pointer to a struct whose
// fields carry `with:"key"` tags. Unknown keys and wrong types are errors, and every
// problem is reported at once, so one round of fixes is enough. A null value leaves
// the field as it was: an empty YAML value reads as "not set", so the default stays.
func decodeWith(builtin string, with map[string]any, dst any) error {
	v := reflect.ValueOf(dst).Elem()
	fields := map[string]reflect.Value{}
	var allowed []string
	for i := range v.NumField() {
		if key := v.Type().Field(i).Tag.Get("with"); key != "" {
			fields[key] = v.Field(i)
			allowed = append(allowed, key)
		}
	}
	slices.Sort(allowed)

	var problems []string
	for _, key := range slices.Sorted(maps.Keys(with)) {
		field, ok := fields[key]
		if !ok {
			problems = append(problems, unknownKey(builtin, key, allowed))
			continue
		}
		if with[key] == nil {
			continue
		}
		if err := assign(field, with[key]); err != nil {
			problems = append(problems, fmt.Sprintf("with.%s %v", key, err))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func unknownKey(builtin, key string, allowed []string) string {
	if len(allowed) == 0 {
		return fmt.Sprintf("unknown key %q in with: %s takes no configuration", key, builtin)
	}
	msg := fmt.Sprintf("unknown key %q in with", key)
	if s := spec.Closest(key, allowed); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + fmt.Sprintf("; %s takes %s", builtin, strings.Join(allowed, ", "))
}

// assign stores a YAML- or JSON-decoded value in a config field of kind string, int
// or []string, the only kinds the builtins' configurations use.
func assign(field reflect.Value, val any) error {
	switch field.Kind() {
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return fmt.Errorf("must be a string, not %s", describeValue(val))
		}
		field.SetString(s)
	case reflect.Int:
		n, ok := toInt(val)
		if !ok {
			return fmt.Errorf("must be an integer, not %s", describeValue(val))
		}
		field.SetInt(int64(n))
	case reflect.Slice:
		list, ok := toStrings(val)
		if !ok {
			return fmt.Errorf("must be a list of strings, not %s", describeValue(val))
		}
		field.Set(reflect.ValueOf(list))
	default:
		panic(fmt.Sprintf("builtin: config field of unsupported kind %s", field.Kind()))
	}
	return nil
}

// toInt accepts the integer forms decoders produce: yaml.v3 gives int, encoding/json
// float64 or json.Number. A fractional or out-of-range number is not an integer.
func toInt(val any) (int, bool) {
	switch n := val.(type) {
	case int:
		return n, true
	case int64:
		if n >= math.MinInt && n <= math.MaxInt {
			return int(n), true
		}
	case uint64:
		if n <= math.MaxInt {
			return int(n), true
		}
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int(n), true
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return toInt(i)
		}
		if f, err := n.Float64(); err == nil {
			return toInt(f)
		}
	}
	return 0, false
}

func toStrings(val any) ([]string, bool) {
	switch l := val.(type) {
	case []string:
		return slices.Clone(l), true
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// describeValue names a value's type the way a YAML author thinks of it.
func describeValue(val any) string {
	switch v := val.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int, int64, uint64, json.Number:
		return fmt.Sprintf("the number %v", v)
	case float64:
		return fmt.Sprintf("the number %s", formatNumber(v))
	case []any, []string:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", val)
}
