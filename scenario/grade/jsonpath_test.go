package grade

import (
	"strings"
	"testing"
)

const order = `{"order": {"id": "A-17", "total": 42, "paid": true, "note": null,
  "items": [{"name": "pizza", "qty": 2}, {"name": "汉堡", "qty": 1}], "tags": ["fast", "加急"]},
  "客户": {"名字": "王小明"}, "a.b": 1}`

func TestJSONPath(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		op     JSONOp
		want   any
		answer string // order when empty
		passed bool
		reason string
	}{
		{name: "key equals a string", path: "$.order.id", op: JSONEquals, want: "A-17", passed: true, reason: `$.order.id is "A-17"`},
		{name: "key differs", path: "$.order.id", op: JSONEquals, want: "B-1", reason: `$.order.id is "A-17", not "B-1"`},
		{name: "an int equals a float", path: "$.order.total", op: JSONEquals, want: 42.0, passed: true},
		{name: "a number is not its text", path: "$.order.total", op: JSONEquals, want: "42", reason: `$.order.total is 42, not "42"`},
		{name: "a bool", path: "$.order.paid", op: JSONEquals, want: true, passed: true},
		{name: "null exists", path: "$.order.note", op: JSONExists, passed: true, reason: "$.order.note is null"},
		{name: "null equals nil", path: "$.order.note", op: JSONEquals, want: nil, passed: true},
		{name: "an index", path: "$.order.items[1].name", op: JSONEquals, want: "汉堡", passed: true, reason: `is "汉堡"`},
		{name: "an object equals a map", path: "$.order.items[0]", op: JSONEquals, want: map[string]any{"qty": 2, "name": "pizza"}, passed: true},
		{name: "a wildcard's values", path: "$.order.items[*].name", op: JSONEquals, want: []string{"pizza", "汉堡"}, passed: true,
			reason: `$.order.items[*].name is ["pizza","汉堡"]`},
		{name: "a wildcard holds one", path: "$.order.items[*].qty", op: JSONContains, want: 2, passed: true, reason: "holds 2"},
		{name: "a wildcard holds none", path: "$.order.items[*].qty", op: JSONContains, want: 5, reason: "$.order.items[*].qty is [2,1], which holds no 5"},
		{name: "a dot wildcard", path: "$.客户.*", op: JSONEquals, want: []string{"王小明"}, passed: true},
		{name: "a wildcard selecting nothing", path: "$.order.items[*].price", op: JSONExists, reason: "$.order.items[*].price selects nothing in the answer"},
		{name: "chinese keys", path: "$.客户.名字", op: JSONContains, want: "小明", passed: true, reason: `$.客户.名字 contains "小明"`},
		{name: "a quoted key", path: "$['a.b']", op: JSONEquals, want: 1, passed: true},
		{name: "a double-quoted key", path: `$["客户"]["名字"]`, op: JSONEquals, want: "王小明", passed: true},
		{name: "an array holds a text", path: "$.order.tags", op: JSONContains, want: "加急", passed: true},
		{name: "a string lacks a text", path: "$.order.id", op: JSONContains, want: "Z", reason: `$.order.id is "A-17", which does not contain "Z"`},
		{name: "contains on a number", path: "$.order.total", op: JSONContains, want: 4, reason: "$.order.total is 42: contains 4 needs a string or an array there"},
		{name: "a missing key", path: "$.order.customer.name", op: JSONExists, reason: `$.order.customer.name: no key "customer" at $.order`},
		{name: "an index past the end", path: "$.order.items[5].name", op: JSONExists, reason: "$.order.items[5].name: no element 5 (the array has 2) at $.order.items"},
		{name: "an index into an object", path: "$.order[0]", op: JSONExists, reason: "$.order[0]: no array ("},
		{name: "a key of a string", path: "$.order.id.x", op: JSONExists, reason: `$.order.id.x: no object ("A-17") at $.order.id`},
		{name: "the whole answer", path: "$", op: JSONEquals, answer: `[1, 2]`, want: []int{1, 2}, passed: true},
		{name: "a fenced answer", path: "$.ok", op: JSONEquals, answer: "```json\n{\"ok\": true}\n```", want: true, passed: true},
		{name: "not JSON", path: "$.ok", op: JSONExists, answer: "Sure! Here it is: {", reason: `the answer is not JSON (invalid character 'S'`},
		{name: "two values", path: "$.ok", op: JSONExists, answer: `{"ok": 1} {"ok": 2}`, reason: "the answer is not JSON (more than one value)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := NewJSONPath(tt.path, tt.op, tt.want)
			if err != nil {
				t.Fatal(err)
			}
			answer := tt.answer
			if answer == "" {
				answer = order
			}
			score := 0.0
			if tt.passed {
				score = 1
			}
			check(t, j.Grade(answer), tt.passed, score, tt.reason)
		})
	}
}

func TestJSONPathErrors(t *testing.T) {
	tests := []struct {
		name, path string
		op         JSONOp
		want       any
		err        string
	}{
		{name: "no dollar", path: "order.id", op: JSONExists, err: `json path "order.id": a path starts with $`},
		{name: "an empty key", path: "$.order..id", op: JSONExists, err: `json path "$.order..id": a . is followed by no key`},
		{name: "a trailing dot", path: "$.order.", op: JSONExists, err: `a . is followed by no key`},
		{name: "no closing bracket", path: "$.items[0", op: JSONExists, err: `json path "$.items[0": [0 has no closing ]`},
		{name: "a negative index", path: "$.items[-1]", op: JSONExists, err: `[-1] is not an index (0, 1, …), * or a quoted key`},
		{name: "a filter", path: "$.items[?(@.qty>1)]", op: JSONExists, err: `[?(@.qty>1)] is not an index`},
		{name: "an unclosed quote", path: "$['a", op: JSONExists, err: `the key at ['a has no closing ']`},
		{name: "junk after $", path: "$order", op: JSONExists, err: `expected . or [ at "order"`},
		{name: "a key with a space", path: "$.first name", op: JSONExists, err: `key "first name" needs brackets: ['key']`},
		{name: "exists with a value", path: "$.a", op: JSONExists, want: 1, err: `json path "$.a": exists takes no value`},
		{name: "an unknown check", path: "$.a", op: "matches", want: "x", err: `json path "$.a": unknown check "matches" (exists, equals or contains)`},
		{name: "a value not JSON", path: "$.a", op: JSONEquals, want: func() {}, err: `the value to compare is not JSON: json: unsupported type: func()`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewJSONPath(tt.path, tt.op, tt.want)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error = %v, want %q", err, tt.err)
			}
		})
	}
}
