// The console's shared state and a small event bus the views talk through:
//   "agents"   the agent list changed (GET /v1/agents after a reload)
//   "agent"    another agent was picked
//   "identity" the user, attributes or token changed
//   "selected" the selected run's events changed (the graph highlights its path)
//   "approvals" something may have paused or resumed

export const state = {
  agents: [], // GET /v1/agents
  agent: "", // the picked agent's name
  status: null, // GET /v1/status
  selected: { runID: "", events: [] }, // the run the graph shows the path of
};

const listeners = new Map();

export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, []);
  listeners.get(name).push(fn);
}

export function emit(name, ...args) {
  for (const fn of listeners.get(name) || []) {
    try {
      fn(...args);
    } catch (err) {
      console.error(err);
    }
  }
}

export function currentAgent() {
  return state.agents.find((a) => a.name === state.agent) || null;
}

// select makes a run the selected one: its events so far (the list is kept and
// grows as the run goes on).
export function select(runID, events) {
  state.selected = { runID, events };
  emit("selected");
}
