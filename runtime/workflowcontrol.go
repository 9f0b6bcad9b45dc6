package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// forEach runs a step once for each element of its list, max_parallel at once;
// the items' outputs and tool calls come out in the list's order. A failed item
// follows the step's on_error: fallback and continue keep the item's output and go
// on, fail fails the step once every item is done.
func (f *flow) forEach(fr *frame, st *flowStep) (map[string]any, error) {
	s := st.spec
	v, err := expr.Run(s.ForEach.Program, f.values(fr, nil).env(spec.EnvWorkflow))
	if err != nil {
		return nil, fmt.Errorf("for_each: %w", err)
	}
	list, ok := asList(v)
	if !ok {
		return nil, fmt.Errorf("for_each: %s is %s, not a list", s.ForEach.Source, jsonKind(v))
	}
	type result struct {
		out   map[string]any
		calls []*call
		steps []Step
		err   error
	}
	results := make([]result, len(list))
	item := func(i int) {
		sub := &frame{outputs: fr.outputs, suffix: fr.suffix, turn: fr.turn, seen: fr.seen}
		res := &results[i]
		res.out, res.calls, res.err = f.once(sub, st, &forItem{list[i], i}, fmt.Sprintf("[%d]", i))
		res.steps = sub.steps
	}
	if f.inOrder(st) {
		// In this goroutine: a workflow's run may not wait on goroutines of its own.
		for i := range list {
			item(i)
		}
	} else {
		sem := make(chan struct{}, cmp.Or(s.MaxParallel, f.r.agent.settings.Guards.MaxParallelTools))
		var wg sync.WaitGroup
		for i := range list {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				item(i)
			})
		}
		wg.Wait()
	}
	items := make([]any, len(list))
	out := zeroOutput(s)
	out[spec.OutOK] = true
	var firstErr error
	for i := range results {
		res := &results[i]
		fr.steps = append(fr.steps, res.steps...)
		f.absorb(fr, res.calls)
		item := res.out
		if res.err != nil {
			var stop *flowStop
			if errors.As(res.err, &stop) {
				return nil, stop
			}
			if item == nil {
				item = zeroOutput(&spec.Step{Tool: s.Tool, Model: s.Model, Agent: s.Agent})
			}
			item[spec.OutError] = res.err.Error()
			if s.ErrorPolicy() == spec.OnErrorFallback {
				fallbackOutput(s, item)
			}
			out[spec.OutOK] = false
			if firstErr == nil {
				firstErr = fmt.Errorf("item %d: %w", i, res.err)
				out[spec.OutError] = firstErr.Error()
			}
		}
		items[i] = item
	}
	out[spec.OutItems] = items
	if firstErr != nil && s.ErrorPolicy() == spec.OnErrorFail {
		return nil, firstErr
	}
	return out, nil
}

// parallel runs the branches at once, each in a frame of its own that starts from
// the outputs before the step; their outputs, calls, entities and facts join the
// step's frame in branch order. The first branch (in order) that failed fails the
// step, once all are done.
func (f *flow) parallel(fr *frame, st *flowStep) (map[string]any, error) {
	subs := make([]*frame, len(st.branches))
	errs := make([]error, len(st.branches))
	var wg sync.WaitGroup
	for i, b := range st.branches {
		seen := make(map[string][]string, len(fr.seen))
		for kind, ids := range fr.seen {
			seen[kind] = slices.Clip(ids)
		}
		subs[i] = &frame{outputs: maps.Clone(fr.outputs), suffix: fr.suffix, turn: fr.turn, branch: true, seen: seen}
		if f.inOrder(st) {
			errs[i] = f.runSteps(subs[i], b)
			continue
		}
		wg.Go(func() { errs[i] = f.runSteps(subs[i], b) })
	}
	wg.Wait()
	for i, sub := range subs {
		fr.steps = append(fr.steps, sub.steps...)
		f.absorb(fr, sub.pending)
		for _, s := range st.spec.Parallel[i] {
			for _, n := range append([]*spec.Step{&s}, s.Nested()...) {
				if o, ok := sub.outputs[n.Name]; ok {
					fr.outputs[n.Name] = o
				}
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	out := zeroOutput(st.spec)
	out[spec.OutOK] = true
	return out, nil
}

// loop runs the body until until holds, at most max times; its steps' outputs are
// the latest iteration's. Not holding after max iterations is the step's error.
func (f *flow) loop(fr *frame, st *flowStep) (map[string]any, error) {
	s := st.spec
	out := zeroOutput(s)
	suffix := fr.suffix
	defer func() { fr.suffix = suffix }()
	for i := 1; i <= s.Loop.Max; i++ {
		fr.suffix = fmt.Sprintf("%s#%d", suffix, i)
		if err := f.runSteps(fr, st.body); err != nil {
			return nil, err
		}
		out = zeroOutput(s)
		out[spec.OutIterations] = i
		fr.outputs[s.Name] = out
		done, err := evalBool(s.Loop.Until.Program, f.values(fr, nil).env(spec.EnvWorkflow))
		if err != nil {
			return nil, fmt.Errorf("until: %w", err)
		}
		if done {
			out[spec.OutOK] = true
			return out, nil
		}
		if stop := f.stopped(); stop != nil {
			return nil, stop
		}
	}
	return nil, fmt.Errorf("until (%s) did not hold after %d iterations", s.Loop.Until.Source, s.Loop.Max)
}

func evalBool(p *vm.Program, env map[string]any) (bool, error) {
	v, err := expr.Run(p, env)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("got %T, not a boolean", v)
	}
	return b, nil
}

// asList is a for_each list's elements: any slice or array (1..3 is an []int).
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case nil:
		return nil, true // nothing to do
	}
	rv := reflect.ValueOf(v)
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

func isOrdered(m model.Model) bool {
	o, ok := m.(model.OrderedModel)
	return ok && o.Ordered()
}

// inOrder reports whether a for_each or parallel step runs its items or branches
// one at a time, in declaration order: when the model is ordered and the step
// makes model calls (a model step, or an agent step's sub-run, inside it), so a
// script answers them, and a recorder keeps them, in the same order on every run.
// Real providers answer concurrent steps at once.
func (f *flow) inOrder(st *flowStep) bool {
	if f.serial {
		return true
	}
	if !f.ordered {
		return false
	}
	for _, s := range append([]*spec.Step{st.spec}, st.nested...) {
		if k := s.Kind(); k == spec.StepModelK || k == spec.StepAgent {
			return true
		}
	}
	return false
}
