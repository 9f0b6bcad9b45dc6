// Package graph is a compiled agent drawn as data: its intents, domains, tools
// and sub-agents, its workflow, and the run's state machine as the runtime's own
// transition table (runtime.Edges) leaves it for the agent's settings. Build makes
// the Graph; WriteMermaid draws it for `agentrun graph`, and serve hands it out as
// JSON for the console.
//
// Node ids are derivable from a run's events, so a client can light up a run's
// path: intent:NAME (the intent event), tool:NAME and agent:NAME (a tool_call's
// tool, a sub-agent's when it is one), state:STATE (a state event's from and
// state), domain:NAME, step:NAME (a workflow step event). A transition edge's
// label is the runtime.Trigger a state event carries.
//
// graph reads the engine (runtime) and spec, and nothing that plugs into the
// engine; internal/layering enforces it.
package graph
