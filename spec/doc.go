// Package spec loads agent specs: YAML with positions, environment interpolation,
// JSON-schema validation and semantic checks (references, expressions, templates,
// regular expressions, durations). Every problem is a Diagnostic with file:line:col and
// the YAML path; a load reports all of them at once.
//
// spec imports only schema; it must never import runtime, builtin or skills.
package spec
