package scenario

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"
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
	// Knowledge opens the knowledge of an agent whose intents use the FAQ cache or
	// retrieval, once per test file: a fresh index with the local embedder, so
	// tests are offline and repeatable. close releases it. nil: such agents run
	// without knowledge, and their cache and retrieval stages report errors.
	Knowledge func(ctx context.Context, s *spec.Spec) (k agent.Knowledge, close func() error, err error)
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
	var knowledge agent.Knowledge
	if opts.Knowledge != nil && res.Spec.UsesKnowledge() {
		k, closeKnowledge, err := opts.Knowledge(ctx, res.Spec)
		if err != nil {
			out.Diagnostics = append(out.Diagnostics, spec.Diagnostic{Severity: spec.Error, Pos: tf.At("agent").Pos, Path: "agent",
				Message: fmt.Sprintf("the agent's knowledge could not be indexed: %v", err)})
			return out
		}
		defer closeKnowledge()
		knowledge = k
	}
	out.Cases = make([]Result, len(selected))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for k, i := range selected {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out.Cases[k] = runCase(ctx, path, res.Spec, &tf.Cases[i], i, opts, knowledge)
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
		at := tf.At(tokens...)
		hint := ""
		if c := spec.Closest(name, slices.Sorted(maps.Keys(known))); c != "" {
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
func runCase(ctx context.Context, path string, s *spec.Spec, c *spec.TestCase, index int, opts Options, knowledge agent.Knowledge) Result {
	start := time.Now()
	r := Result{File: path, Case: c.Name, Pos: c.Pos, Passed: true}
	fail := func(format string, args ...any) {
		r.Passed = false
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
	store := memory.New()
	user := agent.User{ID: "test-user"}
	if c.User != nil {
		user = agent.User{ID: cmp.Or(c.User.ID, "test-user"), Attributes: c.User.Attributes}
	}
	conv := cmp.Or(c.Conversation, fmt.Sprintf("case-%d", index+1))
	seed := agent.Record{UserID: user.ID, Conversation: conv, Seen: c.Seen}
	for _, k := range slices.Sorted(maps.Keys(c.Facts)) {
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
		// The cache's learned entries are keyed by version: one per case keeps the
		// cases of a file, which share an index, from answering each other.
		a, diags := agent.Compile(s, agent.Options{Tools: withMocks(opts.Registry(), c.Mocks), Model: script, Store: store,
			Knowledge: knowledge, Version: fmt.Sprintf("test:%s:%d", path, index)})
		if diags.HasErrors() {
			fail("%scompiling the agent: %v", label, diags)
			break
		}
		var mu sync.Mutex
		var events []agent.Event
		turnUser, turnConv := user, conv
		if turn.User != nil { // another user asks, in a conversation of their own
			turnUser = agent.User{ID: cmp.Or(turn.User.ID, "test-user"), Attributes: turn.User.Attributes}
			turnConv = conv + "/" + turnUser.ID
		}
		res, err := a.Run(ctx, agent.Request{Input: turn.Input, User: turnUser, Conversation: turnConv, Intent: turn.Intent,
			Observer: agent.ObserverFunc(func(e agent.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })})
		if err != nil {
			fail("%s%v", label, err)
			break
		}
		r.Trajectory = append(r.Trajectory, trajectory(res)...)
		run := &observed{res: res, steps: steps(res), tripped: trippedGuards(events), exhausted: script.Exhausted(),
			store: store, user: turnUser.ID, conv: turnConv}
		for _, f := range check(ctx, turn.Expect, run) {
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
	if res.Intent != "" || res.IntentHow != agent.RoutedNone {
		out = append(out, fmt.Sprintf("intent %s (%s)", cmp.Or(res.Intent, "none"), res.IntentHow))
	}
	if res.Cache != "" {
		line := "cache " + string(res.Cache)
		if c := res.Cached; c != nil {
			line += fmt.Sprintf(": %s %s %q (%.2f)", c.Kind, c.Entry, c.Question, c.Score)
		}
		out = append(out, line)
	}
	for _, p := range res.Retrieved {
		out = append(out, fmt.Sprintf("retrieved [%s] %s:%d-%d (%.2f)", p.ID, p.Source, p.StartLine, p.EndLine, p.Score))
	}
	for i, s := range res.Steps {
		line := fmt.Sprintf("%d. %s %s → %s", i+1, s.Tool, s.Arguments, s.Outcome)
		if s.Outcome != agent.OutcomeOK {
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

// clip puts s on one line of at most n runes, for reports.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
