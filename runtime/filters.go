package runtime

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// filterApplies evaluates a filter's condition; a filter without one always applies.
func (r *run) filterApplies(f *spec.Filter, vars *spec.Values) bool {
	if f.When == nil || f.When.Program == nil {
		return true
	}
	out, err := expr.Run(f.When.Program, spec.FilterEnv(f.On).Values(vars))
	if err != nil {
		r.emit(Event{Kind: EventFilter, Filter: filterName(f), Stage: f.On, Error: err.Error(), Message: "condition failed; filter not applied"})
		return false
	}
	ok, _ := out.(bool)
	return ok
}

func filterName(f *spec.Filter) string { return cmp.Or(f.Name, string(f.On)) }

func redact(f *spec.Filter, s string) string {
	return f.Redact.Re.ReplaceAllString(s, cmp.Or(f.Replacement, spec.DefaultReplacement))
}

// filterText applies the filters of a text stage — the user's input or the answer —
// to text, in place. It returns false when one blocked the run, which it stops.
func (r *run) filterText(stage spec.FilterStage, text *string) bool {
	for _, f := range r.agent.filters[stage] {
		vars := r.vars
		vars.Input = r.messages[0].Content
		if stage == spec.StageAnswer {
			vars.Input, vars.Answer = r.req.Input, *text
		}
		if !r.filterApplies(f, &vars) {
			continue
		}
		action := f.EffectiveAction()
		acted := Event{Kind: EventFilter, Filter: filterName(f), Stage: stage, Action: action}
		switch action {
		case spec.ActionBlock:
			r.emit(acted)
			r.stopWith(StopBlocked, fmt.Sprintf("%s blocked by filter %s", stage, filterName(f)), cmp.Or(f.Message, r.agent.settings.Guards.Fallback))
			return false
		case spec.ActionRedact:
			if out := redact(f, *text); out != *text {
				*text = out
				r.emit(acted)
			}
		}
	}
	return true
}

// filterToolResult applies the tool_result filters to a finished call.
func (r *run) filterToolResult(c *call) {
	for _, f := range r.agent.filters[spec.StageToolResult] {
		if len(f.Tools) > 0 && !slices.Contains(f.Tools, c.tc.Name) {
			continue
		}
		vars := r.vars
		vars.Tool, vars.Args, vars.Result, vars.Text, vars.OK = c.tc.Name, c.args, parseResult(c.result), c.result, c.outcome == OutcomeOK
		if !r.filterApplies(f, &vars) {
			continue
		}
		before := c.result
		action := f.EffectiveAction()
		switch action {
		case spec.ActionError:
			c.outcome = OutcomeError
			c.result = "Error: " + cmp.Or(f.Message, fmt.Sprintf(spec.DefaultErrorMessage, c.tc.Name))
		case spec.ActionRedact:
			c.result = redact(f, c.result)
		case spec.ActionTruncate:
			if utf8.RuneCountInString(c.result) > f.MaxChars {
				c.result = string([]rune(c.result)[:f.MaxChars]) + "\n[cut by a filter]"
			}
		case spec.ActionDrop:
			c.outcome = OutcomeFiltered
			c.result = cmp.Or(f.Message, spec.DefaultDropMessage)
		}
		if c.result != before {
			r.emit(Event{Kind: EventFilter, Filter: filterName(f), Stage: spec.StageToolResult, Action: action, Tool: c.tc.Name, CallID: c.tc.ID})
		}
	}
}
