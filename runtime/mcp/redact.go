package mcp

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// minSecret is the length below which a header or query value is left in an error:
// replacing "1" or "en" everywhere would garble the message, and hides no secret.
const minSecret = 4

// redact removes from an error's text what may be a secret of the connection it
// came from: the value of every header sent (and the credential after a scheme
// such as Bearer), and the URL's userinfo and query, where ${VAR} secrets go. A
// server's or the SDK's message may quote any of them.
func redact(msg, endpoint string, headers map[string]string) string {
	var secrets []string
	for _, v := range headers {
		secrets = append(secrets, v)
		if _, credential, ok := strings.Cut(v, " "); ok {
			secrets = append(secrets, strings.TrimSpace(credential))
		}
	}
	if u, err := url.Parse(endpoint); err == nil {
		if u.User != nil {
			password, _ := u.User.Password()
			secrets = append(secrets, u.User.String(), u.User.Username(), password)
		}
		secrets = append(secrets, u.RawQuery)
		for _, values := range u.Query() {
			secrets = append(secrets, values...)
		}
	}
	// Longest first, so that no part of a longer secret is left once a shorter one
	// inside it is replaced.
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, s := range secrets {
		if len(s) >= minSecret {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}
