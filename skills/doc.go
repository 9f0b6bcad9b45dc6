// Package skills loads skill packs — a skill.yaml with instructions, tools, filters and
// options — from a directory or from the bundled library, and turns them into spec
// fragments that merge into an agent. It imports spec; it must not import runtime or
// cmd.
package skills
