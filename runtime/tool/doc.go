// Package tool is what the engine asks of a tool: Tool, its Input (arguments, the
// bound User, the run's values for its templates), Info for tools that describe
// themselves, and the Registry of Factory functions by kind that Compile builds every
// spec tool through. User is the identity that authentication bound to the run; it
// reaches tools here and never the model.
//
// The tool kinds live beneath it: kinds (command and http), mcp (MCP servers) and
// a2a (remote A2A agents, the agents entries with a2a:). The
// builtin tools (package builtin) implement the same interface. What a kind renders and
// passes on is declared once in spec (spec.ToolKind); the engine reads that
// declaration, not the implementation.
package tool
