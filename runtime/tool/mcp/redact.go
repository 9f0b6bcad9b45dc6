package mcp

import (
	"net/url"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// redact removes from an error's text what may be a secret of the connection it
// came from: what ${VAR} put into the server's configuration (as
// [secret VAR]), the value of every header sent (and the credential after a
// scheme such as Bearer), and the URL's userinfo and query. A server's or the
// SDK's message may quote any of them.
func redact(msg string, sp *spec.MCPServer, headers map[string]string) string {
	hide := sp.Secrets.Placeholders()
	add := func(v string) {
		if _, named := hide[v]; !named {
			hide[v] = "[redacted]"
		}
	}
	for _, v := range headers {
		add(v)
		if _, credential, ok := strings.Cut(v, " "); ok {
			add(strings.TrimSpace(credential))
		}
	}
	if u, err := url.Parse(sp.URL); err == nil {
		if u.User != nil {
			password, _ := u.User.Password()
			add(u.User.String())
			add(u.User.Username())
			add(password)
		}
		add(u.RawQuery)
		for _, values := range u.Query() {
			for _, v := range values {
				add(v)
			}
		}
	}
	return spec.Mask(msg, hide)
}
