package runtime

import "context"

// engineTool is a tool of the engine itself: a call works on the run — its plan, a
// sub-run — rather than on the world outside through a ToolInput, so execute hands
// it the run instead of calling a Tool.
type engineTool interface {
	// call runs c as part of r, setting its outcome and result.
	call(ctx context.Context, r *run, c *call)
	// ownState reports whether a call changes only the run's own state (the
	// plan): no filter or output cap applies to its result, it is never a
	// duplicate, and a response's calls of it run first, one by one in call order.
	ownState() bool
}

// planner is the built-in plan tool: a call writes the run's plan.
type planner struct{}

func (planner) call(_ context.Context, r *run, c *call) { r.updatePlan(c) }
func (planner) ownState() bool                          { return true }

// delegation is an agents entry's tool: a call runs that agent on a task, bounded
// by the sub-agent's max_run_time and this run's, not tool_timeout.
type delegation struct{ agent string }

func (d delegation) call(ctx context.Context, r *run, c *call) { r.callSubAgent(ctx, c, d.agent) }
func (delegation) ownState() bool                              { return false }

// ownState reports whether the tool is an engine tool that changes only the run's
// own state (see engineTool).
func (t *agentTool) ownState() bool { return t.engine != nil && t.engine.ownState() }

// subAgent is the agents entry the tool runs, a local or a remote agent; "" for
// any other tool.
func (t *agentTool) subAgent() string {
	if d, ok := t.engine.(delegation); ok {
		return d.agent
	}
	if t.remote {
		return t.def.Name
	}
	return ""
}
