// Package runtime is the engine: it compiles a validated spec into an immutable Agent
// and runs it — the function-calling state machine (THINKING, TOOL_EXECUTING,
// VALIDATING, FINISHED, STOPPED) and the run's stages (routing, memory, knowledge,
// guards and budgets, approvals, the plan, the judge, filters), each keeping its state
// in its own file.
//
// The engine names what plugs into it only through the interface packages beneath it
// — runtime/model, runtime/tool, runtime/store and runtime/knowledge — and spec; it
// never imports an implementation (a provider, a store, a tool kind, MCP, an index),
// and none of those imports it. runtime/telemetry and runtime/temporal wrap it.
// internal/layering enforces all of it.
package runtime
