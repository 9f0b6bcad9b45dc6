package jsonpath

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		path     string
		wildcard bool
		err      string
		offset   int
	}{
		{path: "$"},
		{path: "$.a.b"},
		{path: `$.items[0]["unit price"][12]`},
		{path: `$["a]b"]`},
		{path: `$['a.b']`},
		{path: `$["tab\there"]`},
		{path: `$["客户"].名字`},
		{path: "$.items[*].sku", wildcard: true},
		{path: "$.*", wildcard: true},
		{path: "a", err: "a path starts with $"},
		{path: "order.id", err: "a path starts with $"},
		{path: "$.", err: "a . is followed by no key at offset 1", offset: 1},
		{path: "$.order..id", err: "a . is followed by no key at offset 7", offset: 7},
		{path: "$a", err: `expected . or [ at "a" at offset 1`, offset: 1},
		{path: "$[", err: "[ has no closing ] at offset 1", offset: 1},
		{path: "$.items[0", err: "[0 has no closing ] at offset 7", offset: 7},
		{path: `$["a`, err: `the key at ["a has no closing "] at offset 1`, offset: 1},
		{path: "$['a", err: `the key at ['a has no closing '] at offset 1`, offset: 1},
		{path: `$["a\q"]`, err: `bad quoted key "a\q" at offset 1`, offset: 1},
		{path: "$[-1]", err: "[-1] is not an index (0, 1, …), * or a quoted key at offset 1", offset: 1},
		{path: "$[+1]", err: "[+1] is not an index", offset: 1},
		{path: "$.a[x]", err: "[x] is not an index (0, 1, …), * or a quoted key at offset 3", offset: 3},
		{path: "$.items[?(@.qty>1)]", err: "[?(@.qty>1)] is not an index", offset: 7},
		{path: "$.a]", err: `key "a]" needs brackets: ['key'] at offset 1`, offset: 1},
		{path: "$.first name", err: `key "first name" needs brackets: ['key']`, offset: 1},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := Parse(tt.path)
			if tt.err != "" {
				var pe *Error
				if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), tt.err) || pe.Offset != tt.offset {
					t.Errorf("error %v, want %s (offset %d)", err, tt.err, tt.offset)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != tt.path || p.Wildcard() != tt.wildcard {
				t.Errorf("String() = %s, Wildcard() = %v", p, p.Wildcard())
			}
		})
	}
	if (Path{}).String() != "$" {
		t.Error("the zero path is not $")
	}
	p, _ := Parse(`$["a b"][*]`)
	if b, err := json.Marshal(map[string]Path{"p": p}); err != nil || string(b) != `{"p":"$[\"a b\"][*]"}` {
		t.Errorf("json.Marshal = %s, %v", b, err)
	}
}

const order = `{"order": {"id": "A-17", "total": 42, "note": null,
  "items": [{"name": "pizza", "qty": 2}, {"name": "汉堡", "qty": 1}, {"qty": 3}]},
  "客户": {"名字": "王小明", "城市": "上海"}, "a.b": 1, "a]b": 2, "": 3}`

func TestSelect(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(order), &doc); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		want   []any
		reason string
	}{
		{path: "$", want: []any{doc}},
		{path: "$.order.id", want: []any{"A-17"}},
		{path: "$.order.note", want: []any{nil}},
		{path: "$.order.items[1].name", want: []any{"汉堡"}},
		{path: `$['a.b']`, want: []any{1.0}},
		{path: `$["a]b"]`, want: []any{2.0}},
		{path: `$[""]`, want: []any{3.0}},
		{path: `$["客户"]["名字"]`, want: []any{"王小明"}},
		{path: "$.order.items[*].name", want: []any{"pizza", "汉堡"}},
		{path: "$.order.items[*].qty", want: []any{2.0, 1.0, 3.0}},
		{path: "$.客户.*", want: []any{"王小明", "上海"}}, // keys sorted: 名字 (U+540D) < 城市 (U+57CE)
		{path: "$.order.items[*].price"},
		{path: "$.order.id[*]"},
		{path: "$.order.customer.name", reason: `$.order.customer.name: no key "customer" at $.order`},
		{path: "$.order.items[5].name", reason: "$.order.items[5].name: no element 5 (the array has 3) at $.order.items"},
		{path: "$.order[0]", reason: `$.order[0]: no array ({"id":"A-17",`},
		{path: "$.order.id.x", reason: `$.order.id.x: no object ("A-17") at $.order.id`},
		{path: `$["order"]['items'][9]`, reason: `$["order"]['items'][9]: no element 9 (the array has 3) at $["order"]['items']`},
		{path: "$[0]", reason: "$[0]: no array ({"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := Parse(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got, reason := p.Select(doc)
			if tt.reason != "" {
				if got != nil || !strings.HasPrefix(reason, tt.reason) {
					t.Errorf("Select = %v, %q; want the reason %q", got, reason, tt.reason)
				}
				return
			}
			if reason != "" || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Select = %v, %q; want %v", got, reason, tt.want)
			}
		})
	}
}
