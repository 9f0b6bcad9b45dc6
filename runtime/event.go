package runtime

import "time"

// EventKind names what happened.
type EventKind string

const (
	EventState         EventKind = "state"          // the state machine moved
	EventModelRequest  EventKind = "model_request"  // a request is sent to the model
	EventModelResponse EventKind = "model_response" // the model answered
	EventToolCall      EventKind = "tool_call"      // a tool call is about to run
	EventToolResult    EventKind = "tool_result"    // a tool call finished (Error set when it failed)
	EventToolRefused   EventKind = "tool_refused"   // a call was not run: bad arguments, unknown tool…
	EventBindDiscarded EventKind = "bind_discarded" // the model sent a value for a bound parameter
	EventGuard         EventKind = "guard"          // a guard tripped (duplicate call, truncation, limit)
	EventVerdict       EventKind = "verdict"        // the judge decided on a draft (Passed, Message = what is missing)
	EventFilter        EventKind = "filter"         // a filter acted (Guard = the filter's name or stage, Message = action)
	EventCollect       EventKind = "collect"        // a tool result revealed entities (Message = kind, Calls = how many)
	EventIntent        EventKind = "intent"         // routing chose an intent (Message = intent, Guard = how, Error = why)
	EventMemory        EventKind = "memory"         // memory was injected (Message = level, Calls = facts)
	EventStop          EventKind = "stop"           // the run ended
)

// Event is one step of a run, for progress output, traces and audits. Events never
// hold secrets: API keys are not part of any, and bound values are not shown.
type Event struct {
	Time     time.Time     `json:"time"`
	Kind     EventKind     `json:"kind"`
	Turn     int           `json:"turn,omitempty"`
	State    State         `json:"state,omitempty"`
	From     State         `json:"from,omitempty"`
	Tool     string        `json:"tool,omitempty"`
	CallID   string        `json:"call_id,omitempty"`
	Args     string        `json:"args,omitempty"`
	Result   string        `json:"result,omitempty"` // a preview of the result
	Error    string        `json:"error,omitempty"`
	Guard    string        `json:"guard,omitempty"`
	Message  string        `json:"message,omitempty"`
	Stop     StopReason    `json:"stop,omitempty"`
	Tools    int           `json:"tools,omitempty"`    // tools offered in a model request
	Messages int           `json:"messages,omitempty"` // messages in a model request
	Calls    int           `json:"calls,omitempty"`    // tool calls in a model response
	Passed   *bool         `json:"passed,omitempty"`
	Usage    *Usage        `json:"usage,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// Observer receives the events of a run. Calls come from the run's goroutine and,
// for tool events, from the goroutines running tools, so implementations must be
// safe for concurrent use.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

func (f ObserverFunc) Observe(e Event) { f(e) }
