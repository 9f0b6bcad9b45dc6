package runtime_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// constantsOf reads the constants of a string type from the package's source
// (every non-test file), so a constant added later is checked without anyone
// updating a list here. A constant it cannot read as a string literal fails the
// test rather than being skipped.
func constantsOf(t *testing.T, typeName string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				values := vs.Values
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typeName {
					// An untyped spec may still be one: X = TypeName("x").
					values = nil
					for _, v := range vs.Values {
						if call, ok := v.(*ast.CallExpr); ok && len(call.Args) == 1 {
							if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == typeName {
								values = append(values, call.Args[0])
							}
						}
					}
					if len(values) == 0 {
						continue
					}
				}
				for _, v := range values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: a %s constant that is not a string literal", fset.Position(v.Pos()), typeName)
					}
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, s)
				}
			}
		}
	}
	if len(out) < 2 {
		t.Fatalf("found the %s constants %v: the source was not read right", typeName, out)
	}
	return out
}

func stopReasons(t *testing.T) []runtime.StopReason {
	t.Helper()
	var out []runtime.StopReason
	for _, s := range constantsOf(t, "StopReason") {
		out = append(out, runtime.StopReason(s))
	}
	if !slices.Contains(out, runtime.StopCompleted) {
		t.Fatalf("found the stop reasons %v without completed: the source was not read right", out)
	}
	return out
}

// sameSet reports what of want is missing from got and what of got is not in
// want, and any value listed twice in got.
func sameSet[T comparable](t *testing.T, got, want []T, list, file string) {
	t.Helper()
	seen := map[T]bool{}
	for _, g := range got {
		if seen[g] {
			t.Errorf("%s lists %v twice (%s)", list, g, file)
		}
		seen[g] = true
		if !slices.Contains(want, g) {
			t.Errorf("%s lists %v, which is no constant of the package (%s)", list, g, file)
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("the constant %v is missing from %s: add it there (%s)", w, list, file)
		}
	}
}

// StopReasons, which serve, the scenario schema and graph read, holds every
// StopReason constant: a reason cannot be added and left out of the list.
func TestStopReasonsListsEveryConstant(t *testing.T) {
	sameSet(t, runtime.StopReasons, stopReasons(t), "runtime.StopReasons", "runtime/request.go")
}

// EventKinds holds every EventKind constant.
func TestEventKindsListsEveryConstant(t *testing.T) {
	var kinds []runtime.EventKind
	for _, s := range constantsOf(t, "EventKind") {
		kinds = append(kinds, runtime.EventKind(s))
	}
	sameSet(t, runtime.EventKinds, kinds, "runtime.EventKinds", "runtime/event.go")
}

// Every way a run can stop is a trigger of an edge into STOPPED, and nothing else
// is: a reason without one would panic in the run that first stops with it. Both
// the constants in the source and the StopReasons list are walked.
func TestEveryStopReasonIsAnEdge(t *testing.T) {
	reasons := stopReasons(t)
	for _, r := range runtime.StopReasons {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	intoStopped := map[runtime.Trigger]bool{}
	for _, e := range runtime.Edges() {
		if e.From == runtime.StateFinished || e.From == runtime.StateStopped {
			t.Errorf("edge %s → %s leaves a final state (runtime/machine.go)", e.From, e.To)
		}
		if len(e.Triggers) == 0 {
			t.Errorf("edge %s → %s has no trigger (runtime/machine.go)", e.From, e.To)
		}
		if e.To == runtime.StateStopped {
			for _, tr := range e.Triggers {
				intoStopped[tr] = true
			}
		}
	}
	for _, r := range reasons {
		if r == runtime.StopCompleted {
			if intoStopped[runtime.Trigger(r)] {
				t.Errorf("%s moves to STOPPED; a completed run is FINISHED (runtime/machine.go)", r)
			}
			continue
		}
		if !intoStopped[runtime.Trigger(r)] {
			t.Errorf("stop reason %s is the trigger of no edge into STOPPED: a run stopping that way would panic. "+
				"Add it to the stops(...) of each state it can stop from in runtime/machine.go", r)
		}
	}
	for tr := range intoStopped {
		if !slices.Contains(reasons, runtime.StopReason(tr)) {
			t.Errorf("an edge into STOPPED is triggered by %q, which is no StopReason (runtime/machine.go)", tr)
		}
	}
}

// Every State constant is part of the machine: reachable from THINKING, where
// every run starts, and, unless it is final, with a way out. Every edge joins
// two declared states.
func TestEveryStateHasEdges(t *testing.T) {
	var states []runtime.State
	for _, s := range constantsOf(t, "State") {
		states = append(states, runtime.State(s))
	}
	final := func(s runtime.State) bool { return s == runtime.StateFinished || s == runtime.StateStopped }
	out := map[runtime.State][]runtime.State{}
	for _, e := range runtime.Edges() {
		for _, s := range []runtime.State{e.From, e.To} {
			if !slices.Contains(states, s) {
				t.Errorf("edge %s → %s names %s, which is no State constant (runtime/machine.go)", e.From, e.To, s)
			}
		}
		out[e.From] = append(out[e.From], e.To)
	}
	reached := map[runtime.State]bool{runtime.StateThinking: true}
	for todo := []runtime.State{runtime.StateThinking}; len(todo) > 0; {
		s := todo[0]
		todo = todo[1:]
		for _, to := range out[s] {
			if !reached[to] {
				reached[to] = true
				todo = append(todo, to)
			}
		}
	}
	for _, s := range states {
		if !reached[s] {
			t.Errorf("state %s is reached by no edge from THINKING: add its edges in runtime/machine.go", s)
		}
		if !final(s) && len(out[s]) == 0 {
			t.Errorf("state %s has no edge out of it: a run there could never end; add its edges in runtime/machine.go", s)
		}
	}
}

const machineSpec = `
version: 1
name: machine
instructions: Work.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
  - name: wait
    http: {url: "https://example.com/w"}
`

type machineCase struct {
	name    string
	guards  string // keys of guards:, in flow style
	extra   string // more top-level spec keys
	agent   []stubReply
	judge   []stubReply
	input   string
	context string // "cancel": the wait tool cancels the run; "deadline": the run has a short deadline; "canceled": canceled before it starts
	// maxTokens is guards.max_tokens, set on the loaded spec (0: none). With no
	// model.max_tokens every call's worst case is its prompt plus
	// spec.DefaultBudgetOutput.
	maxTokens int64
	// approval: "pause": the wait tool needs approval; "expire": then nobody
	// decides, and the execution that resumes the run is the one checked, from
	// TOOL_EXECUTING, with approval.on_timeout stop.
	approval string
	// plan turns plan mode on with these settings.
	plan *spec.Plan
	stop runtime.StopReason
	path string // the states the run moves to, from THINKING (from TOOL_EXECUTING when resumed)
}

func machineCases() []machineCase {
	lookup := func(id string) stubReply { return stubCall("c-"+id, "lookup", `{"id":"`+id+`"}`) }
	wait := stubCall("c-wait", "wait", "{}")
	judge := "judge:\n  criteria: [Complete.]\n"
	plan := func(steps string) stubReply { return stubCall("c-plan", "update_plan", `{"steps":[`+steps+`]}`) }
	zero := 0
	output := "output: {schema: {type: object, properties: {n: {type: integer}}, required: [n]}"
	return []machineCase{
		{name: "completed", agent: []stubReply{stubSay("done")},
			stop: runtime.StopCompleted, path: "VALIDATING FINISHED"},
		{name: "completed after tools", agent: []stubReply{lookup("1"), stubSay("done")},
			stop: runtime.StopCompleted, path: "TOOL_EXECUTING THINKING VALIDATING FINISHED"},
		{name: "completed after judge feedback", extra: judge,
			agent: []stubReply{stubSay("draft"), stubSay("done")}, judge: []stubReply{stubVerdict(false, "more"), stubVerdict(true, "")},
			stop: runtime.StopCompleted, path: "VALIDATING THINKING VALIDATING FINISHED"},
		{name: "max_turns", guards: "max_turns: 2, max_tool_rounds: 2",
			agent: []stubReply{lookup("1"), lookup("2"), stubSay("never")},
			stop:  runtime.StopMaxTurns, path: "TOOL_EXECUTING THINKING TOOL_EXECUTING THINKING STOPPED"},
		{name: "max_turns through judge retries", guards: "max_turns: 2", extra: judge + "  max_retries: 5\n",
			agent: []stubReply{stubSay("draft 1"), stubSay("draft 2"), stubSay("never")}, judge: []stubReply{stubVerdict(false, "a"), stubVerdict(false, "b")},
			stop: runtime.StopMaxTurns, path: "VALIDATING THINKING VALIDATING THINKING STOPPED"},
		{name: "max_tool_rounds", guards: "max_turns: 4, max_tool_rounds: 1",
			agent: []stubReply{lookup("1"), lookup("2"), stubSay("never")},
			stop:  runtime.StopMaxToolRounds, path: "TOOL_EXECUTING THINKING STOPPED"},
		{name: "duplicate_call", guards: "duplicate_calls: stop",
			agent: []stubReply{lookup("1"), lookup("1"), stubSay("never")},
			stop:  runtime.StopDuplicateCall, path: "TOOL_EXECUTING THINKING TOOL_EXECUTING STOPPED"},
		{name: "model_error", agent: []stubReply{stubErr(&model.Error{Status: 503, Err: errors.New("unavailable")})},
			stop: runtime.StopModelError, path: "STOPPED"},
		{name: "model_error after tools", agent: []stubReply{lookup("1"), stubErr(errors.New("stream broke"))},
			stop: runtime.StopModelError, path: "TOOL_EXECUTING THINKING STOPPED"},
		{name: "truncated", agent: []stubReply{{text: "The answer is cut", finish: model.FinishLength}},
			stop: runtime.StopTruncated, path: "STOPPED"},
		{name: "content_filter after tools", agent: []stubReply{lookup("1"), {finish: model.FinishContentFilter}},
			stop: runtime.StopContentFilter, path: "TOOL_EXECUTING THINKING STOPPED"},
		{name: "canceled while a tool runs", context: "cancel", agent: []stubReply{wait, stubSay("never")},
			stop: runtime.StopCanceled, path: "TOOL_EXECUTING STOPPED"},
		{name: "awaiting_approval", approval: "pause", agent: []stubReply{lookup("1"), wait, stubSay("never")},
			stop: runtime.StopAwaitingApproval, path: "TOOL_EXECUTING THINKING TOOL_EXECUTING STOPPED"},
		{name: "approval_timeout", approval: "expire", agent: []stubReply{wait, stubSay("never")},
			stop: runtime.StopApprovalTimeout, path: "STOPPED"},
		{name: "canceled before the first turn", context: "canceled", agent: []stubReply{stubSay("never")},
			stop: runtime.StopCanceled, path: "STOPPED"},
		{name: "timeout while a tool runs", context: "deadline", agent: []stubReply{wait, stubSay("never")},
			stop: runtime.StopTimeout, path: "TOOL_EXECUTING STOPPED"},
		{name: "timeout while the model thinks", context: "deadline", agent: []stubReply{{wait: true}},
			stop: runtime.StopTimeout, path: "STOPPED"},
		{name: "blocked input", extra: "filters:\n  - {on: input, when: 'input contains \"card\"', action: block}\n",
			input: "my card", agent: []stubReply{stubSay("never")},
			stop: runtime.StopBlocked, path: "STOPPED"},
		{name: "blocked answer", extra: "filters:\n  - {on: answer, when: 'answer contains \"secret\"', action: block}\n",
			agent: []stubReply{stubSay("the secret is 7")},
			stop:  runtime.StopBlocked, path: "VALIDATING STOPPED"},
		{name: "judge_rejected", extra: judge + "  max_retries: 0\n",
			agent: []stubReply{stubSay("draft")}, judge: []stubReply{stubVerdict(false, "no")},
			stop: runtime.StopJudgeRejected, path: "VALIDATING STOPPED"},
		{name: "completed after output feedback", extra: output + "}\n",
			agent: []stubReply{stubSay("prose"), stubSay(`{"n": 1}`)},
			stop:  runtime.StopCompleted, path: "VALIDATING THINKING VALIDATING FINISHED"},
		{name: "output_invalid", extra: output + ", retries: 0}\n",
			agent: []stubReply{lookup("1"), stubSay(`{"n": "one"}`)},
			stop:  runtime.StopOutputInvalid, path: "TOOL_EXECUTING THINKING VALIDATING STOPPED"},
		{name: "completed after plan feedback", plan: &spec.Plan{},
			agent: []stubReply{plan(`{"step":"look","status":"in_progress"}`), stubSay("early"), plan(`{"step":"look","status":"done"}`), stubSay("done")},
			stop:  runtime.StopCompleted, path: "TOOL_EXECUTING THINKING VALIDATING THINKING TOOL_EXECUTING THINKING VALIDATING FINISHED"},
		{name: "plan_incomplete", plan: &spec.Plan{MaxRejections: &zero},
			agent: []stubReply{plan(`{"step":"look","status":"pending"}`), stubSay("early")},
			stop:  runtime.StopPlanIncomplete, path: "TOOL_EXECUTING THINKING VALIDATING STOPPED"},
		{name: "budget before a turn", maxTokens: 8000,
			agent: []stubReply{used(lookup("1"), 5000), stubSay("never")},
			stop:  runtime.StopBudget, path: "TOOL_EXECUTING THINKING STOPPED"},
		{name: "budget before the judge", maxTokens: 6000, extra: judge,
			agent: []stubReply{used(stubSay("draft"), 3000)}, judge: []stubReply{stubVerdict(true, "")},
			stop: runtime.StopBudget, path: "VALIDATING STOPPED"},
		{name: "a workflow step fails", extra: "workflow: {steps: [{name: bad, tool: lookup, args: {id: 5}}]}\n",
			stop: runtime.StopWorkflowFailed, path: "STOPPED"},
		{name: "a workflow finishes", extra: "workflow: {steps: [{name: ok, tool: lookup, args: {id: \"5\"}}]}\n",
			stop: runtime.StopCompleted, path: "FINISHED"},
	}
}

// Runs that end each way move only along the table's edges and end on the edge their
// stop reason names.
func TestRunsFollowTheEdges(t *testing.T) {
	edges := runtime.Edges()
	onEdge := func(e runtime.Event) bool {
		return slices.ContainsFunc(edges, func(ed runtime.Edge) bool {
			return ed.From == e.From && ed.To == e.State && slices.Contains(ed.Triggers, e.Trigger)
		})
	}
	for _, tt := range machineCases() {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			switch tt.context {
			case "deadline":
				ctx, cancel = context.WithTimeout(context.Background(), time.Second) // long enough to reach the tool on a loaded machine
			case "canceled":
				cancel()
			}
			defer cancel()
			waitTool := &funcTool{fn: func(ctx context.Context, _ tool.Input) (string, error) {
				if tt.context == "cancel" {
					cancel()
				}
				<-ctx.Done()
				return "", ctx.Err()
			}}
			src := machineSpec + "guards: {fallback: FALLBACK, tool_timeout: 10s"
			if tt.guards != "" {
				src += ", " + tt.guards
			}
			src += "}\n" + tt.extra
			model := &stubModel{agent: tt.agent, judge: tt.judge}
			opts := runtime.Options{Model: model}
			clock := &clock{now: time.Now()}
			if tt.approval != "" {
				opts.Store, opts.Now = memory.New(), clock.Now
			}
			a := compileWith(t, src, func(s *spec.Spec) {
				s.Guards.MaxTokens = tt.maxTokens
				s.Plan = tt.plan
				if tt.approval != "" {
					s.Tools[1].Approval = &spec.ToolApproval{}
					s.Approval.OnTimeout = spec.OnTimeoutStop
				}
			}, opts, map[string]*funcTool{"lookup": echo(), "wait": waitTool})
			res, events := runAgent(t, ctx, a, cmpOr(tt.input, "go"))
			from := runtime.StateThinking
			if tt.approval == "expire" {
				if res.Stop != runtime.StopAwaitingApproval {
					t.Fatalf("stop %s (%s), want a pause first", res.Stop, res.Detail)
				}
				clock.add(spec.DefaultApprovalTimeout)
				events = nil
				var err error
				res, err = a.Resume(ctx, runtime.ResumeRequest{RunID: res.RunID, Decider: runtime.Decider{ID: "u-1"},
					Observer: runtime.ObserverFunc(func(e runtime.Event) { events = append(events, e) })})
				if err != nil {
					t.Fatal(err)
				}
				from = runtime.StateToolExecuting
			}

			if res.Stop != tt.stop {
				t.Fatalf("stop %s (%s), want %s", res.Stop, res.Detail, tt.stop)
			}
			states := eventsOf(events, runtime.EventState)
			if len(states) == 0 {
				t.Fatal("no state events")
			}
			var path []string
			for _, e := range states {
				path = append(path, string(e.State))
				if !onEdge(e) {
					t.Errorf("move %s → %s on %q is no edge of the machine", e.From, e.State, e.Trigger)
				}
				if e.From != from {
					t.Errorf("move from %s, but the run was in %s", e.From, from)
				}
				from = e.State
			}
			if got := strings.Join(path, " "); got != tt.path {
				t.Errorf("path %q, want %q", got, tt.path)
			}
			last := states[len(states)-1]
			switch {
			case res.Stop == runtime.StopCompleted:
				if last.State != runtime.StateFinished || last.Trigger != runtime.TriggerAccepted && last.Trigger != runtime.TriggerWorkflowDone {
					t.Errorf("a completed run ends with %s on %s", last.State, last.Trigger)
				}
			case last.State != runtime.StateStopped || last.Trigger != runtime.Trigger(res.Stop):
				t.Errorf("a run stopped by %s ends with %s on %s", res.Stop, last.State, last.Trigger)
			}
			// One stop event, after the last move, and the fallback as the answer of a stopped run.
			stops := eventsOf(events, runtime.EventStop)
			if len(stops) != 1 || stops[0].Stop != res.Stop {
				t.Errorf("stop events %+v, want one for %s", stops, res.Stop)
			}
			if i, j := slices.IndexFunc(events, func(e runtime.Event) bool { return e.Kind == runtime.EventStop }),
				slices.IndexFunc(events, func(e runtime.Event) bool {
					return e.Kind == last.Kind && e.Time.Equal(last.Time) && e.State == last.State && e.Trigger == last.Trigger
				}); i < j {
				t.Errorf("the stop event (%d) comes before the last move (%d)", i, j)
			}
			if res.Stop != runtime.StopCompleted && res.Stop != runtime.StopBlocked && res.Stop != runtime.StopAwaitingApproval && res.Answer != "FALLBACK" {
				t.Errorf("a run stopped by %s answers %q, not the fallback", res.Stop, res.Answer)
			}
		})
	}
}

// A run whose context ends while the judge decides stops like one whose context ends
// while the model or a tool works: canceled or timeout, with the fallback, and not with
// an unchecked draft accepted because on_error took the cancellation for a judge fault.
func TestContextEndsWhileTheJudgeRuns(t *testing.T) {
	tests := []struct {
		name    string
		judge   string // keys added under judge:
		context string // "cancel" or "deadline"
		stop    runtime.StopReason
	}{
		{name: "deadline, on_error pass", judge: "on_error: pass", context: "deadline", stop: runtime.StopTimeout},
		{name: "canceled, on_error pass", judge: "on_error: pass", context: "cancel", stop: runtime.StopCanceled},
		{name: "deadline, on_error fail, no retries", judge: "on_error: fail\n  max_retries: 0", context: "deadline", stop: runtime.StopTimeout},
		{name: "canceled, on_error fail, no retries", judge: "on_error: fail\n  max_retries: 0", context: "cancel", stop: runtime.StopCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if tt.context == "deadline" {
				ctx, cancel = context.WithTimeout(context.Background(), time.Second) // long enough to reach the tool on a loaded machine
			}
			defer cancel()
			verdict := stubReply{wait: true}
			if tt.context == "cancel" {
				verdict.before = cancel
			}
			model := &stubModel{agent: []stubReply{stubSay("an unchecked draft")}, judge: []stubReply{verdict}}
			src := machineSpec + "guards: {fallback: FALLBACK}\njudge:\n  criteria: [Complete.]\n  " + tt.judge + "\n"
			a := compile(t, src, model, map[string]*funcTool{"lookup": echo(), "wait": echo()})
			res, events := runAgent(t, ctx, a, "go")
			if res.Stop != tt.stop || res.Answer != "FALLBACK" {
				t.Errorf("stop %s, answer %q; want %s and the fallback", res.Stop, res.Answer, tt.stop)
			}
			states := eventsOf(events, runtime.EventState)
			if last := states[len(states)-1]; last.State != runtime.StateStopped || last.Trigger != runtime.Trigger(tt.stop) {
				t.Errorf("the run ends with %s on %s", last.State, last.Trigger)
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Every stop reason is reached by a case of TestRunsFollowTheEdges.
func TestRunsCoverEveryStopReason(t *testing.T) {
	var reached []runtime.StopReason
	for _, c := range machineCases() {
		reached = append(reached, c.stop)
	}
	for _, r := range stopReasons(t) {
		if !slices.Contains(reached, r) {
			t.Errorf("no case of TestRunsFollowTheEdges ends with %s", r)
		}
	}
}

// Edges hands out a copy: a caller that changes it changes neither later calls nor
// the machine the runtime checks moves against.
func TestEdgesIsACopy(t *testing.T) {
	want := runtime.Edges()
	got := runtime.Edges()
	if len(got) == 0 {
		t.Fatal("no edges")
	}
	for i := range got {
		got[i].From, got[i].To = runtime.StateFinished, runtime.StateFinished
		for j := range got[i].Triggers {
			got[i].Triggers[j] = "mutated"
		}
		got[i].Triggers = append(got[i].Triggers, "added")
	}
	got = append(got, runtime.Edge{From: runtime.StateStopped, To: runtime.StateThinking, Triggers: []runtime.Trigger{"resurrect"}})
	if again := runtime.Edges(); !reflect.DeepEqual(again, want) {
		t.Errorf("after changing a copy, Edges() = %+v, want %+v", again, want)
	}
	// The runtime still moves along the real edges.
	model := &stubModel{agent: []stubReply{stubCall("c1", "lookup", `{"id":"1"}`), stubSay("done")}}
	a := compile(t, machineSpec, model, map[string]*funcTool{"lookup": echo(), "wait": echo()})
	if res, _ := runAgent(t, context.Background(), a, "go"); res.Stop != runtime.StopCompleted {
		t.Errorf("stop %s (%s)", res.Stop, res.Detail)
	}
}
