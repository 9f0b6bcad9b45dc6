// Package mcp takes tools from Model Context Protocol servers — stdio processes or
// streamable HTTP endpoints — with the official Go SDK. A Manager connects to a
// spec's servers, lists their allowed tools (with an optional name prefix) for the
// runtime, calls them, restarts a crashed stdio server once, audits every call, and
// stops every process it started on Close. A stdio server gets only the environment
// the spec declares for it, plus PATH and HOME.
//
// mcp imports runtime and spec; it must not import cmd.
package mcp
