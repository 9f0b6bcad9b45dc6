package schema

import _ "embed"

// JSON is the agent spec schema (JSON Schema draft-07, the draft editors support).
//
//go:embed agent.schema.json
var JSON []byte

// SkillJSON is the schema of a skill pack's skill.yaml. It refers to JSON's
// definitions by the relative URL agent.schema.json, so the two files must sit
// side by side (as they do here and for editors).
//
//go:embed skill.schema.json
var SkillJSON []byte

// TestJSON is the schema of *.test.yaml scenario files.
//
//go:embed test.schema.json
var TestJSON []byte

// ServeJSON is the schema of serve.yaml, the config of `agentrun serve`.
//
//go:embed serve.schema.json
var ServeJSON []byte

// EvalJSON is the schema of eval files (`kind: eval`), read by `agentrun eval`. It
// refers to the agent schema's model and the test schema's expect by relative URL.
//
//go:embed eval.schema.json
var EvalJSON []byte

// ID is the agent schema's $id; SkillID is where the skill schema is registered, next
// to it, so its relative reference resolves.
const (
	ID      = "https://agentrun.dev/schema/agent.schema.json"
	SkillID = "https://agentrun.dev/schema/skill.schema.json"
	TestID  = "https://agentrun.dev/schema/test.schema.json"
	ServeID = "https://agentrun.dev/schema/serve.schema.json"
	EvalID  = "https://agentrun.dev/schema/eval.schema.json"
)
