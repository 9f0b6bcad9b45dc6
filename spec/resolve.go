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

	DefaultReplacement = "[redacted]"
	DefaultDropMessage = "[this result was withheld by a filter]"
)

// Settings are a spec's effective settings: every value the spec leaves out is its
// default. They are computed once, by Resolve.
type Settings struct {
	Guards  GuardSettings
	Judge   *JudgeSettings // nil without a judge: every draft is accepted
	Routing RoutingSettings
	Memory  MemorySettings
	Intents []IntentSettings // in spec order

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
}

// Resolve computes a spec's effective settings. It needs no validation to have run
// (a hand-built Spec resolves too); values the checker would reject are taken as
// written.
func Resolve(s *Spec) *Settings {
	st := &Settings{defaulted: map[string]bool{}}
	def := func(key string, unset bool) bool {
		if unset {
			st.defaulted[key] = true
		}
		return unset
	}
	g := s.Guards
	maxTurns := cmp.Or(g.MaxTurns, DefaultMaxTurns)
	def("guards.max_turns", g.MaxTurns == 0)
	rounds := g.MaxToolRounds
	if def("guards.max_tool_rounds", rounds == 0) {
		rounds = min(DefaultMaxToolRounds, maxTurns)
	}
	def("guards.max_parallel_tools", g.MaxParallelTools == 0)
	def("guards.duplicate_calls", g.DuplicateCalls == "")
	def("guards.fallback", g.Fallback == "")
	def("guards.tool_timeout", g.ToolTimeout.Duration == 0)
	def("guards.max_tool_output", g.MaxToolOutput == 0)
	def("guards.max_run_time", g.MaxRunTime.Duration == 0)
	def("guards.max_calls_per_response", g.MaxCallsPerResponse == 0)
	st.Guards = GuardSettings{
		MaxTurns:            maxTurns,
		MaxToolRounds:       rounds,
		MaxParallelTools:    cmp.Or(g.MaxParallelTools, DefaultMaxParallelTools),
		DuplicateCalls:      cmp.Or(g.DuplicateCalls, DefaultDuplicateCalls),
		Fallback:            cmp.Or(g.Fallback, DefaultFallback),
		ToolTimeout:         cmp.Or(g.ToolTimeout.Duration, DefaultToolTimeout),
		MaxToolOutput:       cmp.Or(g.MaxToolOutput, DefaultMaxToolOutput),
		MaxRunTime:          cmp.Or(g.MaxRunTime.Duration, DefaultMaxRunTime),
		MaxCallsPerResponse: cmp.Or(g.MaxCallsPerResponse, DefaultMaxCallsPerResponse),
	}
	if j := s.Judge; j != nil {
		js := &JudgeSettings{
			Criteria:    j.Criteria,
			MaxRetries:  DefaultJudgeRetries,
			MinChars:    j.MinChars,
			OnError:     cmp.Or(j.OnError, DefaultJudgeOnError),
			OnExhausted: cmp.Or(j.OnExhausted, DefaultJudgeOnExhausted),
		}
		if !def("judge.criteria", len(j.Criteria) == 0) {
			js.Criteria = slices.Clone(j.Criteria)
		} else {
			js.Criteria = []string{DefaultJudgeCriterion}
		}
		if !def("judge.max_retries", j.MaxRetries == nil) {
			js.MaxRetries = *j.MaxRetries
		}
		def("judge.min_chars", j.MinChars == 0)
		def("judge.on_error", j.OnError == "")
		def("judge.on_exhausted", j.OnExhausted == "")
		st.Judge = js
	}
	r := s.Routing
	st.Routing = RoutingSettings{Recognizer: cmp.Or(r.Recognizer, DefaultRecognizer), Fallback: r.Fallback,
		MinConfidence: DefaultMinConfidence, History: DefaultRoutingHistory}
	def("routing.recognizer", r.Recognizer == "")
	if !def("routing.min_confidence", r.MinConfidence == nil) {
		st.Routing.MinConfidence = *r.MinConfidence
	}
	if !def("routing.history", r.History == nil) {
		st.Routing.History = *r.History
	}
	m := s.Memory
	st.Memory = MemorySettings{Window: DefaultWindow, MaxFactChars: cmp.Or(m.Facts.MaxChars, DefaultMaxFactChars),
		Extract: cmp.Or(m.Facts.Extract, DefaultExtraction), MaxSeen: cmp.Or(m.MaxSeen, DefaultMaxSeen)}
	if !def("memory.window", m.Window == nil) {
		st.Memory.Window = *m.Window
	}
	def("memory.facts.max_chars", m.Facts.MaxChars == 0)
	def("memory.facts.extract", m.Facts.Extract == "")
	def("memory.max_seen", m.MaxSeen == 0)
	st.Intents = resolveIntents(s)
	return st
}

func resolveIntents(s *Spec) []IntentSettings {
	domains := map[string][]string{}
	for _, d := range s.Domains {
		domains[d.Name] = d.Tools
	}
	out := make([]IntentSettings, 0, len(s.Intents))
	for _, in := range s.Intents {
		it := IntentSettings{Name: in.Name, Kind: cmp.Or(in.Kind, DefaultIntentKind), Memory: cmp.Or(in.Memory, DefaultMemoryLevel)}
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

// IsDefault reports whether the spec left a key out, so its value is the default.
// Keys are YAML paths such as guards.max_tool_rounds.
func (st *Settings) IsDefault(key string) bool { return st.defaulted[key] }

// Intent returns an intent's settings.
func (st *Settings) Intent(name string) (IntentSettings, bool) {
	for _, it := range st.Intents {
		if it.Name == name {
			return it, true
		}
	}
	return IntentSettings{}, false
}

// Defaults lists each defaulted key with its default as the docs write it; a test
// keeps the docs' Default columns equal to it.
var Defaults = []struct{ Key, Value string }{
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
	{"intents.kind", "`" + string(DefaultIntentKind) + "`"},
	{"intents.memory", "`" + string(DefaultMemoryLevel) + "`"},
	{"memory.window", fmt.Sprint(DefaultWindow)},
	{"memory.max_seen", fmt.Sprint(DefaultMaxSeen)},
	{"memory.facts.max_chars", fmt.Sprint(DefaultMaxFactChars)},
	{"memory.facts.extract", "`" + string(DefaultExtraction) + "`"},
}
