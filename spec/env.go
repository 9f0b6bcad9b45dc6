package spec

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// interpolate expands ${VAR}, ${VAR:-default} and $$ (a literal $) in s. Variables
// that are unset and have no default expand to "" and are returned in unset; the
// values taken from the environment (not defaults, which the spec itself holds) are
// returned in fromEnv.
func interpolate(s string, lookup func(string) (string, bool)) (out string, fromEnv []Secret, unset []string, err error) {
	if !strings.Contains(s, "$") {
		return s, nil, nil, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '{':
		default:
			b.WriteByte(c)
			continue
		}
		if strings.HasPrefix(s[i:], "${options.") {
			b.WriteByte(c) // a skill option, substituted (or reported) before
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return s, nil, nil, fmt.Errorf("unterminated ${ at offset %d", i)
		}
		inner := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(inner, ":-")
		if !validEnvName(name) {
			return s, nil, nil, fmt.Errorf("invalid variable name %q in ${%s}", name, inner)
		}
		if v, ok := lookup(name); ok && (v != "" || !hasDef) {
			b.WriteString(v)
			fromEnv = append(fromEnv, Secret{Var: name, Value: v})
		} else if hasDef {
			b.WriteString(def)
		} else {
			unset = append(unset, name)
		}
		i += end
	}
	return b.String(), fromEnv, unset, nil
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		letter := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// interpolateTree expands variables in every scalar value (not in keys). A plain
// scalar's type is resolved again afterwards, so `temperature: ${TEMP:-0.2}` is a
// number. Aliases are not followed: each node is visited once, where it is defined.
// The values a node took from the environment are recorded with it, so the tool
// or MCP server it configures can mask them in its errors (see Secrets).
func (d *document) interpolateTree(n *yaml.Node, path string, lookup func(string) (string, bool)) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			d.interpolateTree(c, p, lookup)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.interpolateTree(n.Content[i+1], joinKey(path, n.Content[i].Value), lookup)
		}
	case yaml.ScalarNode:
		out, fromEnv, unset, err := interpolate(n.Value, lookup)
		if err != nil {
			d.errorf(location{pos: d.posOf(n), path: path}, "write $$ for a literal $", "%v", err)
			return
		}
		if out == n.Value {
			return
		}
		n.Value = out
		// An empty result stays a string: ${URL:-} means "", not null.
		if n.Style == 0 && n.Tag == "!!str" && out != "" {
			n.Tag = "" // let the plain scalar resolve to a number, bool or null again
		}
		if len(unset) > 0 {
			d.unset[n] = unsetRef{path: path, vars: unset}
		}
		for _, v := range fromEnv {
			d.secrets[n] = append(d.secrets[n], secretsOf(v.Var, v.Value)...)
		}
	}
}
