// Package runtime compiles a validated spec into an immutable Agent and runs it: the
// function-calling state machine (THINKING, TOOL_EXECUTING, VALIDATING, FINISHED,
// STOPPED), the advisor pipeline (routing, context, memory, guards, judge, filters) and
// the interfaces it consumes (Model, Tool, Store, Observer), declared here where they
// are used.
//
// runtime imports spec; it must not import cmd, builtin or skills. Provider adapters,
// stores and MCP live in sub-packages so the core has no heavy imports.
package runtime
