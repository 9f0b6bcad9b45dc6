package runtime_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const filterSpec = `
version: 1
name: filtered
instructions: Help the user.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
  - name: other
    http: {url: "https://example.com/y"}
guards: {max_turns: 4, fallback: FALLBACK}
filters:
`

// filterHit is a filter event: a filter that acted, or one whose when failed to
// evaluate (action "").
type filterHit struct {
	filter string
	stage  spec.FilterStage
	action spec.FilterAction
}

// hit is an unnamed filter's event: it carries the stage as its name.
func hit(stage spec.FilterStage, action spec.FilterAction) filterHit {
	return filterHit{string(stage), stage, action}
}

type filterCase struct {
	name    string
	filters string // items under filters:
	input   string
	tool    string // the tool the model calls before it answers; "" for none
	args    string
	result  string // what the tool returns
	toolErr error
	answer  string // the model's answer
	// What the run must come to.
	stop    runtime.StopReason
	final   string          // Result.Answer
	sent    string          // the user message the model gets
	toolMsg string          // the tool message the model gets next
	outcome runtime.Outcome // of the tool call
	hits    []filterHit
}

// filterCases covers every stage × action of spec.FilterStages (a test checks that),
// with and without a when, with the variables of each stage.
func filterCases() []filterCase {
	const (
		input  = "Where is my order?"
		answer = "It ships tomorrow."
	)
	return []filterCase{
		// input
		{
			name:    "input block with message",
			filters: `- {on: input, when: 'input contains "4111"', action: block, message: Do not send card numbers.}`,
			input:   "pay with 4111111111111111", answer: answer,
			stop: runtime.StopBlocked, final: "Do not send card numbers.",
			hits: []filterHit{hit(spec.StageInput, spec.ActionBlock)},
		},
		{
			name:    "input block falls back",
			filters: `- {name: no-cards, on: input, when: 'input matches "\\d{16}"', action: block}`,
			input:   "pay with 4111111111111111", answer: answer,
			stop: runtime.StopBlocked, final: "FALLBACK",
			hits: []filterHit{{"no-cards", spec.StageInput, spec.ActionBlock}},
		},
		{
			name:    "input block: when is false",
			filters: `- {on: input, when: 'input contains "4111"', action: block}`,
			input:   input, answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
		},
		{
			name:    "input redact",
			filters: `- {on: input, redact: '\d{16}', replacement: "[card]"}`,
			input:   "pay with 4111111111111111 please", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: "pay with [card] please",
			hits: []filterHit{hit(spec.StageInput, spec.ActionRedact)},
		},
		{
			name:    "input redact, default replacement",
			filters: `- {on: input, action: redact, redact: 'secret-\w+'}`,
			input:   "my token is secret-abc", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: "my token is " + spec.DefaultReplacement,
			hits: []filterHit{hit(spec.StageInput, spec.ActionRedact)},
		},
		{
			name:    "input redact: no match, no event",
			filters: `- {on: input, redact: '\d{16}'}`,
			input:   input, answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
		},
		{
			name:    "input redact when user and conversation match",
			filters: `- {on: input, when: 'user.id == "u-1" && conversation.id == "c-1"', redact: 'A\d+'}`,
			input:   "where is A17", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: "where is [redacted]",
			hits: []filterHit{hit(spec.StageInput, spec.ActionRedact)},
		},
		{
			name:    "input redact when another user",
			filters: `- {on: input, when: 'user.id == "u-2"', redact: 'A\d+'}`,
			input:   "where is A17", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: "where is A17",
		},
		{
			name: "input filters run in order: a block sees the redacted input",
			filters: `- {on: input, redact: '\d{16}'}
- {on: input, when: 'input contains "[redacted]"', action: block, message: Redacted inputs are refused.}`,
			input: "pay with 4111111111111111", answer: answer,
			stop: runtime.StopBlocked, final: "Redacted inputs are refused.",
			hits: []filterHit{hit(spec.StageInput, spec.ActionRedact), hit(spec.StageInput, spec.ActionBlock)},
		},
		{
			name:    "input when fails at run time: not applied",
			filters: `- {on: input, when: 'int(input) > 3', action: block}`,
			input:   "not a number", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: "not a number",
			hits: []filterHit{hit(spec.StageInput, "")},
		},

		// tool_result
		{
			name:    "tool_result error when text contains FAIL, with message",
			filters: `- {on: tool_result, tools: [lookup], when: 'text contains "FAIL"', action: error, message: The order service is down.}`,
			input:   input, tool: "lookup", result: "FAIL: db timeout", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "Error: The order service is down.", outcome: runtime.OutcomeError,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionError)},
		},
		{
			name:    "tool_result error, default message",
			filters: `- {on: tool_result, when: 'text startsWith "FAIL"', action: error}`,
			input:   input, tool: "lookup", result: "FAIL: db timeout", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "Error: lookup failed.", outcome: runtime.OutcomeError,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionError)},
		},
		{
			name:    "tool_result error: when is false",
			filters: `- {on: tool_result, when: 'text contains "FAIL"', action: error}`,
			input:   input, tool: "lookup", result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "A1 shipped", outcome: runtime.OutcomeOK,
		},
		{
			name:    "tool_result error on a failed call (not ok)",
			filters: `- {on: tool_result, when: '!ok', action: error, message: Try again later.}`,
			input:   input, tool: "lookup", toolErr: errors.New("connection refused"), answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "Error: Try again later.", outcome: runtime.OutcomeError,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionError)},
		},
		{
			name:    "tool_result: ok is true for a call that succeeded",
			filters: `- {on: tool_result, when: 'ok', redact: 'A\d+'}`,
			input:   input, tool: "lookup", result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "[redacted] shipped", outcome: runtime.OutcomeOK,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionRedact)},
		},
		{
			name:    "tool_result: ok is false for a call that failed",
			filters: `- {on: tool_result, when: 'ok', action: drop}`,
			input:   input, tool: "lookup", toolErr: errors.New("connection refused"), answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "Error: connection refused", outcome: runtime.OutcomeError,
		},
		{
			name:    "tool_result redact",
			filters: `- {on: tool_result, redact: '\b\d{3}-\d{4}\b', replacement: XXX-XXXX}`,
			input:   input, tool: "lookup", result: "call 555-1234 now", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "call XXX-XXXX now", outcome: runtime.OutcomeOK,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionRedact)},
		},
		{
			name:    "tool_result truncate counts characters",
			filters: `- {on: tool_result, action: truncate, max_chars: 3}`,
			input:   input, tool: "lookup", result: "éééééé", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "ééé\n[cut by a filter]", outcome: runtime.OutcomeOK,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionTruncate)},
		},
		{
			name:    "tool_result truncate: a short result is untouched",
			filters: `- {on: tool_result, action: truncate, max_chars: 10}`,
			input:   input, tool: "lookup", result: "short", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "short", outcome: runtime.OutcomeOK,
		},
		{
			name:    "tool_result drop, default message",
			filters: `- {on: tool_result, action: drop}`,
			input:   input, tool: "lookup", result: "card 4111111111111111", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: spec.DefaultDropMessage, outcome: runtime.OutcomeFiltered,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionDrop)},
		},
		{
			// Regression: validate once said message had no effect on drop.
			name:    "tool_result drop: message replaces the result",
			filters: `- {name: private, on: tool_result, action: drop, message: Withheld for privacy.}`,
			input:   input, tool: "lookup", result: "card 4111111111111111", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "Withheld for privacy.", outcome: runtime.OutcomeFiltered,
			hits: []filterHit{{"private", spec.StageToolResult, spec.ActionDrop}},
		},
		{
			name:    "tool_result drop when tool is the one called",
			filters: `- {on: tool_result, when: 'tool == "lookup"', action: drop}`,
			input:   input, tool: "lookup", result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: spec.DefaultDropMessage, outcome: runtime.OutcomeFiltered,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionDrop)},
		},
		{
			name:    "tool_result drop when tool is another",
			filters: `- {on: tool_result, when: 'tool == "lookup"', action: drop}`,
			input:   input, tool: "other", result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "A1 shipped", outcome: runtime.OutcomeOK,
		},
		{
			name:    "tool_result tools: lists another tool",
			filters: `- {on: tool_result, tools: [other], action: drop}`,
			input:   input, tool: "lookup", result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "A1 shipped", outcome: runtime.OutcomeOK,
		},
		{
			name:    "tool_result tools: lists the tool called",
			filters: `- {on: tool_result, tools: [other], action: drop}`,
			input:   input, tool: "other", result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: spec.DefaultDropMessage, outcome: runtime.OutcomeFiltered,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionDrop)},
		},
		{
			name:    "tool_result when reads a JSON result",
			filters: `- {on: tool_result, when: 'result.status == "FAIL"', action: error}`,
			input:   input, tool: "lookup", result: `{"status": "FAIL"}`, answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "Error: lookup failed.", outcome: runtime.OutcomeError,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionError)},
		},
		{
			name:    "tool_result when reads the arguments",
			filters: `- {on: tool_result, when: 'args.id == "A1"', action: drop}`,
			input:   input, tool: "lookup", args: `{"id": "A1"}`, result: "A1 shipped", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: spec.DefaultDropMessage, outcome: runtime.OutcomeFiltered,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionDrop)},
		},
		{
			name:    "tool_result when fails at run time: not applied",
			filters: `- {on: tool_result, when: 'result.items[0] == "x"', action: drop}`,
			input:   input, tool: "lookup", result: "plain text", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "plain text", outcome: runtime.OutcomeOK,
			hits: []filterHit{hit(spec.StageToolResult, "")},
		},
		{
			name: "tool_result filters run in order",
			filters: `- {on: tool_result, redact: secret}
- {on: tool_result, action: truncate, max_chars: 12}`,
			input: input, tool: "lookup", result: "the secret is here", answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			toolMsg: "the [redacte\n[cut by a filter]", outcome: runtime.OutcomeOK,
			hits: []filterHit{hit(spec.StageToolResult, spec.ActionRedact), hit(spec.StageToolResult, spec.ActionTruncate)},
		},

		// answer
		{
			name:    "answer redact",
			filters: `- {on: answer, redact: '\b1\d{10}\b', replacement: "1**********"}`,
			input:   input, answer: "Call 13812345678 today.",
			stop: runtime.StopCompleted, final: "Call 1********** today.", sent: input,
			hits: []filterHit{hit(spec.StageAnswer, spec.ActionRedact)},
		},
		{
			name:    "answer redact: no match, no event",
			filters: `- {on: answer, redact: '\b1\d{10}\b'}`,
			input:   input, answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
		},
		{
			name:    "answer block when answer matches, with message",
			filters: `- {on: answer, when: 'answer contains "internal"', action: block, message: I cannot share that.}`,
			input:   input, answer: "The internal code is 7.",
			stop: runtime.StopBlocked, final: "I cannot share that.", sent: input,
			hits: []filterHit{hit(spec.StageAnswer, spec.ActionBlock)},
		},
		{
			name:    "answer block when input matches, falls back",
			filters: `- {name: no-passwords, on: answer, when: 'input contains "password"', action: block}`,
			input:   "what is the admin password?", answer: "It is hunter2.",
			stop: runtime.StopBlocked, final: "FALLBACK", sent: "what is the admin password?",
			hits: []filterHit{{"no-passwords", spec.StageAnswer, spec.ActionBlock}},
		},
		{
			name:    "answer block: when is false",
			filters: `- {on: answer, when: 'answer contains "internal"', action: block}`,
			input:   input, answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
		},
		{
			name:    "answer when fails at run time: not applied",
			filters: `- {on: answer, when: 'int(answer) > 0', action: block}`,
			input:   input, answer: answer,
			stop: runtime.StopCompleted, final: answer, sent: input,
			hits: []filterHit{hit(spec.StageAnswer, "")},
		},
	}
}

func TestFilters(t *testing.T) {
	for _, tt := range filterCases() {
		t.Run(tt.name, func(t *testing.T) {
			src := filterSpec
			for line := range strings.SplitSeq(tt.filters, "\n") {
				src += "  " + line + "\n"
			}
			tool := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return tt.result, tt.toolErr }}
			replies := []stubReply{stubSay(tt.answer)}
			if tt.tool != "" {
				replies = append([]stubReply{stubCall("c1", tt.tool, tt.args)}, replies...)
			}
			m := &stubModel{agent: replies}
			a := compile(t, src, m, map[string]*funcTool{"lookup": tool, "other": tool})
			res, events := runAgent(t, context.Background(), a, tt.input)

			if res.Stop != tt.stop || res.Answer != tt.final {
				t.Errorf("stop %s (%s), answer %q; want %s, %q", res.Stop, res.Detail, res.Answer, tt.stop, tt.final)
			}
			var hits []filterHit
			for _, e := range eventsOf(events, runtime.EventFilter) {
				hits = append(hits, filterHit{e.Filter, e.Stage, e.Action})
				if (e.Action == "") == (e.Error == "") {
					t.Errorf("filter event with action %q and error %q: one of them, not both", e.Action, e.Error)
				}
				if e.Stage == spec.StageToolResult && e.Action != "" && (e.Tool != tt.tool || e.CallID != "c1") {
					t.Errorf("tool_result filter event for %s %s, want %s c1", e.Tool, e.CallID, tt.tool)
				}
			}
			if !slices.Equal(hits, tt.hits) {
				t.Errorf("filter events %+v, want %+v", hits, tt.hits)
			}

			inputBlocked := slices.ContainsFunc(tt.hits, func(h filterHit) bool { return h.stage == spec.StageInput && h.action == spec.ActionBlock })
			if inputBlocked {
				// Nothing reached a model.
				if len(m.agentReqs)+len(m.judgeReqs)+len(m.otherReqs) != 0 || res.Turns != 0 {
					t.Errorf("a blocked input made %d model requests", len(m.agentReqs))
				}
				return
			}
			wantReqs := len(replies)
			if len(m.agentReqs) != wantReqs {
				t.Fatalf("%d model requests, want %d", len(m.agentReqs), wantReqs)
			}
			// The model sees the filtered input; the history keeps it too.
			first := m.agentReqs[0].Messages
			if got := first[len(first)-1]; got.Role != model.RoleUser || got.Content != tt.sent {
				t.Errorf("the model got the input %s %q, want %q", got.Role, got.Content, tt.sent)
			}
			if res.Messages[0].Content != tt.sent {
				t.Errorf("the history keeps the input %q, want %q", res.Messages[0].Content, tt.sent)
			}

			if tt.tool != "" {
				next := m.agentReqs[1].Messages
				got := next[len(next)-1]
				if got.Role != model.RoleTool || got.ToolCallID != "c1" || got.Content != tt.toolMsg {
					t.Errorf("the model got the tool message %s %s %q, want %q", got.Role, got.ToolCallID, got.Content, tt.toolMsg)
				}
				if len(res.Steps) != 1 || res.Steps[0].Outcome != tt.outcome || res.Steps[0].Result != tt.toolMsg {
					t.Errorf("steps %+v, want outcome %s, result %q", res.Steps, tt.outcome, tt.toolMsg)
				}
				if tt.result != "" && tt.toolMsg != tt.result && mentions(res.Messages, tt.result) > 0 {
					t.Errorf("the history holds the unfiltered result %q", tt.result)
				}
			}

			// An accepted answer is stored as given, once; a blocked one nowhere.
			roles := "user"
			if tt.tool != "" {
				roles += " assistant tool"
			}
			if res.Stop == runtime.StopCompleted {
				roles += " assistant"
			}
			var got []string
			for _, m := range res.Messages {
				got = append(got, string(m.Role))
			}
			if strings.Join(got, " ") != roles {
				t.Errorf("the history has the roles %v, want %s", got, roles)
			}
			switch res.Stop {
			case runtime.StopCompleted:
				if last := res.Messages[len(res.Messages)-1]; last.Role != model.RoleAssistant || last.Content != tt.final {
					t.Errorf("the history ends with %s %q, want the answer %q", last.Role, last.Content, tt.final)
				}
			case runtime.StopBlocked:
				if mentions(res.Messages, tt.answer) > 0 || res.Messages[len(res.Messages)-1].Role == model.RoleAssistant {
					t.Errorf("the blocked answer was stored: %q", contentsOf(res.Messages))
				}
			}
		})
	}
}

// Every action every stage allows is exercised by a case of TestFilters, so a new
// stage or action cannot go untested. Coverage is read from the cases' expected
// filter events, which TestFilters checks against what the runs emit.
func TestFilterCasesCoverEveryAction(t *testing.T) {
	covered := map[filterHit]bool{}
	for _, c := range filterCases() {
		for _, h := range c.hits {
			covered[filterHit{stage: h.stage, action: h.action}] = true
		}
	}
	for _, fs := range spec.FilterStages {
		for _, action := range fs.Actions {
			if !covered[filterHit{stage: fs.Stage, action: action}] {
				t.Errorf("no case of TestFilters shows a %s filter acting with %s", fs.Stage, action)
			}
		}
		if !covered[filterHit{stage: fs.Stage}] {
			t.Errorf("no case of TestFilters shows a %s filter whose when fails at run time", fs.Stage)
		}
	}
	for h := range covered {
		if h.action != "" && !h.stage.Allows(h.action) {
			t.Errorf("a case expects %s on %s, which spec.FilterStages does not allow", h.action, h.stage)
		}
	}
}

// Input redaction exists so the text never reaches a model: not the agent's, and not
// the judge's or the intent classifier's either.
func TestInputRedactionReachesNoModel(t *testing.T) {
	const card = "4111111111111111"
	tests := []struct {
		name  string
		extra string // spec keys added after filters:
	}{
		{name: "judge", extra: "judge:\n  criteria: [Complete.]\n"},
		{name: "classifier", extra: "intents:\n  billing: {description: Payments}\n  other: {kind: chat}\nrouting: {recognizer: llm, fallback: other}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := filterSpec + "  - {on: input, redact: '\\d{16}'}\n" + tt.extra
			m := &stubModel{agent: []stubReply{stubSay("Paid.")}, judge: []stubReply{stubVerdict(true, "")}}
			a := compile(t, src, m, map[string]*funcTool{"lookup": echo(), "other": echo()})
			res, _ := runAgent(t, context.Background(), a, "pay with "+card)
			if res.Stop != runtime.StopCompleted {
				t.Fatalf("stop %s (%s)", res.Stop, res.Detail)
			}
			if len(m.judgeReqs)+len(m.otherReqs) == 0 {
				t.Fatal("no judge or classifier request: the case tests nothing")
			}
			for purpose, reqs := range map[string][]model.Request{"agent": m.agentReqs, "judge": m.judgeReqs, "classifier": m.otherReqs} {
				for i, req := range reqs {
					if mentions(req.Messages, card) > 0 {
						t.Errorf("%s request %d holds the redacted text", purpose, i)
					}
				}
			}
		})
	}
}

// A filter's intent is the run's routed intent, not only one the request named.
func TestFiltersSeeTheRoutedIntent(t *testing.T) {
	model := &stubModel{agent: []stubReply{stubSay("Hello there!")}}
	a := compile(t, `
version: 1
name: routed
intents:
  greet: {kind: chat, keywords: [hello]}
  other: {kind: chat}
routing: {recognizer: rules, fallback: other}
filters:
  - {on: answer, when: 'intent == "greet"', action: block, message: BLOCKED}
`, model, nil)
	res, _ := runAgent(t, context.Background(), a, "hello")
	if res.Intent != "greet" || res.Stop != runtime.StopBlocked || res.Answer != "BLOCKED" {
		t.Errorf("intent %s, stop %s, answer %q", res.Intent, res.Stop, res.Answer)
	}
}
