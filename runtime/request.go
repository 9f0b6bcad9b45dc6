package runtime

import (
	"encoding/json"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
)

// Request is one run of an agent.
type Request struct {
	Input string
	// Parts are the files the user sent with Input (images, documents): on the
	// run's user message, sent with every model call of the run. Each is checked
	// against the agent's model before the first call (see PartError); the
	// history keeps them by reference (see Result.Messages).
	Parts        []model.Part
	User         tool.User
	Conversation string
	// Intent, when set, is a pre-recognised intent: routing is skipped.
	Intent string
	// History holds earlier messages of the conversation, oldest first.
	History []model.Message
	// Observer receives every event of the run; nil for none.
	Observer Observer
	// OnDelta receives answer text as the model streams it; nil for no streaming.
	OnDelta func(text string)
	// Seen holds the entities revealed to this user earlier in the conversation, by
	// kind (the tools' collect rules): what accept rules' seen(kind) starts from.
	Seen map[string][]string
	// TraceConversation is the conversation's id as its client named it, for
	// traces; "" means Conversation. A server that keys conversations by their
	// user (serve) sets it, so traces never carry a user id.
	TraceConversation string
	// Ephemeral runs write nothing to the store — no exchange, no facts, no seen
	// entities: a caller that keeps the history itself (an OpenAI-style client
	// sending its earlier messages) asked for a run that leaves no trace.
	Ephemeral bool
	// RunID names the run; "" lets the runtime pick one if the run pauses. A caller
	// that tracks runs itself (serve) passes its own, so one id names the run
	// before and after a pause.
	RunID string
	// Approvals says what happens to a call that needs a person's approval: the
	// default pauses the run; ApprovalsRefuse refuses the call.
	Approvals ApprovalMode
	// Host runs the run's time and concurrency; nil is this process (LocalHost).
	// A durable engine's workflow passes its own.
	Host Host
}

// ApprovalMode says what a run does with a call that needs a person's approval.
type ApprovalMode string

const (
	// ApprovalsPause stores the run and stops it with awaiting_approval, to be
	// resumed by a decision (Decide, then Agent.Resume).
	ApprovalsPause ApprovalMode = ""
	// ApprovalsRefuse refuses such a call, telling the model why: the caller cannot
	// ask anyone (an OpenAI-compatible client, which knows nothing of pauses).
	ApprovalsRefuse ApprovalMode = "refuse"
)

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
	StopTruncated     StopReason = "truncated"      // the answer was cut off (finish_reason length)
	StopContentFilter StopReason = "content_filter" // the provider's content filter stopped the answer
	StopBudget        StopReason = "budget"         // the next model call could break guards.max_tokens or max_cost
	// StopAwaitingApproval: calls wait for a person's decision; the run is stored
	// and resumes as a new execution (Agent.Resume). It has no answer yet.
	StopAwaitingApproval StopReason = "awaiting_approval"
	// StopApprovalTimeout: nobody decided in time and approval.on_timeout is stop.
	StopApprovalTimeout StopReason = "approval_timeout"
	// StopPlanIncomplete: the model kept answering while steps of its plan were open
	// (plan.max_rejections answers were refused).
	StopPlanIncomplete StopReason = "plan_incomplete"
	// StopWorkflowFailed: a workflow step failed with on_error fail (Detail says
	// which and why); the answer is the fallback message.
	StopWorkflowFailed StopReason = "workflow_failed"
	// StopOutputInvalid: the answers did not match the output schema, after
	// output.retries corrections; the answer is the fallback message.
	StopOutputInvalid StopReason = "output_invalid"
)

// StopReasons lists every stop reason. A new one needs its edges into STOPPED in
// machine.go (TestEveryStopReasonIsAnEdge fails without them, naming the file)
// and a place in this list (TestStopReasonsListsEveryConstant).
var StopReasons = []StopReason{StopCompleted, StopMaxTurns, StopMaxToolRounds, StopDuplicateCall, StopModelError,
	StopCanceled, StopTimeout, StopJudgeRejected, StopBlocked, StopTruncated, StopContentFilter, StopBudget,
	StopAwaitingApproval, StopApprovalTimeout, StopPlanIncomplete, StopWorkflowFailed, StopOutputInvalid}

// Result is the outcome of a run. A run that a guard or a fault stopped has the
// spec's fallback message as its Answer and Stop says why.
type Result struct {
	Answer string `json:"answer"`
	// Output is the answer's JSON value when the run answers with a structured
	// output (output: in the spec or the intent); Answer is then its text.
	Output     json.RawMessage `json:"output,omitempty"`
	Stop       StopReason      `json:"stop"`
	Detail     string          `json:"detail,omitempty"` // what tripped, for a stopped run
	Intent     string          `json:"intent,omitempty"`
	IntentHow  RoutedBy        `json:"intent_how,omitempty"`
	Turns      int             `json:"turns"`       // model calls
	ToolRounds int             `json:"tool_rounds"` // responses whose tool calls ran
	Steps      []Step          `json:"steps"`
	Usage      model.Usage     `json:"usage"` // of every model call: the agent's, the judge's and the classifier's
	// ModelConfigStatus is the HTTP status (401, 403, 404) of a model_error stop that
	// is a configuration error (see ModelError.Misconfigured), 0 otherwise: the key,
	// the model's name or its base URL is wrong, and the fallback message is no answer
	// to show (exec exits 1, serve answers 502).
	ModelConfigStatus int `json:"model_config_status,omitempty"`
	// Cost is what the run's model calls cost in US dollars, each priced by the model
	// that answered it (Options.Prices). It is nil when the agent's model has no price
	// or any call's model had none: a sum that leaves out calls would read as the
	// run's cost and be too low.
	Cost     *float64      `json:"cost,omitempty"`
	Duration time.Duration `json:"duration_ns"`
	// Messages is the exchange to keep in the conversation's history: the user's
	// input, every assistant message with its tool results, and the final answer.
	// No system message, no rejected draft and no judge feedback is ever part of it.
	Messages []model.Message `json:"messages"`
	// Seen is Request.Seen plus what this run's tool results revealed.
	Seen map[string][]string `json:"seen,omitempty"`
	// Verdicts are the judge's decisions on this run's drafts, in order.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// MemoryError says why the run could not be saved to the store, if it could not.
	MemoryError string `json:"memory_error,omitempty"`
	// Partial is the text of an answer that was cut off or filtered (stop truncated
	// or content_filter): never the answer, kept for whoever looks into the run.
	Partial string `json:"partial,omitempty"`
	// Reasoning is the reasoning text of the run's model responses, in order, for
	// --json and traces; it is never part of the answer.
	Reasoning []string `json:"reasoning,omitempty"`
	// FinishReasons are the finish reasons of the agent's model calls, in order.
	FinishReasons []model.FinishReason `json:"finish_reasons,omitempty"`
	// Models are the models that answered the agent's calls, beside FinishReasons:
	// the configured name of a fallback chain's model that answered, else the
	// name the server reported ("" when it reported none).
	Models []string `json:"models,omitempty"`
	// Cache is what the intent's FAQ cache did; "" when it has none. Cached is the
	// entry that answered (a hit) or came closest (a miss).
	Cache  CacheOutcome        `json:"cache,omitempty"`
	Cached *knowledge.CacheHit `json:"cached,omitempty"`
	// Learned says the answer was stored in the FAQ cache (Scope: for whom).
	Learned *Learned `json:"learned,omitempty"`
	// Retrieved are the passages retrieval put into the model's context.
	Retrieved []knowledge.Passage `json:"retrieved,omitempty"`
	// RunID names the run: Request.RunID, or the id the runtime gave a run that
	// paused. Pending are the calls a paused run (awaiting_approval) waits on.
	RunID   string     `json:"run_id,omitempty"`
	Pending []Approval `json:"pending,omitempty"`
	// Prior is what the run's earlier executions did, for a run that resumed after
	// a pause; Steps, Usage and Cost include it. Telemetry of this execution counts
	// only what it added.
	Prior *Prior `json:"prior,omitempty"`
	// Plan is the model's plan as it last wrote it (plan mode).
	Plan []PlanStep `json:"plan,omitempty"`
	// Handoff is the run of the agent the intent handed the run to.
	Handoff *AgentRun `json:"handoff,omitempty"`
	// Checkpoint, when set, says the run stopped between two turns because its
	// host asked (Continuer): it has not ended, and Agent.Continue goes on with
	// it. The rest of the result is what it did so far.
	Checkpoint *Checkpoint `json:"-"`
}

// Prior is what a resumed run's earlier executions did: its first Steps steps,
// their usage and cost.
type Prior struct {
	Steps int         `json:"steps"`
	Usage model.Usage `json:"usage"`
	Cost  float64     `json:"cost,omitempty"`
}

// Learned describes an answer stored in the FAQ cache.
type Learned struct {
	PerUser bool `json:"per_user"`
}

// Verdict is the judge's decision on one draft answer.
type Verdict struct {
	Passed  bool       `json:"passed"`
	Missing string     `json:"missing,omitempty"`
	How     VerdictHow `json:"how"`
}

// VerdictHow says how a verdict came about.
type VerdictHow string

const (
	VerdictByJudge    VerdictHow = "judge"       // the judge model decided
	VerdictByMinChars VerdictHow = "min_chars"   // too short: failed without a judge call
	VerdictByError    VerdictHow = "judge_error" // the judge failed; on_error decided
)

// Completed reports whether the run ended with an accepted answer.
func (r *Result) Completed() bool { return r.Stop == StopCompleted }

// Step is one tool call of the run, as it was decided and executed.
type Step struct {
	Turn   int    `json:"turn"`
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	// Arguments are those the tool ran with, bound parameters included; for a call
	// that did not run, what the model sent.
	Arguments string `json:"arguments"`
	// Discarded names the bound parameters the model tried to set; their values
	// were dropped and are shown nowhere.
	Discarded []string      `json:"discarded,omitempty"`
	Outcome   Outcome       `json:"outcome"`
	Refusal   Refusal       `json:"refusal,omitempty"` // why a refused call was not run
	Result    string        `json:"result"`
	Duration  time.Duration `json:"duration_ns"`
	// Finish is the finish reason of the model response that asked for the call,
	// Model the model that answered it (as in Result.Models).
	Finish model.FinishReason `json:"finish_reason,omitempty"`
	Model  string             `json:"model,omitempty"`
	// Decision is what a person (or approval.on_timeout) decided about a call that
	// needed approval.
	Decision *Decision `json:"decision,omitempty"`
	// Agent is what the sub-agent a call of an agents entry ran did.
	Agent *AgentRun `json:"agent,omitempty"`

	modelArgs string // what the model may see of the arguments: no bound values
}

// AgentRun is a sub-run as its caller's result shows it: whose it was, how it
// ended, and what it did.
type AgentRun struct {
	Agent string      `json:"agent"`
	RunID string      `json:"run_id"`
	Stop  StopReason  `json:"stop"`
	Turns int         `json:"turns"`
	Usage model.Usage `json:"usage"`
	// Steps are the sub-run's tool calls; a handoff's are the run's own Steps.
	Steps []Step     `json:"steps,omitempty"`
	Plan  []PlanStep `json:"plan,omitempty"`
}

// Outcome is what became of a tool call.
type Outcome string

const (
	OutcomeOK        Outcome = "ok"        // the tool ran and succeeded
	OutcomeError     Outcome = "error"     // the tool ran and failed, timed out, or a filter turned its result into an error
	OutcomeRefused   Outcome = "refused"   // the call was not run (Step.Refusal says why)
	OutcomeDuplicate Outcome = "duplicate" // not run again: the model had the result already (duplicate_calls: hint)
	OutcomeFiltered  Outcome = "filtered"  // the tool ran but a filter withheld its result
	OutcomeRejected  Outcome = "rejected"  // not run: the call needed approval and was rejected, or nobody decided in time
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeOK, OutcomeError, OutcomeRefused, OutcomeDuplicate, OutcomeFiltered, OutcomeRejected}

// Ran reports whether the tool was actually called.
func (o Outcome) Ran() bool { return o == OutcomeOK || o == OutcomeError || o == OutcomeFiltered }

// Refusal is why a call was not run.
type Refusal string

const (
	RefusedNotOffered  Refusal = "not_offered"  // no such tool, or not for this request's intent
	RefusedInvalidJSON Refusal = "invalid_json" // the arguments are not JSON
	RefusedNotObject   Refusal = "not_object"   // the arguments are JSON but not an object
	RefusedSchema      Refusal = "schema"       // the arguments do not match the tool's parameters
	RefusedAccept      Refusal = "accept"       // the tool's accept rule said no
	RefusedTooMany     Refusal = "too_many"     // beyond guards.max_calls_per_response
	// RefusedNoApproval: the call needs a person's approval and this run cannot
	// ask for one (Request.Approvals is refuse, or there is no store to pause in).
	RefusedNoApproval Refusal = "approval_unavailable"
)
