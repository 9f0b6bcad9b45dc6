package spec

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RedirectPolicy says which redirects an http tool follows.
type RedirectPolicy string

const (
	RedirectNone     RedirectPolicy = "none"      // every redirect is a tool error
	RedirectSameHost RedirectPolicy = "same_host" // only to the URL's own scheme, host and port
	// RedirectAllow is the {allow: [hosts]} form: the URL's own origin, and the
	// listed hosts without the tool's headers or body.
	RedirectAllow RedirectPolicy = "allow"
)

// RedirectPolicies lists the policies written as a word (`redirects: none`); the
// schema's enum for the short form is exactly these. RedirectAllow is the mapping form.
var RedirectPolicies = []RedirectPolicy{RedirectNone, RedirectSameHost}

// Redirects is an http tool's redirects key: a policy word, or {allow: [hosts]}.
type Redirects struct {
	Policy RedirectPolicy `yaml:"-"`
	Allow  []string       `yaml:"allow"`
}

// UnmarshalYAML accepts the short form `redirects: none` as well as `{allow: […]}`.
func (r *Redirects) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Policy = RedirectPolicy(n.Value)
		return nil
	}
	type plain Redirects
	if err := n.Decode((*plain)(r)); err != nil {
		return err
	}
	r.Policy = RedirectAllow
	return nil
}

// Effective is the policy in force; an http tool without redirects gets
// DefaultRedirects.
func (r *Redirects) Effective() RedirectPolicy {
	switch {
	case r == nil:
		return DefaultRedirects
	case r.Policy == "" && len(r.Allow) > 0: // built by hand, not decoded
		return RedirectAllow
	case r.Policy == "":
		return DefaultRedirects
	}
	return r.Policy
}

// RedirectHost is one entry of redirects.allow: a host, `*.example.com` for every
// subdomain (not example.com itself), optionally with a port. Without a port it
// matches the scheme's default port only, as a URL without a port would mean.
type RedirectHost struct {
	Host     string
	Port     string
	Wildcard bool
}

func (h RedirectHost) String() string {
	s := h.Host
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if h.Wildcard {
		s = "*." + s
	}
	if h.Port != "" {
		s += ":" + h.Port
	}
	return s
}

// ParseRedirectHost reads one redirects.allow entry.
func ParseRedirectHost(entry string) (RedirectHost, error) {
	s := strings.ToLower(entry)
	switch {
	case strings.TrimSpace(s) == "" || s == "*" || s == "*.":
		return RedirectHost{}, fmt.Errorf("%q allows every host; list the hosts, like api.example.com", entry)
	case strings.Contains(s, "://"):
		return RedirectHost{}, fmt.Errorf("%q is a URL; write only the host, like api.example.com", entry)
	case strings.ContainsAny(s, "/?#@\\% \t\r\n"):
		return RedirectHost{}, fmt.Errorf("%q is not a host name; write only the host, like api.example.com or api.example.com:8443", entry)
	}
	var h RedirectHost
	h.Wildcard = strings.HasPrefix(s, "*.")
	s = strings.TrimPrefix(s, "*.")
	host, port := s, ""
	if strings.HasPrefix(s, "[") { // [::1] or [::1]:8443
		end := strings.Index(s, "]")
		if end < 0 || (end+1 < len(s) && s[end+1] != ':') {
			return RedirectHost{}, fmt.Errorf("%q is not a host name; write an IPv6 address as [::1] or [::1]:8443", entry)
		}
		host = s[1:end]
		port = strings.TrimPrefix(s[end+1:], ":")
		if net.ParseIP(host) == nil {
			return RedirectHost{}, fmt.Errorf("%q: %s is not an IPv6 address", entry, host)
		}
		if port == "" && end+1 < len(s) {
			return RedirectHost{}, fmt.Errorf("%q has an empty port", entry)
		}
	} else if net.ParseIP(s) == nil && strings.Contains(s, ":") {
		i := strings.LastIndex(s, ":")
		host, port = s[:i], s[i+1:]
		if strings.Contains(host, ":") {
			return RedirectHost{}, fmt.Errorf("%q is not a host name; write an IPv6 address in brackets, like [::1]:8443", entry)
		}
	}
	host = strings.TrimSuffix(host, ".")
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return RedirectHost{}, fmt.Errorf("%q: the port must be a number from 1 to 65535", entry)
		}
	}
	switch {
	case host == "":
		return RedirectHost{}, fmt.Errorf("%q has no host", entry)
	case strings.Contains(host, "*"):
		return RedirectHost{}, fmt.Errorf("%q: a wildcard is only allowed as the first label, like *.example.com", entry)
	case h.Wildcard && net.ParseIP(host) != nil:
		return RedirectHost{}, fmt.Errorf("%q: an IP address has no subdomains; write it without *.", entry)
	}
	h.Host, h.Port = host, port
	return h, nil
}

// Matches reports whether a redirect to u goes to this host (and port).
func (h RedirectHost) Matches(u *url.URL) bool {
	host := hostOf(u)
	if h.Wildcard {
		if !strings.HasSuffix(host, "."+h.Host) {
			return false
		}
	} else if host != h.Host {
		return false
	}
	return portOf(u) == cmp.Or(h.Port, portOf(&url.URL{Scheme: u.Scheme}))
}

// SameOrigin reports whether two URLs have the same scheme, host and port: where a
// redirect may go without the spec's leave.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && hostOf(a) == hostOf(b) && portOf(a) == portOf(b)
}

// hostOf is u's host name as DNS compares it: lower case, no trailing dot.
func hostOf(u *url.URL) string { return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") }

// portOf is u's port, or the one its scheme means without one.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// checkRedirects reports the allow entries that are not hosts, at their positions.
func (c *checker) checkRedirects(h *HTTPTool, idx string) {
	if h.Redirects == nil {
		return
	}
	for i, entry := range h.Redirects.Allow {
		at := c.at("tools", idx, "http", "redirects", "allow", strconv.Itoa(i))
		if at.node == nil || c.failed[at.path] || c.unset[at.node].vars != nil {
			continue
		}
		if _, err := ParseRedirectHost(entry); err != nil {
			c.errorf(at, "", "%v", err)
		}
	}
}
