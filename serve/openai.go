package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/attach"
)

// ConversationHeader names the conversation of a chat completion: with it the
// server keeps the history (the client's earlier messages are not used); without
// it the client's earlier messages are the run's history and nothing is stored.
const ConversationHeader = "X-Agentrun-Conversation"

// The OpenAI-compatible endpoint. The agent's own tool calls stay inside the
// server: a client only ever receives the answer.

// openAIError is OpenAI's error shape.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

func writeOpenAIError(w http.ResponseWriter, status int, typ, code, message string) {
	var e openAIError
	e.Error.Message, e.Error.Type, e.Error.Code = message, typ, code
	writeJSON(w, status, e)
}

// openAIFail maps the server's error codes onto OpenAI's error types.
func openAIFail(w http.ResponseWriter) func(status int, code, msg string) {
	return func(status int, code, msg string) {
		typ := "invalid_request_error"
		if code == "unknown_agent" {
			code = "model_not_found" // OpenAI's code for a model it does not have
		}
		switch {
		case status == http.StatusTooManyRequests:
			typ = "rate_limit_exceeded"
		case status >= 500, status == http.StatusFailedDependency: // a fault of the run, after its tools ran
			typ = "server_error"
		}
		writeOpenAIError(w, status, typ, code, msg)
	}
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request, p Principal) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := []model{}
	for _, n := range s.agentNames() {
		out = append(out, model{ID: n, Object: "model", OwnedBy: "agentrun"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// chatRequest is what the endpoint reads of a chat completion request; other
// parameters (temperature, tools, …) are ignored: the agent's spec decides them.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatRun is what a chat request asks to run: its input (its last message, a
// user's) with that message's files, and the client's history.
type chatRun struct {
	input   string
	parts   []model.Part
	history []model.Message
}

// chatInput reads a chat request's run; else the status, code and message of
// its refusal. The files of earlier messages are kept as what they were, not
// their bytes: the model is told of them, as of a stored conversation's.
func chatInput(body chatRequest, lim attach.Limits) (run chatRun, status int, code, msg string) {
	if body.Model == "" {
		return run, http.StatusBadRequest, "missing_model", "model is required: the name of an agent (GET /v1/models lists them)"
	}
	if len(body.Messages) == 0 || body.Messages[len(body.Messages)-1].Role != "user" {
		return run, http.StatusBadRequest, "invalid_messages", "messages must end with a user message"
	}
	for i, m := range body.Messages {
		text, parts, err := m.content(lim)
		switch {
		case attach.ProblemOf(err) != "":
			status, code := attachmentFailure(err)
			return run, status, code, fmt.Sprintf("messages[%d]: %v", i, err)
		case err != nil:
			return run, http.StatusBadRequest, "invalid_messages", fmt.Sprintf("messages[%d]: %v", i, err)
		}
		switch m.Role {
		case "user":
			if i == len(body.Messages)-1 {
				run.input, run.parts = text, parts
			} else {
				run.history = append(run.history, model.Message{Role: model.RoleUser, Content: text, Parts: withoutData(parts)})
			}
		case "assistant":
			run.history = append(run.history, model.Message{Role: model.RoleAssistant, Content: text})
		case "system", "developer", "tool":
			// The agent's instructions are its system prompt, and its tools run in the
			// server: a client's system messages and tool results are not used.
		default:
			return run, http.StatusBadRequest, "invalid_messages", fmt.Sprintf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if err := lim.Check(run.parts); err != nil {
		status, code := attachmentFailure(err)
		return run, status, code, err.Error()
	}
	return run, 0, "", ""
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, p Principal) {
	fail := openAIFail(w)
	var body chatRequest
	follow := func(rec *runRecord) { s.answerChat(w, r, rec, body) }
	key, slot, ok := s.accept(w, r, p, "chat", &body, fail, follow)
	if !ok {
		return
	}
	in, status, code, msg := chatInput(body, s.limits.attachLimits())
	if code != "" {
		slot()
		fail(status, code, msg)
		return
	}
	conversation := r.Header.Get(ConversationHeader)
	pr, ok := s.prepare(p, slot, body.Model, runInput{text: in.input, parts: in.parts, conversation: conversation}, fail)
	if !ok {
		return
	}
	// An OpenAI client knows nothing of runs paused for approval: a call that needs
	// one is refused, and the model told why; it is never run unapproved.
	pr.req.Approvals = runtime.ApprovalsRefuse
	if conversation == "" {
		// The client keeps the history: its earlier messages are the run's, within
		// the bounds of a stored history, and the run leaves nothing in the store.
		window := pr.agent.Settings().Memory.Window
		budget := (window+1)*s.limits.MaxInputChars - utf8.RuneCountInString(in.input)
		pr.req.History, pr.req.Ephemeral = clientHistory(in.history, window, budget), true
	}
	pr.key, pr.text = key, body.Stream
	rec, ok := s.start(r.Context(), pr) // without a key, the client leaving cancels the run
	if !ok {
		keyConflict(fail)
		return
	}
	follow(rec)
}

// answerChat answers a chat completion from its run, streamed or not. The
// completion's id and time are the run's, so a repeat of the request (its
// Idempotency-Key) gets the same completion.
func (s *Server) answerChat(w http.ResponseWriter, r *http.Request, rec *runRecord, body chatRequest) {
	id, created := "chatcmpl-"+strings.TrimPrefix(rec.ID, "run_"), rec.Created.Unix()
	w.Header().Set("X-Agentrun-Run", rec.ID)
	if body.Stream {
		s.streamChat(w, r, rec, id, created, body)
		return
	}
	v, ok := s.answered(w, r, rec, openAIFail(w))
	if !ok {
		return
	}
	res := v.Result
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": body.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finishReason(res.Stop),
			"message": map[string]any{"role": "assistant", "content": res.Answer, "refusal": nil}}},
		"usage":    usage(res.Usage),
		"agentrun": map[string]any{"run": rec.ID, "stop": res.Stop, "intent": res.Intent},
	})
}

// clientHistory holds a client's history (user and assistant messages, oldest
// first) to the bounds of a stored one: its last window turns, as
// model.LastTurns cuts a stored conversation, and of those only the newest that
// fit within budget characters, each turn whole. Messages before the first user message are no turn's, empty
// ones say nothing, and consecutive ones of one role are joined into one, so a
// turn is at most two messages however a client splits it.
func clientHistory(msgs []model.Message, window, budget int) []model.Message {
	var joined []model.Message
	for _, m := range msgs {
		switch n := len(joined); {
		case m.Content == "" && len(m.Parts) == 0, n == 0 && m.Role != model.RoleUser:
		case n > 0 && joined[n-1].Role == m.Role:
			if m.Content != "" {
				joined[n-1].Content = strings.TrimPrefix(joined[n-1].Content+"\n\n"+m.Content, "\n\n")
			}
			joined[n-1].Parts = append(joined[n-1].Parts, m.Parts...)
		default:
			joined = append(joined, m)
		}
	}
	start, turns, chars := len(joined), 0, 0
	for i := len(joined) - 1; i >= 0 && turns < window; i-- {
		chars += utf8.RuneCountInString(joined[i].Content)
		if chars > budget {
			break
		}
		if joined[i].Role == model.RoleUser {
			start, turns = i, turns+1
		}
	}
	return joined[start:]
}

// finishReason is OpenAI's finish reason for how a run ended: an answer cut off
// or filtered says so as OpenAI would; every other answer — an accepted one, or a
// guard's fallback message, which the agent's author wrote for its users — is
// "stop" (the agentrun field says which).
func finishReason(stop runtime.StopReason) string {
	switch stop {
	case runtime.StopTruncated:
		return "length"
	case runtime.StopContentFilter:
		return "content_filter"
	}
	return "stop"
}

// faultOf turns a run that ended on a fault — the model failing, the deadline, a
// cancellation — into an error, so a client never takes the fallback message for
// the agent's answer. Before any tool ran, it is a 5xx, which clients retry: a
// retry repeats model calls only. Once a tool ran it is 424 (failed dependency),
// which stock clients do not retry, since the tool's effects would happen twice.
func faultOf(res *runtime.Result) (status int, code, msg string, failed bool) {
	switch res.Stop {
	case runtime.StopModelError:
		status, code, msg = http.StatusBadGateway, "model_error", "the agent's model failed"
	case runtime.StopTimeout:
		status, code, msg = http.StatusGatewayTimeout, "timeout", "the run took longer than it may"
	case runtime.StopCanceled:
		status, code, msg = http.StatusServiceUnavailable, "canceled", "the run was canceled"
	default:
		return 0, "", "", false
	}
	if res.ToolRounds > 0 {
		status, msg = http.StatusFailedDependency, msg+" after its tools ran; not retried, since they would run again"
	}
	return status, code, msg, true
}

// answered waits for a run answered whole and returns it; false when the client
// left first, or the run could not run or ended on a fault, which fail has told
// (see faultOf).
func (s *Server) answered(w http.ResponseWriter, r *http.Request, rec *runRecord, fail func(status int, code, msg string)) (runView, bool) {
	if !s.await(r, rec) {
		return runView{}, false
	}
	v := rec.snapshot()
	if v.Status == runFailed {
		fail(runFailure(v))
		return v, false
	}
	if status, code, msg, failed := faultOf(v.Result); failed {
		noRetry(w, v.Result)
		fail(status, code, msg)
		return v, false
	}
	return v, true
}

// noRetry tells the official OpenAI clients, which obey x-should-retry, not to
// retry a run whose tools ran.
func noRetry(w http.ResponseWriter, res *runtime.Result) {
	if res.ToolRounds > 0 {
		w.Header().Set("X-Should-Retry", "false")
	}
}

func usage(u model.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
}

// answerChunk is how many runes of the answer one streamed chunk carries.
const answerChunk = 64

// streamChat streams a chat completion: the role first, heartbeat comments while
// the run works, then the accepted answer (after the judge and the answer
// filters: never a draft) in chunks, the finish, the usage when asked, [DONE].
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, rec *runRecord, id string, created int64, body chatRequest) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any, u any) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": body.Model,
			"choices": []any{}}
		if delta != nil {
			c["choices"] = []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
		}
		if u != nil {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil) {
		return
	}
	rec.reading(+1, s.opts.ResumeGrace) // a run with a key waits for a reader to come back
	defer rec.reading(-1, s.opts.ResumeGrace)
	streamed, ok := s.streamChatText(w, r, rec, chunk)
	if !ok {
		return // the run is canceled with the request, or, with a key, unless another follows it
	}
	v := rec.snapshot()
	if v.Status == runFailed {
		status, code, msg := runFailure(v)
		typ := "invalid_request_error"
		if status >= 500 {
			typ = "server_error"
		}
		b, _ := json.Marshal(openAIErrorBody(typ, code, msg))
		fmt.Fprintf(w, "data: %s\n\n", b)
		rc.Flush()
		return
	}
	if _, code, msg, failed := faultOf(v.Result); failed {
		b, _ := json.Marshal(openAIErrorBody("server_error", code, msg))
		fmt.Fprintf(w, "data: %s\n\n", b)
		rc.Flush()
		return
	}
	answer := v.Result.Answer
	switch {
	case streamed == "":
	case strings.HasSuffix(streamed, answer):
		answer = "" // it is out already
	default: // a fallback message after the text of a run that stopped
		answer = "\n\n" + answer
	}
	for answer != "" {
		n, i := 0, 0
		for i < len(answer) && n < answerChunk {
			_, size := utf8.DecodeRuneInString(answer[i:])
			i += size
			n++
		}
		if !chunk(map[string]any{"content": answer[:i]}, nil, nil) {
			return
		}
		answer = answer[i:]
	}
	if !chunk(map[string]any{}, finishReason(v.Result.Stop), nil) {
		return
	}
	if body.StreamOptions != nil && body.StreamOptions.IncludeUsage {
		chunk(nil, nil, usage(v.Result.Usage))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
}

// streamChatText sends the model's text as it streams, with keep-alive comments
// while nothing comes, until the run is over, and returns what it sent; false
// when the client left first. Text after a model response that called tools
// starts a new paragraph: what the model said before a tool ("Let me look that
// up.") is not run into the answer.
func (s *Server) streamChatText(w http.ResponseWriter, r *http.Request, rec *runRecord, chunk func(delta map[string]any, finish any, u any) bool) (string, bool) {
	rc := http.NewResponseController(w)
	var streamed strings.Builder
	paragraph := false
	send := func(events []runtime.Event, _ int) bool {
		for _, e := range events {
			switch {
			case e.Kind == runtime.EventText:
				text := e.Text
				if paragraph && streamed.Len() > 0 {
					text = "\n\n" + text
				}
				paragraph = false
				if !chunk(map[string]any{"content": text}, nil, nil) {
					return false
				}
				streamed.WriteString(text)
			case e.Kind == runtime.EventModelResponse && e.Calls > 0:
				paragraph = true
			}
		}
		return true
	}
	idle := func() bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err := fmt.Fprint(w, ": keep-alive\n\n")
		return err == nil && rc.Flush() == nil
	}
	if _, ok := follow(r.Context(), rec, 0, send, idle); !ok {
		return "", false
	}
	return streamed.String(), true
}

func openAIErrorBody(typ, code, msg string) openAIError {
	var e openAIError
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	return e
}
