// Package layering holds the test that enforces the dependency direction of
// DESIGN.md: cmd → assembly (the module's root package) → runtime, skills, builtin,
// scenario → spec → schema, with internal/... helpers usable by all. The rules live in
// one table in layering_test.go; when a new package appears, it fails until the
// package is given a place there.
//
// It has no code of its own and imports nothing of agentrun: the test reads the
// import graph with `go list`, so it sees every package without importing any.
package layering
