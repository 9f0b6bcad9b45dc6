package runtime

import "time"

// User is who a run acts for. Its values come from the caller (CLI flags, the HTTP
// API's authenticated identity) and are never shown to or settable by the model.
type User struct {
	ID         string            `json:"id"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Request is one run of an agent.
type Request struct {
	Input        string
	User         User
	Conversation string
	// Intent, when set, is a pre-recognised intent: routing is skipped.
	Intent string
	// History holds earlier messages of the conversation, oldest first.
	History []Message
	// Observer receives every event of the run; nil for none.
	Observer Observer
	// OnDelta receives answer text as the model streams it; nil for no streaming.
	OnDelta func(text string)
	// Seen holds the entities revealed to this user earlier in the conversation, by
	// kind (the tools' collect rules): what accept rules' seen(kind) starts from.
	Seen map[string][]string
}

// StopReason says why a run ended.
type StopReason string

const (
	StopCompleted     StopReason = "completed"
	StopMaxTurns      StopReason = "max_turns"
	StopMaxToolRounds StopReason = "max_tool_rounds"
	StopDuplicateCall StopReason = "duplicate_call"
	StopModelError    StopReason = "model_error"
	StopCanceled      StopReason = "canceled"
	StopTimeout       StopReason = "timeout"
	StopJudgeRejected StopReason = "judge_rejected" // the judge kept failing drafts (on_exhausted: fallback)
	StopBlocked       StopReason = "blocked"        // an input or answer filter blocked the run
)

// Result is the outcome of a run. A run that a guard or a fault stopped has the
// spec's fallback message as its Answer and Stop says why.
type Result struct {
	Answer     string        `json:"answer"`
	Stop       StopReason    `json:"stop"`
	Detail     string        `json:"detail,omitempty"` // what tripped, for a stopped run
	Intent     string        `json:"intent,omitempty"`
	IntentHow  string        `json:"intent_how,omitempty"` // pre, rules, llm or fallback
	Turns      int           `json:"turns"`                // model calls
	ToolRounds int           `json:"tool_rounds"`          // responses whose tool calls ran
	Steps      []Step        `json:"steps"`
	Usage      Usage         `json:"usage"`
	Duration   time.Duration `json:"duration_ns"`
	// Messages is the exchange to keep in the conversation's history: the user's
	// input, every assistant message with its tool results, and the final answer.
	// No system message, no rejected draft and no judge feedback is ever part of it.
	Messages []Message `json:"messages"`
	// Seen is Request.Seen plus what this run's tool results revealed.
	Seen map[string][]string `json:"seen,omitempty"`
	// Verdicts are the judge's decisions on this run's drafts, in order.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// MemoryError says why the run could not be saved to the store, if it could not.
	MemoryError string `json:"memory_error,omitempty"`
}

// Verdict is the judge's decision on one draft answer.
type Verdict struct {
	Passed  bool   `json:"passed"`
	Missing string `json:"missing,omitempty"`
	// How says how the verdict came about: judge, min_chars, judge_error.
	How string `json:"how"`
}

// Completed reports whether the run ended with an accepted answer.
func (r *Result) Completed() bool { return r.Stop == StopCompleted }

// Step is one tool call of the run, as it was decided and executed.
type Step struct {
	Turn      int           `json:"turn"`
	Tool      string        `json:"tool"`
	CallID    string        `json:"call_id"`
	Arguments string        `json:"arguments"`
	Outcome   string        `json:"outcome"` // ok, error, refused, duplicate, filtered
	Result    string        `json:"result"`
	Duration  time.Duration `json:"duration_ns"`
}
