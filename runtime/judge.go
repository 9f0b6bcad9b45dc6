package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
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

// judgeState is the judge's part of a run.
type judgeState struct {
	rejections int        // drafts the judge failed
	calls      judgeCalls // the judge's calls behind its latest verdict
}

// validate gates a draft answer. A draft the judge fails is not kept: the model gets
// the judge's feedback and tries again, up to max_retries; then on_exhausted decides.
func (r *run) validate(draft *model.Message) {
	if !r.checkOutput(draft) || !r.planGate() {
		return
	}
	if j := r.agent.settings.Judge; j != nil {
		v, ended := r.judgeDraft(j, draft.Content)
		var budget *budgetError
		switch {
		case errors.As(ended, &budget):
			r.stop(StopBudget, budget.detail)
			return
		case ended != nil: // the run's own deadline or cancellation, not the judge's failure
			r.stopForContext(ended)
			return
		}
		r.result.Verdicts = append(r.result.Verdicts, v)
		r.emit(Event{Kind: EventVerdict, Passed: &v.Passed, Missing: v.Missing, Verdict: v.How, Usage: r.judge.calls.usage, Cost: r.judge.calls.cost})
		if !v.Passed {
			r.judge.rejections++
			switch {
			case r.judge.rejections <= j.MaxRetries:
				r.sendBack(JudgeFeedbackPrefix + " Your draft answer was not accepted and the user has not seen it. What is missing: " + v.Missing +
					" Write the complete answer again; use tools if you need more information.")
				r.transition(StateThinking, TriggerJudgeFeedback)
				return
			case j.OnExhausted != spec.ExhaustedAccept:
				r.emit(Event{Kind: EventGuard, Guard: GuardJudgeExhausted, Message: "on_exhausted: " + string(j.OnExhausted)})
				r.stop(StopJudgeRejected, fmt.Sprintf("the judge rejected %d drafts: %s", r.judge.rejections, v.Missing))
				return
			}
			r.emit(Event{Kind: EventGuard, Guard: GuardJudgeExhausted, Message: "on_exhausted: " + string(j.OnExhausted)})
		}
	}
	if !r.filterText(spec.StageAnswer, &draft.Content) || !r.acceptOutput(draft) {
		return
	}
	r.messages = append(r.messages, *draft)
	r.result.Answer = draft.Content
	r.result.Stop = StopCompleted
	r.transition(StateFinished, TriggerAccepted)
	r.emit(Event{Kind: EventStop, Stop: StopCompleted, Usage: &r.result.Usage, Cost: r.runCost()})
}

// judgeDraft asks the judge about a draft answer. A failure of the judge itself
// follows on_error: pass lets the draft through, fail rejects it. When the run's
// context ends meanwhile, or the judge's call could break the run's budget (a
// *budgetError), there is no verdict: ended says why.
func (r *run) judgeDraft(j *spec.JudgeSettings, draft string) (v Verdict, ended error) {
	if n := utf8.RuneCountInString(strings.TrimSpace(draft)); n < j.MinChars {
		r.judge.calls = judgeCalls{}
		return Verdict{Passed: false, How: VerdictByMinChars,
			Missing: fmt.Sprintf("The answer is too short (%d characters; at least %d are expected). Answer every part of the question in full.", n, j.MinChars)}, nil
	}
	req := &model.Request{
		Messages: []model.Message{
			{Role: model.RoleSystem, Content: judgeSystemPrompt},
			{Role: model.RoleUser, Content: r.judgePrompt(j, draft)},
		},
		JSONSchema: &model.JSONSchemaFormat{Name: model.SchemaVerdict, Schema: verdictSchema},
	}
	r.judge.calls = judgeCalls{}
	resp, err := r.askJudge(req)
	var me *model.Error
	if err != nil && errors.As(err, &me) && (me.Status == 400 || me.Status == 422) && r.ctx.Err() == nil {
		// Some compatible servers reject json_schema; plain JSON mode is the next best.
		r.emit(Event{Kind: EventGuard, Guard: GuardJudgeJSONObject, Message: "the server rejected a JSON schema; asking for a JSON object instead"})
		req.JSONObject = true
		resp, err = r.askJudge(req)
	}
	if _, over := err.(*budgetError); over {
		return Verdict{}, err
	}
	if err == nil {
		var v struct {
			Passed  *bool  `json:"passed"`
			Missing string `json:"missing"`
		}
		content := strings.TrimSpace(resp.Message.Content)
		content = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(content, "```json"), "```"), "```")
		if jerr := json.Unmarshal([]byte(content), &v); jerr != nil || v.Passed == nil {
			err = fmt.Errorf("the judge's answer is not a verdict: %s", preview(resp.Message.Content))
		} else {
			return Verdict{Passed: *v.Passed, Missing: strings.TrimSpace(v.Missing), How: VerdictByJudge}, nil
		}
	}
	if ctxErr := r.ctx.Err(); ctxErr != nil {
		return Verdict{}, ctxErr
	}
	r.emit(Event{Kind: EventGuard, Guard: GuardJudgeError, Error: err.Error(), Message: "on_error: " + string(j.OnError)})
	if j.OnError == spec.JudgeErrorFail {
		return Verdict{Passed: false, How: VerdictByError, Missing: "The answer could not be checked. Answer again, completely and precisely."}, nil
	}
	return Verdict{Passed: true, How: VerdictByError}, nil
}

// askJudge makes one call of the judge's model, within the run's budget: a call
// that could break it is not made (a *budgetError). The call's usage and cost are
// the run's and, for the verdict event, the judge stage's (r.judge.calls).
func (r *run) askJudge(req *model.Request) (*model.Response, error) {
	detail, release := r.overBudget(PurposeJudge, req)
	if detail != "" {
		return nil, &budgetError{detail}
	}
	defer release()
	resp, err := r.agent.judgeModel.Complete(r.ctx, req)
	if err != nil {
		return nil, err
	}
	r.judge.calls.add(resp.Usage, r.account(PurposeJudge, resp.Usage, resp.Answered))
	return resp, nil
}

// judgeCalls are the usage and cost of the judge's calls behind one verdict (two
// when the server refused a JSON schema): the verdict event carries them, as a
// model_response event carries an agent call's. No call (a draft too short): nil.
type judgeCalls struct {
	usage *model.Usage
	cost  *float64
	calls int
}

func (j *judgeCalls) add(u model.Usage, cost *float64) {
	if j.usage == nil {
		j.usage = &model.Usage{}
	}
	j.usage.Add(u)
	switch {
	case j.calls == 0:
		j.cost = cost
	case j.cost != nil && cost != nil:
		sum := *j.cost + *cost
		j.cost = &sum
	default:
		j.cost = nil // one call's price is unknown
	}
	j.calls++
}

// judgePrompt lays out what the judge decides on: the question, the tool results of
// this run and the draft, then the criteria.
func (r *run) judgePrompt(j *spec.JudgeSettings, draft string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "User's message:\n%s\n\n", r.input())
	if len(r.result.Steps) > 0 {
		b.WriteString("Tool results the assistant had:\n")
		for _, s := range r.result.Steps {
			fmt.Fprintf(&b, "- %s(%s) → %s\n", s.Tool, s.modelArgs, clipText(s.Result, 1500)) // never bound values
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "Draft answer:\n%s\n\nCriteria:\n", draft)
	for i, c := range j.Criteria {
		fmt.Fprintf(&b, "%d. %s\n", i+1, c)
	}
	return b.String()
}
