package schema

import _ "embed"

// JSON is the agent spec schema (draft 2020-12).
//
//go:embed agent.schema.json
var JSON []byte

// ID is the schema's $id.
const ID = "https://agentrun.dev/schema/agent.schema.json"
