package spec

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Defaults of the keys a spec may leave out. Resolve applies them; the runtime,
// explain, graph and the docs' Default columns all read the result (a test compares
// the docs with Defaults).
const (
	DefaultMaxTurns            = 10
	DefaultMaxToolRounds       = 8 // and never more than max_turns
	DefaultMaxParallelTools    = 4
	DefaultToolTimeout         = 30 * time.Second
	DefaultMaxToolOutput       = 16000
	DefaultFallback            = "I could not complete this request automatically. Please rephrase it or add details."
	DefaultDuplicateCalls      = DuplicateStop
	DefaultMaxRunTime          = 10 * time.Minute
	DefaultMaxCallsPerResponse = 32
	DefaultRedirects           = RedirectSameHost // an http tool's redirects

	DefaultJudgeRetries     = 2
	DefaultJudgeCriterion   = "The answer responds to every part of the user's message."
	DefaultJudgeOnError     = JudgeErrorPass
	DefaultJudgeOnExhausted = ExhaustedFallback

	DefaultRecognizer     = RecognizerLLM
	DefaultMinConfidence  = 0.5
	DefaultRoutingHistory = 3

	DefaultIntentKind   = IntentTask
	DefaultMemoryLevel  = MemoryNone
	DefaultWindow       = 10
	DefaultMaxFactChars = 500
	DefaultExtraction   = ExtractOff
	DefaultMaxSeen      = 10000

	DefaultModelTimeout = 60 * time.Second // one model call: headers and the whole body
	DefaultModelRetries = 2

	DefaultEmbeddings       = EmbeddingsLocal
	DefaultEmbeddingsModel  = "text-embedding-3-small" // after LLM_EMBEDDING_MODEL
	DefaultLocalDimensions  = 256
	DefaultIndexPath        = ".agentrun/knowledge.db" // in the spec's project directory, like the store
	DefaultChunkSize        = 800                      // runes
	DefaultChunkOverlap     = 100                      // runes
	DefaultCacheThreshold   = 0.76                     // measured on runtime/knowledge/testdata/faq_pairs.yaml
	DefaultCacheScope       = CacheAuto
	DefaultCacheTTL         = 7 * 24 * time.Hour // a learned entry's life
	DefaultCacheVerify      = VerifyNone
	DefaultVerifyBelow      = 0.9
	DefaultLearnedThreshold = 0.9
	DefaultRAGTopK          = 4
	DefaultRAGMinScore      = 0.3 // a passage's vector score
	DefaultRAGMaxTokens     = 1500

	DefaultApprovalTimeout   = 24 * time.Hour // how long a paused run waits for decisions
	DefaultApprovalOnTimeout = OnTimeoutReject
	DefaultPlanMaxSteps      = 20 // steps a plan may hold
	DefaultPlanMaxRejections = 3  // answers the plan gate refuses before plan_incomplete

	DefaultReplacement   = "[redacted]"
	DefaultDropMessage   = "[this result was withheld by a filter]"
	DefaultErrorMessage  = "%s failed." // the tool's name fills in
	DefaultAcceptMessage = "This call is not allowed for this user, so it was not run."
)

// DefaultBudgetOutput is the output a model call may produce, in tokens, as the
// budgets (guards.max_tokens, guards.max_cost) count it before the call when its
// model sets no max_tokens. No key sets it: it is the budgets' assumption, not a
// limit sent to the model.
const DefaultBudgetOutput = 4096

// Settings are a spec's effective settings: every value the spec leaves out is its
// default. They are computed once, by Resolve.
type Settings struct {
	Guards   GuardSettings
	Judge    *JudgeSettings // nil without a judge: every draft is accepted
	Routing  RoutingSettings
	Memory   MemorySettings
	Intents  []IntentSettings // in spec order
	Approval ApprovalSettings
	Plan     *PlanSettings // nil: plan mode is off

	defaulted map[string]bool
}

// GuardSettings are the limits of a run.
type GuardSettings struct {
	MaxTurns            int
	MaxToolRounds       int
	MaxParallelTools    int
	DuplicateCalls      DuplicatePolicy
	Fallback            string
	ToolTimeout         time.Duration
	MaxToolOutput       int
	MaxRunTime          time.Duration
	MaxCallsPerResponse int
	MaxTokens           int64   // 0: no token budget
	MaxCost             float64 // 0: no cost budget (US dollars)
}

// PlanSettings are plan mode's: see Plan.
type PlanSettings struct {
	Required      bool
	MaxSteps      int
	MaxRejections int
}

// ApprovalSettings say how long a paused run waits and what an undecided call
// becomes after that.
type ApprovalSettings struct {
	Timeout   time.Duration
	OnTimeout ApprovalOnTimeout
}

// JudgeSettings are the judge's.
type JudgeSettings struct {
	Criteria    []string
	MaxRetries  int
	MinChars    int
	OnError     JudgeOnError
	OnExhausted JudgeOnExhausted
}

// RoutingSettings say how an intent is chosen.
type RoutingSettings struct {
	Recognizer    Recognizer
	Fallback      string // "" for none
	MinConfidence float64
	History       int // turns the classifier sees
}

// MemorySettings are the memory's.
type MemorySettings struct {
	Window       int // turns of history a run loads
	MaxFactChars int
	Extract      Extraction
	MaxSeen      int // entities of one kind a conversation keeps
}

// IntentSettings is an intent with its kind, memory level and tool set resolved.
type IntentSettings struct {
	Name   string
	Kind   IntentKind
	Memory MemoryLevel
	// Tools are the names of the tools the intent may offer: for a task intent its
	// domain's and its own, for the other kinds only its own; each once.
	Tools []string
	Cache *CacheSettings // nil: no FAQ cache
	RAG   *RAGSettings   // nil: no retrieval
	Plan  *PlanSettings  // the agent's unless the intent sets its own; nil: off
	Agent string         // the agents entry the intent hands its runs to; "" for none
}

// CacheSettings are an intent's FAQ cache with its defaults applied.
type CacheSettings struct {
	Collection string // "" when the agent has no collection: learned entries only
	Threshold  float64
	// LearnedThreshold is the score a learned entry needs (by default the
	// higher of DefaultLearnedThreshold and Threshold).
	LearnedThreshold float64
	Scope            CacheScope
	TTL              time.Duration
	Learn            bool
	Verify           CacheVerify
	VerifyBelow      float64
}

// RAGSettings are an intent's retrieval with its defaults applied.
type RAGSettings struct {
	Collection string
	TopK       int
	MinScore   float64
	MaxTokens  int
}

// Resolve computes a spec's effective settings. It needs no validation to have run
// (a hand-built Spec resolves too); values the checker would reject are taken as
// written.
func Resolve(s *Spec) *Settings {
	st := &Settings{defaulted: map[string]bool{}}
	g := s.Guards
	maxTurns := pick(st, "guards.max_turns", g.MaxTurns, DefaultMaxTurns)
	st.Guards = GuardSettings{
		MaxTurns:            maxTurns,
		MaxToolRounds:       pick(st, "guards.max_tool_rounds", g.MaxToolRounds, min(DefaultMaxToolRounds, maxTurns)),
		MaxParallelTools:    pick(st, "guards.max_parallel_tools", g.MaxParallelTools, DefaultMaxParallelTools),
		DuplicateCalls:      pick(st, "guards.duplicate_calls", g.DuplicateCalls, DefaultDuplicateCalls),
		Fallback:            pick(st, "guards.fallback", g.Fallback, DefaultFallback),
		ToolTimeout:         pick(st, "guards.tool_timeout", g.ToolTimeout.Duration, DefaultToolTimeout),
		MaxToolOutput:       pick(st, "guards.max_tool_output", g.MaxToolOutput, DefaultMaxToolOutput),
		MaxRunTime:          pick(st, "guards.max_run_time", g.MaxRunTime.Duration, DefaultMaxRunTime),
		MaxCallsPerResponse: pick(st, "guards.max_calls_per_response", g.MaxCallsPerResponse, DefaultMaxCallsPerResponse),
		MaxTokens:           g.MaxTokens,
		MaxCost:             g.MaxCost,
	}
	if j := s.Judge; j != nil {
		st.Judge = &JudgeSettings{
			Criteria:    slices.Clone(j.Criteria),
			MaxRetries:  pickPtr(st, "judge.max_retries", j.MaxRetries, DefaultJudgeRetries),
			MinChars:    pick(st, "judge.min_chars", j.MinChars, 0),
			OnError:     pick(st, "judge.on_error", j.OnError, DefaultJudgeOnError),
			OnExhausted: pick(st, "judge.on_exhausted", j.OnExhausted, DefaultJudgeOnExhausted),
		}
		if len(j.Criteria) == 0 {
			st.defaulted["judge.criteria"] = true
			st.Judge.Criteria = []string{DefaultJudgeCriterion}
		}
	}
	r := s.Routing
	st.Routing = RoutingSettings{
		Recognizer:    pick(st, "routing.recognizer", r.Recognizer, DefaultRecognizer),
		Fallback:      r.Fallback,
		MinConfidence: pickPtr(st, "routing.min_confidence", r.MinConfidence, DefaultMinConfidence),
		History:       pickPtr(st, "routing.history", r.History, DefaultRoutingHistory),
	}
	m := s.Memory
	st.Memory = MemorySettings{
		Window:       pickPtr(st, "memory.window", m.Window, DefaultWindow),
		MaxFactChars: pick(st, "memory.facts.max_chars", m.Facts.MaxChars, DefaultMaxFactChars),
		Extract:      pick(st, "memory.facts.extract", m.Facts.Extract, DefaultExtraction),
		MaxSeen:      pick(st, "memory.max_seen", m.MaxSeen, DefaultMaxSeen),
	}
	st.Plan = resolvePlan(st, "plan", s.Plan)
	st.Intents = resolveIntents(s, st.Plan)
	st.Approval = ApprovalSettings{
		Timeout:   pick(st, "approval.timeout", s.Approval.Timeout.Duration, DefaultApprovalTimeout),
		OnTimeout: pick(st, "approval.on_timeout", s.Approval.OnTimeout, DefaultApprovalOnTimeout),
	}
	return st
}

// pick is a key's value, or its default when the spec leaves it at the zero value.
func pick[T comparable](st *Settings, key string, v, def T) T {
	var zero T
	if v == zero {
		st.defaulted[key] = true
		return def
	}
	return v
}

// pickPtr is pick for keys where the zero value is a valid setting (max_retries: 0).
func pickPtr[T any](st *Settings, key string, v *T, def T) T {
	if v == nil {
		st.defaulted[key] = true
		return def
	}
	return *v
}

func resolvePlan(st *Settings, key string, p *Plan) *PlanSettings {
	if p == nil {
		return nil
	}
	return &PlanSettings{
		Required:      p.Required,
		MaxSteps:      pick(st, key+".max_steps", p.MaxSteps, DefaultPlanMaxSteps),
		MaxRejections: pickPtr(st, key+".max_rejections", p.MaxRejections, DefaultPlanMaxRejections),
	}
}

func resolveIntents(s *Spec, plan *PlanSettings) []IntentSettings {
	domains := map[string][]string{}
	for _, d := range s.Domains {
		domains[d.Name] = d.Tools
	}
	out := make([]IntentSettings, 0, len(s.Intents))
	for _, in := range s.Intents {
		it := IntentSettings{Name: in.Name, Kind: cmp.Or(in.Kind, DefaultIntentKind), Memory: cmp.Or(in.Memory, DefaultMemoryLevel), Agent: in.Agent}
		switch {
		case in.PlanOff:
		case in.Plan != nil:
			it.Plan = resolvePlan(&Settings{defaulted: map[string]bool{}}, "", in.Plan)
		default:
			it.Plan = plan
		}
		if c := in.Cache; c != nil {
			it.Cache = &CacheSettings{
				Collection:       cmp.Or(c.Collection, onlyCollection(s)),
				Threshold:        derefOr(c.Threshold, DefaultCacheThreshold),
				LearnedThreshold: derefOr(c.LearnedThreshold, max(DefaultLearnedThreshold, derefOr(c.Threshold, DefaultCacheThreshold))),
				Scope:            cmp.Or(c.Scope, DefaultCacheScope),
				TTL:              cmp.Or(c.TTL.Duration, DefaultCacheTTL),
				Learn:            c.Learn,
				Verify:           cmp.Or(c.Verify, DefaultCacheVerify),
				VerifyBelow:      derefOr(c.VerifyBelow, DefaultVerifyBelow),
			}
		}
		if r := in.RAG; r != nil {
			it.RAG = &RAGSettings{
				Collection: cmp.Or(r.Collection, onlyCollection(s)),
				TopK:       cmp.Or(r.TopK, DefaultRAGTopK),
				MinScore:   derefOr(r.MinScore, DefaultRAGMinScore),
				MaxTokens:  cmp.Or(r.MaxTokens, DefaultRAGMaxTokens),
			}
		}
		names := in.Tools
		if it.Kind == IntentTask {
			names = append(slices.Clone(domains[in.Domain]), in.Tools...)
		}
		for _, n := range names {
			if !slices.Contains(it.Tools, n) {
				it.Tools = append(it.Tools, n)
			}
		}
		out = append(out, it)
	}
	return out
}

// onlyCollection is the collection an intent uses without naming one: the agent's
// only collection, or "" when it has none or several (the checker reports that).
func onlyCollection(s *Spec) string {
	if len(s.Knowledge.Collections) == 1 {
		return s.Knowledge.Collections[0].Name
	}
	return ""
}

func derefOr[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// ChunkOptions are a collection's chunk size and overlap with the defaults applied.
func (c *Collection) ChunkOptions() (size, overlap int) {
	return cmp.Or(c.ChunkSize, DefaultChunkSize), derefOr(c.ChunkOverlap, DefaultChunkOverlap)
}

// IsDefault reports whether the spec left a key out, so its value is the default.
// Keys are YAML paths such as guards.max_tool_rounds, as Defaults lists them; any
// other key is a bug of the caller.
func (st *Settings) IsDefault(key string) bool {
	if !slices.ContainsFunc(Defaults, func(d struct{ Key, Value string }) bool { return d.Key == key }) {
		panic("spec: IsDefault of a key Resolve does not know: " + key)
	}
	return st.defaulted[key]
}

// Defaults lists each defaulted key with its default as the docs write it; a test
// keeps the docs' Default columns equal to it.
var Defaults = []struct{ Key, Value string }{
	{"model.timeout", DefaultModelTimeout.String()},
	{"model.retries", fmt.Sprint(DefaultModelRetries)},
	{"guards.max_turns", fmt.Sprint(DefaultMaxTurns)},
	{"guards.max_tool_rounds", fmt.Sprintf("%d (at most `max_turns`)", DefaultMaxToolRounds)},
	{"guards.duplicate_calls", "`" + string(DefaultDuplicateCalls) + "`"},
	{"guards.fallback", fmt.Sprintf("%q", DefaultFallback)},
	{"guards.max_parallel_tools", fmt.Sprint(DefaultMaxParallelTools)},
	{"guards.tool_timeout", DefaultToolTimeout.String()},
	{"guards.max_tool_output", fmt.Sprint(DefaultMaxToolOutput)},
	{"guards.max_run_time", "10m"},
	{"guards.max_calls_per_response", fmt.Sprint(DefaultMaxCallsPerResponse)},
	{"judge.criteria", fmt.Sprintf("%q", DefaultJudgeCriterion)},
	{"judge.max_retries", fmt.Sprint(DefaultJudgeRetries)},
	{"judge.min_chars", "0"},
	{"judge.on_error", "`" + string(DefaultJudgeOnError) + "`"},
	{"judge.on_exhausted", "`" + string(DefaultJudgeOnExhausted) + "`"},
	{"routing.recognizer", "`" + string(DefaultRecognizer) + "`"},
	{"routing.min_confidence", fmt.Sprint(DefaultMinConfidence)},
	{"routing.history", fmt.Sprint(DefaultRoutingHistory)},
	{"intents.kind", "`" + string(DefaultIntentKind) + "`"}, // per intent: IntentSettings
	{"intents.memory", "`" + string(DefaultMemoryLevel) + "`"},
	{"memory.window", fmt.Sprint(DefaultWindow)},
	{"memory.max_seen", fmt.Sprint(DefaultMaxSeen)},
	{"memory.facts.max_chars", fmt.Sprint(DefaultMaxFactChars)},
	{"memory.facts.extract", "`" + string(DefaultExtraction) + "`"},
	{"embeddings.provider", "`" + string(DefaultEmbeddings) + "`"},
	{"embeddings.model", "`$LLM_EMBEDDING_MODEL`, then `" + DefaultEmbeddingsModel + "`"},
	{"embeddings.dimensions", fmt.Sprintf("%d for `local`; the model's own for `openai`", DefaultLocalDimensions)},
	{"embeddings.timeout", DefaultModelTimeout.String()},
	{"embeddings.retries", fmt.Sprint(DefaultModelRetries)},
	{"knowledge.index", "`" + DefaultIndexPath + "`"},
	{"knowledge.collections.chunk_size", fmt.Sprint(DefaultChunkSize)},
	{"knowledge.collections.chunk_overlap", fmt.Sprint(DefaultChunkOverlap)},
	{"intents.cache.threshold", fmt.Sprint(DefaultCacheThreshold)},
	{"intents.cache.scope", "`" + string(DefaultCacheScope) + "`"},
	{"intents.cache.ttl", "168h"},
	{"intents.cache.verify", "`" + string(DefaultCacheVerify) + "`"},
	{"intents.cache.verify_below", fmt.Sprint(DefaultVerifyBelow)},
	{"intents.cache.learned_threshold", fmt.Sprintf("the higher of %g and `threshold`", DefaultLearnedThreshold)},
	{"intents.rag.top_k", fmt.Sprint(DefaultRAGTopK)},
	{"intents.rag.min_score", fmt.Sprint(DefaultRAGMinScore)},
	{"intents.rag.max_tokens", fmt.Sprint(DefaultRAGMaxTokens)},
	{"filters.replacement", "`" + DefaultReplacement + "`"},
	{"approval.timeout", "24h"},
	{"approval.on_timeout", "`" + string(DefaultApprovalOnTimeout) + "`"},
	{"plan.max_steps", fmt.Sprint(DefaultPlanMaxSteps)},
	{"plan.max_rejections", fmt.Sprint(DefaultPlanMaxRejections)},
}
