// Package agentrun assembles agents: one call turns a spec file into a ready agent
// with its models, memory store, MCP servers and tools, and one Close releases all
// of them. The CLI's exec, explain, graph and test use it, and so can any Go
// program that runs agents (see the package example).
//
// Assembly follows provision → validate → cleanup-on-failure: Open loads the spec,
// builds the models, opens the store, starts the MCP servers and compiles the
// agent; when a step fails, whatever the earlier steps opened is closed before Open
// returns.
//
// agentrun sits between cmd and the rest: it may import runtime and its
// sub-packages, skills, builtin, scenario and spec, and nothing below it imports it.
package agentrun
