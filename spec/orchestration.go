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

// SubAgent is another agent spec this agent may use: as a tool named Name (the
// model gives it a task and gets its answer) and as the target of an intent.
type SubAgent struct {
	Source
	Name        string `yaml:"name"`
	Spec        string `yaml:"spec"` // the spec file, relative to this spec's directory
	Description string `yaml:"description"`

	// Loaded is the sub-agent's spec, once the loader resolved it; nil when it could
	// not be loaded (a diagnostic says why).
	Loaded *Spec `yaml:"-"`
}

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
