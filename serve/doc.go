// Package serve is `agentrun serve`: agents as an HTTP service. It offers a run API
// (JSON or server-sent events), an OpenAI-compatible chat completions endpoint, and
// the operations endpoints (health, readiness, Prometheus metrics).
//
// Identity comes only from authentication (Authenticator): the principal's user id
// and attributes are the run context that tools bind, and nothing in a request body,
// header or query parameter sets them. Conversations, runs and memory belong to
// their principal; another principal's are not found.
//
// serve builds agents with the assembly package (the module's root) and may import
// runtime and spec; nothing but cmd imports serve.
package serve
