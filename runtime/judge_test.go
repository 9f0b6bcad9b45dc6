package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// stubReply is one answer of a stubModel: text, tool calls, or an error. wait makes
// the model block until the request's context ends and fail with its error; before,
// when set, runs first (say, to cancel the run).
type stubReply struct {
	text      string
	reasoning *model.Reasoning
	finish    model.FinishReason
	calls     []model.ToolCall
	err       error
	wait      bool
	before    func()
	usage     *model.Usage // reported instead of the purpose's stub tokens
}

// Token counts the stub reports, different per purpose so a test can tell whose
// usage a result counted.
const (
	stubAgentTokens = 1
	stubJudgeTokens = 1000
)

// stubModel answers the agent's requests and the judge's (JSONSchema.Name ==
// model.SchemaVerdict) from a list of replies each, in order, and records every
// request. A request past the end of its list fails, so an unexpected extra call
// shows up as a model_error stop or a judge error. The stub is used by the tests in
// judge_test.go, filters_test.go and machine_test.go.
type stubModel struct {
	mu        sync.Mutex
	agent     []stubReply
	judge     []stubReply
	agentReqs []model.Request
	judgeReqs []model.Request
	otherReqs []model.Request // classifier and extraction requests; always failed
	tokens    int64           // the usage of every reply that was not an error
}

var _ model.Model = (*stubModel)(nil)

// TakesPart takes every part: the stub reads none.
func (m *stubModel) TakesPart(model.Part) error { return nil }

func (m *stubModel) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	cp := *req
	cp.Messages = slices.Clone(req.Messages)
	m.mu.Lock()
	var replies []stubReply
	var n int
	var tokens int64
	switch {
	case req.JSONSchema == nil || req.JSONSchema.Name == model.SchemaAnswer:
		m.agentReqs = append(m.agentReqs, cp)
		replies, n, tokens = m.agent, len(m.agentReqs), stubAgentTokens
	case req.JSONSchema.Name == model.SchemaVerdict:
		m.judgeReqs = append(m.judgeReqs, cp)
		replies, n, tokens = m.judge, len(m.judgeReqs), stubJudgeTokens
	default:
		m.otherReqs = append(m.otherReqs, cp)
		m.mu.Unlock()
		return nil, fmt.Errorf("stub: no answers for %s requests", req.JSONSchema.Name)
	}
	if n > len(replies) {
		m.mu.Unlock()
		return nil, fmt.Errorf("stub: request %d, but only %d replies", n, len(replies))
	}
	reply := replies[n-1]
	usage := model.Usage{TotalTokens: tokens}
	if reply.usage != nil {
		usage = *reply.usage
	}
	if reply.err == nil && !reply.wait {
		m.tokens += usage.TotalTokens
	}
	m.mu.Unlock()
	if reply.before != nil {
		reply.before()
	}
	if reply.wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if reply.err != nil {
		return nil, reply.err
	}
	return &model.Response{
		Message:      model.Message{Role: model.RoleAssistant, Content: reply.text, ToolCalls: reply.calls, Reasoning: reply.reasoning},
		FinishReason: reply.finish,
		Usage:        usage,
	}, nil
}

func stubSay(text string) stubReply { return stubReply{text: text} }

func stubCall(id, name, args string) stubReply {
	return stubReply{calls: []model.ToolCall{{ID: id, Name: name, Arguments: args}}}
}

func stubErr(err error) stubReply { return stubReply{err: err} }

func stubVerdict(passed bool, missing string) stubReply {
	b, _ := json.Marshal(map[string]any{"passed": passed, "missing": missing})
	return stubReply{text: string(b)}
}

// runAgent runs one request for user u-1 in conversation c-1 and collects its
// events. A panic — a move the state machine does not allow — fails the test.
func runAgent(t *testing.T, ctx context.Context, a *runtime.Agent, input string) (res *runtime.Result, events []runtime.Event) {
	t.Helper()
	var mu sync.Mutex
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("the run panicked: %v", p)
		}
	}()
	res, err := a.Run(ctx, runtime.Request{
		Input: input, User: tool.User{ID: "u-1"}, Conversation: "c-1",
		Observer: runtime.ObserverFunc(func(e runtime.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }),
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return res, slices.Clone(events)
}

func eventsOf(events []runtime.Event, kind runtime.EventKind) []runtime.Event {
	var out []runtime.Event
	for _, e := range events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func guardsOf(events []runtime.Event) []runtime.Guard {
	var out []runtime.Guard
	for _, e := range eventsOf(events, runtime.EventGuard) {
		out = append(out, e.Guard)
	}
	return out
}

func contentsOf(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

func mentions(msgs []model.Message, s string) int {
	n := 0
	for _, m := range msgs {
		if strings.Contains(m.Content, s) {
			n++
		}
	}
	return n
}

const judgeSpec = `
version: 1
name: judged
instructions: Answer the question.
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}}
    http: {url: "https://example.com/x"}
guards: {max_turns: 8, fallback: FALLBACK}
judge:
  criteria: [Every question is answered.]
`

type verdictWant struct {
	how    runtime.VerdictHow
	passed bool
}

func passedBy(how runtime.VerdictHow) verdictWant { return verdictWant{how, true} }
func failedBy(how runtime.VerdictHow) verdictWant { return verdictWant{how, false} }

func TestJudge(t *testing.T) {
	const (
		question  = "Where is order A1?"
		toolOut   = "order A1: shipped on Monday"
		draft1    = "It is somewhere."
		draft2    = "Order A1 shipped on Monday."
		draft3    = "Order A1 shipped on Monday; it arrives Thursday."
		criterion = "Every question is answered."
	)
	badRequest := &model.Error{Status: 400, Err: errors.New("response_format json_schema is not supported")}
	tests := []struct {
		name     string
		judge    string // keys added under judge:
		agent    []stubReply
		verdicts []stubReply // the judge model's replies
		// What the run must come to.
		stop       runtime.StopReason
		answer     string
		want       []verdictWant
		guards     []runtime.Guard
		agentCalls int // 0: every scripted agent reply is used
		judgeCalls int
		stored     []string // Result.Messages' contents, in order
		rejected   []string // drafts that must reach no agent request and not the history
		jsonObject []bool   // per judge request; nil: none asks for a plain JSON object
		judgeSees  []string // in the first judge request's prompt
	}{
		{
			name:  "reject then pass",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(false, "The date is missing."), stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{failedBy(runtime.VerdictByJudge), passedBy(runtime.VerdictByJudge)},
			judgeCalls: 2, stored: []string{question, draft2}, rejected: []string{draft1},
			judgeSees: []string{question, draft1, criterion},
		},
		{
			name:  "reject, use a tool, then pass",
			agent: []stubReply{stubSay(draft1), stubCall("c1", "lookup", `{"id":"A1"}`), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(false, "Look the order up."), stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{failedBy(runtime.VerdictByJudge), passedBy(runtime.VerdictByJudge)},
			judgeCalls: 2, stored: []string{question, "", toolOut, draft2}, rejected: []string{draft1},
		},
		{
			name:  "tool results reach the judge",
			agent: []stubReply{stubCall("c1", "lookup", `{"id":"A1"}`), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{passedBy(runtime.VerdictByJudge)},
			judgeCalls: 1, stored: []string{question, "", toolOut, draft2},
			judgeSees: []string{question, "lookup", toolOut, draft2, criterion},
		},
		{
			name:  "verdict in a code fence",
			agent: []stubReply{stubSay(draft2)}, verdicts: []stubReply{{text: "```json\n{\"passed\": true, \"missing\": \"\"}\n```"}},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{passedBy(runtime.VerdictByJudge)},
			judgeCalls: 1, stored: []string{question, draft2},
		},
		{
			name:  "exhausted, fallback",
			judge: "max_retries: 1\non_exhausted: fallback",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(false, "No date."), stubVerdict(false, "Still no date.")},
			stop: runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByJudge), failedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			judgeCalls: 2, stored: []string{question}, rejected: []string{draft1, draft2},
		},
		{
			name:  "exhausted, fallback by default",
			agent: []stubReply{stubSay(draft1), stubSay(draft2), stubSay(draft3)}, verdicts: []stubReply{stubVerdict(false, "a"), stubVerdict(false, "b"), stubVerdict(false, "c")},
			stop: runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByJudge), failedBy(runtime.VerdictByJudge), failedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			judgeCalls: 3, stored: []string{question}, rejected: []string{draft1, draft2, draft3},
		},
		{
			name:  "exhausted, accept",
			judge: "max_retries: 1\non_exhausted: accept",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(false, "No date."), stubVerdict(false, "Still no date.")},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{failedBy(runtime.VerdictByJudge), failedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			judgeCalls: 2, stored: []string{question, draft2}, rejected: []string{draft1},
		},
		{
			// Regression: max_retries: 0 once showed as 2; the first rejection must end the run.
			name:  "max_retries 0: the first rejection ends the run",
			judge: "max_retries: 0",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(false, "No date."), stubVerdict(true, "")},
			stop: runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			agentCalls: 1, judgeCalls: 1, stored: []string{question}, rejected: []string{draft1},
		},
		{
			name:  "max_retries 0 with on_exhausted accept keeps the first draft",
			judge: "max_retries: 0\non_exhausted: accept",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubVerdict(false, "No date."), stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft1,
			want:       []verdictWant{failedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			agentCalls: 1, judgeCalls: 1, stored: []string{question, draft1},
		},
		{
			name:  "judge model error, on_error pass",
			judge: "on_error: pass",
			agent: []stubReply{stubSay(draft1)}, verdicts: []stubReply{stubErr(&model.Error{Status: 500, Err: errors.New("overloaded")})},
			stop: runtime.StopCompleted, answer: draft1,
			want:       []verdictWant{passedBy(runtime.VerdictByError)},
			guards:     []runtime.Guard{runtime.GuardJudgeError},
			judgeCalls: 1, stored: []string{question, draft1},
		},
		{
			name:  "judge garbage, on_error pass by default",
			agent: []stubReply{stubSay(draft1)}, verdicts: []stubReply{stubSay("Looks fine to me!")},
			stop: runtime.StopCompleted, answer: draft1,
			want:       []verdictWant{passedBy(runtime.VerdictByError)},
			guards:     []runtime.Guard{runtime.GuardJudgeError},
			judgeCalls: 1, stored: []string{question, draft1},
		},
		{
			name:  "judge JSON without passed is an error",
			judge: "on_error: pass",
			agent: []stubReply{stubSay(draft1)}, verdicts: []stubReply{stubSay(`{"missing": "nothing"}`)},
			stop: runtime.StopCompleted, answer: draft1,
			want:       []verdictWant{passedBy(runtime.VerdictByError)},
			guards:     []runtime.Guard{runtime.GuardJudgeError},
			judgeCalls: 1, stored: []string{question, draft1},
		},
		{
			name:  "judge error, on_error fail, then a retry passes",
			judge: "on_error: fail",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubErr(errors.New("connection reset")), stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{failedBy(runtime.VerdictByError), passedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeError},
			judgeCalls: 2, stored: []string{question, draft2}, rejected: []string{draft1},
		},
		{
			name:  "judge garbage, on_error fail, exhausted",
			judge: "on_error: fail\nmax_retries: 1",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubSay("yes"), stubSay("<html>")},
			stop: runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByError), failedBy(runtime.VerdictByError)},
			guards:     []runtime.Guard{runtime.GuardJudgeError, runtime.GuardJudgeError, runtime.GuardJudgeExhausted},
			judgeCalls: 2, stored: []string{question}, rejected: []string{draft1, draft2},
		},
		{
			name:  "min_chars rejects without a judge request",
			judge: "min_chars: 20",
			agent: []stubReply{stubSay("Soon."), stubSay(draft3)}, verdicts: []stubReply{stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft3,
			want:       []verdictWant{failedBy(runtime.VerdictByMinChars), passedBy(runtime.VerdictByJudge)},
			judgeCalls: 1, stored: []string{question, draft3}, rejected: []string{"Soon."},
			judgeSees: []string{draft3},
		},
		{
			name:  "min_chars exhausted makes no judge request at all",
			judge: "min_chars: 20\nmax_retries: 0",
			agent: []stubReply{stubSay("Soon.")},
			stop:  runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByMinChars)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			judgeCalls: 0, stored: []string{question}, rejected: []string{"Soon."},
		},
		{
			// Characters, not bytes, and surrounding space does not count.
			name:  "min_chars counts trimmed characters",
			judge: "min_chars: 20\nmax_retries: 0",
			agent: []stubReply{stubSay("  " + strings.Repeat("é", 19) + "  ")},
			stop:  runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByMinChars)},
			guards:     []runtime.Guard{runtime.GuardJudgeExhausted},
			judgeCalls: 0, stored: []string{question},
		},
		{
			name:  "min_chars: exactly enough goes to the judge",
			judge: "min_chars: 20\nmax_retries: 0",
			agent: []stubReply{stubSay(strings.Repeat("é", 20))}, verdicts: []stubReply{stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: strings.Repeat("é", 20),
			want:       []verdictWant{passedBy(runtime.VerdictByJudge)},
			judgeCalls: 1, stored: []string{question, strings.Repeat("é", 20)},
		},
		{
			name:  "HTTP 400 on the schema: retried as a JSON object",
			agent: []stubReply{stubSay(draft1), stubSay(draft2)}, verdicts: []stubReply{stubErr(badRequest), stubVerdict(false, "No date."), stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft2,
			want:       []verdictWant{failedBy(runtime.VerdictByJudge), passedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeJSONObject},
			judgeCalls: 3, stored: []string{question, draft2}, rejected: []string{draft1},
			jsonObject: []bool{false, true, false},
		},
		{
			name:  "HTTP 422 on the schema: retried as a JSON object",
			agent: []stubReply{stubSay(draft1)}, verdicts: []stubReply{stubErr(&model.Error{Status: 422, Err: errors.New("unprocessable")}), stubVerdict(true, "")},
			stop: runtime.StopCompleted, answer: draft1,
			want:       []verdictWant{passedBy(runtime.VerdictByJudge)},
			guards:     []runtime.Guard{runtime.GuardJudgeJSONObject},
			judgeCalls: 2, stored: []string{question, draft1},
			jsonObject: []bool{false, true},
		},
		{
			name:  "JSON object refused too: on_error decides",
			judge: "on_error: fail\nmax_retries: 0",
			agent: []stubReply{stubSay(draft1)}, verdicts: []stubReply{stubErr(badRequest), stubErr(badRequest)},
			stop: runtime.StopJudgeRejected, answer: "FALLBACK",
			want:       []verdictWant{failedBy(runtime.VerdictByError)},
			guards:     []runtime.Guard{runtime.GuardJudgeJSONObject, runtime.GuardJudgeError, runtime.GuardJudgeExhausted},
			judgeCalls: 2, stored: []string{question}, rejected: []string{draft1},
			jsonObject: []bool{false, true},
		},
		{
			name:  "other HTTP errors are not retried as a JSON object",
			agent: []stubReply{stubSay(draft1)}, verdicts: []stubReply{stubErr(&model.Error{Status: 429, Err: errors.New("slow down")}), stubVerdict(false, "unused")},
			stop: runtime.StopCompleted, answer: draft1,
			want:       []verdictWant{passedBy(runtime.VerdictByError)},
			guards:     []runtime.Guard{runtime.GuardJudgeError},
			judgeCalls: 1, stored: []string{question, draft1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := judgeSpec
			for line := range strings.SplitSeq(tt.judge, "\n") {
				if line != "" {
					src += "  " + line + "\n"
				}
			}
			lookup := &funcTool{fn: func(context.Context, tool.Input) (string, error) { return toolOut, nil }}
			m := &stubModel{agent: tt.agent, judge: tt.verdicts}
			a := compile(t, src, m, map[string]*funcTool{"lookup": lookup})
			res, events := runAgent(t, context.Background(), a, question)

			if res.Stop != tt.stop || res.Answer != tt.answer {
				t.Fatalf("stop %s (%s), answer %q; want %s, %q", res.Stop, res.Detail, res.Answer, tt.stop, tt.answer)
			}
			var got []verdictWant
			for _, v := range res.Verdicts {
				got = append(got, verdictWant{v.How, v.Passed})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("verdicts %+v, want %+v", got, tt.want)
			}
			verdictEvents := eventsOf(events, runtime.EventVerdict)
			if len(verdictEvents) != len(res.Verdicts) {
				t.Errorf("%d verdict events for %d verdicts", len(verdictEvents), len(res.Verdicts))
			}
			for i, e := range verdictEvents {
				if i < len(res.Verdicts) && (e.Passed == nil || *e.Passed != res.Verdicts[i].Passed || e.Verdict != res.Verdicts[i].How) {
					t.Errorf("verdict event %d: %+v, verdict %+v", i, e, res.Verdicts[i])
				}
			}
			if g := guardsOf(events); !slices.Equal(g, tt.guards) {
				t.Errorf("guards %v, want %v", g, tt.guards)
			}
			if got := contentsOf(res.Messages); !slices.Equal(got, tt.stored) {
				t.Errorf("stored %q, want %q", got, tt.stored)
			}

			// Requests: one agent request per model turn, the judge's as expected.
			if tt.agentCalls == 0 {
				tt.agentCalls = len(tt.agent)
			}
			if len(m.agentReqs) != tt.agentCalls || res.Turns != len(m.agentReqs) {
				t.Errorf("%d agent requests and %d turns, want %d", len(m.agentReqs), res.Turns, tt.agentCalls)
			}
			if len(m.judgeReqs) != tt.judgeCalls {
				t.Errorf("%d judge requests, want %d", len(m.judgeReqs), tt.judgeCalls)
			}
			var jsonObject []bool
			for _, req := range m.judgeReqs {
				jsonObject = append(jsonObject, req.JSONObject)
				if len(req.Tools) != 0 || req.JSONSchema == nil || judgedDraft(req) == "" {
					t.Errorf("judge request with tools %v, schema %v, draft %q", req.Tools, req.JSONSchema, judgedDraft(req))
				}
			}
			if tt.jsonObject == nil {
				tt.jsonObject = make([]bool, tt.judgeCalls)
			}
			if !slices.Equal(jsonObject, tt.jsonObject) {
				t.Errorf("JSONObject per judge request %v, want %v", jsonObject, tt.jsonObject)
			}
			if res.Usage.TotalTokens != m.tokens {
				t.Errorf("usage %d tokens, the models reported %d", res.Usage.TotalTokens, m.tokens)
			}
			if len(tt.judgeSees) > 0 {
				prompt := m.judgeReqs[0].Messages[len(m.judgeReqs[0].Messages)-1].Content
				for _, s := range tt.judgeSees {
					if !strings.Contains(prompt, s) {
						t.Errorf("the judge's prompt lacks %q:\n%s", s, prompt)
					}
				}
			}

			// A rejected draft is kept nowhere: not in a later request, not in the history.
			for _, d := range tt.rejected {
				for i, req := range m.agentReqs {
					if mentions(req.Messages, d) > 0 {
						t.Errorf("agent request %d holds the rejected draft %q", i, d)
					}
				}
				for i, req := range m.judgeReqs {
					if judgedDraft(req) != d && mentions(req.Messages, d) > 0 {
						t.Errorf("judge request %d, about %q, holds the rejected draft %q", i, judgedDraft(req), d)
					}
				}
				if mentions(res.Messages, d) > 0 {
					t.Errorf("the history holds the rejected draft %q", d)
				}
			}
			// Every failed verdict the run went on from became one [Judge feedback] user
			// message that says what was missing: sent to the model, never stored.
			retries := 0
			for i, v := range res.Verdicts {
				if !v.Passed && i < len(res.Verdicts)-1 { // a later draft was judged: this one was sent back
					retries++
				}
			}
			last := m.agentReqs[len(m.agentReqs)-1].Messages
			var feedback []model.Message
			for _, m := range last {
				if strings.HasPrefix(m.Content, runtime.JudgeFeedbackPrefix) {
					feedback = append(feedback, m)
				}
			}
			if len(feedback) != retries {
				t.Errorf("the last agent request has %d feedback messages, want %d", len(feedback), retries)
			}
			for i, m := range feedback {
				if m.Role != model.RoleUser || !strings.Contains(m.Content, res.Verdicts[i].Missing) {
					t.Errorf("feedback %d is %s %q, want a user message with %q", i, m.Role, m.Content, res.Verdicts[i].Missing)
				}
			}
			if mentions(res.Messages, runtime.JudgeFeedbackPrefix) > 0 {
				t.Errorf("the history holds judge feedback: %q", contentsOf(res.Messages))
			}
		})
	}
}

// The judge may be a model of its own; the agent's model then never sees a verdict
// request.
func TestJudgeModelOption(t *testing.T) {
	tests := []struct {
		name    string
		verdict stubReply
		stop    runtime.StopReason
	}{
		{name: "passes", verdict: stubVerdict(true, ""), stop: runtime.StopCompleted},
		{name: "rejects", verdict: stubVerdict(false, "Nothing answered."), stop: runtime.StopJudgeRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agentModel := &stubModel{agent: []stubReply{stubSay("An answer.")}}
			judgeModel := &stubModel{judge: []stubReply{tt.verdict}}
			reg := tool.Registry{"http": func(*spec.Tool, string) (tool.Tool, error) { return echo(), nil }}
			a, diags := runtime.Compile(loadSpec(t, judgeSpec+"  max_retries: 0\n"), runtime.Options{Tools: reg, Model: agentModel, JudgeModel: judgeModel})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			res, _ := runAgent(t, context.Background(), a, "Q?")
			if res.Stop != tt.stop {
				t.Errorf("stop %s, want %s", res.Stop, tt.stop)
			}
			if len(agentModel.judgeReqs) != 0 || len(judgeModel.judgeReqs) != 1 || len(judgeModel.agentReqs) != 0 {
				t.Errorf("judge requests: %d to the agent's model, %d to the judge's; agent requests to the judge's: %d",
					len(agentModel.judgeReqs), len(judgeModel.judgeReqs), len(judgeModel.agentReqs))
			}
		})
	}
}

// judgedDraft is the draft a judge request asks about, as its prompt lays it out.
func judgedDraft(req model.Request) string {
	prompt := req.Messages[len(req.Messages)-1].Content
	_, after, ok := strings.Cut(prompt, "Draft answer:\n")
	if !ok {
		return ""
	}
	draft, _, _ := strings.Cut(after, "\n\nCriteria:")
	return draft
}
