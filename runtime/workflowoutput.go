package runtime

import (
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// zeroOutput is a step's output before it produced anything: every field its type
// declares, at its zero value, so an expression reading a skipped or failed step
// gets "" or false rather than an error.
func zeroOutput(s *spec.Step) map[string]any {
	out := map[string]any{spec.OutOK: false, spec.OutSkipped: false, spec.OutError: ""}
	if s.ForEach != nil && s.ForEach.Source != "" {
		out[spec.OutItems] = []any{}
		return out
	}
	switch s.Kind() {
	case spec.StepTool:
		out[spec.OutResult], out[spec.OutText] = nil, ""
	case spec.StepModelK:
		out[spec.OutText], out[spec.OutOutput] = "", nil
	case spec.StepAgent:
		out[spec.OutAnswer], out[spec.OutStop] = "", ""
	case spec.StepLoop:
		out[spec.OutIterations] = 0
	}
	return out
}

// fallbackOutput puts a step's fallback where its result would be.
func fallbackOutput(s *spec.Step, out map[string]any) {
	text := spec.ValueText(s.Fallback)
	switch s.Kind() {
	case spec.StepTool:
		out[spec.OutResult], out[spec.OutText] = s.Fallback, text
	case spec.StepModelK:
		out[spec.OutOutput], out[spec.OutText] = s.Fallback, text
	case spec.StepAgent:
		out[spec.OutAnswer] = text
	}
}

// lastText is the default answer: the text of the last step that ran — a tool's
// result, a model's text, an agent's answer; for a for_each step its items' texts,
// one a line; for a loop or parallel step the last of its steps'. A last step that
// failed (and continue let the flow go on) leaves no answer: that is an error, so
// the run stops with workflow_failed rather than answer nothing. A fallback value
// stands in for a failed step's text.
func lastText(steps []*flowStep, outputs map[string]any) (string, error) {
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		out, _ := outputs[st.spec.Name].(map[string]any)
		if out == nil || out[spec.OutSkipped] == true {
			continue
		}
		switch {
		case st.kind == spec.StepLoop:
			if t, err := lastText(st.body, outputs); t != "" || err != nil {
				return t, err
			}
			continue
		case st.kind == spec.StepParallel:
			for b := len(st.branches) - 1; b >= 0; b-- {
				if t, err := lastText(st.branches[b], outputs); t != "" || err != nil {
					return t, err
				}
			}
			continue
		}
		answered := func(o map[string]any) bool {
			return o[spec.OutOK] == true || st.spec.ErrorPolicy() == spec.OnErrorFallback
		}
		if items, ok := out[spec.OutItems].([]any); ok {
			var lines []string
			for _, it := range items {
				if m, ok := it.(map[string]any); ok && answered(m) {
					lines = append(lines, outputText(m))
				}
			}
			if len(lines) == 0 && len(items) > 0 {
				return "", fmt.Errorf("the last step, %s, failed for every item and the workflow has no answer: %v", st.spec.Name, out[spec.OutError])
			}
			return strings.Join(lines, "\n"), nil
		}
		if !answered(out) {
			return "", fmt.Errorf("the last step, %s, failed and the workflow has no answer: %v", st.spec.Name, out[spec.OutError])
		}
		return outputText(out), nil
	}
	return "", nil
}

func outputText(out map[string]any) string {
	if s, _ := out[spec.OutAnswer].(string); s != "" {
		return s
	}
	s, _ := out[spec.OutText].(string)
	return s
}
