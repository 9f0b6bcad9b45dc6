package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// ExternalTool is a tool that brings its own definition.
type ExternalTool struct {
	Def  model.ToolDef
	Impl Tool
}

// Credential is the bearer token a user's request was authenticated with, held for
// the tools that forward it (an MCP server's forward_auth). Only authentication
// makes one. It prints and logs as "[credential]", no encoder sees its unexported
// token, and User leaves it out of JSON: it is in no trace, event, stored run or
// workflow history, so a run resumed after an approval, or run by a Temporal
// worker, has none.
type Credential struct{ token string }

// NewCredential holds a bearer token.
func NewCredential(token string) Credential { return Credential{token: token} }

// Token is the bearer token itself, for the request that forwards it; "" for none.
func (c Credential) Token() string { return c.token }

// IsZero reports there is no credential.
func (c Credential) IsZero() bool { return c.token == "" }

// Fingerprint names the credential in audit records without showing it: "sha256:"
// and the first 16 hex digits of its SHA-256, the start of the hash serve's static
// tokens are configured by. "" for none.
func (c Credential) Fingerprint() string {
	if c.token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(c.token))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// Format keeps the token out of every fmt verb, %+v and %#v of a User included.
func (c Credential) Format(f fmt.State, _ rune) {
	if c.token != "" {
		fmt.Fprint(f, "[credential]")
	}
}

// User is who a run acts for. Its values come from the caller (CLI flags, the HTTP
// API's authenticated identity) and are never shown to or settable by the model.
type User struct {
	ID         string            `json:"id"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Credential is what authenticated the user's request (serve's bearer token),
	// for tools that forward it; it is never serialized.
	Credential Credential `json:"-"`
}

// Tool runs one tool call. Arguments have been parsed, validated against the tool's
// schema and completed with bound values before Call sees them.
type Tool interface {
	Call(ctx context.Context, in Input) (string, error)
}

// Input is what a tool call receives.
type Input struct {
	Args         map[string]any // the model's arguments plus bound parameters
	User         User
	Conversation string
	// Name and CallID are the tool's name and the model's id for this call (for
	// traces: gen_ai.tool.name, gen_ai.tool.call.id).
	Name, CallID string
	// IdempotencyKey names this call of this run (the run's id, the turn, the
	// call's place in the model's response and its id): the same on every attempt,
	// so a service that a retried call reaches twice can tell it is one call, and
	// never the same for two calls, even where a provider reuses call ids. The http tool sends it as the Idempotency-Key
	// header, the command tool as AGENTRUN_IDEMPOTENCY_KEY, MCP tools in _meta.
	IdempotencyKey string
	// Timeout is how long the call may take (the tool's timeout): a tool that
	// runs elsewhere (a durable engine's activity) is given it there.
	Timeout time.Duration

	// Values are the run's values for the call's templates, set by the engine, so
	// templates see user exactly as the spec's checks typed it (every declared
	// attribute, "" when unset); nil for a caller outside a run.
	Values *spec.Values

	// Run is the id of the run making the call: what a tool keeps for the length
	// of one run (a remote agent's conversation) is keyed by it. "" outside a run.
	Run string
	// OnRemoteTask is told about the task a call started on a remote agent, once
	// its id is known and when it reached its last state, for the run's events
	// and traces; nil when nobody listens. A tool that runs elsewhere (a durable
	// engine's activity) has none.
	OnRemoteTask func(RemoteTask)
}

// RemoteTask is a task that a call started on a remote agent (A2A): where it
// runs (the host of the agent's URL, never credentials), its ids there, and its
// state in the protocol's words (working, completed, failed, canceled, rejected,
// input-required, auth-required).
type RemoteTask struct {
	Host    string `json:"host"`
	Task    string `json:"task_id,omitempty"`
	Context string `json:"context_id,omitempty"`
	State   string `json:"state,omitempty"`
}

// ReportRemoteTask tells in's listener about t, if there is one.
func (in Input) ReportRemoteTask(t RemoteTask) {
	if in.OnRemoteTask != nil {
		in.OnRemoteTask(t)
	}
}

// ErrTimeout is a call that took longer than its timeout where the context
// could not say so (it ran elsewhere): the run reports it as a timeout.
var ErrTimeout = errors.New("the tool call timed out")

// UserPasser is a tool found at run time (Options.External: an MCP server's tool
// the spec does not declare) that says whether its calls pass something of the
// user on to what they reach, so that what they return may be that user's alone.
// A declared tool's kind says it in the spec (spec.ToolKind); the FAQ cache's scope
// rule reads one or the other. A tool that does not say is taken to pass the user on.
type UserPasser interface {
	PassesUser() bool
}

// PassesUser reports whether t's calls may pass the user on: true unless t is a
// UserPasser that says otherwise.
func PassesUser(t Tool) bool {
	p, ok := t.(UserPasser)
	return !ok || p.PassesUser()
}

// Info is what a tool tells the model about itself when the spec does not say:
// builtins and MCP tools bring their description and parameters.
type Info struct {
	Description string
	Parameters  map[string]any
}

// Describer is implemented by tools that bring their own description and parameters.
type Describer interface {
	Describe() Info
}

// Factory builds the tool a spec entry declares. dir is the directory of the spec
// file, against which relative paths in the tool's configuration resolve. An error
// is reported as a diagnostic on the tool.
type Factory func(t *spec.Tool, dir string) (Tool, error)

// Registry maps tool kinds to their factories: "command", "http", "mcp", and
// "builtin:<name>" for each builtin. cmd builds it; the runtime only reads it.
type Registry map[string]Factory

// Key is the registry key for a spec tool.
func Key(t *spec.Tool) string {
	if t.Builtin != "" {
		return "builtin:" + t.Builtin
	}
	return t.Kind()
}

// Env is the environment a tool's templates see: args, user and conversation, as
// spec.EnvToolTemplate declares them for the checks at load.
func (in Input) Env() map[string]any {
	if in.Values != nil {
		vars := *in.Values
		vars.Args = in.Args
		return spec.EnvToolTemplate.Values(&vars)
	}
	return spec.EnvToolTemplate.Values(&spec.Values{ // a caller outside a run
		Args:         in.Args,
		User:         spec.UserValue(slices.Collect(maps.Keys(in.User.Attributes)), in.User.ID, in.User.Attributes),
		Conversation: spec.ConversationValue(in.Conversation),
	})
}
