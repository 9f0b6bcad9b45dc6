package model

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// EstimateTokens is a rough token count for budgeting: about four characters a
// token for ASCII text, one a token for other scripts (CJK especially).
func EstimateTokens(s string) int {
	ascii, other := 0, 0
	for _, r := range s {
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
	}
	return (ascii+3)/4 + other
}

// ToolTokens estimates what a tool definition costs in a request.
func ToolTokens(d ToolDef) int {
	b, _ := json.Marshal(d)
	return EstimateTokens(string(b))
}

// EstimateRequestTokens estimates a request's prompt for budgeting: its messages
// (text, tool calls, reasoning sent back), its tools and the answer schema it asks
// for. The budgets count it before every model call (see GuardBudget).
func EstimateRequestTokens(req *Request) int {
	n := 0
	for _, m := range req.Messages {
		n += EstimateTokens(m.Content)
		for _, tc := range m.ToolCalls {
			n += EstimateTokens(tc.Name) + EstimateTokens(tc.Arguments)
		}
		if m.Reasoning != nil {
			n += EstimateTokens(m.Reasoning.Text)
		}
	}
	for _, d := range req.Tools {
		n += ToolTokens(d)
	}
	if req.JSONSchema != nil {
		b, _ := json.Marshal(req.JSONSchema.Schema)
		n += EstimateTokens(string(b))
	}
	return n
}

// Role is the author of a message in the function-calling protocol.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation. An assistant message may carry tool
// calls; a tool message answers exactly one of them by ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Reasoning is an assistant message's reasoning text (DeepSeek's
	// reasoning_content, others' reasoning). It is never part of an answer; a
	// provider that requires it back gets it back, and it is stored with the
	// messages that made tool calls.
	Reasoning *Reasoning `json:"reasoning,omitempty"`
	// Parts are the files a user message carries besides its text: images and
	// documents, sent to each provider in its own form.
	Parts []Part `json:"parts,omitempty"`
}

// Reasoning is the reasoning a model sent with a message and the wire field it came
// in, so it goes back the way it came.
type Reasoning struct {
	Field string `json:"field"` // reasoning_content or reasoning; the block type for native providers
	Text  string `json:"text"`  // what can be read of it, for --json, traces and --record
	// Provider names the API whose Blocks these are (ProviderAnthropic, …); any
	// other provider ignores them.
	Provider string `json:"provider,omitempty"`
	// Blocks are the provider's reasoning as it came on the wire, sent back byte
	// for byte on the next request of a tool round: Anthropic's thinking and
	// redacted_thinking blocks with their signatures, the Responses API's
	// reasoning items, Gemini's thought parts.
	Blocks []json.RawMessage `json:"blocks,omitempty"`
}

// The APIs whose own reasoning blocks a Reasoning may carry.
const (
	ProviderAnthropic = "anthropic"
	ProviderGemini    = "gemini"
	ProviderResponses = "openai-responses"
)

// PartKind is what a message part holds.
type PartKind string

const (
	PartImage PartKind = "image" // image/png, image/jpeg, image/gif, image/webp
	PartFile  PartKind = "file"  // a document: application/pdf, text/plain, …
)

// Part is a file sent with a user message. It holds its bytes (Data) or a URL the
// provider fetches itself; once stored, Ref is the blob store's reference to the
// bytes, and a stored conversation keeps the reference, never the bytes.
type Part struct {
	Kind      PartKind `json:"kind"`
	MediaType string   `json:"media_type"`
	Name      string   `json:"name,omitempty"` // a file name, for the model and for people
	Data      []byte   `json:"data,omitempty"`
	URL       string   `json:"url,omitempty"`
	Ref       string   `json:"ref,omitempty"`
	Size      int64    `json:"size,omitempty"` // of Data, also once Data was dropped for Ref
}

// ToolCall is a model's request to run a tool. Arguments is the raw JSON text the
// model produced: untrusted until checked.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Extra holds the provider's own fields of the call, by their wire names, which
	// must go back with it (Gemini's thought signature in extra_content).
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// ToolDef is a tool as offered to the model.
type ToolDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// CachedPromptTokens are the prompt tokens the provider served from its prompt
	// cache (priced lower; Anthropic's cache_read_input_tokens); part of
	// PromptTokens.
	CachedPromptTokens int64 `json:"cached_prompt_tokens,omitempty"`
	// CacheWriteTokens are the prompt tokens the provider wrote to its prompt
	// cache (priced higher; Anthropic's cache_creation_input_tokens); part of
	// PromptTokens.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Add accumulates u into the receiver.
func (u *Usage) Add(o Usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens += o.TotalTokens
	u.CachedPromptTokens += o.CachedPromptTokens
	u.CacheWriteTokens += o.CacheWriteTokens
}

// Request is one chat completion request.
type Request struct {
	Messages []Message
	Tools    []ToolDef
	// OnDelta, when set, asks for a streamed response and receives the text as it
	// arrives. Tool calls are only returned once complete.
	OnDelta func(text string)
	// JSONSchema, when set, asks for a JSON answer matching the schema (the judge
	// and the intent classifier use it).
	JSONSchema *JSONSchemaFormat
	// JSONObject asks only for some JSON object, for servers that reject a schema;
	// JSONSchema then still describes the expected shape to offline models.
	JSONObject bool
	// MaxTokens caps this call's output (a run's budget counted it at that);
	// 0 means the model's own setting.
	MaxTokens int
}

// Names of the structured answers the runtime asks models for: the judge's verdict,
// the classifier's intent and extracted facts, and the agent's own answer when the
// spec asks for a structured output. Offline models answer by these names.
const (
	SchemaAnswer  = "answer"
	SchemaVerdict = "verdict"
	SchemaIntent  = "intent"
	SchemaFacts   = "facts"
)

// JSONSchemaFormat names a schema for structured output.
type JSONSchemaFormat struct {
	Name   string
	Schema map[string]any
}

// Response is the model's answer: text, tool calls or both.
type Response struct {
	Message      Message
	FinishReason FinishReason
	Usage        Usage
	Model        string // the model name the server reported
	// Answered says which model of a fallback chain (runtime/model/fallback)
	// answered and which failed before it; nil for a model that is no chain.
	Answered *Answered
}

// Answered is the model of a fallback chain that answered a call, by its
// configured provider and name (the spec's, not what the server reported), and the
// chain's models that failed with a retryable fault, or were skipped by their
// circuit breaker, before it: empty when the chain's first model answered.
type Answered struct {
	Provider     string   `json:"provider"`
	Name         string   `json:"name"`
	FallbackFrom []string `json:"fallback_from,omitempty"`
}

// FinishReason is why the model stopped writing, as the server said it. The runtime
// acts on those below; other values (providers have their own) are recorded as
// they are.
type FinishReason string

const (
	FinishStop          FinishReason = "stop"           // a complete answer
	FinishToolCalls     FinishReason = "tool_calls"     // it asked for tools
	FinishLength        FinishReason = "length"         // cut at max_tokens or the context size
	FinishContentFilter FinishReason = "content_filter" // stopped by the provider's content filter
)

// Model is a chat model that supports function calling. Implementations retry
// transient failures themselves; an error returned here ends the run.
type Model interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Error is a failure of the model service after retries.
type Error struct {
	Status int // HTTP status, 0 when none (a connection or stream failure)
	Err    error
	// Usage is what the call was billed for when a response arrived and was
	// refused (tool call arguments cut off at max_tokens): the run still spent it.
	Usage Usage
	// Refused marks a failure without a status that no retry can fix: a
	// response that arrived and was unusable (cut-off tool arguments, too large),
	// or a request this provider cannot send (a part type it does not take).
	Refused bool
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model error (HTTP %d): %v", e.Status, e.Err)
	}
	return fmt.Sprintf("model error: %v", e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Misconfigured reports a refusal no retry or fallback can fix: the server refused
// the API key (401, 403) or has no such model or endpoint (404).
func (e *Error) Misconfigured() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusNotFound
}

// Retryable reports a fault another try, or another model, may not meet: no
// answer (a connection failure or a timeout), 408, 409, 429, a 5xx or Anthropic's
// 529 overloaded. A refused request (400, 401, 403, 404, 413, 422) is not: another
// model would be asked the same wrong thing.
func (e *Error) Retryable() bool {
	switch {
	case e.Status == 0:
		return !e.Refused
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusConflict, e.Status == http.StatusTooManyRequests:
		return true
	}
	return e.Status >= 500
}

// LastTurns keeps the last n turns of messages: everything from the n-th last user
// message on. A conversation is stored by whole turns, so this never separates a
// tool call from its results.
func LastTurns(msgs []Message, n int) []Message {
	if n <= 0 {
		return nil
	}
	seen := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			seen++
			if seen == n {
				return msgs[i:]
			}
		}
	}
	return msgs
}

// OrderedModel is a model that answers calls in the order they come, from a list
// (offline.Script), or keeps them in that order (offline.Recorder's wrapper).
type OrderedModel interface {
	Model
	// Ordered reports whether the order of calls decides the answers.
	Ordered() bool
}

// PartTaker is a model that can be sent message parts. TakesPart says whether it
// takes p (its kind, media type, size, and whether it comes as bytes or a URL),
// and if not, why, in words for the person who sent it; a model that does not
// implement PartTaker takes no parts. Runs check every part before the first
// call, so a part a provider cannot take is refused, never silently dropped.
type PartTaker interface {
	TakesPart(p Part) error
}
