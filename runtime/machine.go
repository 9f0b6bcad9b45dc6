package runtime

import "fmt"

// State is a state of the run's state machine.
type State string

const (
	StateThinking      State = "THINKING"       // waiting for the model
	StateToolExecuting State = "TOOL_EXECUTING" // running the tool calls of a response
	StateValidating    State = "VALIDATING"     // checking a draft answer before it is accepted
	StateFinished      State = "FINISHED"       // an answer was accepted
	StateStopped       State = "STOPPED"        // a guard or a fault ended the run
)

// transitions is the state machine as data: from each state, where a run may go.
// FINISHED and STOPPED are final.
var transitions = map[State][]State{
	StateThinking:      {StateToolExecuting, StateValidating, StateStopped},
	StateToolExecuting: {StateThinking, StateStopped},
	StateValidating:    {StateFinished, StateThinking, StateStopped},
}

// Transitions returns the state machine's edges, for diagrams and docs.
func Transitions() map[State][]State {
	out := make(map[State][]State, len(transitions))
	for from, tos := range transitions {
		out[from] = append([]State(nil), tos...)
	}
	return out
}

func canTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// errBadTransition is a bug in the runtime, never the model's or the spec's fault.
type errBadTransition struct{ from, to State }

func (e errBadTransition) Error() string {
	return fmt.Sprintf("internal error: no transition from %s to %s", e.from, e.to)
}
