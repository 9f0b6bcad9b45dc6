package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/runtime/tool"
)

// The headers by which a page of `agentrun dev` chooses who it is.
const (
	DevUserHeader       = "X-Agentrun-User"
	DevAttributesHeader = "X-Agentrun-Attributes"
	DevRolesHeader      = "X-Agentrun-Roles"
)

// defaultDevUser is the user of a dev request that names none.
const defaultDevUser = "dev"

// Bounds of what a dev request may say about its user.
const (
	maxDevUser       = 128
	maxDevAttributes = 4 << 10
)

// devAuth is Options.Dev: a server on a loopback address, for the one person at
// the machine, who tries the agents as any user they like. A request is the user
// its X-Agentrun-User header names, with the attributes of X-Agentrun-Attributes
// (a JSON object of strings) and the roles of X-Agentrun-Roles (comma-separated);
// nothing else in it changes who it is.
type devAuth struct{}

func (devAuth) Authenticate(r *http.Request) (Principal, error) {
	user := r.Header.Get(DevUserHeader)
	if user == "" {
		user = defaultDevUser
	}
	if !validDevUser(user) {
		return Principal{}, fmt.Errorf("%s must be 1 to %d of A-Z a-z 0-9 . _ : @ -", DevUserHeader, maxDevUser)
	}
	attrs := map[string]string{}
	if v := r.Header.Get(DevAttributesHeader); v != "" {
		if len(v) > maxDevAttributes {
			return Principal{}, fmt.Errorf("%s is longer than %d bytes", DevAttributesHeader, maxDevAttributes)
		}
		if err := json.Unmarshal([]byte(v), &attrs); err != nil {
			return Principal{}, errors.New(DevAttributesHeader + " must be a JSON object of strings")
		}
	}
	var roles []string
	for _, role := range strings.Split(r.Header.Get(DevRolesHeader), ",") {
		switch role = strings.TrimSpace(role); {
		case role == "":
		case containsString(knownRoles, role):
			roles = append(roles, role)
		default:
			return Principal{}, fmt.Errorf("%s: unknown role %q; the roles are %s", DevRolesHeader, role, strings.Join(knownRoles, ", "))
		}
	}
	return Principal{User: tool.User{ID: user, Attributes: attrs}, Via: "dev", Roles: roles}, nil
}

func validDevUser(id string) bool {
	if id == "" || len(id) > maxDevUser {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:@-", c) >= 0) {
			return false
		}
	}
	return true
}

// loopbackOnly guards a server without authentication (agentrun dev,
// --insecure-no-auth) from the web pages its user visits: a page of another site
// may send requests to 127.0.0.1 (the browser lets it post a form or a fetch
// without reading the answer, and a DNS name rebound to 127.0.0.1 reads it too),
// and each would run as a user of the page's choosing. So such a server answers
// only requests for a loopback host name, and of these only those sent by its own
// pages, by no page at all, or by a page of an origin allowed (CORS).
func loopbackOnly(h http.Handler, allowed func(origin string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopback(hostPort(r.Host)) {
			writeError(w, http.StatusForbidden, "forbidden", "a server without authentication answers requests for a loopback host (127.0.0.1, [::1], localhost) only")
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host && (allowed == nil || !allowed(origin)) {
			writeError(w, http.StatusForbidden, "forbidden", "a server without authentication answers its own pages only, not those of "+origin)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostPort is a request's Host as host:port, for IsLoopback.
func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}
