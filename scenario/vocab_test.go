package scenario

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	agent "github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/schema"
	"github.com/agentrun/agentrun/spec"
)

// The test schema's enums name the runtime's words: a test may expect any stop
// reason, outcome or routing the runtime can produce, and no other.
func TestTestSchemaEnumsMatchTheRuntime(t *testing.T) {
	var doc any
	if err := json.Unmarshal(schema.TestJSON, &doc); err != nil {
		t.Fatal(err)
	}
	enums := map[string][]string{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if e, ok := x["enum"].([]any); ok {
				for _, s := range e {
					enums[key] = append(enums[key], fmt.Sprint(s))
				}
			}
			for k, c := range x {
				walk(k, c)
			}
		case []any:
			for _, c := range x {
				walk(key, c)
			}
		}
	}
	walk("", doc)
	for key, want := range map[string][]string{
		"stop":       strs(agent.StopReasons),
		"outcome":    strs(agent.Outcomes),
		"intent_how": strs(agent.RoutedBys),
		"order":      strs(spec.CallOrders),
		"cache":      strs(agent.CacheOutcomes),
		"learned":    LearnedScopes,
		"decision":   strs(spec.ApprovalDecisions),
		"status":     strs(agent.PlanStatuses),
	} {
		got := slices.Sorted(slices.Values(enums[key]))
		if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: the test schema allows %v, the code has %v", key, got, want)
		}
	}
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
