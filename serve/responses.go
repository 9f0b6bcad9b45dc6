package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/attach"
	"github.com/agentrun/agentrun/runtime/store"
)

// The OpenAI Responses API: POST /v1/responses and GET /v1/responses/{id}, so
// the Responses clients (the OpenAI Agents SDK's default) can use an agent as
// their model. As on chat completions, the agent's tool calls stay inside the
// server: a response's only output is the answer, as one assistant message.
//
// A chain of responses is a conversation of the caller's. A response's id names
// its run and the conversation it was stored in, so previous_response_id
// continues that conversation from any replica for as long as the store keeps it,
// within the caller's own conversations (storeConversation): another user's id
// names a conversation of the caller's that does not exist.

// responsesRequest is what the endpoint reads of a request; other parameters
// (instructions, tools, temperature, …) are ignored: the agent's spec decides.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Metadata           map[string]string `json:"metadata"`
}

// stored reports whether the response is stored (OpenAI's default): it can be
// continued and retrieved.
func (b responsesRequest) stored() bool { return b.Store == nil || *b.Store }

// namedConversation is the id of the request's conversation parameter, a
// string or {"id": …}; "" when it has none.
func (b responsesRequest) namedConversation() (string, bool) {
	if len(b.Conversation) == 0 || string(b.Conversation) == "null" {
		return "", true
	}
	var id string
	if json.Unmarshal(b.Conversation, &id) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b.Conversation, &obj) != nil {
			return "", false
		}
		id = obj.ID
	}
	return id, validConversationID(id)
}

// OpenAI's bounds on metadata.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// chainKind is how a response request's run relates to a conversation.
type chainKind int

const (
	chainNone      chainKind = iota // not stored, no conversation: the client's history only
	chainNew                        // a new conversation, which begins with the client's history
	chainNamed                      // the conversation the request names, as chat's conversation header does
	chainContinued                  // the conversation of previous_response_id
)

// responsesChain is the conversation a request runs in; else the status, code
// and message of its refusal.
func responsesChain(body responsesRequest) (conversation string, kind chainKind, status int, code, msg string) {
	named, ok := body.namedConversation()
	switch {
	case !ok:
		return "", 0, http.StatusBadRequest, "invalid_conversation",
			"conversation is an id (or {\"id\": …}) of 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'"
	case named != "" && body.PreviousResponseID != "":
		return "", 0, http.StatusBadRequest, "mutually_exclusive_parameters", "previous_response_id and conversation cannot both be given"
	case body.PreviousResponseID != "":
		_, conv, ok := parseResponseID(body.PreviousResponseID)
		if !ok || conv == "" { // malformed, or a response that was not stored
			return "", 0, http.StatusNotFound, "previous_response_not_found", previousNotFound(body.PreviousResponseID)
		}
		return conv, chainContinued, 0, "", ""
	case named != "":
		return named, chainNamed, 0, "", ""
	case body.stored():
		return newID("conv_"), chainNew, 0, "", ""
	}
	return "", chainNone, 0, "", ""
}

func previousNotFound(id string) string {
	return fmt.Sprintf("Previous response with id '%s' not found.", shortID(id))
}

// shortID is a client's id as an error repeats it: its first 200 bytes.
func shortID(id string) string {
	if len(id) > 200 {
		return strings.ToValidUTF8(id[:200], "") + "…"
	}
	return id
}

// responseID is the id of the response of run rec: its run and, when it was
// stored, its conversation (as the client names it), which a continuation
// needs. It is the same for every repeat of the request.
func responseID(rec *runRecord, stored bool) string {
	id := "resp_" + strings.TrimPrefix(rec.ID, "run_")
	if stored && rec.Conversation != "" {
		id += "_" + rec.Conversation
	}
	return id
}

// runIDLength is the length of a run id's random part (newID).
const runIDLength = 24

// parseResponseID reads a response id: its run's id and its conversation, ""
// for a response that was not stored.
func parseResponseID(id string) (run, conversation string, ok bool) {
	rest, ok := strings.CutPrefix(id, "resp_")
	if !ok || len(rest) < runIDLength || strings.ContainsFunc(rest[:runIDLength], func(c rune) bool {
		return (c < '0' || c > '9') && (c < 'a' || c > 'f')
	}) {
		return "", "", false
	}
	run, rest = "run_"+rest[:runIDLength], rest[runIDLength:]
	if rest == "" {
		return run, "", true
	}
	conversation, ok = strings.CutPrefix(rest, "_")
	return run, conversation, ok && validConversationID(conversation)
}

// responsesInput reads a request's run: the last user message of input (a
// string is one) with its files, and the messages before it; else the status,
// code and message of its refusal. Items other than messages — a client's own
// function calls and their outputs, reasoning, references — are not the agent's
// and are skipped, as chat completions skips tool messages.
func responsesInput(body responsesRequest, lim attach.Limits) (run chatRun, status int, code, msg string) {
	if body.Model == "" {
		return run, http.StatusBadRequest, "missing_model", "model is required: the name of an agent (GET /v1/models lists them)"
	}
	if code, msg := checkMetadata(body.Metadata); code != "" {
		return run, http.StatusBadRequest, code, msg
	}
	if len(body.Input) == 0 || string(body.Input) == "null" {
		return run, http.StatusBadRequest, "invalid_input", "input is required: a string or an array of input items"
	}
	if json.Unmarshal(body.Input, &run.input) == nil {
		return run, 0, "", ""
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(body.Input, &items); err != nil {
		return run, http.StatusBadRequest, "invalid_input", "input must be a string or an array of input items"
	}
	var msgs []model.Message
	for i, it := range items {
		if it.Type != "" && it.Type != "message" {
			continue
		}
		switch it.Role {
		case "user":
			text, parts, err := chatMessage{Role: it.Role, Content: it.Content}.content(lim)
			switch {
			case attach.ProblemOf(err) != "":
				status, code := attachmentFailure(err)
				return run, status, code, fmt.Sprintf("input[%d]: %v", i, err)
			case err != nil:
				return run, http.StatusBadRequest, "invalid_input", fmt.Sprintf("input[%d]: %v", i, err)
			}
			msgs = append(msgs, model.Message{Role: model.RoleUser, Content: text, Parts: parts})
		case "assistant":
			text, err := outputText(it.Content)
			if err != nil {
				return run, http.StatusBadRequest, "invalid_input", fmt.Sprintf("input[%d]: %v", i, err)
			}
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: text})
		case "system", "developer":
			// The agent's instructions are its system prompt: a client's are not used.
		default:
			return run, http.StatusBadRequest, "invalid_input", fmt.Sprintf("input[%d]: unknown role %q", i, it.Role)
		}
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != model.RoleUser {
		return run, http.StatusBadRequest, "invalid_input", "input must end with a user message"
	}
	last := msgs[len(msgs)-1]
	run.input, run.parts = last.Content, last.Parts
	for _, m := range msgs[:len(msgs)-1] {
		m.Parts = withoutData(m.Parts)
		run.history = append(run.history, m)
	}
	if err := lim.Check(run.parts); err != nil {
		status, code := attachmentFailure(err)
		return run, status, code, err.Error()
	}
	return run, 0, "", ""
}

func checkMetadata(md map[string]string) (code, msg string) {
	if len(md) > maxMetadataPairs {
		return "invalid_metadata", fmt.Sprintf("metadata has %d pairs; at most %d", len(md), maxMetadataPairs)
	}
	for k, v := range md {
		if utf8.RuneCountInString(k) > maxMetadataKey || utf8.RuneCountInString(v) > maxMetadataValue {
			return "invalid_metadata", fmt.Sprintf("a metadata key is at most %d characters, a value at most %d", maxMetadataKey, maxMetadataValue)
		}
	}
	return "", ""
}

// outputText is the text of an assistant message of input: a string, or its
// text parts (output_text, as the Responses API returned it).
func outputText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", fmt.Errorf("content must be a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "output_text", "text", "input_text":
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// responsesParams name the request field an error code is about, for the
// param of OpenAI's error shape.
var responsesParams = map[string]string{
	"missing_model": "model", "model_not_found": "model", "unknown_agent": "model",
	"invalid_input": "input", "invalid_request": "input", "input_too_long": "input",
	"invalid_attachment": "input", "attachment_too_large": "input", "unsupported_attachment": "input",
	"previous_response_not_found": "previous_response_id", "mutually_exclusive_parameters": "previous_response_id",
	"invalid_conversation": "conversation", "invalid_metadata": "metadata",
}

// responsesFail answers in OpenAI's error shape, as openAIFail does, with the
// field the error is about.
func responsesFail(w http.ResponseWriter) func(status int, code, msg string) {
	return func(status int, code, msg string) {
		typ := "invalid_request_error"
		switch {
		case status == http.StatusTooManyRequests:
			typ = "rate_limit_exceeded"
		case status >= 500, status == http.StatusFailedDependency:
			typ = "server_error"
		}
		param := responsesParams[code]
		if code == "unknown_agent" {
			code = "model_not_found"
		}
		e := openAIErrorBody(typ, code, msg)
		if param != "" {
			e.Error.Param = &param
		}
		writeJSON(w, status, e)
	}
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request, p Principal) {
	fail := responsesFail(w)
	var body responsesRequest
	follow := func(rec *runRecord) { s.answerResponse(w, r, rec, body) }
	key, slot, ok := s.accept(w, r, p, "responses", &body, fail, follow)
	if !ok {
		return
	}
	in, status, code, msg := responsesInput(body, s.limits.attachLimits())
	var conversation string
	var kind chainKind
	if code == "" {
		conversation, kind, status, code, msg = responsesChain(body)
	}
	if code != "" {
		slot()
		fail(status, code, msg)
		return
	}
	pr, ok := s.prepare(p, slot, body.Model, runInput{text: in.input, parts: in.parts, conversation: conversation}, fail)
	if !ok || !s.prepareResponse(r, pr, body, in, kind, fail) {
		return
	}
	pr.key, pr.text = key, body.Stream
	rec, ok := s.start(r.Context(), pr) // without a key, the client leaving cancels the run
	if !ok {
		keyConflict(fail)
		return
	}
	if body.stored() {
		s.responses.keep(s.runs, rec.ID, body)
	}
	follow(rec)
}

// prepareResponse sets up a prepared run for its chain: the conversation it
// continues must be the caller's; a new one begins with the client's history;
// a run that is not stored writes nothing. On false pr is released and the
// error written.
func (s *Server) prepareResponse(r *http.Request, pr *prepared, body responsesRequest, in chatRun,
	kind chainKind, fail func(status int, code, msg string)) bool {
	// An OpenAI client knows nothing of runs paused for approval: a call that needs
	// one is refused, and the model told why; it is never run unapproved.
	pr.req.Approvals = runtime.ApprovalsRefuse
	pr.req.Ephemeral = !body.stored()
	refuse := func(status int, code, msg string) bool {
		pr.done()
		fail(status, code, msg)
		return false
	}
	window := pr.agent.Settings().Memory.Window
	history := func() []model.Message {
		return clientHistory(in.history, window, (window+1)*s.limits.MaxInputChars-utf8.RuneCountInString(in.input))
	}
	switch kind {
	case chainNone:
		pr.req.History = history()
	case chainContinued:
		// Ids are the caller's own: another user's response names a conversation of
		// the caller's that does not exist, answered as any unknown id.
		conv, err := s.store.Conversation(r.Context(), pr.req.Conversation, 0)
		switch {
		case err != nil:
			return refuse(http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
		case conv.User != pr.req.User.ID:
			return refuse(http.StatusNotFound, "previous_response_not_found", previousNotFound(body.PreviousResponseID))
		}
	case chainNew:
		// The client's earlier messages begin the conversation, so a continuation
		// sees what this response saw.
		if h := history(); len(h) > 0 {
			err := s.store.Commit(r.Context(), store.Record{UserID: pr.req.User.ID, Conversation: pr.req.Conversation, Messages: h})
			if err != nil {
				return refuse(http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
			}
		}
	}
	return true
}

// answerResponse answers a response request from its run, streamed or not. The
// response's id and time are the run's, so a repeat of the request (its
// Idempotency-Key) gets the same response.
func (s *Server) answerResponse(w http.ResponseWriter, r *http.Request, rec *runRecord, body responsesRequest) {
	w.Header().Set("X-Agentrun-Run", rec.ID)
	if body.Stream {
		s.streamResponse(w, r, rec, body)
		return
	}
	v, ok := s.answered(w, r, rec, responsesFail(w))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, responseObject(rec, body, v, responseText(rec, v)))
}

func (s *Server) getResponse(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("id")
	run, conversation, ok := parseResponseID(id)
	var rec *runRecord
	var body responsesRequest
	if ok && conversation != "" {
		rec = s.runs.get(run, p.User.ID)
		body, ok = s.responses.get(run)
	}
	if rec == nil || !ok || rec.Conversation != conversation {
		responsesFail(w)(http.StatusNotFound, "response_not_found", fmt.Sprintf("Response with id '%s' not found.", shortID(id)))
		return
	}
	v := rec.snapshot()
	text := ""
	if v.Status != runRunning {
		text = responseText(rec, v)
	}
	writeJSON(w, http.StatusOK, responseObject(rec, body, v, text))
}

// responseObject is the Response of run rec in the state v, with its message's
// text: OpenAI's fields, those a parameter the server ignores sets at what the
// run used (no instructions, no tools), and agentrun's own.
func responseObject(rec *runRecord, body responsesRequest, v runView, text string) map[string]any {
	md := body.Metadata
	if md == nil {
		md = map[string]string{}
	}
	var previous, conversation any
	if body.PreviousResponseID != "" {
		previous = body.PreviousResponseID
	}
	if named, _ := body.namedConversation(); named != "" {
		conversation = map[string]any{"id": named}
	}
	out := map[string]any{
		"id": responseID(rec, body.stored()), "object": "response", "created_at": rec.Created.Unix(),
		"status": "in_progress", "error": nil, "incomplete_details": nil, "background": false,
		"instructions": nil, "max_output_tokens": nil, "max_tool_calls": nil, "metadata": md, "model": rec.Agent,
		"output": []any{}, "parallel_tool_calls": true, "previous_response_id": previous, "conversation": conversation,
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "service_tier": "default", "store": body.stored(),
		"temperature": nil, "top_p": nil, "text": map[string]any{"format": map[string]any{"type": "text"}},
		"tool_choice": "auto", "tools": []any{}, "truncation": "disabled", "usage": nil,
	}
	if v.Status == runRunning {
		return out
	}
	status, msg := responseStatus(v)
	out["status"] = status
	if status == "failed" {
		out["error"] = map[string]any{"code": "server_error", "message": msg}
	}
	res := v.Result
	if res != nil {
		switch res.Stop {
		case runtime.StopTruncated:
			out["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		case runtime.StopContentFilter:
			out["incomplete_details"] = map[string]any{"reason": "content_filter"}
		}
		out["usage"] = responsesUsage(res.Usage)
		out["agentrun"] = map[string]any{"run": rec.ID, "stop": res.Stop, "intent": res.Intent}
	}
	if text != "" || status == "completed" || status == "incomplete" {
		itemStatus := "completed"
		if status != "completed" {
			itemStatus = "incomplete"
		}
		out["output"] = []any{messageItem(rec, itemStatus, []any{outputTextPart(text)})}
	}
	return out
}

// responseStatus is the status of a finished run's response: failed for a run
// that could not run or ended on a fault (with why), incomplete for an answer
// cut off or filtered, else completed — an accepted answer or a guard's
// fallback message (agentrun.stop says which), as chat's finish reason is stop.
func responseStatus(v runView) (status, msg string) {
	if v.Status == runFailed {
		_, _, msg := runFailure(v)
		return "failed", msg
	}
	if _, _, msg, failed := faultOf(v.Result); failed {
		return "failed", msg
	}
	if r := finishReason(v.Result.Stop); r == "length" || r == "content_filter" {
		return "incomplete", ""
	}
	return "completed", ""
}

func responsesUsage(u model.Usage) map[string]any {
	return map[string]any{
		"input_tokens": u.PromptTokens, "input_tokens_details": map[string]any{"cached_tokens": u.CachedPromptTokens},
		"output_tokens": u.CompletionTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.TotalTokens,
	}
}

// messageID is the id of the message of run rec's response.
func messageID(rec *runRecord) string { return "msg_" + strings.TrimPrefix(rec.ID, "run_") }

func messageItem(rec *runRecord, status string, content []any) map[string]any {
	return map[string]any{"type": "message", "id": messageID(rec), "status": status,
		"role": "assistant", "content": content}
}

func outputTextPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// responseText is a finished run's message: the text a stream of it sent and
// the rest of its answer, as streamResponse sends them (for a run that was not
// streamed, its answer); for a run that failed, only what was streamed.
func responseText(rec *runRecord, v runView) string {
	events, last, _, _ := rec.since(0)
	streamed := ""
	if last-len(events) == 0 { // every event is kept: the streamed text is whole
		streamed = streamedText(events)
	}
	if status, _ := responseStatus(v); status == "failed" {
		return streamed
	}
	return streamed + answerRest(streamed, v.Result.Answer)
}

// streamedText is the text streamChatText sends of these events: text after a
// model response that called tools starts a new paragraph.
func streamedText(events []runtime.Event) string {
	var b strings.Builder
	paragraph := false
	for _, e := range events {
		switch {
		case e.Kind == runtime.EventText:
			if paragraph && b.Len() > 0 {
				b.WriteString("\n\n")
			}
			paragraph = false
			b.WriteString(e.Text)
		case e.Kind == runtime.EventModelResponse && e.Calls > 0:
			paragraph = true
		}
	}
	return b.String()
}

// answerRest is what of the answer a stream still sends after the text it
// streamed, as streamChat does: all of it when nothing was streamed (an agent
// whose drafts are withheld), nothing when it was streamed, and a fallback
// message after the text of a run that stopped as a paragraph of its own.
func answerRest(streamed, answer string) string {
	switch {
	case streamed == "":
		return answer
	case strings.HasSuffix(streamed, answer):
		return ""
	}
	return "\n\n" + answer
}

// streamResponse streams a response as the Responses API does: created and
// in_progress at once; the message, its text part and the model's text as it
// streams (where the agent shows it, see streamChatText), keep-alive comments
// while nothing comes, the rest of the answer in chunks, the done events; then
// completed, incomplete, or failed for a run that ended on a fault.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, rec *runRecord, body responsesRequest) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	seq := 0
	emit := func(typ string, ev map[string]any) bool {
		ev["type"], ev["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(ev)
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	begun := responseObject(rec, body, runView{Status: runRunning}, "")
	if !emit("response.created", map[string]any{"response": begun}) || !emit("response.in_progress", map[string]any{"response": begun}) {
		return
	}
	rec.reading(+1, s.opts.ResumeGrace) // a run with a key waits for a reader to come back
	defer rec.reading(-1, s.opts.ResumeGrace)
	item := messageID(rec)
	at := func(ev map[string]any) map[string]any {
		ev["item_id"], ev["output_index"], ev["content_index"] = item, 0, 0
		return ev
	}
	opened := false
	var text strings.Builder
	open := func() bool {
		if opened {
			return true
		}
		opened = true
		return emit("response.output_item.added", map[string]any{"output_index": 0, "item": messageItem(rec, "in_progress", []any{})}) &&
			emit("response.content_part.added", at(map[string]any{"part": outputTextPart("")}))
	}
	delta := func(d string) bool {
		text.WriteString(d)
		return open() && emit("response.output_text.delta", at(map[string]any{"delta": d, "logprobs": []any{}}))
	}
	streamed, ok := s.streamChatText(w, r, rec, func(d map[string]any, _, _ any) bool {
		content, _ := d["content"].(string)
		return delta(content)
	})
	if !ok {
		return // the run is canceled with the request, or, with a key, unless another follows it
	}
	v := rec.snapshot()
	if status, _ := responseStatus(v); status == "failed" {
		emit("response.failed", map[string]any{"response": responseObject(rec, body, v, streamed)})
		return
	}
	for _, c := range runeChunks(answerRest(streamed, v.Result.Answer), answerChunk) {
		if !delta(c) {
			return
		}
	}
	final := responseObject(rec, body, v, text.String())
	message := final["output"].([]any)[0].(map[string]any)
	if !open() ||
		!emit("response.output_text.done", at(map[string]any{"text": text.String(), "logprobs": []any{}})) ||
		!emit("response.content_part.done", at(map[string]any{"part": outputTextPart(text.String())})) ||
		!emit("response.output_item.done", map[string]any{"output_index": 0, "item": message}) {
		return
	}
	terminal := "response.completed"
	if final["status"] == "incomplete" {
		terminal = "response.incomplete"
	}
	emit(terminal, map[string]any{"response": final})
}

// runeChunks cuts s into pieces of n runes.
func runeChunks(s string, n int) []string {
	var out []string
	for s != "" {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// responseBodies keeps the requests of stored responses by run id, for GET
// /v1/responses/{id}, as long as the registry keeps their runs: a response is
// retrieved from its run, in the process that ran it.
type responseBodies struct {
	mu    sync.Mutex
	m     map[string]responsesRequest
	swept int // how many were kept after the last sweep
}

func (b *responseBodies) keep(runs *runRegistry, id string, body responsesRequest) {
	body.Input = nil // the run has what it was asked
	// Only the conversation's id: {"id": …} may carry anything else, as large as the body.
	if named, _ := body.namedConversation(); named != "" {
		body.Conversation = json.RawMessage(strconv.Quote(named))
	} else {
		body.Conversation = nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]responsesRequest{}
	}
	b.m[id] = body
	if len(b.m) > max(2*b.swept, 1024) { // swept once the map doubles: each insert costs O(1) on average
		for id := range b.m {
			if runs.lookup(id) == nil {
				delete(b.m, id)
			}
		}
		b.swept = len(b.m)
	}
}

func (b *responseBodies) get(id string) (responsesRequest, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.m[id]
	return body, ok
}
