// Package mcp takes tools from Model Context Protocol servers — stdio processes or
// streamable HTTP endpoints — with the official Go SDK. A Manager connects to a
// spec's servers, lists their allowed tools for the runtime under the names the model
// sees (the server's prefix, and a name chat APIs accept: spec.ModelToolNames), calls
// them by their names on the server, restarts a crashed stdio server once — sending an
// interrupted call again only when the tool is idempotent — audits every call, and
// stops every process it started on Close. A stdio server gets only the environment
// the spec declares for it, plus PATH and HOME. A url server whose requests carry the
// user (headers rendering the run context, forward_auth) is called over a session of
// each user's own, bounded in number and closed when idle.
//
// mcp imports runtime and spec; it must not import cmd.
package mcp
