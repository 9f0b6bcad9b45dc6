// Package mcp takes tools from Model Context Protocol servers — stdio processes or
// streamable HTTP endpoints — with the official Go SDK. A Manager connects to a
// spec's servers, lists their allowed tools for the runtime under the names the model
// sees (the server's prefix, and a name chat APIs accept: spec.ModelToolNames), calls
// them by their names on the server, restarts a crashed stdio server once — sending an
// interrupted call again only when the tool is idempotent — audits every call, and
// stops every process it started on Close. A stdio server gets only the environment
// the spec declares for it, plus PATH and HOME.
//
// mcp imports runtime and spec; it must not import cmd.
package mcp
