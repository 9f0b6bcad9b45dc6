package runtime

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// acceptCall evaluates a tool's accept rule on a prepared call. A rule that fails
// to evaluate refuses the call: an argument rule fails closed.
func (r *run) acceptCall(t *agentTool, args map[string]any) (bool, string) {
	rule := t.spec.Accept
	if rule == nil || rule.Program == nil {
		return true, ""
	}
	vars := r.vars
	vars.Args, vars.Seen = args, r.seenKind
	out, err := expr.Run(rule.Program, spec.EnvAccept.Values(&vars))
	if ok, _ := out.(bool); ok && err == nil {
		return true, ""
	}
	msg := cmp.Or(t.spec.AcceptMessage, "This call is not allowed for this user, so it was not run.")
	if err != nil {
		msg += " (the rule could not be checked: " + err.Error() + ")"
	}
	return false, msg
}

func (r *run) seenKind(kind string) []string { return r.seen[kind] }

// collect records the entities a successful call's result reveals, by the tool's
// collect rules, so later accept rules can check seen(kind).
func (r *run) collect(c *call) {
	rules := c.tool.spec.Collect
	if len(rules) == 0 || c.outcome != OutcomeOK {
		return
	}
	vars := r.vars
	vars.Args, vars.Result = c.args, parseResult(c.result)
	env := spec.EnvCollect.Values(&vars)
	for kind, rule := range rules {
		if rule.Program == nil {
			continue
		}
		out, err := expr.Run(rule.Program, env)
		if err != nil {
			r.emit(Event{Kind: EventCollect, Tool: c.tc.Name, CallID: c.tc.ID, Entity: kind, Error: err.Error()})
			continue
		}
		added := addSeen(r.seen, kind, flatten(out))
		r.emit(Event{Kind: EventCollect, Tool: c.tc.Name, CallID: c.tc.ID, Entity: kind, Count: added})
	}
}

// addSeen adds the ids not yet seen under kind and returns how many it added.
func addSeen(seen map[string][]string, kind string, ids []string) int {
	added := 0
	for _, id := range ids {
		if !slices.Contains(seen[kind], id) {
			seen[kind] = append(seen[kind], id)
			added++
		}
	}
	return added
}

// parseResult is a tool result as expressions see it: decoded JSON when it is JSON,
// else the text.
func parseResult(text string) any {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err == nil {
		return v
	}
	return text
}

// flatten turns what a collect rule returned into entity ids.
func flatten(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, flatten(e)...)
		}
		return out
	case []string:
		return x
	case string:
		return []string{x}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return []string{strconv.FormatInt(int64(x), 10)}
		}
	}
	return []string{fmt.Sprint(v)}
}
