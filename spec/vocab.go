package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Every closed vocabulary of the spec is a string type with its values listed once
// here. The schema's enums are tested against these lists, and the checker, the
// runtime, explain, graph and the docs read them instead of comparing strings.

// Provider says what answers a model's requests.
type Provider string

const (
	ProviderOpenAI    Provider = "openai"    // any OpenAI-compatible server
	ProviderAnthropic Provider = "anthropic" // Anthropic's Messages API
	ProviderGemini    Provider = "gemini"    // Google's Gemini API or Vertex AI
	ProviderTest      Provider = "test"      // offline: calls each offered tool once, then answers
	ProviderScript    Provider = "script"    // offline: plays scripted turns
)

// Providers lists every provider.
var Providers = []Provider{ProviderOpenAI, ProviderAnthropic, ProviderGemini, ProviderTest, ProviderScript}

// ModelAPI is the wire protocol of the OpenAI provider.
type ModelAPI string

const (
	APIChat      ModelAPI = "chat"      // chat completions: every compatible server
	APIResponses ModelAPI = "responses" // OpenAI's Responses API
)

// ModelAPIs lists every model API.
var ModelAPIs = []ModelAPI{APIChat, APIResponses}

// ReasoningEffort is how hard a reasoning model thinks.
type ReasoningEffort string

const (
	EffortMinimal ReasoningEffort = "minimal"
	EffortLow     ReasoningEffort = "low"
	EffortMedium  ReasoningEffort = "medium"
	EffortHigh    ReasoningEffort = "high"
)

// ReasoningEfforts lists every reasoning effort.
var ReasoningEfforts = []ReasoningEffort{EffortMinimal, EffortLow, EffortMedium, EffortHigh}

// IntentKind decides which tools an intent gets.
type IntentKind string

const (
	IntentTask      IntentKind = "task"      // its domain's tools and its own
	IntentKnowledge IntentKind = "knowledge" // only the tools it lists
	IntentChat      IntentKind = "chat"      // only the tools it lists
)

// IntentKinds lists every intent kind.
var IntentKinds = []IntentKind{IntentTask, IntentKnowledge, IntentChat}

// MemoryLevel is how much of what is known about a user an intent's runs get.
type MemoryLevel string

const (
	MemoryNone    MemoryLevel = "none"
	MemorySummary MemoryLevel = "summary"
	MemoryFull    MemoryLevel = "full"
)

// MemoryLevels lists every memory level.
var MemoryLevels = []MemoryLevel{MemoryNone, MemorySummary, MemoryFull}

// Injects reports whether the level puts remembered facts into the prompt.
func (l MemoryLevel) Injects() bool { return l == MemorySummary || l == MemoryFull }

// Recognizer says how a run's intent is recognised.
type Recognizer string

const (
	RecognizerLLM   Recognizer = "llm"   // rules first, then the classifier model
	RecognizerRules Recognizer = "rules" // keywords, patterns and examples only
	RecognizerOff   Recognizer = "off"   // only a pre-recognised intent or the fallback
)

// Recognizers lists every recognizer.
var Recognizers = []Recognizer{RecognizerLLM, RecognizerRules, RecognizerOff}

// EmbeddingsProvider says what turns text into vectors.
type EmbeddingsProvider string

const (
	EmbeddingsLocal  EmbeddingsProvider = "local"  // built in: hashed n-grams, no network
	EmbeddingsOpenAI EmbeddingsProvider = "openai" // any OpenAI-compatible embeddings API
)

// EmbeddingsProviders lists every embeddings provider.
var EmbeddingsProviders = []EmbeddingsProvider{EmbeddingsLocal, EmbeddingsOpenAI}

// CacheScope says whose questions a learned cache entry answers.
type CacheScope string

const (
	// CacheAuto learns an answer for everyone unless the run depended on the user
	// (a bound tool, injected memory, the user's facts or history): then only for
	// that user.
	CacheAuto CacheScope = "auto"
	// CacheShared learns answers for everyone, and none of a run that depended on
	// the user.
	CacheShared CacheScope = "shared"
	// CacheUser learns every answer only for the user who asked.
	CacheUser CacheScope = "user"
)

// CacheScopes lists every cache scope.
var CacheScopes = []CacheScope{CacheAuto, CacheShared, CacheUser}

// CacheVerify says whether a cache hit is checked before it is served.
type CacheVerify string

const (
	VerifyNone  CacheVerify = "none"  // a hit above the threshold is served
	VerifyJudge CacheVerify = "judge" // the judge checks hits below verify_below
)

// CacheVerifies lists every verify mode.
var CacheVerifies = []CacheVerify{VerifyNone, VerifyJudge}

// StoreKind names a memory store.
type StoreKind string

const (
	StoreMemory   StoreKind = "memory"
	StoreSQLite   StoreKind = "sqlite"
	StoreRedis    StoreKind = "redis"
	StorePostgres StoreKind = "postgres"
)

// StoreKinds lists every store kind.
var StoreKinds = []StoreKind{StoreMemory, StoreSQLite, StoreRedis, StorePostgres}

// StoreKindOf says which store a URL names:
//
//	memory:                       process-local
//	sqlite:///var/lib/agentrun.db sqlite:relative/path.db, or a plain path ending in .db
//	redis://localhost:6379/0      rediss:// for TLS
//	postgres://user@host:5432/db  postgresql:// too; ?schema=NAME&sslmode=…
func StoreKindOf(u string) (StoreKind, error) {
	switch {
	case u == "memory" || strings.HasPrefix(u, "memory:"):
		return StoreMemory, nil
	case strings.HasPrefix(u, "sqlite:"):
		return StoreSQLite, nil
	case strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://"):
		return StoreRedis, nil
	case strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://"):
		return StorePostgres, nil
	case strings.HasSuffix(u, ".db") && !strings.Contains(u, "://"):
		return StoreSQLite, nil
	}
	return "", fmt.Errorf("store URL %q: want memory:, sqlite:///path.db, redis://host:6379/0 or postgres://host:5432/db", u)
}

// Extraction says whether facts are extracted from the user's words by a model.
type Extraction string

const (
	ExtractOff Extraction = "off"
	ExtractLLM Extraction = "llm"
)

// Extractions lists every extraction mode.
var Extractions = []Extraction{ExtractOff, ExtractLLM}

// DuplicatePolicy is what happens when the model repeats a call.
type DuplicatePolicy string

const (
	DuplicateStop  DuplicatePolicy = "stop"  // end the run with duplicate_call
	DuplicateHint  DuplicatePolicy = "hint"  // do not run it; answer with the earlier result
	DuplicateAllow DuplicatePolicy = "allow" // run it again
)

// DuplicatePolicies lists every duplicate-call policy.
var DuplicatePolicies = []DuplicatePolicy{DuplicateStop, DuplicateHint, DuplicateAllow}

// JudgeOnError is what a failure of the judge itself does to a draft.
type JudgeOnError string

const (
	JudgeErrorPass JudgeOnError = "pass" // fail open
	JudgeErrorFail JudgeOnError = "fail" // like a rejection
)

// JudgeOnErrors lists every on_error value.
var JudgeOnErrors = []JudgeOnError{JudgeErrorPass, JudgeErrorFail}

// JudgeOnExhausted is what happens when a draft fails after the last retry.
type JudgeOnExhausted string

const (
	ExhaustedAccept   JudgeOnExhausted = "accept"
	ExhaustedFallback JudgeOnExhausted = "fallback"
)

// JudgeOnExhausteds lists every on_exhausted value.
var JudgeOnExhausteds = []JudgeOnExhausted{ExhaustedAccept, ExhaustedFallback}

// ApprovalOnTimeout is what an undecided call becomes when approval.timeout passes.
type ApprovalOnTimeout string

const (
	// OnTimeoutReject rejects the call: the model is told nobody approved it in
	// time, and the run goes on.
	OnTimeoutReject ApprovalOnTimeout = "reject"
	// OnTimeoutStop ends the run with stop reason approval_timeout and the fallback.
	OnTimeoutStop ApprovalOnTimeout = "stop"
)

// ApprovalOnTimeouts lists every on_timeout value.
var ApprovalOnTimeouts = []ApprovalOnTimeout{OnTimeoutReject, OnTimeoutStop}

// FilterStage is where a filter acts.
type FilterStage string

const (
	StageInput      FilterStage = "input"
	StageToolResult FilterStage = "tool_result"
	StageAnswer     FilterStage = "answer"
)

// FilterAction is what a filter does.
type FilterAction string

const (
	ActionBlock    FilterAction = "block"
	ActionError    FilterAction = "error"
	ActionRedact   FilterAction = "redact"
	ActionTruncate FilterAction = "truncate"
	ActionDrop     FilterAction = "drop"
)

// FilterActions lists every filter action.
var FilterActions = []FilterAction{ActionBlock, ActionError, ActionRedact, ActionTruncate, ActionDrop}

// FilterStages is what each stage allows, in the order the docs show them: the one
// table the checker, the runtime and the docs read.
var FilterStages = []struct {
	Stage   FilterStage
	Actions []FilterAction
}{
	{StageInput, []FilterAction{ActionBlock, ActionRedact}},
	{StageToolResult, []FilterAction{ActionError, ActionRedact, ActionTruncate, ActionDrop}},
	{StageAnswer, []FilterAction{ActionRedact, ActionBlock}},
}

// Actions lists the actions a stage allows; nil for an unknown stage.
func (s FilterStage) Actions() []FilterAction {
	for _, fs := range FilterStages {
		if fs.Stage == s {
			return fs.Actions
		}
	}
	return nil
}

// Allows reports whether a filter at this stage may take the action.
func (s FilterStage) Allows(a FilterAction) bool { return slices.Contains(s.Actions(), a) }

// FilterKeys says which actions read each of a filter's optional keys; a key set
// for another action has no effect (a warning).
var FilterKeys = []struct {
	Key     string
	Actions []FilterAction
}{
	{"replacement", []FilterAction{ActionRedact}},
	{"max_chars", []FilterAction{ActionTruncate}},
	{"message", []FilterAction{ActionBlock, ActionError, ActionDrop}},
}
