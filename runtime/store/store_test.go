package store

import (
	"testing"

	"github.com/agentrun/agentrun/spec"
)

func TestURLs(t *testing.T) {
	tests := []struct {
		url, path string
		kind      spec.StoreKind
		err       bool
	}{
		{url: "memory:", kind: "memory"},
		{url: "memory", kind: "memory"},
		{url: "sqlite:.agentrun/state.db", kind: "sqlite", path: ".agentrun/state.db"},
		{url: "sqlite:///var/lib/agentrun/state.db", kind: "sqlite", path: "/var/lib/agentrun/state.db"},
		{url: "sqlite://host/x.db", kind: "sqlite", err: true},
		{url: "sqlite:", kind: "sqlite", err: true},
		{url: "state.db", kind: "sqlite", path: "state.db"},
		{url: "redis://127.0.0.1:6379/0", kind: "redis"},
		{url: "rediss://cache.example:6380/1", kind: "redis"},
		{url: "postgres://x", kind: "postgres"},
		{url: "postgresql://u@db.internal:5432/agentrun?schema=a1&sslmode=require", kind: "postgres"},
		{url: "mysql://x", err: true},
		{url: "", err: true},
	}
	for _, tt := range tests {
		kind, err := spec.StoreKindOf(tt.url)
		if tt.kind == "" {
			if err == nil {
				t.Errorf("StoreKindOf(%q) = %q, want an error", tt.url, kind)
			}
			continue
		}
		if err != nil || kind != tt.kind {
			t.Errorf("StoreKindOf(%q) = %q, %v; want %q", tt.url, kind, err, tt.kind)
			continue
		}
		if kind != "sqlite" {
			continue
		}
		path, err := SQLitePath(tt.url)
		if (err != nil) != tt.err || path != tt.path {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q (error %v)", tt.url, path, err, tt.path, tt.err)
		}
	}
}
