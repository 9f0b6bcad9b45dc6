package openai

import "slices"

// strictCompatible reports whether OpenAI's strict structured output can take
// schema as it is: every object in it says additionalProperties: false and
// requires all of its properties. Strict mode refuses any other schema with a
// 400, so such a schema is sent with strict: false, where the model is asked,
// not forced, to follow it; the runtime validates the answer either way.
func strictCompatible(schema map[string]any) bool {
	return schema != nil && strictNode(schema)
}

// subschemaLists and subschemaMaps are the keywords whose values hold schemas:
// a list of them, or a map of names to them.
var (
	subschemaLists = []string{"anyOf", "allOf", "oneOf", "prefixItems"}
	subschemaMaps  = []string{"properties", "$defs", "definitions"}
)

func strictNode(node map[string]any) bool {
	if isObjectSchema(node) && !strictObject(node) {
		return false
	}
	if items, ok := node["items"].(map[string]any); ok && !strictNode(items) {
		return false
	}
	for _, k := range subschemaLists {
		list, _ := node[k].([]any)
		for _, s := range list {
			if sub, ok := s.(map[string]any); ok && !strictNode(sub) {
				return false
			}
		}
	}
	for _, k := range subschemaMaps {
		m, _ := node[k].(map[string]any)
		for _, s := range m {
			if sub, ok := s.(map[string]any); ok && !strictNode(sub) {
				return false
			}
		}
	}
	return true
}

// isObjectSchema: the node's type is object (alone or among others), or it
// lists properties.
func isObjectSchema(node map[string]any) bool {
	if _, ok := node["properties"]; ok {
		return true
	}
	switch t := node["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return slices.Contains(t, any("object"))
	}
	return false
}

// strictObject: additionalProperties is false and required names every property.
func strictObject(node map[string]any) bool {
	if ap, ok := node["additionalProperties"].(bool); !ok || ap {
		return false
	}
	props, _ := node["properties"].(map[string]any)
	required := map[string]bool{}
	switch r := node["required"].(type) {
	case []any:
		for _, n := range r {
			if s, ok := n.(string); ok {
				required[s] = true
			}
		}
	case []string: // schemas built in Go rather than decoded from YAML or JSON
		for _, s := range r {
			required[s] = true
		}
	}
	for name := range props {
		if !required[name] {
			return false
		}
	}
	return true
}
