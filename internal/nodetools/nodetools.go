// Package nodetools finds the Node programs some tests drive (yaml-language-server,
// Mermaid's parser), which .ci/run installs under tools/node with npm ci. A test
// skips when they are missing, except in CI, where that is a failure.
package nodetools

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir returns the absolute path of tools/node, with its node_modules installed.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	tools := filepath.Join(dir, "tools", "node")
	_, modErr := os.Stat(filepath.Join(tools, "node_modules"))
	_, nodeErr := exec.LookPath("node")
	if modErr != nil || nodeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node tools are not installed (%v, %v): .ci/run runs npm ci --prefix tools/node", modErr, nodeErr)
		}
		t.Skip("node tools not installed; run: npm ci --prefix tools/node")
	}
	return tools
}
