package scenario

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	agent "github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
)

// observed is what one run did, as the expectations read it.
type observed struct {
	res   *agent.Result
	steps []step
	// tripped holds the names a guards: expectation can list.
	tripped map[string]bool
	// approvals are the tools whose calls asked for approval, over every execution.
	approvals []string
	// exhausted says the model script had no turn left for a model call.
	exhausted  bool
	store      store.Store
	user, conv string
}

// step is a tool call of the run with its arguments decoded.
type step struct {
	tool    string
	outcome agent.Outcome
	refusal agent.Refusal
	result  string
	args    map[string]any
}

func steps(res *agent.Result) []step {
	out := make([]step, len(res.Steps))
	for i, s := range res.Steps {
		out[i] = step{tool: s.Tool, outcome: s.Outcome, refusal: s.Refusal, result: s.Result}
		_ = json.Unmarshal([]byte(s.Arguments), &out[i].args)
	}
	return out
}

// trippedGuards collects the guards that tripped during a run. A call refused by a
// tool's accept rule counts as the guard "accept": the runtime reports it as a refusal
// (EventToolRefused with Refusal accept, no Guard), but to a test author the accept
// rule guards a tool's arguments, so test files write `guards: [accept]`.
func trippedGuards(events []agent.Event) map[string]bool {
	tripped := map[string]bool{}
	for _, ev := range events {
		switch {
		case ev.Kind == agent.EventGuard:
			tripped[string(ev.Guard)] = true
		case ev.Kind == agent.EventToolRefused && ev.Refusal == agent.RefusedAccept:
			tripped[string(agent.RefusedAccept)] = true
		}
	}
	return tripped
}

// expectation checks one group of a case's expectations and returns its mismatches.
type expectation func(ctx context.Context, e spec.Expect, run *observed) []string

// check compares a run with its expectations and returns every mismatch, in the
// order of the groups below (the order reports have always had).
func check(ctx context.Context, e spec.Expect, run *observed) []string {
	var out []string
	for _, group := range []expectation{
		checkIntent, checkCalls, checkNotCalled, checkRefused, checkOffered, checkGuards,
		checkVerdicts, checkStop, checkAnswer, checkFacts, checkHistory, checkCache, checkRetrieved, checkApprovals, checkPlan, checkOutput,
	} {
		out = append(out, group(ctx, e, run)...)
	}
	return out
}

func checkIntent(_ context.Context, e spec.Expect, run *observed) []string {
	var out []string
	res := run.res
	if e.Intent != "" && e.Intent != res.Intent {
		out = append(out, fmt.Sprintf("intent: expected %s, got %s (%s)", e.Intent, cmp.Or(res.Intent, "none"), res.IntentHow))
	}
	if e.IntentHow != "" && agent.RoutedBy(e.IntentHow) != res.IntentHow {
		out = append(out, fmt.Sprintf("intent chosen by: expected %s, got %s", e.IntentHow, res.IntentHow))
	}
	return out
}

func checkCalls(_ context.Context, e spec.Expect, run *observed) []string {
	if len(e.Calls) == 0 {
		return nil
	}
	mode := cmp.Or(e.Order, spec.OrderInOrder)
	if callsMatch(mode, e.Calls, run.steps) {
		return nil
	}
	return []string{describeCalls(mode, e.Calls, run.steps)}
}

// checkNotCalled fails for a listed tool that actually ran; a refused or
// deduplicated call of it did not run, so it does not count.
func checkNotCalled(_ context.Context, e spec.Expect, run *observed) []string {
	var out []string
	for _, name := range e.NotCalled {
		if i := slices.IndexFunc(run.steps, func(s step) bool { return s.tool == name && s.outcome.Ran() }); i >= 0 {
			out = append(out, fmt.Sprintf("not_called: %s was called (%s)", name, run.steps[i].outcome))
		}
	}
	return out
}

func checkRefused(_ context.Context, e spec.Expect, run *observed) []string {
	var out []string
	for _, name := range e.Refused {
		if !slices.ContainsFunc(run.steps, func(s step) bool { return s.tool == name && s.outcome == agent.OutcomeRefused }) {
			out = append(out, fmt.Sprintf("refused: expected a refused call of %s, there is none", name))
		}
	}
	return out
}

// checkOffered fails for a scripted call of a tool the agent does not offer for the
// request, unless the case expects it refused: the script and the spec have drifted.
func checkOffered(_ context.Context, e spec.Expect, run *observed) []string {
	var out []string
	for _, s := range run.steps {
		if s.refusal == agent.RefusedNotOffered && !slices.Contains(e.Refused, s.tool) {
			out = append(out, fmt.Sprintf("the model script calls %s, which the agent does not offer here: %s", s.tool, clip(s.result, 160)))
		}
	}
	return out
}

func checkGuards(_ context.Context, e spec.Expect, run *observed) []string {
	var out []string
	for _, g := range e.Guards {
		if !run.tripped[g] {
			out = append(out, fmt.Sprintf("guards: expected %s to trip; tripped: %s", g, strings.Join(slices.Sorted(maps.Keys(run.tripped)), ", ")))
		}
	}
	return out
}

func checkVerdicts(_ context.Context, e spec.Expect, run *observed) []string {
	if e.Verdicts == nil {
		return nil
	}
	var got []bool
	for _, v := range run.res.Verdicts {
		got = append(got, v.Passed)
	}
	if slices.Equal(got, e.Verdicts) {
		return nil
	}
	return []string{fmt.Sprintf("verdicts: expected %v, got %v", e.Verdicts, got)}
}

// checkStop compares the stop reason; without one expected, a run that the model
// script's end stopped fails, since that is a loop the script did not foresee, and
// so does a run left waiting for approval when the case neither decides nor expects
// approvals.
func checkStop(_ context.Context, e spec.Expect, run *observed) []string {
	res := run.res
	switch {
	case e.Stop != "" && agent.StopReason(e.Stop) != res.Stop:
		return []string{fmt.Sprintf("stop: expected %s, got %s (%s)", e.Stop, res.Stop, res.Detail)}
	case e.Stop == "" && res.Stop == agent.StopModelError && run.exhausted:
		return []string{"the model script ran out: " + res.Detail}
	case e.Stop == "" && res.Stop == agent.StopAwaitingApproval && e.Approvals == nil:
		return []string{fmt.Sprintf("the run is left %s: give the case approvals: to decide, or expect stop: awaiting_approval", res.Detail)}
	}
	return nil
}

func checkAnswer(_ context.Context, e spec.Expect, run *observed) []string {
	a, answer := e.Answer, run.res.Answer
	switch {
	case a == nil:
		return nil
	case a.Equals != "" && answer != a.Equals:
		return []string{fmt.Sprintf("answer: expected %q, got %q", a.Equals, answer)}
	case a.Contains != "" && !strings.Contains(answer, a.Contains):
		return []string{fmt.Sprintf("answer: expected it to contain %q, got %q", a.Contains, answer)}
	case a.Re != nil && !a.Re.MatchString(answer):
		return []string{fmt.Sprintf("answer: expected it to match %s, got %q", a.Matches, answer)}
	}
	return nil
}

// checkOutput compares the structured answer with the expected value, as a subset
// (see spec.Expect.Output).
func checkOutput(_ context.Context, e spec.Expect, run *observed) []string {
	if e.Output == nil {
		return nil
	}
	want := jsonValue(e.Output)
	wantJSON, _ := json.Marshal(want)
	if run.res.Output == nil {
		return []string{fmt.Sprintf("output: expected %s, the run has no structured answer (stop %s)", wantJSON, run.res.Stop)}
	}
	var got any
	if err := json.Unmarshal(run.res.Output, &got); err != nil {
		return []string{"output: " + err.Error()}
	}
	if at, ok := subsetOf(want, got, ""); !ok {
		return []string{fmt.Sprintf("output: expected %s, got %s (they differ at %s)", wantJSON, run.res.Output, cmp.Or(at, "/"))}
	}
	return nil
}

// subsetOf reports whether got has every key of want, recursively for objects,
// and otherwise equals it; when not, at is the JSON pointer where they differ.
func subsetOf(want, got any, at string) (string, bool) {
	w, ok := want.(map[string]any)
	if !ok {
		return at, reflect.DeepEqual(want, got)
	}
	g, ok := got.(map[string]any)
	if !ok {
		return at, false
	}
	for _, k := range slices.Sorted(maps.Keys(w)) {
		gv, ok := g[k]
		if !ok {
			return at + "/" + k, false
		}
		if p, ok := subsetOf(w[k], gv, at+"/"+k); !ok {
			return p, false
		}
	}
	return "", true
}

// checkFacts compares the user's stored facts; a nil expected value means absent.
func checkFacts(ctx context.Context, e spec.Expect, run *observed) []string {
	if len(e.Facts) == 0 {
		return nil
	}
	var out []string
	facts, err := run.store.Facts(ctx, run.user)
	if err != nil {
		out = append(out, "facts: "+err.Error())
	}
	got := map[string]string{}
	for _, f := range facts {
		got[f.Key] = f.Value
	}
	for _, k := range slices.Sorted(maps.Keys(e.Facts)) {
		want := e.Facts[k]
		v, ok := got[k]
		switch {
		case want == nil && ok:
			out = append(out, fmt.Sprintf("facts: expected no %s, got %q", k, v))
		case want != nil && (!ok || v != *want):
			out = append(out, fmt.Sprintf("facts: expected %s = %q, got %q", k, *want, v))
		}
	}
	return out
}

func checkHistory(ctx context.Context, e spec.Expect, run *observed) []string {
	if e.HistoryTurns == nil {
		return nil
	}
	c, err := run.store.Conversation(ctx, run.conv, 0)
	if err != nil || c.Turns != *e.HistoryTurns {
		return []string{fmt.Sprintf("history: expected %d turns stored, got %d", *e.HistoryTurns, c.Turns)}
	}
	return nil
}

// callsMatch compares expected tool calls with the calls made, by mode: exact (the
// same calls in the same order, no others), in_order (these calls in this order,
// others between allowed), any_order (each of them, in any order).
func callsMatch(mode spec.CallOrder, want []spec.ExpectCall, got []step) bool {
	switch mode {
	case spec.OrderExact:
		return matchExact(want, got)
	case spec.OrderAnyOrder:
		return matchAnyOrder(want, got)
	default:
		return matchInOrder(want, got)
	}
}

func matchExact(want []spec.ExpectCall, got []step) bool {
	if len(want) != len(got) {
		return false
	}
	for i, w := range want {
		if !matches(w, got[i]) {
			return false
		}
	}
	return true
}

// matchAnyOrder pairs each expected call with a call made that no earlier expected
// call took.
func matchAnyOrder(want []spec.ExpectCall, got []step) bool {
	used := make([]bool, len(got))
	for _, w := range want {
		j := 0
		for j < len(got) && (used[j] || !matches(w, got[j])) {
			j++
		}
		if j == len(got) {
			return false
		}
		used[j] = true
	}
	return true
}

// matchInOrder finds the expected calls, in their order, among the calls made.
func matchInOrder(want []spec.ExpectCall, got []step) bool {
	j := 0
	for _, w := range want {
		for j < len(got) && !matches(w, got[j]) {
			j++
		}
		if j == len(got) {
			return false
		}
		j++
	}
	return true
}

func matches(e spec.ExpectCall, s step) bool {
	return e.Tool == s.tool && containsArgs(s.args, e.Args) && (e.Outcome == "" || agent.Outcome(e.Outcome) == s.outcome)
}

// describeCalls is the report of calls that differ from the expected ones.
func describeCalls(mode spec.CallOrder, want []spec.ExpectCall, got []step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "calls (%s) differ:\n  expected:", mode)
	for _, w := range want {
		fmt.Fprintf(&b, "\n    - %s", describeCall(w))
	}
	b.WriteString("\n  actual:")
	if len(got) == 0 {
		b.WriteString(" no tool calls")
	}
	for _, s := range got {
		args, _ := json.Marshal(s.args)
		fmt.Fprintf(&b, "\n    - %s %s → %s", s.tool, args, s.outcome)
	}
	return b.String()
}

func describeCall(e spec.ExpectCall) string {
	s := e.Tool
	if len(e.Args) > 0 {
		b, _ := json.Marshal(jsonValue(e.Args))
		s += " " + string(b)
	}
	if e.Outcome != "" {
		s += " → " + e.Outcome
	}
	return s
}

// Learned entries' scopes as test files write them.
const (
	LearnedShared = "shared"
	LearnedUser   = "user"
	LearnedNone   = "none"
)

// LearnedScopes lists every value of expect.learned.
var LearnedScopes = []string{LearnedShared, LearnedUser, LearnedNone}

func checkCache(_ context.Context, e spec.Expect, run *observed) []string {
	var out []string
	res := run.res
	if e.Cache != "" && agent.CacheOutcome(e.Cache) != res.Cache {
		got := string(res.Cache)
		if got == "" {
			got = "no cache lookup"
		}
		detail := ""
		if res.Cached != nil {
			detail = fmt.Sprintf(" (entry %s %q, score %.2f)", res.Cached.Entry, res.Cached.Question, res.Cached.Score)
		}
		out = append(out, fmt.Sprintf("cache: expected %s, got %s%s", e.Cache, got, detail))
	}
	if e.Learned != "" {
		got := LearnedNone
		if res.Learned != nil {
			got = LearnedShared
			if res.Learned.PerUser {
				got = LearnedUser
			}
		}
		if got != e.Learned {
			out = append(out, fmt.Sprintf("learned: expected %s, got %s", e.Learned, got))
		}
	}
	return out
}

func checkRetrieved(_ context.Context, e spec.Expect, run *observed) []string {
	if len(e.Retrieved) == 0 {
		return nil
	}
	var got []string
	for _, p := range run.res.Retrieved {
		if !slices.Contains(got, p.Source) {
			got = append(got, p.Source)
		}
	}
	var missing []string
	for _, want := range e.Retrieved {
		if !slices.Contains(got, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if len(got) == 0 {
		return []string{fmt.Sprintf("retrieved: expected %s, nothing was retrieved", strings.Join(missing, ", "))}
	}
	return []string{fmt.Sprintf("retrieved: expected %s among %s", strings.Join(missing, ", "), strings.Join(got, ", "))}
}

// checkApprovals compares the tools whose calls asked for approval, in order; an
// empty list expects none.
func checkApprovals(_ context.Context, e spec.Expect, run *observed) []string {
	if e.Approvals == nil || slices.Equal(e.Approvals, run.approvals) {
		return nil
	}
	got := "none"
	if len(run.approvals) > 0 {
		got = strings.Join(run.approvals, ", ")
	}
	want := "none"
	if len(e.Approvals) > 0 {
		want = strings.Join(e.Approvals, ", ")
	}
	return []string{fmt.Sprintf("approvals: expected approval asked for %s, got %s", want, got)}
}

// checkPlan compares the model's final plan, step by step; an empty list expects
// no plan.
func checkPlan(_ context.Context, e spec.Expect, run *observed) []string {
	if e.Plan == nil {
		return nil
	}
	show := func(steps []string) string {
		if len(steps) == 0 {
			return "no plan"
		}
		return strings.Join(steps, "; ")
	}
	var want, got []string
	for _, s := range e.Plan {
		want = append(want, s.Step+": "+s.Status)
	}
	for _, s := range run.res.Plan {
		got = append(got, s.Step+": "+string(s.Status))
	}
	if slices.Equal(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("plan: expected %s, got %s", show(want), show(got))}
}
