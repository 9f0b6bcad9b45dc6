// Package schema embeds agent.schema.json, the JSON schema of an agent spec. The
// schema is the contract for editors (yaml-language-server) and the first stage of
// `agentrun validate`. It imports nothing of agentrun.
package schema
