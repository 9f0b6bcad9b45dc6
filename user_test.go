package agentrun_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentrun/agentrun"
)

// The run's user is bound into tools where the model cannot change it, so a value no
// tool could use safely is refused when the run is asked for, not when a tool builds
// a request from it.
func TestUserRefusesUnsafeValues(t *testing.T) {
	a, err := agentrun.Open(context.Background(), writeSpec(t, `version: 1
name: x
context: {user: [tenant, tier]}
tools:
  - name: orders
    bind: {org: user.tenant}
    http: {url: "https://shop.example/{{ args.org }}/orders", headers: {X-Tier: "{{ user.tier }}"}}
`), agentrun.Options{Model: "test", Inspect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tests := []struct {
		name  string
		id    string
		attrs []string
		err   string // "" for accepted
	}{
		{name: "exec's default", id: "cli-user"},
		{name: "email and domain ids", id: `DOMAIN\alice@example.com`},
		{name: "dots inside an id", id: "a..b"},
		{name: "empty id", id: "", err: `user id "" is empty`},
		{name: "dot", id: ".", err: `user id "." is not allowed: "." and ".." are steps in a URL's path, not names`},
		{name: "dot dot", id: "..", err: `user id ".." is not allowed`},
		{name: "slash", id: "alice/../bob", err: `user id "alice/../bob" is not allowed: it contains "/"`},
		{name: "control character", id: "alice\r\nX-Admin: 1", err: "it contains a control character"},
		{name: "encoded dot dot", id: "%2e%2e", err: `user id "%2e%2e" is not allowed: it would make the segment ".." in a URL's path`},
		{name: "attribute in a URL", id: "u", attrs: []string{"tenant=acme", "tier=gold"}},
		{name: "dot-dot attribute in a URL", id: "u", attrs: []string{"tenant=.."}, err: `"tenant=..": user.tenant goes into an http tool's URL, and it would make the segment ".."`},
		{name: "empty attribute in a URL", id: "u", attrs: []string{"tenant="}, err: "would make an empty segment"},
		{name: "attribute only in a header", id: "u", attrs: []string{"tier=..", "tier="}},
		{name: "control character in any attribute", id: "u", attrs: []string{"tier=gold\nX: 1"}, err: "the value of tier contains a control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := agentrun.User(a.Spec, tt.id, tt.attrs)
			if tt.err == "" {
				if err != nil || u.ID != tt.id {
					t.Errorf("User(%q, %q) = %+v, %v", tt.id, tt.attrs, u, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("User(%q, %q): err = %v\nwant %q", tt.id, tt.attrs, err, tt.err)
			}
			var idErr *agentrun.UserIDError
			if isID := errors.As(err, &idErr); isID != (tt.attrs == nil) {
				t.Errorf("err %v: a UserIDError is %v", err, isID)
			}
		})
	}
}
