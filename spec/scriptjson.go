package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// JSONValue is a YAML value of a model script kept as the JSON text it stands for,
// with its keys in the order they were written: a scripted structured answer goes
// out as written, and a recorded one comes back byte for byte.
type JSONValue json.RawMessage

// UnmarshalYAML converts the value to JSON. What JSON cannot hold (an infinity,
// binary data, a key that is not a string) leaves it empty: the loader has
// reported it at its line already.
func (v *JSONValue) UnmarshalYAML(n *yaml.Node) error {
	budget := maxJSONNodes
	var b bytes.Buffer
	if writeNodeJSON(&b, n, &budget) == nil {
		*v = b.Bytes()
	}
	return nil
}

// MarshalYAML writes the JSON as the YAML value it is, keys in their order.
func (v JSONValue) MarshalYAML() (any, error) { return jsonNode(v) }

// MarshalJSON writes the JSON text as it is.
func (v JSONValue) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}

// ScriptBlock is one of a provider's native reasoning blocks in a script: a
// mapping, sent as JSON with its keys in order, or a string, which is the block's
// JSON text as it is (how --record keeps a block whose text a mapping would not
// reproduce byte for byte).
type ScriptBlock struct {
	JSON     json.RawMessage
	verbatim bool // written as a string
}

func (b *ScriptBlock) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		b.JSON, b.verbatim = json.RawMessage(n.Value), true
		return nil
	}
	var v JSONValue
	_ = v.UnmarshalYAML(n)
	b.JSON = json.RawMessage(v)
	return nil
}

// MarshalYAML writes the block as a mapping when that reads back to the same
// bytes, else as its JSON text.
func (b ScriptBlock) MarshalYAML() (any, error) {
	if !b.verbatim && sameAsMapping(b.JSON) {
		return jsonNode(JSONValue(b.JSON))
	}
	return string(b.JSON), nil
}

func (b ScriptBlock) MarshalJSON() ([]byte, error) { return JSONValue(b.JSON).MarshalJSON() }

// NewScriptBlock keeps a block of a recorded response.
func NewScriptBlock(raw json.RawMessage) ScriptBlock { return ScriptBlock{JSON: raw} }

// sameAsMapping reports whether raw, written as YAML and read back, is raw again:
// compact JSON with its strings escaped the way writeNodeJSON escapes them.
func sameAsMapping(raw []byte) bool {
	node, err := jsonNode(JSONValue(raw))
	if err != nil {
		return false
	}
	budget := maxJSONNodes
	var b bytes.Buffer
	return writeNodeJSON(&b, node, &budget) == nil && bytes.Equal(b.Bytes(), raw)
}

// JSONAsValue returns text as the JSONValue a script writes as `output:` when
// that reads back to the very same text, and false when it would not (the text is
// not JSON, or not compact): --record then keeps the text as it is.
func JSONAsValue(text string) (JSONValue, bool) {
	if !json.Valid([]byte(text)) || !sameAsMapping([]byte(text)) {
		return nil, false
	}
	return JSONValue(text), true
}

var errNotJSON = errors.New("not a JSON value")

// writeNodeJSON writes a YAML node as compact JSON, keys in order, strings without
// HTML escaping (as models write them). budget bounds the nodes written, aliases
// expanded.
func writeNodeJSON(b *bytes.Buffer, n *yaml.Node, budget *int) error {
	if *budget--; *budget < 0 {
		return errNotJSON
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return errNotJSON
		}
		return writeNodeJSON(b, n.Content[0], budget)
	case yaml.AliasNode:
		if t := resolveAlias(n); t != nil {
			return writeNodeJSON(b, t, budget)
		}
		return errNotJSON
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return errNotJSON
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k.Value)
			b.WriteByte(':')
			if err := writeNodeJSON(b, n.Content[i+1], budget); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeNodeJSON(b, c, budget); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalarJSON(b, n)
	default:
		return errNotJSON
	}
	return nil
}

func writeScalarJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var v bool
		if n.Decode(&v) != nil {
			return errNotJSON
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!int", "!!float":
		if json.Valid([]byte(n.Value)) && n.Value != "" && (n.Value[0] == '-' || n.Value[0] >= '0' && n.Value[0] <= '9') {
			b.WriteString(n.Value) // the number as written: 1.50 stays 1.50
			return nil
		}
		var f float64
		if n.Decode(&f) != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return errNotJSON
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case "!!binary":
		return errNotJSON
	default: // !!str, !!timestamp: the text as written
		writeJSONString(b, n.Value)
	}
	return nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// jsonNode reads JSON text into a YAML node, keys in order; numbers keep their
// text.
func jsonNode(raw JSONValue) (*yaml.Node, error) {
	if len(raw) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := decodeJSONNode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: more than one value", errNotJSON)
	}
	return n, nil
}

func decodeJSONNode(dec *json.Decoder, depth int) (*yaml.Node, error) {
	if depth > 1000 {
		return nil, fmt.Errorf("%w: nested too deeply", errNotJSON)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.(string)})
			}
			v, err := decodeJSONNode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	default: // nil
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
}
