package graph

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// Setting shows an effective value, marked when the spec left it to its default.
func Setting(st *spec.Settings, key string, v any) string {
	if st.IsDefault(key) {
		return fmt.Sprintf("%v (default)", v)
	}
	return fmt.Sprint(v)
}

// FormatCost shows US dollars with up to four significant digits and never in
// exponent notation, which a cost of a cheap call would otherwise get ($8.1e-05):
// $0.000081, $0.001234, $1.234, $1235.
func FormatCost(usd float64) string {
	if usd <= 0 || math.IsInf(usd, 0) || math.IsNaN(usd) {
		return "$" + strconv.FormatFloat(usd, 'f', -1, 64)
	}
	decimals := max(0, 3-int(math.Floor(math.Log10(usd))))
	s := strconv.FormatFloat(usd, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return "$" + s
}

// StepSummary says what a workflow step does, in one line: its kind and target,
// and the settings that shape how it runs.
func StepSummary(s *spec.Step, st *spec.Settings) string {
	var parts []string
	switch s.Kind() {
	case spec.StepTool:
		parts = append(parts, "tool "+s.Tool)
	case spec.StepModelK:
		m := "model"
		if s.Model.Schema != nil {
			m += " (JSON schema)"
		}
		parts = append(parts, m)
	case spec.StepAgent:
		parts = append(parts, "agent "+s.Agent)
	case spec.StepParallel:
		parts = append(parts, fmt.Sprintf("parallel · %d branches", len(s.Parallel)))
	case spec.StepLoop:
		parts = append(parts, fmt.Sprintf("loop until %s · max %d", s.Loop.Until.Source, s.Loop.Max))
	}
	if s.ForEach != nil && s.ForEach.Source != "" {
		n := s.MaxParallel
		at := fmt.Sprintf("%d at once", n)
		if n == 0 {
			at = Setting(st, "guards.max_parallel_tools", st.Guards.MaxParallelTools) + " at once"
		}
		parts = append(parts, fmt.Sprintf("for_each %s · %s", s.ForEach.Source, at))
	}
	if s.OnError != "" {
		parts = append(parts, "on_error "+string(s.OnError))
	} else {
		parts = append(parts, "on_error "+string(spec.DefaultStepOnError)+" (default)")
	}
	return strings.Join(parts, " · ")
}

// clip is s on one line, cut to n runes and marked so.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
