// Package store holds what the memory stores share: their URLs. Each store lives in a
// sub-package (memory, sqlite, redis) and implements runtime.Store; storetest is the
// conformance suite every store passes.
//
// store imports nothing of agentrun but runtime's types through its sub-packages; it
// must not import cmd.
package store

import (
	"fmt"
	"net/url"
	"strings"
)

// Kind returns the store a URL names: memory, sqlite or redis.
//
//	memory:                       process-local
//	sqlite:///var/lib/agentrun.db sqlite:relative/path.db, or a plain path ending in .db
//	redis://localhost:6379/0      rediss:// for TLS
func Kind(u string) (string, error) {
	switch {
	case u == "memory" || strings.HasPrefix(u, "memory:"):
		return "memory", nil
	case strings.HasPrefix(u, "sqlite:"):
		return "sqlite", nil
	case strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://"):
		return "redis", nil
	case strings.HasSuffix(u, ".db") && !strings.Contains(u, "://"):
		return "sqlite", nil
	}
	return "", fmt.Errorf("store URL %q: want memory:, sqlite:///path.db or redis://host:6379/0", u)
}

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
