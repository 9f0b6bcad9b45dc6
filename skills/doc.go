// Package skills holds the bundled skill packs — calculator, files, web, shell, time —
// embedded in the binary. A skill pack is a directory with a skill.yaml (a prompt
// fragment, tools, the filters that belong to them, options) and a README.md; the
// spec loader reads packs, bundled or from a directory, and merges them into agents.
//
// skills imports nothing of agentrun; it must not import runtime or cmd.
package skills
