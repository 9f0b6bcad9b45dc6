package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	agent "github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/offline"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/spec"
)

// Options configure a test run.
type Options struct {
	Loader *spec.Loader
	// Registry builds a fresh tool registry; the runner wraps it with each case's mocks.
	Registry func() agent.Registry
	// Run selects cases by a regular expression over "file › case"; nil runs all.
	Run *regexp.Regexp
}

// Result is one case's outcome.
type Result struct {
	File       string        `json:"file"`
	Case       string        `json:"case"`
	Pos        spec.Pos      `json:"pos"`
	Passed     bool          `json:"passed"`
	Failures   []string      `json:"failures,omitempty"`
	Trajectory []string      `json:"trajectory,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
}

// File is one test file's outcome: its cases, or the problems that kept it from
// running.
type File struct {
	Path        string           `json:"path"`
	Diagnostics spec.Diagnostics `json:"diagnostics,omitempty"`
	Cases       []Result         `json:"cases"`
}

// Failed reports whether anything in the file failed.
func (f File) Failed() bool {
	if f.Diagnostics.HasErrors() {
		return true
	}
	return slices.ContainsFunc(f.Cases, func(r Result) bool { return !r.Passed })
}

// RunFile runs the cases of one test file, in parallel.
func RunFile(ctx context.Context, path string, opts Options) File {
	out := File{Path: path}
	tf, diags := opts.Loader.LoadTestFile(path)
	out.Diagnostics = diags
	if tf == nil || diags.HasErrors() {
		return out
	}
	res := opts.Loader.LoadFile(tf.AgentPath())
	if res.Spec == nil || res.Diagnostics.HasErrors() {
		out.Diagnostics = append(out.Diagnostics, spec.Diagnostic{Severity: spec.Error, Pos: tf.At("agent").Pos, Path: "agent",
			Message: fmt.Sprintf("the agent %s does not load: run agentrun validate %s", tf.Agent, tf.AgentPath())})
		out.Diagnostics = append(out.Diagnostics, res.Diagnostics...)
		return out
	}
	out.Diagnostics = append(out.Diagnostics, checkAgainst(tf, res.Spec)...)
	if out.Diagnostics.HasErrors() {
		return out
	}
	var selected []int
	for i, c := range tf.Cases {
		if opts.Run == nil || opts.Run.MatchString(path+" › "+c.Name) || opts.Run.MatchString(c.Name) {
			selected = append(selected, i)
		}
	}
	out.Cases = make([]Result, len(selected))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k, i := range selected {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out.Cases[k] = runCase(ctx, path, res.Spec, &tf.Cases[i], i, opts)
		})
	}
	wg.Wait()
	return out
}

// checkAgainst reports names in the test file that the agent does not have.
func checkAgainst(tf *spec.TestFile, s *spec.Spec) spec.Diagnostics {
	var diags spec.Diagnostics
	tools := map[string]bool{}
	for _, t := range s.Tools {
		tools[t.Name] = true
	}
	intents := map[string]bool{}
	for _, in := range s.Intents {
		intents[in.Name] = true
	}
	bad := func(kind, name string, known map[string]bool, tokens ...string) {
		if name == "" || known[name] {
			return
		}
		var names []string
		for n := range known {
			names = append(names, n)
		}
		sort.Strings(names)
		at := tf.At(tokens...)
		hint := ""
		if c := spec.Closest(name, names); c != "" {
			hint = fmt.Sprintf("did you mean %q?", c)
		}
		diags = append(diags, spec.Diagnostic{Severity: spec.Error, Pos: at.Pos, Path: at.Path, Message: fmt.Sprintf("the agent has no %s %q", kind, name), Hint: hint})
	}
	for i, c := range tf.Cases {
		ci := fmt.Sprint(i)
		for j, m := range c.Mocks {
			bad("tool", m.Tool, tools, "cases", ci, "mocks", fmt.Sprint(j), "tool")
		}
		check := func(e spec.Expect, intent string, prefix ...string) {
			bad("intent", intent, intents, append(prefix, "intent")...)
			bad("intent", e.Intent, intents, append(prefix, "expect", "intent")...)
			for j, call := range e.Calls {
				bad("tool", call.Tool, tools, append(prefix, "expect", "calls", fmt.Sprint(j), "tool")...)
			}
			for j, n := range e.NotCalled {
				bad("tool", n, tools, append(prefix, "expect", "not_called", fmt.Sprint(j))...)
			}
		}
		if len(c.Turns) == 0 {
			check(c.Expect, c.Intent, "cases", ci)
		}
		for j, t := range c.Turns {
			check(t.Expect, t.Intent, "cases", ci, "turns", fmt.Sprint(j))
		}
	}
	return diags
}

// runCase plays a case's turns in one conversation with a fresh memory store.
func runCase(ctx context.Context, path string, s *spec.Spec, c *spec.TestCase, index int, opts Options) Result {
	start := time.Now()
	r := Result{File: path, Case: c.Name, Pos: c.Pos, Passed: true}
	fail := func(format string, args ...any) {
		r.Passed = false
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
	store := memory.New()
	user := agent.User{ID: "test-user"}
	if c.User != nil {
		user = agent.User{ID: cmpOr(c.User.ID, "test-user"), Attributes: c.User.Attributes}
	}
	conv := cmpOr(c.Conversation, fmt.Sprintf("case-%d", index+1))
	seed := agent.Record{UserID: user.ID, Conversation: conv, Seen: c.Seen}
	for _, k := range sortedKeys(c.Facts) {
		seed.Facts = append(seed.Facts, agent.FactChange{Op: agent.FactSet, Key: k, Value: c.Facts[k], Source: "user"})
	}
	if err := store.Commit(ctx, seed); err != nil {
		fail("preparing the store: %v", err)
	}
	runs := c.Runs()
	for n, turn := range runs {
		label := ""
		if len(runs) > 1 {
			label = fmt.Sprintf("turn %d: ", n+1)
			r.Trajectory = append(r.Trajectory, fmt.Sprintf("turn %d: %q", n+1, turn.Input))
		}
		script := offline.NewScript(fmt.Sprintf("%s › %s", path, c.Name), turn.Model).WithVerdicts(turn.Judge...).WithClassifier(turn.Classifier...)
		a, diags := agent.Compile(s, agent.Options{Tools: withMocks(opts.Registry(), c.Mocks), Model: script, Store: store})
		if diags.HasErrors() {
			fail("%scompiling the agent: %v", label, diags)
			break
		}
		var mu sync.Mutex
		var events []agent.Event
		res, err := a.Run(ctx, agent.Request{Input: turn.Input, User: user, Conversation: conv, Intent: turn.Intent,
			Observer: agent.ObserverFunc(func(e agent.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })})
		if err != nil {
			fail("%s%v", label, err)
			break
		}
		r.Trajectory = append(r.Trajectory, trajectory(res)...)
		for _, f := range check(ctx, turn.Expect, res, events, store, user.ID, conv) {
			fail("%s%s", label, f)
		}
		if u := script.Unused(); u > 0 && res.Completed() {
			fail("%sthe model script has %d turn(s) the run never used", label, u)
		}
	}
	r.Duration = time.Since(start)
	return r
}

// trajectory is what a run did, one line a step, for failure reports.
func trajectory(res *agent.Result) []string {
	var out []string
	if res.Intent != "" || res.IntentHow != "" {
		out = append(out, fmt.Sprintf("intent %s (%s)", cmpOr(res.Intent, "none"), res.IntentHow))
	}
	for i, s := range res.Steps {
		line := fmt.Sprintf("%d. %s %s → %s", i+1, s.Tool, s.Arguments, s.Outcome)
		if s.Outcome != "ok" {
			line += ": " + clip(s.Result, 120)
		}
		out = append(out, line)
	}
	for _, v := range res.Verdicts {
		if v.Passed {
			out = append(out, "judge: passed")
		} else {
			out = append(out, fmt.Sprintf("judge: rejected (%s): %s", v.How, clip(v.Missing, 100)))
		}
	}
	out = append(out, fmt.Sprintf("stop %s: %q", res.Stop, clip(res.Answer, 160)))
	return out
}

type step struct {
	tool, outcome, result string
	args                  map[string]any
}

func steps(res *agent.Result) []step {
	out := make([]step, len(res.Steps))
	for i, s := range res.Steps {
		out[i] = step{tool: s.Tool, outcome: string(s.Outcome), result: s.Result}
		_ = json.Unmarshal([]byte(s.Arguments), &out[i].args)
	}
	return out
}

func matches(e spec.ExpectCall, s step) bool {
	return e.Tool == s.tool && containsArgs(s.args, e.Args) && (e.Outcome == "" || e.Outcome == s.outcome)
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

// check compares a run with its expectations and returns every mismatch.
func check(ctx context.Context, e spec.Expect, res *agent.Result, events []agent.Event, store agent.Store, user, conv string) []string {
	var out []string
	if e.Intent != "" && e.Intent != res.Intent {
		out = append(out, fmt.Sprintf("intent: expected %s, got %s (%s)", e.Intent, cmpOr(res.Intent, "none"), res.IntentHow))
	}
	if e.IntentHow != "" && e.IntentHow != string(res.IntentHow) {
		out = append(out, fmt.Sprintf("intent chosen by: expected %s, got %s", e.IntentHow, res.IntentHow))
	}
	all := steps(res)
	if len(e.Calls) > 0 {
		if msg := checkCalls(e.Calls, cmpOr(e.Order, "in_order"), all); msg != "" {
			out = append(out, msg)
		}
	}
	for _, name := range e.NotCalled {
		for _, s := range all {
			if s.tool == name && s.outcome != "refused" && s.outcome != "duplicate" {
				out = append(out, fmt.Sprintf("not_called: %s was called (%s)", name, s.outcome))
				break
			}
		}
	}
	for _, name := range e.Refused {
		if !slices.ContainsFunc(all, func(s step) bool { return s.tool == name && s.outcome == "refused" }) {
			out = append(out, fmt.Sprintf("refused: expected a refused call of %s, there is none", name))
		}
	}
	for _, s := range all {
		if s.outcome == "refused" && strings.Contains(s.result, "for this request") && !slices.Contains(e.Refused, s.tool) {
			out = append(out, fmt.Sprintf("the model script calls %s, which the agent does not offer here: %s", s.tool, clip(s.result, 160)))
		}
	}
	guards := map[string]bool{}
	for _, ev := range events {
		switch {
		case ev.Kind == agent.EventGuard:
			guards[string(ev.Guard)] = true
		case ev.Kind == agent.EventToolRefused && ev.Refusal == agent.RefusedAccept:
			guards[string(agent.RefusedAccept)] = true
		}
	}
	for _, g := range e.Guards {
		if !guards[g] {
			out = append(out, fmt.Sprintf("guards: expected %s to trip; tripped: %s", g, strings.Join(sortedKeys(guards), ", ")))
		}
	}
	if e.Verdicts != nil {
		var got []bool
		for _, v := range res.Verdicts {
			got = append(got, v.Passed)
		}
		if !slices.Equal(got, e.Verdicts) {
			out = append(out, fmt.Sprintf("verdicts: expected %v, got %v", e.Verdicts, got))
		}
	}
	if e.Stop != "" && string(res.Stop) != e.Stop {
		out = append(out, fmt.Sprintf("stop: expected %s, got %s (%s)", e.Stop, res.Stop, res.Detail))
	} else if e.Stop == "" && res.Stop == agent.StopModelError && strings.Contains(res.Detail, "the script has only") {
		out = append(out, "the model script ran out: "+res.Detail)
	}
	if a := e.Answer; a != nil {
		switch {
		case a.Equals != "" && res.Answer != a.Equals:
			out = append(out, fmt.Sprintf("answer: expected %q, got %q", a.Equals, res.Answer))
		case a.Contains != "" && !strings.Contains(res.Answer, a.Contains):
			out = append(out, fmt.Sprintf("answer: expected it to contain %q, got %q", a.Contains, res.Answer))
		case a.Re != nil && !a.Re.MatchString(res.Answer):
			out = append(out, fmt.Sprintf("answer: expected it to match %s, got %q", a.Matches, res.Answer))
		}
	}
	if len(e.Facts) > 0 {
		facts, err := store.Facts(ctx, user)
		if err != nil {
			out = append(out, "facts: "+err.Error())
		}
		got := map[string]string{}
		for _, f := range facts {
			got[f.Key] = f.Value
		}
		for _, k := range sortedKeys(e.Facts) {
			want := e.Facts[k]
			v, ok := got[k]
			switch {
			case want == nil && ok:
				out = append(out, fmt.Sprintf("facts: expected no %s, got %q", k, v))
			case want != nil && (!ok || v != *want):
				out = append(out, fmt.Sprintf("facts: expected %s = %q, got %q", k, *want, v))
			}
		}
	}
	if e.HistoryTurns != nil {
		c, err := store.Conversation(ctx, conv, 0)
		if err != nil || c.Turns != *e.HistoryTurns {
			out = append(out, fmt.Sprintf("history: expected %d turns stored, got %d", *e.HistoryTurns, c.Turns))
		}
	}
	return out
}

// checkCalls compares expected tool calls with the calls made, by mode: exact (the
// same calls in the same order, no others), in_order (these calls in this order,
// others between allowed), any_order (each of them, in any order).
func checkCalls(want []spec.ExpectCall, mode string, got []step) string {
	ok := true
	switch mode {
	case "exact":
		ok = len(want) == len(got)
		for i := 0; ok && i < len(want); i++ {
			ok = matches(want[i], got[i])
		}
	case "any_order":
		used := make([]bool, len(got))
		for _, w := range want {
			found := false
			for j, s := range got {
				if !used[j] && matches(w, s) {
					used[j], found = true, true
					break
				}
			}
			ok = ok && found
		}
	default:
		j := 0
		for _, w := range want {
			for j < len(got) && !matches(w, got[j]) {
				j++
			}
			if j == len(got) {
				ok = false
				break
			}
			j++
		}
	}
	if ok {
		return ""
	}
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

func cmpOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
