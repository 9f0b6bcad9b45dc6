package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// judgeSystemPrompt instructs the judge. It sees the question, what the tools
// returned and the draft, never the agent's instructions: it checks the answer, not
// the agent.
const judgeSystemPrompt = `You review a draft answer of an AI assistant before the user sees it.
Decide whether the draft satisfies every criterion for the user's message, using only the
question, the tool results shown and the draft. Reply with a JSON object:
{"passed": true or false, "missing": "what is missing or wrong, in one or two sentences; empty when passed"}`

// JudgeFeedbackPrefix starts the message that sends a rejected draft back.
const JudgeFeedbackPrefix = "[Judge feedback]"

var verdictSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"passed":  map[string]any{"type": "boolean"},
		"missing": map[string]any{"type": "string"},
	},
	"required":             []any{"passed", "missing"},
	"additionalProperties": false,
}

// judgeDraft asks the judge about a draft answer. A failure of the judge itself
// follows on_error: pass lets the draft through, fail rejects it.
func (r *run) judgeDraft(draft string) Verdict {
	j := r.agent.judge
	if n := utf8.RuneCountInString(strings.TrimSpace(draft)); n < j.minChars {
		return Verdict{Passed: false, How: "min_chars",
			Missing: fmt.Sprintf("The answer is too short (%d characters; at least %d are expected). Answer every part of the question in full.", n, j.minChars)}
	}
	req := &ModelRequest{
		Messages: []Message{
			{Role: RoleSystem, Content: judgeSystemPrompt},
			{Role: RoleUser, Content: r.judgePrompt(draft)},
		},
		JSONSchema: &JSONSchemaFormat{Name: "verdict", Schema: verdictSchema},
	}
	resp, err := j.model.Complete(r.ctx, req)
	var me *ModelError
	if err != nil && errors.As(err, &me) && (me.Status == 400 || me.Status == 422) && r.ctx.Err() == nil {
		// Some compatible servers reject json_schema; plain JSON mode is the next best.
		r.emit(Event{Kind: EventGuard, Guard: "judge_json_object", Message: "the server rejected a JSON schema; asking for a JSON object instead"})
		req.JSONObject = true
		resp, err = j.model.Complete(r.ctx, req)
	}
	if err == nil {
		r.result.Usage.Add(resp.Usage)
		var v struct {
			Passed  *bool  `json:"passed"`
			Missing string `json:"missing"`
		}
		content := strings.TrimSpace(resp.Message.Content)
		content = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(content, "```json"), "```"), "```")
		if jerr := json.Unmarshal([]byte(content), &v); jerr != nil || v.Passed == nil {
			err = fmt.Errorf("the judge's answer is not a verdict: %s", preview(resp.Message.Content))
		} else {
			return Verdict{Passed: *v.Passed, Missing: strings.TrimSpace(v.Missing), How: "judge"}
		}
	}
	r.emit(Event{Kind: EventGuard, Guard: "judge_error", Error: err.Error(), Message: "on_error: " + j.onError})
	if j.onError == "fail" {
		return Verdict{Passed: false, How: "judge_error", Missing: "The answer could not be checked. Answer again, completely and precisely."}
	}
	return Verdict{Passed: true, How: "judge_error"}
}

// judgePrompt lays out what the judge decides on: the question, the tool results of
// this run and the draft, then the criteria.
func (r *run) judgePrompt(draft string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "User's message:\n%s\n\n", r.req.Input)
	if len(r.result.Steps) > 0 {
		b.WriteString("Tool results the assistant had:\n")
		for _, s := range r.result.Steps {
			fmt.Fprintf(&b, "- %s(%s) → %s\n", s.Tool, s.Arguments, clipText(s.Result, 1500))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "Draft answer:\n%s\n\nCriteria:\n", draft)
	criteria := r.agent.judge.criteria
	if len(criteria) == 0 {
		criteria = []string{"The answer responds to every part of the user's message."}
	}
	for i, c := range criteria {
		fmt.Fprintf(&b, "%d. %s\n", i+1, c)
	}
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// acceptCall evaluates a tool's accept rule on a prepared call. A rule that fails
// to evaluate refuses the call: an argument rule fails closed.
func (r *run) acceptCall(t *agentTool, args map[string]any) (bool, string) {
	rule := t.spec.Accept
	if rule == nil || rule.Program == nil {
		return true, ""
	}
	env := map[string]any{
		"args":         args,
		"user":         r.exprEnv["user"],
		"conversation": r.exprEnv["conversation"],
		"seen":         r.seenKind,
	}
	out, err := expr.Run(rule.Program, env)
	if ok, _ := out.(bool); ok && err == nil {
		return true, ""
	}
	msg := cmpOr(t.spec.AcceptMessage, "This call is not allowed for this user, so it was not run.")
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
	if len(rules) == 0 || c.outcome != "ok" {
		return
	}
	env := map[string]any{"args": c.args, "result": parseResult(c.result), "user": r.exprEnv["user"], "conversation": r.exprEnv["conversation"]}
	for kind, rule := range rules {
		if rule.Program == nil {
			continue
		}
		out, err := expr.Run(rule.Program, env)
		if err != nil {
			r.emit(Event{Kind: EventCollect, Tool: c.tc.Name, CallID: c.tc.ID, Message: kind, Error: err.Error()})
			continue
		}
		added := 0
		for _, v := range flatten(out) {
			if !slices.Contains(r.seen[kind], v) {
				r.seen[kind] = append(r.seen[kind], v)
				added++
			}
		}
		r.emit(Event{Kind: EventCollect, Tool: c.tc.Name, CallID: c.tc.ID, Message: kind, Calls: added})
	}
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

// filterApplies evaluates a filter's condition; a filter without one always applies.
func (r *run) filterApplies(f *spec.Filter, env map[string]any) bool {
	if f.When == nil || f.When.Program == nil {
		return true
	}
	out, err := expr.Run(f.When.Program, env)
	if err != nil {
		r.emit(Event{Kind: EventFilter, Guard: filterName(f), Error: err.Error(), Message: "condition failed; filter not applied"})
		return false
	}
	ok, _ := out.(bool)
	return ok
}

func filterName(f *spec.Filter) string {
	if f.Name != "" {
		return f.Name
	}
	return f.On
}

func redact(f *spec.Filter, s string) string {
	return f.Redact.Re.ReplaceAllString(s, cmpOr(f.Replacement, "[redacted]"))
}

// filterInput applies the input filters. It returns false when one blocked the run.
func (r *run) filterInput() bool {
	filters := r.agent.filters["input"]
	if len(filters) == 0 {
		return true
	}
	in := &r.messages[0]
	for _, f := range filters {
		env := map[string]any{"input": in.Content, "user": r.exprEnv["user"], "conversation": r.exprEnv["conversation"], "intent": r.req.Intent}
		if !r.filterApplies(f, env) {
			continue
		}
		switch f.Action {
		case "block":
			r.emit(Event{Kind: EventFilter, Guard: filterName(f), Message: "input: block"})
			r.stopWith(StopBlocked, "input blocked by filter "+filterName(f), cmpOr(f.Message, r.agent.guards.fallback))
			return false
		case "redact":
			if out := redact(f, in.Content); out != in.Content {
				in.Content = out
				r.emit(Event{Kind: EventFilter, Guard: filterName(f), Message: "input: redact"})
			}
		}
	}
	return true
}

// filterToolResult applies the tool_result filters to a finished call.
func (r *run) filterToolResult(c *call) {
	for _, f := range r.agent.filters["tool_result"] {
		if len(f.Tools) > 0 && !slices.Contains(f.Tools, c.tc.Name) {
			continue
		}
		env := map[string]any{
			"tool": c.tc.Name, "args": c.args, "result": parseResult(c.result), "text": c.result, "ok": c.outcome == "ok",
			"user": r.exprEnv["user"], "conversation": r.exprEnv["conversation"], "intent": r.req.Intent,
		}
		if !r.filterApplies(f, env) {
			continue
		}
		before := c.result
		switch f.Action {
		case "error":
			c.outcome = "error"
			c.result = "Error: " + cmpOr(f.Message, fmt.Sprintf("%s failed.", c.tc.Name))
		case "redact":
			c.result = redact(f, c.result)
		case "truncate":
			if utf8.RuneCountInString(c.result) > f.MaxChars {
				c.result = string([]rune(c.result)[:f.MaxChars]) + "\n[cut by a filter]"
			}
		case "drop":
			c.outcome = "filtered"
			c.result = cmpOr(f.Message, "[this result was withheld by a filter]")
		}
		if c.result != before {
			r.emit(Event{Kind: EventFilter, Guard: filterName(f), Tool: c.tc.Name, CallID: c.tc.ID, Message: "tool_result: " + f.Action})
		}
	}
}

// filterAnswer applies the answer filters to an accepted answer. It returns false
// when one blocked the answer.
func (r *run) filterAnswer(answer *Message) bool {
	for _, f := range r.agent.filters["answer"] {
		env := map[string]any{"answer": answer.Content, "input": r.req.Input, "user": r.exprEnv["user"], "conversation": r.exprEnv["conversation"], "intent": r.req.Intent}
		if !r.filterApplies(f, env) {
			continue
		}
		switch f.Action {
		case "block":
			r.emit(Event{Kind: EventFilter, Guard: filterName(f), Message: "answer: block"})
			r.stopWith(StopBlocked, "answer blocked by filter "+filterName(f), cmpOr(f.Message, r.agent.guards.fallback))
			return false
		case "redact":
			if out := redact(f, answer.Content); out != answer.Content {
				answer.Content = out
				r.emit(Event{Kind: EventFilter, Guard: filterName(f), Message: "answer: redact"})
			}
		}
	}
	return true
}
