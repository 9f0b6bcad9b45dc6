// Package examples embeds the example agents of agents/ — specs, their scenario
// tests, skill packs and knowledge files — so `agentrun init --from NAME` can copy one
// from an installed binary, far from this repository. It imports nothing of agentrun.
package examples

import (
	"embed"
	"io/fs"
)

// Portable names the examples that need nothing outside examples/agents, so init can
// copy them anywhere. code-assistant reads this repository (its files root is ../..)
// and mcp-files serves ../../docs with a Node server installed under tools/node: they
// make sense only in a clone.
func Portable() []string { return []string{"order-digest", "refund-specialist", "shop-support"} }

//go:embed agents
var agents embed.FS

// Agents is the examples/agents directory: its files at their paths below it.
func Agents() fs.FS {
	sub, err := fs.Sub(agents, "agents")
	if err != nil { // fs.Sub fails only on an invalid path, and "agents" is valid
		panic(err)
	}
	return sub
}
