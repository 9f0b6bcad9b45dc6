package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// acceptCall evaluates a tool's accept rule on a prepared call. A rule that fails
// to evaluate refuses the call: an argument rule fails closed — a store that cannot
// say whether an entity was seen refuses it too.
func (r *run) acceptCall(t *agentTool, args map[string]any) (bool, string) {
	rule := t.spec.Accept
	if rule == nil || rule.Program == nil {
		return true, ""
	}
	vars := r.vars
	vars.Args, vars.Seen, vars.InSeen = args, r.seenList, r.inSeen
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

// seenList is seen(kind); inSeen is in_seen(id, kind), what `id in seen(kind)`
// compiles to. An id that is not a string is not an entity, as `in` on the list of
// strings would find.
func (r *run) seenList(kind string) ([]string, error) { return r.seen.list(r.ctx, kind) }

func (r *run) inSeen(id any, kind string) (bool, error) {
	s, ok := id.(string)
	if !ok {
		return false, nil
	}
	return r.seen.has(r.ctx, kind, s)
}

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
	for _, kind := range slices.Sorted(maps.Keys(rules)) { // the same events in the same order on every run
		rule := rules[kind]
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
// those its caller passed in (Request.Seen), those of earlier runs in the store, and
// those this run's results reveal, which are all the run commits. Nothing is read up
// front: the store is asked about one entity when a rule checks it, and for a whole
// kind only when a rule uses the list, once per run. So a run that checks a handful
// of entities costs the same whatever the conversation has accumulated.
type seenEntities struct {
	kinds  map[string]*seenKind
	stored storedSeen
	// pending are entities a workflow's parallel branch revealed that the run has
	// not taken in yet: set only while one of the branch's own calls is checked.
	pending map[string][]string
}

// storedSeen is where a run finds the entities of earlier runs: the conversation in
// the store, once the run has read it and found it the user's. Without a store to
// ask (none, no conversation, or history the caller passed) the run knows only the
// entities passed in and its own.
type storedSeen struct {
	store        store.Store
	conversation string
	// err says why the store cannot be asked — the conversation could not be read —
	// and fails every check the run cannot answer alone: a rule fails closed.
	err error
}

type seenKind struct {
	// all is each entity of the kind the run knows once: the caller's first, then the
	// store's once loaded, then this run's. Once loaded it is what seen(kind) returns,
	// extended in place, so an accept rule never waits for a copy.
	all    []string
	passed int  // all[:passed] are the caller's
	loaded bool // all holds the store's entities of the kind
	// index holds the members of all once searching all has cost scanPasses passes
	// over it: a run that checks or reveals a handful of entities never builds it.
	index    map[string]struct{}
	scanned  int             // entities compared while searching all without index
	stored   map[string]bool // the store's answers about single entities
	revealed []string        // what this run revealed, in order, each once
	inRun    map[string]struct{}
}

// scanPasses is how many passes over all a kind's searches may cost before its index
// is built: a pass compares strings, far cheaper per entity than building a map.
const scanPasses = 8

// seenSoFar are the entities revealed to the user: those the request passed and
// those this run's calls revealed.
func (r *run) seenSoFar() map[string][]string { return r.seen.result(r.req.Seen) }

// newSeenEntities starts from the entities the caller passes in. Each list is taken
// as it is, with its capacity clipped so that extending all never writes into the
// caller's array.
func newSeenEntities(passed map[string][]string) seenEntities {
	s := seenEntities{kinds: make(map[string]*seenKind, len(passed))}
	for kind, ids := range passed {
		if len(ids) > 0 {
			s.kinds[kind] = &seenKind{all: slices.Clip(ids), passed: len(ids)}
		}
	}
	return s
}

func (s *seenEntities) kind(name string) *seenKind {
	k := s.kinds[name]
	if k == nil {
		k = &seenKind{}
		s.kinds[name] = k
	}
	return k
}

// has is in_seen(id, kind): the run's own knowledge first, then one lookup in the
// store, whose answer the run keeps.
func (s *seenEntities) has(ctx context.Context, kind, id string) (bool, error) {
	if slices.Contains(s.pending[kind], id) {
		return true, nil
	}
	k := s.kinds[kind]
	if k != nil {
		if _, ok := k.inRun[id]; ok {
			return true, nil
		}
		if k.find(id) {
			return true, nil
		}
		if k.loaded {
			return false, nil
		}
		if known, ok := k.stored[id]; ok {
			return known, nil
		}
	}
	if s.stored.err != nil {
		return false, fmt.Errorf("seen(%q): %w", kind, s.stored.err)
	}
	if s.stored.store == nil {
		return false, nil
	}
	found, err := s.stored.store.Seen(ctx, s.stored.conversation, kind, id)
	if err != nil {
		return false, fmt.Errorf("seen(%q): %w", kind, err)
	}
	k = s.kind(kind)
	if k.stored == nil {
		k.stored = map[string]bool{}
	}
	k.stored[id] = found
	return found, nil
}

// list is seen(kind): every entity of the kind known to the run, the store's loaded
// on the first call.
func (s *seenEntities) list(ctx context.Context, kind string) ([]string, error) {
	ids, err := s.listRun(ctx, kind)
	if extra := s.pending[kind]; err == nil && len(extra) > 0 {
		ids = slices.Clip(ids) // never extend the run's own list
		for _, id := range extra {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, err
}

func (s *seenEntities) listRun(ctx context.Context, kind string) ([]string, error) {
	k := s.kinds[kind]
	if k != nil && k.loaded || s.stored.store == nil && s.stored.err == nil {
		if k == nil {
			return nil, nil
		}
		return k.all, nil
	}
	if s.stored.err != nil {
		return nil, fmt.Errorf("seen(%q): %w", kind, s.stored.err)
	}
	byKind, err := s.stored.store.SeenEntities(ctx, s.stored.conversation, kind)
	if err != nil {
		return nil, fmt.Errorf("seen(%q): %w", kind, err)
	}
	k = s.kind(kind)
	k.load(byKind[kind])
	return k.all, nil
}

// load puts the store's entities between the caller's and this run's.
func (k *seenKind) load(stored []string) {
	k.loaded, k.stored = true, nil
	if len(stored) == 0 {
		return
	}
	own := k.all[k.passed:] // appending to the clipped all below leaves it as it is
	k.index, k.scanned = nil, 0
	if k.passed == 0 {
		k.all = slices.Clip(stored) // a store's list has no duplicates
	} else {
		k.all = slices.Clip(k.all[:k.passed])
		for _, id := range stored {
			k.add(id)
		}
	}
	for _, id := range own {
		k.add(id)
	}
}

// reveal records what this run's results revealed and returns how many of the ids
// were new to the run: neither passed in, nor revealed or loaded before.
func (s *seenEntities) reveal(kind string, ids []string) int {
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

// find reports whether all holds id, building the index once scanning has cost
// scanPasses passes over all.
func (k *seenKind) find(id string) bool {
	if k.index == nil && k.scanned+len(k.all) > scanPasses*len(k.all) {
		k.index = make(map[string]struct{}, len(k.all))
		for _, e := range k.all {
			k.index[e] = struct{}{}
		}
	}
	if k.index != nil {
		_, ok := k.index[id]
		return ok
	}
	k.scanned += len(k.all)
	return slices.Contains(k.all, id)
}

// add appends id to all unless all holds it, and reports whether it did.
func (k *seenKind) add(id string) bool {
	if k.find(id) {
		return false
	}
	if k.index != nil {
		k.index[id] = struct{}{}
	}
	k.all = append(k.all, id)
	return true
}

// revealedByKind is what the run commits: only its own revelations.
func (s *seenEntities) revealedByKind() map[string][]string {
	var out map[string][]string
	for kind, k := range s.kinds {
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
func (s *seenEntities) result(passed map[string][]string) map[string][]string {
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
