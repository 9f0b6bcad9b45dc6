// Package store holds what the memory stores share: their URLs (spec.StoreKindOf
// says which store a URL names). Each store lives in a
// sub-package (memory, sqlite, redis, postgres) and implements runtime.Store; storetest is the
// conformance suite every store passes. A run never reads a conversation's seen
// entities whole unless a rule asks for the list: Store.Seen must answer for one
// entity by an index, at a cost that does not grow with the entities kept.
//
// store imports nothing of agentrun but runtime's types through its sub-packages; it
// must not import cmd.
package store

import (
	"fmt"
	"net/url"
	"strings"
)

// SQLitePath is the file a sqlite URL names.
func SQLitePath(u string) (string, error) {
	if !strings.HasPrefix(u, "sqlite:") {
		return u, nil
	}
	rest := strings.TrimPrefix(u, "sqlite:")
	if strings.HasPrefix(rest, "//") {
		parsed, err := url.Parse(u)
		if err != nil {
			return "", err
		}
		if parsed.Host != "" {
			return "", fmt.Errorf("store URL %q: a sqlite URL has no host; write sqlite:///abs/path.db or sqlite:rel/path.db", u)
		}
		return parsed.Path, nil
	}
	if rest == "" {
		return "", fmt.Errorf("store URL %q names no file", u)
	}
	return rest, nil
}
