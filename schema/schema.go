package schema

import _ "embed"

// JSON is the agent spec schema (JSON Schema draft-07, the draft editors support).
//
//go:embed agent.schema.json
var JSON []byte

// ID is the schema's $id.
const ID = "https://agentrun.dev/schema/agent.schema.json"
