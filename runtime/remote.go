package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// compileRemoteAgent makes an agents entry that names a remote agent (a2a) a
// tool like a local sub-agent's, {"task": …} in, its answer out. Unlike a local
// one it is a tool the engine calls (Options.RemoteAgents), not a sub-run: it
// spends no turns or tokens of the run that anyone can count, and its calls are
// bounded by the entry's timeout (default: max_run_time) under the run's own
// max_run_time, go through the result filters and max_tool_output, and reach a
// durable engine's worker as any tool's do.
func (c *compilation) compileRemoteAgent(i int, entry *spec.SubAgent) {
	g := c.a.settings.Guards
	impl := c.opts.RemoteAgents[entry.Name]
	if impl == nil {
		impl = unconnected{entry.Name}
	}
	def := model.ToolDef{Name: entry.Name, Description: entry.Description, Parameters: spec.SubAgentParameters()}
	params, _ := normalizeJSON(def.Parameters)
	def.Parameters = params
	at := &agentTool{def: def, spec: &spec.Tool{Name: entry.Name}, impl: impl, remote: true,
		timeout: cmp.Or(entry.A2A.Timeout.Duration, g.MaxRunTime), maxOutput: g.MaxToolOutput, usesUser: tool.PassesUser(impl)}
	if err := c.addTool(at, fmt.Sprintf("mem://agents/%d/%s.json", i, entry.Name), true); err != nil {
		panic(err) // the agent tool's schema is ours
	}
}

// unconnected stands in for a remote agent that Compile was not given: the
// agent compiles (validate, explain), and a call says why it cannot run.
type unconnected struct{ agent string }

func (u unconnected) Call(context.Context, tool.Input) (string, error) {
	return "", fmt.Errorf("the remote agent %s is not connected", u.agent)
}

func (unconnected) PassesUser() bool { return false }

// remoteTasks is how a call of a remote agent reports its task: as the run's
// remote_agent events, under the call's tool name and id.
func (r *run) remoteTasks(name, callID string) func(tool.RemoteTask) {
	return func(t tool.RemoteTask) {
		r.emit(Event{Kind: EventRemote, Tool: name, CallID: callID, Remote: &t})
	}
}

// remoteAgent is the tool of the agents entry name when that is a remote agent;
// nil otherwise.
func (a *Agent) remoteAgent(name string) *agentTool {
	if t := a.byName[name]; t != nil && t.remote {
		return t
	}
	return nil
}

// errRemoteTimeout is a remote agent's call that its entry's timeout ended.
var errRemoteTimeout = errors.New("the remote agent did not answer within its timeout")

// askRemote sends a task to a remote agent outside a model's tool call (an
// intent's handoff), bounded by the entry's timeout and the run's context.
func (r *run) askRemote(t *agentTool, task, key string) (string, error) {
	ctx, cancel := r.host().CallContext(r.ctx, t.timeout)
	defer cancel()
	out, err := callTool(ctx, t.impl, tool.Input{Args: map[string]any{spec.SubAgentTaskParam: task}, User: r.req.User,
		Conversation: r.req.Conversation, Name: t.def.Name, IdempotencyKey: key, Timeout: t.timeout, Values: &r.vars,
		Run: r.id, OnRemoteTask: r.remoteTasks(t.def.Name, "")})
	if err != nil && r.ctx.Err() == nil && (ctx.Err() == context.DeadlineExceeded || errors.Is(err, tool.ErrTimeout)) {
		return "", fmt.Errorf("%w (%s)", errRemoteTimeout, t.timeout)
	}
	return out, err
}

// handoffRemote hands the run to a remote agent: the user's message is its task
// (it sees no history), its answer the run's once the answer filters pass it.
func (r *run) handoffRemote(t *agentTool) {
	it := r.intent
	answer, err := r.askRemote(t, r.input(), r.id+"/"+it.agent)
	r.result.Handoff = &AgentRun{Agent: it.agent, Stop: StopCompleted}
	switch {
	case err != nil && r.ctx.Err() != nil:
		r.stopForContext(r.ctx.Err())
	case errors.Is(err, errRemoteTimeout):
		r.stop(StopTimeout, fmt.Sprintf("intent %s: %v", it.name, err))
	case err != nil:
		r.stop(StopModelError, fmt.Sprintf("intent %s: %v", it.name, err))
	}
	if err != nil {
		r.result.Handoff.Stop = r.result.Stop
		return
	}
	if !r.filterText(spec.StageAnswer, &answer) {
		r.result.Handoff.Stop = r.result.Stop
		return
	}
	r.messages = append(r.messages[:1], model.Message{Role: model.RoleAssistant, Content: answer})
	r.result.Answer = answer
	r.result.Stop = StopCompleted
	r.transition(StateFinished, TriggerHandoff)
	r.emit(Event{Kind: EventStop, Stop: StopCompleted, Usage: &r.result.Usage, Cost: r.runCost()})
}

// remoteStep runs a workflow step's task on a remote agent as a call of its
// tool, through the checks a model's call of it gets (the filters, the output
// cap, the timeout). Its outputs are a local agent step's (answer, stop
// completed, ok); a failed call is the step's error.
func (f *flow) remoteStep(fr *frame, st *flowStep, task, id string) (map[string]any, *call, error) {
	r := f.r
	args, _ := json.Marshal(map[string]string{spec.SubAgentTaskParam: task})
	c := &call{tc: model.ToolCall{ID: id, Name: st.spec.Agent, Arguments: string(args)}, key: r.id + "/" + id}
	f.mu.Lock()
	r.prepare(c)
	f.mu.Unlock()
	if c.outcome == "" {
		r.execute(r.ctx, c)
	}
	fr.steps = append(fr.steps, Step{Turn: fr.turn, Tool: c.tc.Name, CallID: id, Arguments: string(args), modelArgs: string(args),
		Outcome: c.outcome, Refusal: c.refusal, Result: c.result, Duration: c.duration})
	if c.outcome != OutcomeOK {
		return nil, nil, errors.New(strings.TrimPrefix(c.result, "Error: "))
	}
	out := zeroOutput(st.spec)
	out[spec.OutAnswer], out[spec.OutStop], out[spec.OutOK] = c.result, string(StopCompleted), true
	return out, nil, nil
}
