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
	msg := cmp.Or(t.spec.AcceptMessage, spec.DefaultAcceptMessage)
	if err != nil {
		msg += " (the rule could not be checked: " + err.Error() + ")"
	}
	return false, msg
}

func (r *run) seenKind(kind string) []string { return r.seen.list(kind) }

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
		added := r.seen.reveal(kind, flatten(out))
		r.emit(Event{Kind: EventCollect, Tool: c.tc.Name, CallID: c.tc.ID, Entity: kind, Count: added})
	}
}

// seenEntities is what a run knows of the entities revealed to the user, by kind:
// those of earlier runs (Request.Seen and the store's) and those this run's results
// reveal, which are all the run commits. A run costs at most a few passes over a
// kind's earlier entities, never a pass per entity.
type seenEntities map[string]*seenKind

type seenKind struct {
	// all is what seen(kind) returns — each entity once, earlier runs' first — built
	// once per run and extended in place, so an accept rule never waits for a copy.
	all []string
	// index holds the members of all once searching all has cost scanPasses passes
	// over it: a run that reveals a handful of entities never builds it.
	index    map[string]struct{}
	scanned  int                 // entities compared while searching all without index
	revealed []string            // what this run revealed, in order, each once
	inRun    map[string]struct{} // the members of revealed
}

// scanPasses is how many passes over all a kind's searches may cost before its index
// is built: a pass compares strings, far cheaper per entity than building a map.
const scanPasses = 8

// newSeenEntities starts from the entities the caller passes in.
func newSeenEntities(passed map[string][]string) seenEntities {
	s := make(seenEntities, len(passed))
	for kind, ids := range passed {
		s.addEarlier(kind, ids)
	}
	return s
}

func (s seenEntities) kind(name string) *seenKind {
	k := s[name]
	if k == nil {
		k = &seenKind{}
		s[name] = k
	}
	return k
}

// addEarlier adds entities revealed by earlier runs. The first list of a kind is
// taken as it is (a store's list has no duplicates), with its capacity clipped so
// that extending all never writes into the caller's array.
func (s seenEntities) addEarlier(kind string, ids []string) {
	if len(ids) == 0 {
		return
	}
	k := s.kind(kind)
	if len(k.all) == 0 {
		k.all = slices.Clip(ids)
		return
	}
	for _, id := range ids {
		k.add(id)
	}
}

// reveal records what this run's results revealed and returns how many of the ids
// were not known before.
func (s seenEntities) reveal(kind string, ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	k := s.kind(kind)
	if k.inRun == nil {
		k.inRun = map[string]struct{}{}
	}
	added := 0
	for _, id := range ids {
		if _, ok := k.inRun[id]; ok {
			continue
		}
		k.inRun[id] = struct{}{}
		k.revealed = append(k.revealed, id)
		if k.add(id) {
			added++
		}
	}
	return added
}

// add appends id to all unless all holds it, and reports whether it did.
func (k *seenKind) add(id string) bool {
	if k.index == nil && k.scanned+len(k.all) > scanPasses*len(k.all) {
		k.index = make(map[string]struct{}, len(k.all))
		for _, e := range k.all {
			k.index[e] = struct{}{}
		}
	}
	if k.index != nil {
		if _, ok := k.index[id]; ok {
			return false
		}
		k.index[id] = struct{}{}
	} else {
		k.scanned += len(k.all)
		if slices.Contains(k.all, id) {
			return false
		}
	}
	k.all = append(k.all, id)
	return true
}

// list is seen(kind): every entity of the kind known to the run.
func (s seenEntities) list(kind string) []string {
	if k := s[kind]; k != nil {
		return k.all
	}
	return nil
}

// revealedByKind is what the run commits: only its own revelations.
func (s seenEntities) revealedByKind() map[string][]string {
	var out map[string][]string
	for kind, k := range s {
		if len(k.revealed) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[kind] = k.revealed
		}
	}
	return out
}

// result is Result.Seen: the entities the caller passed in plus what this run
// revealed — not the store's, which a caller with a store does not need back.
func (s seenEntities) result(passed map[string][]string) map[string][]string {
	revealed := s.revealedByKind()
	if len(passed) == 0 {
		return revealed
	}
	out := make(map[string][]string, len(passed)+len(revealed))
	for kind, ids := range passed {
		out[kind] = slices.Clone(ids)
	}
	for kind, ids := range revealed {
		have := make(map[string]struct{}, len(out[kind]))
		for _, id := range out[kind] {
			have[id] = struct{}{}
		}
		for _, id := range ids {
			if _, ok := have[id]; !ok {
				out[kind] = append(out[kind], id)
			}
		}
	}
	return out
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
