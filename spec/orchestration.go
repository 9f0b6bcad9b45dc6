package spec

import "go.yaml.in/yaml/v3"

// Plan turns on plan mode: the model keeps a plan of steps with the built-in plan
// tool, and an answer is refused while a step is still open. `plan: true` is plan
// mode with every default; `plan: false` on an intent turns the agent's off.
type Plan struct {
	Source
	// Required refuses an answer given before any plan was written.
	Required bool `yaml:"required"`
	// MaxSteps is the most steps a plan may hold.
	MaxSteps int `yaml:"max_steps"`
	// MaxRejections is how many answers the plan gate refuses before the run
	// stops with plan_incomplete.
	MaxRejections *int `yaml:"max_rejections"`
}

// UnmarshalYAML accepts `plan: true` (every default); `plan: false` is handled by
// the mapping that holds it (Spec, Intent).
func (p *Plan) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return nil
	}
	type plain Plan
	return n.Decode((*plain)(p))
}

// SubAgent is another agent this agent may use: as a tool named Name (the model
// gives it a task and gets its answer) and as the target of an intent. It is a
// spec file (Spec), run here, or a remote agent (A2A), run by its own server;
// exactly one of the two.
type SubAgent struct {
	Source
	Name        string    `yaml:"name"`
	Spec        string    `yaml:"spec"` // the spec file, relative to this spec's directory
	A2A         *A2AAgent `yaml:"a2a"`
	Description string    `yaml:"description"`

	// Loaded is the sub-agent's spec, once the loader resolved it; nil when it could
	// not be loaded (a diagnostic says why).
	Loaded *Spec `yaml:"-"`
}

// A2AAgent is a remote agent that speaks the A2A protocol. Its card is read from
// URL when the agent is first called, never when the spec is validated; each
// task goes to the endpoint the card names on URL's host.
type A2AAgent struct {
	// URL is the agent's base URL (its card is at URL/.well-known/agent-card.json),
	// or the card's own URL when its path ends in .json.
	URL  string   `yaml:"url"`
	Auth *A2AAuth `yaml:"auth"`
	// Timeout bounds one task, from sending it to its last state; zero means the
	// run's guards.max_run_time.
	Timeout Duration `yaml:"timeout"`
}

// A2AAuth is how agentrun authenticates to a remote agent: a token from the
// environment variable TokenEnv, sent as "Authorization: Bearer <token>", or as
// the value of Header when that is set (an API key).
type A2AAuth struct {
	TokenEnv string `yaml:"token_env"`
	Header   string `yaml:"header"`
}

// A2ACardPath is where an A2A agent serves its card, below its base URL.
const A2ACardPath = "/.well-known/agent-card.json"

// Remote reports whether the entry is a remote (A2A) agent.
func (a *SubAgent) Remote() bool { return a.A2A != nil }

// MaxAgentDepth is how deep sub-agents may nest below the agent that runs: an
// agent's sub-agent is depth 1, its sub-agent's depth 2, and so on.
const MaxAgentDepth = 3

// SubAgentTaskParam is the one parameter of a sub-agent's tool: the task the
// sub-agent gets as its user message.
const SubAgentTaskParam = "task"

// SubAgentParameters is the JSON schema of a sub-agent tool's arguments.
func SubAgentParameters() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			SubAgentTaskParam: map[string]any{"type": "string", "description": "The task for the agent, with everything it needs to know: it does not see this conversation."},
		},
		"required":             []any{SubAgentTaskParam},
		"additionalProperties": false,
	}
}

// SubAgent returns the agents entry with the name, or nil.
func (s *Spec) SubAgent(name string) *SubAgent {
	for i := range s.Agents {
		if s.Agents[i].Name == name {
			return &s.Agents[i]
		}
	}
	return nil
}

// PlanToolName is the built-in plan tool's name, offered wherever plan mode is on;
// no tool or sub-agent may take it.
const PlanToolName = "update_plan"
