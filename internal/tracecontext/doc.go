// Package tracecontext carries a run's W3C trace context over HTTP: into the
// requests tools and MCP servers receive (InjectHTTP, Transport) and out of the
// requests serve answers (ExtractHTTP). It lives apart from runtime/telemetry, which
// wraps the engine, so that tool kinds can continue a trace without importing it.
package tracecontext
