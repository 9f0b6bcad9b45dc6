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
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Options configure a test run.
type Options struct {
	Loader *spec.Loader
	// Registry builds a fresh tool registry; the runner wraps it with each case's mocks.
	Registry func() tool.Registry
	// Run selects cases by a regular expression over "file › case"; nil runs all.
	Run *regexp.Regexp
	// Knowledge opens the knowledge of an agent whose intents use the FAQ cache or
	// retrieval, once per test file: a fresh index with the local embedder, so
	// tests are offline and repeatable. close releases it. nil: such agents run
	// without knowledge, and their cache and retrieval stages report errors.
	Knowledge func(ctx context.Context, s *spec.Spec) (k knowledge.Knowledge, close func() error, err error)
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
	var knowledge knowledge.Knowledge
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

// addTools adds the names of the tools a run of the agent may call or mock: its
// own, the plan tool in plan mode, its agents entries and, since a sub-agent's
// calls are the case's too (and its tools mocked by the case), theirs.
func addTools(tools map[string]bool, s *spec.Spec) {
	for _, t := range s.Tools {
		tools[t.Name] = true
	}
	if s.Plan != nil || slices.ContainsFunc(s.Intents, func(in spec.Intent) bool { return in.Plan != nil }) {
		tools[spec.PlanToolName] = true
	}
	for _, a := range s.Agents {
		tools[a.Name] = true
		if a.Loaded != nil {
			addTools(tools, a.Loaded)
		}
	}
}

// checkAgainst reports names in the test file that the agent does not have.
func checkAgainst(tf *spec.TestFile, s *spec.Spec) spec.Diagnostics {
	var diags spec.Diagnostics
	tools := map[string]bool{}
	addTools(tools, s)
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
	// approving are the tools with an approval rule: only their calls can wait.
	approving := map[string]bool{}
	for _, t := range s.Tools {
		if t.Approval != nil {
			approving[t.Name] = true
		}
	}
	// asks checks a tool named where approval is asked for: it must exist and have
	// an approval rule.
	asks := func(name string, tokens ...string) {
		if name == "" || !tools[name] {
			bad("tool", name, tools, tokens...)
			return
		}
		if approving[name] {
			return
		}
		at := tf.At(tokens...)
		hint := "give the tool an approval rule in the agent, or name one that has one"
		if len(approving) > 0 {
			hint = "the tools that ask for approval: " + strings.Join(slices.Sorted(maps.Keys(approving)), ", ")
		}
		diags = append(diags, spec.Diagnostic{Severity: spec.Error, Pos: at.Pos, Path: at.Path,
			Message: fmt.Sprintf("tool %q never asks for approval: it has no approval rule", name), Hint: hint})
	}
	for i, c := range tf.Cases {
		ci := fmt.Sprint(i)
		for j, m := range c.Mocks {
			bad("tool", m.Tool, tools, "cases", ci, "mocks", fmt.Sprint(j), "tool")
		}
		check := func(e spec.Expect, intent string, approvals []spec.TestApproval, prefix ...string) {
			bad("intent", intent, intents, append(prefix, "intent")...)
			bad("intent", e.Intent, intents, append(prefix, "expect", "intent")...)
			for j, call := range e.Calls {
				bad("tool", call.Tool, tools, append(prefix, "expect", "calls", fmt.Sprint(j), "tool")...)
			}
			for j, n := range e.NotCalled {
				bad("tool", n, tools, append(prefix, "expect", "not_called", fmt.Sprint(j))...)
			}
			for j, n := range e.Approvals {
				asks(n, append(prefix, "expect", "approvals", fmt.Sprint(j))...)
			}
			for j, a := range approvals {
				if a.Tool != "" {
					asks(a.Tool, append(prefix, "approvals", fmt.Sprint(j), "tool")...)
				}
			}
		}
		if len(c.Turns) == 0 {
			check(c.Expect, c.Intent, c.Approvals, "cases", ci)
		}
		for j, t := range c.Turns {
			check(t.Expect, t.Intent, t.Approvals, "cases", ci, "turns", fmt.Sprint(j))
		}
	}
	diags.Sort()
	return diags
}

// clock is a case's clock, by which approvals expire: it starts at the real time
// and moves only when a decision is expire.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// runCase plays a case's turns in one conversation with a fresh memory store.
func runCase(ctx context.Context, path string, s *spec.Spec, c *spec.TestCase, index int, opts Options, knowledge knowledge.Knowledge) Result {
	start := time.Now()
	r := Result{File: path, Case: c.Name, Pos: c.Pos, Passed: true}
	fail := func(format string, args ...any) {
		r.Passed = false
		r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
	}
	st := memory.New()
	user := tool.User{ID: "test-user"}
	if c.User != nil {
		user = tool.User{ID: cmp.Or(c.User.ID, "test-user"), Attributes: c.User.Attributes}
	}
	conv := cmp.Or(c.Conversation, fmt.Sprintf("case-%d", index+1))
	seed := store.Record{UserID: user.ID, Conversation: conv, Seen: c.Seen}
	for _, k := range slices.Sorted(maps.Keys(c.Facts)) {
		seed.Facts = append(seed.Facts, store.FactChange{Op: store.FactSet, Key: k, Value: c.Facts[k], Source: "user"})
	}
	if err := st.Commit(ctx, seed); err != nil {
		fail("preparing the store: %v", err)
	}
	clk := &clock{now: time.Now()}
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
		a, diags := agent.Compile(s, agent.Options{Tools: withMocks(opts.Registry(), c.Mocks), RemoteAgents: remoteMocks(s, c.Mocks), Model: script, Store: st,
			Knowledge: knowledge, Version: fmt.Sprintf("test:%s:%d", path, index), Now: clk.Now})
		if diags.HasErrors() {
			fail("%scompiling the agent: %v", label, diags)
			break
		}
		var mu sync.Mutex
		var events []agent.Event
		turnUser, turnConv := user, conv
		if turn.User != nil { // another user asks, in a conversation of their own
			turnUser = tool.User{ID: cmp.Or(turn.User.ID, "test-user"), Attributes: turn.User.Attributes}
			turnConv = conv + "/" + turnUser.ID
		}
		observer := agent.ObserverFunc(func(e agent.Event) { mu.Lock(); events = append(events, e); mu.Unlock() })
		res, err := a.Run(ctx, agent.Request{Input: turn.Input, User: turnUser, Conversation: turnConv, Intent: turn.Intent, Observer: observer})
		if err != nil {
			fail("%s%v", label, err)
			break
		}
		res, problems := settle(ctx, a, res, turn.Approvals, turnUser.ID, clk, observer)
		for _, p := range problems {
			fail("%s%s", label, p)
		}
		r.Trajectory = append(r.Trajectory, trajectory(res)...)
		mu.Lock()
		run := &observed{res: res, steps: steps(res), tripped: trippedGuards(events), approvals: approvalsAsked(events),
			exhausted: script.Exhausted(), store: st, user: turnUser.ID, conv: turnConv}
		mu.Unlock()
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

// settle plays a turn's approvals: while the run waits for approval and decisions
// remain, it gives each call waiting the next decision, in the order the run lists
// them, and resumes the run. It returns the last execution's result — a pause when
// the decisions ran out — and what went wrong: a decision for another tool or call
// than the one waiting, a decision the runtime refused, decisions never used.
func settle(ctx context.Context, a *agent.Agent, res *agent.Result, decisions []spec.TestApproval, user string, clk *clock, obs agent.Observer) (*agent.Result, []string) {
	store := a.PausedRuns()
	owner := agent.Decider{ID: user}
	next := 0
	for res.Stop == agent.StopAwaitingApproval && next < len(decisions) {
		expire, undecided := false, 0
		for _, p := range res.Pending {
			if next == len(decisions) {
				undecided++
				continue
			}
			d, i := decisions[next], next
			next++
			what := fmt.Sprintf("approvals[%d] (%s", i, d.Decision)
			if d.Tool != "" {
				what += " " + d.Tool
			}
			what += ")"
			switch {
			case d.Tool != "" && d.Tool != p.Tool:
				return res, []string{fmt.Sprintf("%s: the run waits on a call of %s (%s), not of %s", what, p.Tool, p.CallID, d.Tool)}
			case d.Call != "" && d.Call != p.CallID:
				return res, []string{fmt.Sprintf("%s: the run waits on call %s (%s), not on %s", what, p.CallID, p.Tool, d.Call)}
			case d.Decision == spec.DecisionExpire:
				expire = true
				continue
			}
			who := owner
			if d.By != "" {
				who = agent.Decider{ID: d.By, Approver: true}
			}
			req := agent.DecideRequest{CallID: p.CallID, Approve: d.Decision == spec.DecisionApprove, Reason: d.Reason}
			if _, err := agent.Decide(ctx, store, res.RunID, who, req, clk.Now()); err != nil {
				return res, []string{fmt.Sprintf("%s: deciding on %s (%s): %v", what, p.Tool, p.CallID, err)}
			}
		}
		if undecided > 0 && !expire {
			return res, nil // the decisions ran out: the pause is the turn's result
		}
		if expire {
			p, err := agent.LoadPaused(ctx, store, res.RunID, owner)
			if err != nil {
				return res, []string{fmt.Sprintf("approvals: reading the paused run: %v", err)}
			}
			if t := p.Expires.Add(time.Second); t.After(clk.Now()) {
				clk.set(t)
			}
		}
		resumed, err := a.Resume(ctx, agent.ResumeRequest{RunID: res.RunID, Decider: owner, Observer: obs})
		if err != nil {
			return res, []string{fmt.Sprintf("approvals: resuming the run: %v", err)}
		}
		res = resumed
	}
	if left := len(decisions) - next; left > 0 {
		why := fmt.Sprintf("it stopped with %s", res.Stop)
		if next == 0 {
			why = fmt.Sprintf("it never waited for approval (it stopped with %s)", res.Stop)
		}
		return res, []string{fmt.Sprintf("approvals: %d decision(s) left unused: %s", left, why)}
	}
	return res, nil
}

// approvalsAsked lists the tools whose calls asked for approval, in order.
func approvalsAsked(events []agent.Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Kind == agent.EventApprovalRequested {
			out = append(out, ev.Tool)
		}
	}
	return out
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
		if d := s.Decision; d != nil {
			out = append(out, fmt.Sprintf("approval %s (%s): %s", s.Tool, s.CallID, describeDecision(d)))
		}
		line := fmt.Sprintf("%d. %s %s → %s", i+1, s.Tool, s.Arguments, s.Outcome)
		if s.Outcome != agent.OutcomeOK {
			line += ": " + clip(s.Result, 120)
		}
		out = append(out, line)
	}
	for _, p := range res.Pending {
		line := fmt.Sprintf("approval %s (%s): waiting", p.Tool, p.CallID)
		if p.Message != "" {
			line += ": " + clip(p.Message, 120)
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

// describeDecision says what became of a call that needed approval.
func describeDecision(d *agent.Decision) string {
	switch {
	case d.Expired:
		return "expired"
	case d.Approved:
		return "approved by " + d.By
	}
	s := "rejected by " + d.By
	if d.Reason != "" {
		s += ": " + clip(d.Reason, 120)
	}
	return s
}

// clip puts s on one line of at most n runes, for reports.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
