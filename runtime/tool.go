package runtime

import (
	"context"
	"maps"
	"slices"

	"github.com/agentrun/agentrun/spec"
)

// Tool runs one tool call. Arguments have been parsed, validated against the tool's
// schema and completed with bound values before Call sees them.
type Tool interface {
	Call(ctx context.Context, in ToolInput) (string, error)
}

// ToolInput is what a tool call receives.
type ToolInput struct {
	Args         map[string]any // the model's arguments plus bound parameters
	User         User
	Conversation string
	// Name and CallID are the tool's name and the model's id for this call (for
	// traces: gen_ai.tool.name, gen_ai.tool.call.id).
	Name, CallID string

	// vars are the run's variables, so templates see user exactly as the spec's
	// checks typed it (every declared attribute, "" when unset).
	vars *spec.Values
}

// ToolInfo is what a tool tells the model about itself when the spec does not say:
// builtins and MCP tools bring their description and parameters.
type ToolInfo struct {
	Description string
	Parameters  map[string]any
}

// Describer is implemented by tools that bring their own description and parameters.
type Describer interface {
	Describe() ToolInfo
}

// ToolFactory builds the tool a spec entry declares. dir is the directory of the spec
// file, against which relative paths in the tool's configuration resolve. An error
// is reported as a diagnostic on the tool.
type ToolFactory func(t *spec.Tool, dir string) (Tool, error)

// Registry maps tool kinds to their factories: "command", "http", "mcp", and
// "builtin:<name>" for each builtin. cmd builds it; the runtime only reads it.
type Registry map[string]ToolFactory

// Key is the registry key for a spec tool.
func Key(t *spec.Tool) string {
	if t.Builtin != "" {
		return "builtin:" + t.Builtin
	}
	return t.Kind()
}

// Env is the environment a tool's templates see: args, user and conversation, as
// spec.EnvToolTemplate declares them for the checks at load.
func (in ToolInput) Env() map[string]any {
	if in.vars != nil {
		vars := *in.vars
		vars.Args = in.Args
		return spec.EnvToolTemplate.Values(&vars)
	}
	return spec.EnvToolTemplate.Values(&spec.Values{ // a caller outside a run
		Args:         in.Args,
		User:         spec.UserValue(slices.Collect(maps.Keys(in.User.Attributes)), in.User.ID, in.User.Attributes),
		Conversation: spec.ConversationValue(in.Conversation),
	})
}
