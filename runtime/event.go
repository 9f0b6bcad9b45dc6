package runtime

import (
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// EventKind names what happened.
type EventKind string

const (
	EventState         EventKind = "state"          // the state machine moved (From, State, Trigger)
	EventModelRequest  EventKind = "model_request"  // a request is sent to a model (Purpose, Messages, Tools)
	EventModelResponse EventKind = "model_response" // the model answered (Purpose, Calls, Usage, Cost, Finish, Reasoning)
	EventToolCall      EventKind = "tool_call"      // a tool call is about to run
	EventToolResult    EventKind = "tool_result"    // a tool call finished (Error set when it failed)
	EventToolRefused   EventKind = "tool_refused"   // a call was not run (Refusal, Error)
	EventBindDiscarded EventKind = "bind_discarded" // the model sent a value for a bound parameter (Param)
	EventGuard         EventKind = "guard"          // a guard tripped (Guard)
	EventVerdict       EventKind = "verdict"        // the judge decided on a draft (Passed, Missing, Verdict; Usage and Cost of its calls)
	EventFilter        EventKind = "filter"         // a filter acted (Filter, Stage, Action)
	EventCollect       EventKind = "collect"        // a tool result revealed entities (Entity, Count)
	EventIntent        EventKind = "intent"         // routing chose an intent (Intent, RoutedBy)
	EventMemory        EventKind = "memory"         // memory was read, injected or saved (Level, Count)
	EventCache         EventKind = "cache"          // the FAQ cache was looked up (CacheOutcome, Cached) or learned an answer
	EventRetrieve      EventKind = "retrieve"       // retrieval put passages into the context (Passages)
	EventStop          EventKind = "stop"           // the run ended (Stop, Usage, Cost: the run's so far)
	// EventText is the model's text as it streams, where the run shows it
	// (Text). The runtime hands the text to Request.OnDelta; serve's streams
	// record it as these events.
	EventText EventKind = "text"
	// EventApprovalRequested: a call waits for a person's decision (Tool, CallID,
	// Args, Message: the spec's approval message).
	EventApprovalRequested EventKind = "approval_requested"
	// EventApprovalDecided: a resumed run applies a decision (Tool, CallID, Passed:
	// approved, Message: who and why).
	EventApprovalDecided EventKind = "approval_decided"
	// EventPlan: the model wrote or updated its plan (Plan; Message counts the
	// steps by status). The plan gate's refusals are guard events (plan_open).
	EventPlan EventKind = "plan"
	// EventAgent: a sub-agent's run starts (Agent, CallID of the tool call or ""
	// for an intent's handoff, Message: the task) or ends (Stop, Usage, Cost).
	// The sub-run's own events follow with its Run, Parent and Depth.
	EventAgent EventKind = "agent"
	// EventStep: a workflow step starts or ends (Step; StepStatus; Error).
	EventStep EventKind = "step"
	// EventRemote: a call of a remote agent (Tool: its agents entry; CallID, ""
	// for an intent's handoff) started a task there or the task reached a state
	// (Remote: the agent's host, the task's and context's ids, the state).
	EventRemote EventKind = "remote_agent"
)

// EventKinds lists every event kind, for the tables that handle each one (the
// CLI's progress lines, docs). A test reads the constants above from this file
// and fails when one is missing here.
var EventKinds = []EventKind{EventState, EventModelRequest, EventModelResponse, EventToolCall, EventToolResult,
	EventToolRefused, EventBindDiscarded, EventGuard, EventVerdict, EventFilter, EventCollect, EventIntent,
	EventMemory, EventCache, EventRetrieve, EventStop, EventApprovalRequested, EventApprovalDecided, EventPlan,
	EventAgent, EventStep, EventText, EventRemote}

// Purpose says what a model request is for.
type Purpose string

const (
	PurposeAgent      Purpose = "agent"      // the agent's own turn
	PurposeClassifier Purpose = "classifier" // intent recognition
	PurposeJudge      Purpose = "judge"      // the judge checking a draft (or a cache hit); its calls' usage is on the verdict event
)

// Guard names a guard that tripped.
type Guard string

const (
	GuardMaxTurns        Guard = "max_turns"
	GuardMaxToolRounds   Guard = "max_tool_rounds"
	GuardDuplicateCall   Guard = "duplicate_call"
	GuardToolTimeout     Guard = "tool_timeout"
	GuardMaxToolOutput   Guard = "max_tool_output"
	GuardMaxCalls        Guard = "max_calls_per_response"
	GuardJudgeJSONObject Guard = "judge_json_object" // the server rejected a JSON schema; JSON mode instead
	GuardJudgeError      Guard = "judge_error"
	GuardJudgeExhausted  Guard = "judge_exhausted"
	GuardInstructions    Guard = "instructions" // the instructions failed to render; shown as written
	// GuardBudget: the next model call could break guards.max_tokens or max_cost
	// (Purpose says whose call; the run stops, except that a judge's check of a
	// cache hit is skipped: a miss), or max_cost cannot be checked because a
	// model's price is unknown (said once a run; the run goes on).
	GuardBudget Guard = "budget"
	// GuardPlanOpen: the plan gate refused an answer while plan steps were open (or
	// before any plan, with plan.required); the run stops after max_rejections.
	GuardPlanOpen Guard = "plan_open"
	// GuardOutputInvalid: an answer did not match the output schema; it goes back
	// to the model with the problems, or the run stops with output_invalid.
	GuardOutputInvalid Guard = "output_invalid"
)

// Event is one step of a run, for progress output, traces and audits. Each kind
// fills the fields its comment names, plus Turn and, where it helps a reader,
// Message (a human-readable detail) and Error. Events never hold secrets: API keys
// are not part of any, and bound values are not shown.
type Event struct {
	Time time.Time `json:"time"`
	Kind EventKind `json:"kind"`
	Turn int       `json:"turn,omitempty"`
	// Run is the id of the run the event belongs to; Parent the id of the run that
	// started it and Depth how far below the top run it is (0 for the top run),
	// so a reader can tell whose events are whose when sub-agents run.
	Run    string `json:"run_id,omitempty"`
	Parent string `json:"parent_id,omitempty"`
	Depth  int    `json:"depth,omitempty"`
	// Agent names the agent of a sub-run (its agents entry).
	Agent string `json:"agent,omitempty"`
	// Step names a workflow step, StepStatus what became of it.
	Step       string     `json:"step,omitempty"`
	StepStatus StepStatus `json:"step_status,omitempty"`
	// Plan is the plan after the model's update (EventPlan).
	Plan []PlanStep `json:"plan,omitempty"`

	From    State   `json:"from,omitempty"`
	State   State   `json:"state,omitempty"`
	Trigger Trigger `json:"trigger,omitempty"`

	// Text is a piece of the model's streamed text (EventText).
	Text string `json:"text,omitempty"`

	Purpose  Purpose `json:"purpose,omitempty"`
	Messages int     `json:"messages,omitempty"` // messages in a model request
	Tools    int     `json:"tools,omitempty"`    // tools offered in a model request
	Calls    int     `json:"calls,omitempty"`    // tool calls in a model response
	// Offered names the tools offered in a model request.
	Offered []string `json:"offered,omitempty"`
	// Sent is a model request's messages, for observers in this process that show
	// them (the console); it is never written out with the event, and an observer
	// must not change it.
	Sent  []model.Message `json:"-"`
	Usage *model.Usage    `json:"usage,omitempty"`
	// Cost is a model response's cost in US dollars, priced by the model that
	// answered, a verdict's (its judge calls'), or the run's so far in a stop
	// event; nil when a price is unknown.
	Cost *float64 `json:"cost,omitempty"`
	// Finish and Reasoning are a model response's finish reason and reasoning text.
	Finish    model.FinishReason `json:"finish_reason,omitempty"`
	Reasoning string             `json:"reasoning,omitempty"`
	// Model is the model that answered a model response (see Result.Models);
	// FallbackFrom the models of its fallback chain that failed before it.
	Model        string   `json:"model,omitempty"`
	FallbackFrom []string `json:"fallback_from,omitempty"`

	Tool    string  `json:"tool,omitempty"`
	CallID  string  `json:"call_id,omitempty"`
	Args    string  `json:"args,omitempty"`
	Result  string  `json:"result,omitempty"` // a preview of the result
	Refusal Refusal `json:"refusal,omitempty"`
	Param   string  `json:"param,omitempty"` // a bound parameter the model tried to set

	Guard Guard `json:"guard,omitempty"`

	Filter string            `json:"filter,omitempty"` // the filter's name, or its stage when unnamed
	Stage  spec.FilterStage  `json:"stage,omitempty"`
	Action spec.FilterAction `json:"action,omitempty"`

	Passed  *bool      `json:"passed,omitempty"`
	Missing string     `json:"missing,omitempty"`
	Verdict VerdictHow `json:"verdict,omitempty"`

	Intent   string   `json:"intent,omitempty"`
	RoutedBy RoutedBy `json:"routed_by,omitempty"`

	Level  spec.MemoryLevel `json:"level,omitempty"`  // the memory level injected
	Entity string           `json:"entity,omitempty"` // the kind of entities collected
	Count  int              `json:"count,omitempty"`  // facts injected, entities added, history messages read

	Stop StopReason `json:"stop,omitempty"`

	// Remote is a remote agent's task (EventRemote).
	Remote *tool.RemoteTask `json:"remote,omitempty"`

	CacheOutcome CacheOutcome        `json:"cache,omitempty"`
	Cached       *knowledge.CacheHit `json:"cached,omitempty"`
	Passages     []knowledge.Passage `json:"passages,omitempty"` // without their text

	Message  string        `json:"message,omitempty"`
	Error    string        `json:"error,omitempty"`
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

// StepStatus is what became of a workflow step.
type StepStatus string

const (
	StepStarted StepStatus = "started"
	StepOK      StepStatus = "ok"
	StepFailed  StepStatus = "failed"  // its error ended the workflow (on_error: fail)
	StepErrored StepStatus = "errored" // it failed and the workflow went on (on_error: continue or fallback)
	StepSkipped StepStatus = "skipped" // its when was false
)
