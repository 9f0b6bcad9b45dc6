package spec

import (
	"cmp"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MinSecretLen is the shortest value Mask hides: a shorter one, such as a default
// "1" or "true", would mask half of an error and hides little.
const MinSecretLen = 6

// Secret is a value that ${VAR} put into a spec element's configuration.
type Secret struct {
	Var   string // the environment variable's name
	Value string
}

// Secrets are the values the environment put into one tool's or MCP server's
// configuration, recorded when the spec loads. Whatever turns that element's
// failures into text (an error for the model, a trace, a log line) passes the text
// through Mask first.
type Secrets []Secret

// Mask replaces each secret in text, as it is and URL-escaped, by [secret VAR].
func (s Secrets) Mask(text string) string {
	return Mask(text, s.Placeholders())
}

// Placeholders maps each secret's value to [secret VAR], for Mask together with
// other values to hide.
func (s Secrets) Placeholders() map[string]string {
	m := make(map[string]string, len(s))
	for _, sec := range s {
		m[sec.Value] = "[secret " + sec.Var + "]"
	}
	return m
}

// MaskError is err with its text masked, or err itself when it holds no secret.
// The masked error still matches what err matches (errors.Is: a timeout, a
// cancellation) but does not unwrap, which would hand the unmasked text back.
func (s Secrets) MaskError(err error) error {
	if err == nil || len(s) == 0 {
		return err
	}
	msg := err.Error()
	if masked := s.Mask(msg); masked != msg {
		return &maskedError{msg: masked, err: err}
	}
	return err
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }

func (e *maskedError) Is(target error) bool { return errors.Is(e.err, target) }

// Mask replaces every occurrence in text of each key of placeholders by its value:
// the key as it is, query-escaped and path-escaped (the forms it takes in a URL).
// A longer key wins over one it contains; keys shorter than MinSecretLen are left
// alone.
func Mask(text string, placeholders map[string]string) string {
	type form struct{ old, new string }
	var forms []form
	for _, v := range slices.Sorted(maps.Keys(placeholders)) { // the same form of two values: the first one's placeholder
		if len(v) < MinSecretLen {
			continue
		}
		for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if !slices.ContainsFunc(forms, func(x form) bool { return x.old == f }) {
				forms = append(forms, form{f, placeholders[v]})
			}
		}
	}
	if len(forms) == 0 {
		return text
	}
	// strings.Replacer tries its pairs in order at each position: longest first.
	slices.SortFunc(forms, func(a, b form) int { return cmp.Or(len(b.old)-len(a.old), strings.Compare(a.old, b.old)) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f.old, f.new)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// secretsOf is what of a value taken from the environment is worth masking. A URL
// keeps its scheme and host visible, so an error still names the server that
// failed; its user info, path and query values are masked (a webhook URL's path is
// its key). Anything else is masked whole.
func secretsOf(name, value string) []Secret {
	if len(value) < MinSecretLen {
		return nil
	}
	u, err := url.Parse(value)
	if err != nil || u.Host == "" || !strings.Contains(value, "://") {
		return []Secret{{Var: name, Value: value}}
	}
	parts := []string{u.User.Username(), u.EscapedPath(), u.Path}
	if p, ok := u.User.Password(); ok {
		parts = append(parts, p)
	}
	for _, vs := range u.Query() {
		parts = append(parts, vs...)
	}
	var out []Secret
	for _, p := range parts {
		if len(p) >= MinSecretLen && !slices.Contains(out, Secret{name, p}) {
			out = append(out, Secret{Var: name, Value: p})
		}
	}
	return out
}

// recordSecrets gives the tools and MCP servers declared in d the secrets recorded
// under their entries.
func (d *document) recordSecrets(tools []Tool, servers []MCPServer) {
	for i := range tools {
		tools[i].Secrets = d.secretsUnder(d.at("tools", strconv.Itoa(i)).node)
	}
	for i := range servers {
		servers[i].Secrets = d.secretsUnder(d.at("mcp_servers", strconv.Itoa(i)).node)
	}
}

// secretsUnder collects the secrets recorded in n and below it, following aliases,
// so a tool whose headers name an anchor defined elsewhere still gets its secrets.
func (d *document) secretsUnder(n *yaml.Node) Secrets {
	var out Secrets
	seen := map[*yaml.Node]bool{}
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		n = resolveAlias(n)
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		for _, s := range d.secrets[n] {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}
