// Package store is what the engine asks of its memory: Store (facts, conversations,
// seen entities, the one-transaction Commit), PausedRuns (runs waiting for approval)
// and Blobs, with the records they exchange; and what the stores share, their URLs
// (spec.StoreKindOf says which store a URL names).
//
// Each store lives beneath it (memory, sqlite, redis, postgres) and imports this
// package, runtime/model and spec, never the engine; storetest is the conformance
// suite every store passes. A run never reads a conversation's seen entities whole
// unless a rule asks for the list: Store.Seen must answer for one entity by an index,
// at a cost that does not grow with the entities kept.
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
