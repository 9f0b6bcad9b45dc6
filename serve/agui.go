package serve

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

// AG-UI (https://docs.ag-ui.com), the event stream agent front ends consume:
// POST /v1/agents/{name}/agui takes a RunAgentInput and answers with the run
// as AG-UI events over SSE. The thread is the caller's conversation, kept by
// the server; a run that pauses for approval ends with AG-UI's interrupt
// outcome, and the next input's resume entries decide its calls and go on.

// aguiProtocolVersion is the AG-UI version the endpoint speaks: that of the
// pinned @ag-ui/core its tests validate against.
const aguiProtocolVersion = "1.0"

// aguiInput is what the endpoint reads of a RunAgentInput. The client's state,
// tools (frontend tools), context and forwardedProps are taken and not used:
// the agent's spec decides its instructions and tools.
type aguiInput struct {
	ThreadID       string            `json:"threadId"`
	RunID          string            `json:"runId"`
	Messages       []aguiMessage     `json:"messages"`
	State          json.RawMessage   `json:"state,omitempty"`
	Tools          json.RawMessage   `json:"tools,omitempty"`
	Context        json.RawMessage   `json:"context,omitempty"`
	ForwardedProps json.RawMessage   `json:"forwardedProps,omitempty"`
	Resume         []aguiResumeEntry `json:"resume,omitempty"`
}

type aguiMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
}

// aguiPart is a content part of a user message: text, or an image or a
// document by its bytes or URL.
type aguiPart struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type     string `json:"type"`
		Value    string `json:"value"`
		MimeType string `json:"mimeType"`
	} `json:"source"`
}

// aguiResumeEntry answers one interrupt of the thread's paused run.
type aguiResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // resolved or cancelled
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// check reports what makes the input unusable: its error code and message.
func (in aguiInput) check() (code, msg string) {
	switch {
	case in.ThreadID == "":
		return "invalid_request", "threadId is required: the thread's id, which names its conversation"
	case in.RunID == "":
		return "invalid_request", "runId is required: the client's id of this run"
	case !validConversationID(in.ThreadID):
		return "invalid_conversation", "a threadId is 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'"
	case len(in.Resume) > 0:
		return "", ""
	case len(in.Messages) == 0 || in.Messages[len(in.Messages)-1].Role != "user":
		return "invalid_messages", "messages must end with a user message: it is the run's input (the server keeps the thread's earlier turns)"
	}
	return "", ""
}

// aguiUserInput reads the run's input, the last message: its text and its
// images and documents. A part the server or the agent's model cannot take
// (audio, video, a provider's file handle, a type the model does not read) is
// left out, as AG-UI asks of a producer, rather than failing the run; a file
// that is malformed or beyond the limits is refused.
func (s *Server) aguiUserInput(agent string, m aguiMessage) (in runInput, status int, code, msg string) {
	var text string
	if json.Unmarshal(m.Content, &text) == nil {
		return runInput{text: text}, 0, "", ""
	}
	var parts []aguiPart
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return in, http.StatusBadRequest, "invalid_messages", "the user message's content must be a string or an array of content parts"
	}
	lim := s.limits.attachLimits()
	var b strings.Builder
	var files []model.Part
	for i, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
			continue
		}
		if p.Type != "image" && p.Type != "document" || p.Source == nil || p.Source.Type != "data" && p.Source.Type != "url" {
			continue
		}
		f := runAttachment{MediaType: p.Source.MimeType, Data: p.Source.Value}
		if p.Source.Type == "url" {
			f = runAttachment{MediaType: p.Source.MimeType, URL: p.Source.Value}
		}
		read, err := runParts([]runAttachment{f}, lim)
		if err != nil {
			status, code := attachmentFailure(shownAs(err, "", fmt.Sprintf("content[%d]", i)))
			return in, status, code, err.Error()
		}
		files = append(files, read...)
	}
	if err := lim.Check(files); err != nil {
		status, code := attachmentFailure(err)
		return in, status, code, err.Error()
	}
	if a, release := s.agent(agent); a != nil {
		files = takenParts(a, files)
		release()
	}
	return runInput{text: b.String(), parts: files}, 0, "", ""
}

// takenParts are the parts the agent's model takes; one too large stays, for
// the limit to refuse.
func takenParts(a *served, parts []model.Part) []model.Part {
	out := parts[:0]
	for _, p := range parts {
		if err := a.CheckParts([]model.Part{p}); err == nil || errors.Is(err, model.ErrPartTooLarge) {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) aguiRun(w http.ResponseWriter, r *http.Request, p Principal) {
	fail := func(status int, code, msg string) { writeError(w, status, code, msg) }
	name := r.PathValue("name")
	var body aguiInput
	follow := func(rec *runRecord) { s.streamAGUI(w, r, rec, body, 0, nil) }
	key, slot, ok := s.accept(w, r, p, "agui "+name, &body, fail, follow)
	if !ok {
		return
	}
	if code, msg := body.check(); code != "" {
		slot()
		fail(http.StatusBadRequest, code, msg)
		return
	}
	if len(body.Resume) > 0 {
		slot() // the resumed execution holds a slot of its own
		s.aguiResume(w, r, p, name, body)
		return
	}
	in, status, code, msg := s.aguiUserInput(name, body.Messages[len(body.Messages)-1])
	if code != "" {
		slot()
		fail(status, code, msg)
		return
	}
	in.conversation = body.ThreadID
	pr, ok := s.prepare(p, slot, name, in, fail)
	if !ok {
		return
	}
	pr.key, pr.text = key, true
	rec, ok := s.start(r.Context(), pr) // without a key, the client leaving cancels the run
	if !ok {
		keyConflict(fail)
		return
	}
	follow(rec)
}

// The id of an interrupt names the paused run, the arguments the person was
// shown (their args_hash) and the call: a resume decides that call on those
// arguments, or is refused.
func interruptID(runID string, a runtime.Approval) string {
	return runID + "/" + a.ArgsHash + "/" + a.CallID
}

func parseInterruptID(id string) (runID, argsHash, callID string, ok bool) {
	parts := strings.SplitN(id, "/", 3)
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "run_") || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// decision reads a resume entry: resolved with {"approved": bool, "reason"?}, or
// cancelled, which rejects the call.
func (e aguiResumeEntry) decision() (runID string, d runtime.DecideRequest, msg string) {
	runID, hash, call, ok := parseInterruptID(e.InterruptID)
	if !ok {
		return "", d, fmt.Sprintf("interruptId %q is not an interrupt of this server", e.InterruptID)
	}
	d = runtime.DecideRequest{CallID: call, ArgsHash: hash}
	switch e.Status {
	case "cancelled":
		d.Reason = "the user cancelled the approval"
		return runID, d, ""
	case "resolved":
	default:
		return "", d, fmt.Sprintf("status must be \"resolved\" or \"cancelled\", not %q", e.Status)
	}
	var payload struct {
		Approved   *bool           `json:"approved"`
		Reason     string          `json:"reason"`
		EditedArgs json.RawMessage `json:"editedArgs"`
	}
	if err := json.Unmarshal(e.Payload, &payload); err != nil || payload.Approved == nil {
		return "", d, `a resolved entry's payload is {"approved": true|false, "reason": "…"}`
	}
	if len(payload.EditedArgs) > 0 {
		return "", d, "editedArgs is not taken: a call runs with the arguments it was approved on, or not at all"
	}
	d.Approve, d.Reason = *payload.Approved, payload.Reason
	return runID, d, ""
}

// aguiResume decides the calls the input's resume entries answer, all of one
// paused run of the caller's in this thread, and streams the run as it goes
// on; while calls still wait it ends again with their interrupts.
func (s *Server) aguiResume(w http.ResponseWriter, r *http.Request, p Principal, agent string, body aguiInput) {
	fail := func(status int, code, msg string) { writeError(w, status, code, msg) }
	var runID string
	decisions := make([]runtime.DecideRequest, 0, len(body.Resume))
	for i, e := range body.Resume {
		id, d, msg := e.decision()
		switch {
		case msg != "":
			fail(http.StatusBadRequest, "invalid_decision", fmt.Sprintf("resume[%d]: %s", i, msg))
			return
		case runID != "" && id != runID:
			fail(http.StatusBadRequest, "invalid_decision", "resume answers the interrupts of one run, the thread's last")
			return
		}
		runID, decisions = id, append(decisions, d)
	}
	// Only the run's own user resumes it here: an approver decides others' runs
	// through the approval endpoints.
	who := runtime.Decider{ID: p.User.ID}
	paused, err := runtime.LoadPaused(r.Context(), s.pausedStore(), runID, who)
	if err != nil {
		approvalError(w, err)
		return
	}
	if paused.Agent != agent || paused.Conversation != body.ThreadID {
		fail(http.StatusNotFound, "run_not_found", "no run of this agent's thread waits for these interrupts")
		return
	}
	if err := paused.Placement.ResumableFrom(s.placement()); err != nil {
		fail(http.StatusConflict, "run_on_other_engine", fmt.Sprintf("the run waits on %s and this server runs on %s", paused.Placement, s.placement()))
		return
	}
	for _, d := range decisions {
		if paused, err = runtime.Decide(r.Context(), s.pausedStore(), runID, who, d, time.Now()); err != nil {
			approvalError(w, err)
			return
		}
		verdict := map[bool]string{true: "approve", false: "reject"}[d.Approve]
		s.metrics.ApprovalDecided(s.agentLabel(agent), verdict, 1)
		s.log.Info("approval decided", "run", runID, "agent", agent, "call", d.CallID, "decision", verdict, "by", p.User.ID, "via", "agui")
	}
	if len(paused.Undecided()) > 0 {
		a := newAGUIStream(w, runID, nil, body)
		if a.begin() {
			a.interrupt(paused.Approvals, paused.Expires)
		}
		return
	}
	switch err := s.resume(r.Context(), paused, who); {
	case err == nil, errors.Is(err, runtime.ErrResuming):
	default:
		s.log.Warn("a decided run could not be resumed now", "run", runID, "agent", agent, "error", err.Error())
		fail(http.StatusServiceUnavailable, "not_resumed", "the decisions are kept, but the run could not be resumed now; it resumes when its approvals expire")
		return
	}
	rec := s.runs.get(runID, p.User.ID)
	if rec == nil {
		fail(http.StatusConflict, "run_resuming", "the run is being resumed by another process")
		return
	}
	s.streamAGUI(w, r, rec, body, resumedAfter(rec), paused.Approvals)
}

// resumedAfter is the sequence number after which a resumed run's events are
// its resumption's: that of the earlier execution's result, 0 for a record of
// the resumption alone.
func resumedAfter(rec *runRecord) int {
	events, last, _, _ := rec.since(0)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == resultKind {
			return last - (len(events) - 1 - i)
		}
	}
	return 0
}

// aguiStream writes one AG-UI run: the run record's events as AG-UI events.
type aguiStream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	id     string // the server's run id
	rec    *runRecord
	thread string // the client's ids, which RUN_STARTED and RUN_FINISHED carry
	run    string
	msg    string          // the open text message, "" when none is
	parent string          // the assistant message of the model's turn (its text's, or its calls' own): its tool calls' parent
	last   strings.Builder // the text of the last text message
	// calls are the tool calls shown and not yet answered, by the model's call id;
	// used, every toolCallId given out.
	calls map[string]string
	used  map[string]bool
}

func newAGUIStream(w http.ResponseWriter, id string, rec *runRecord, in aguiInput) *aguiStream {
	return &aguiStream{w: w, rc: http.NewResponseController(w), id: id, rec: rec, thread: in.ThreadID, run: in.RunID,
		calls: map[string]string{}, used: map[string]bool{}}
}

// streamAGUI streams rec's events after sequence number after as one AG-UI run.
// shown are the calls a run that resumes showed before it paused: their results
// answer the tool calls the client has, under the same ids.
func (s *Server) streamAGUI(w http.ResponseWriter, r *http.Request, rec *runRecord, in aguiInput, after int, shown []runtime.Approval) {
	a := newAGUIStream(w, rec.ID, rec, in)
	for _, c := range shown {
		a.toolCallID(c.CallID, 0)
	}
	rec.reading(+1, s.opts.ResumeGrace) // a run with a key waits for a reader to come back
	defer rec.reading(-1, s.opts.ResumeGrace)
	if !a.begin() {
		return
	}
	idle := func() bool {
		a.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err := fmt.Fprint(w, ": heartbeat\n\n")
		return err == nil && a.rc.Flush() == nil
	}
	for {
		var ok bool
		if after, ok = follow(r.Context(), rec, after, a.events, idle); !ok {
			return
		}
		// (A run resumed meanwhile, decided elsewhere, is running again: it goes on.)
		if v := rec.snapshot(); v.Status != runRunning {
			a.finish(v)
			return
		}
	}
}

// begin sends the headers and RUN_STARTED, with the server's run id in its
// metadata and the X-Agentrun-Run header.
func (a *aguiStream) begin() bool {
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Agentrun-Run", a.id)
	a.w.WriteHeader(http.StatusOK)
	return a.send(map[string]any{"type": "RUN_STARTED", "threadId": a.thread, "runId": a.run, "protocolVersion": aguiProtocolVersion,
		"metadata": map[string]any{"agentrun": map[string]any{"runId": a.id}}}) && a.rc.Flush() == nil
}

// send writes one event.
func (a *aguiStream) send(ev map[string]any) bool {
	data, err := json.Marshal(ev)
	if err != nil {
		return false
	}
	a.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err = fmt.Fprintf(a.w, "data: %s\n\n", data)
	return err == nil
}

// events sends a batch of the run's events, those of the run itself: a
// sub-agent's work is its tool call's.
func (a *aguiStream) events(events []runtime.Event, first int) bool {
	for i, e := range events {
		if e.Depth == 0 && !a.event(e, first+i) {
			return false
		}
	}
	return a.rc.Flush() == nil
}

// event sends what one runtime event is in AG-UI, if anything.
func (a *aguiStream) event(e runtime.Event, seq int) bool {
	switch e.Kind {
	case runtime.EventText:
		return e.Text == "" || a.text(e.Text, seq)
	case runtime.EventModelRequest:
		a.parent = ""
		return a.closeText()
	case runtime.EventModelResponse:
		if e.Calls > 0 && a.parent == "" { // the calls of one response are one assistant message's
			a.parent = fmt.Sprintf("%s-%d", a.id, seq)
		}
		return a.closeText()
	case runtime.EventToolCall:
		return a.closeText() && a.showCall(e, e.Args, seq)
	case runtime.EventToolResult:
		return a.closeText() && a.showCall(e, "", seq) && a.result(e.CallID, e.Result, seq)
	case runtime.EventToolRefused:
		return a.closeText() && a.showCall(e, e.Args, seq) && a.result(e.CallID, cmp.Or(e.Error, "refused"), seq)
	case runtime.EventApprovalRequested:
		return a.closeText() && a.showCall(e, e.Args, seq) && a.send(map[string]any{"type": "CUSTOM", "name": "agentrun.approval_requested",
			"value": map[string]any{"runId": a.id, "callId": e.CallID, "toolCallId": a.callRef(e.CallID), "tool": e.Tool, "arguments": e.Args, "message": e.Message}})
	case runtime.EventApprovalDecided:
		return a.send(map[string]any{"type": "CUSTOM", "name": "agentrun.approval_decided",
			"value": map[string]any{"runId": a.id, "callId": e.CallID, "toolCallId": a.callRef(e.CallID), "tool": e.Tool, "approved": e.Passed != nil && *e.Passed, "message": e.Message}})
	case runtime.EventPlan:
		return a.send(map[string]any{"type": "STATE_SNAPSHOT", "snapshot": map[string]any{"plan": e.Plan}})
	}
	return true
}

// text adds streamed text to the open text message, opening one if none is.
func (a *aguiStream) text(text string, seq int) bool {
	if a.msg == "" {
		a.msg, a.parent = fmt.Sprintf("%s-%d", a.id, seq), fmt.Sprintf("%s-%d", a.id, seq)
		a.last.Reset()
		if !a.send(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": a.msg, "role": "assistant"}) {
			return false
		}
	}
	a.last.WriteString(text)
	return a.send(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": a.msg, "delta": text})
}

func (a *aguiStream) closeText() bool {
	if a.msg == "" {
		return true
	}
	id := a.msg
	a.msg = ""
	return a.send(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": id})
}

// message sends a whole text message.
func (a *aguiStream) message(id, text string) bool {
	a.last.Reset()
	a.last.WriteString(text)
	return a.send(map[string]any{"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"}) &&
		a.send(map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text}) &&
		a.send(map[string]any{"type": "TEXT_MESSAGE_END", "messageId": id})
}

// toolCallID is the AG-UI id of the model's call: the run's id and the call's,
// unique in a thread however the model names its calls, and the same in the
// run that resumes a paused one. shown: the client has the call already.
func (a *aguiStream) toolCallID(callID string, seq int) (id string, shown bool) {
	if id, ok := a.calls[callID]; ok {
		return id, true
	}
	id = a.id + ":" + callID
	if a.used[id] { // a model that reuses call ids from one round to the next
		id = fmt.Sprintf("%s:%d", id, seq)
	}
	a.used[id] = true
	a.calls[callID] = id
	return id, false
}

// callRef is the AG-UI id of a call the client has, or would have.
func (a *aguiStream) callRef(callID string) string {
	return cmp.Or(a.calls[callID], a.id+":"+callID)
}

// showCall sends the start, arguments and end of a tool call the client does
// not have yet.
func (a *aguiStream) showCall(e runtime.Event, args string, seq int) bool {
	id, shown := a.toolCallID(e.CallID, seq)
	if shown {
		return true
	}
	start := map[string]any{"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": e.Tool}
	if a.parent != "" {
		start["parentMessageId"] = a.parent
	}
	if !a.send(start) || args != "" && !a.send(map[string]any{"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": args}) {
		return false
	}
	return a.send(map[string]any{"type": "TOOL_CALL_END", "toolCallId": id})
}

// result answers a tool call with its result (the preview the run's events
// hold, never more) or the reason it was not run.
func (a *aguiStream) result(callID, content string, seq int) bool {
	id, _ := a.toolCallID(callID, seq)
	delete(a.calls, callID)
	return a.send(map[string]any{"type": "TOOL_CALL_RESULT", "messageId": fmt.Sprintf("%s-%d", a.id, seq), "toolCallId": id,
		"content": content, "role": "tool"})
}

// finish ends the AG-UI run as the run ended: RUN_FINISHED with its outcome, or
// RUN_ERROR for a run that could not run or ended on a fault. An answer no
// text message carried (the runtime withholds drafts: the agent has a judge,
// filters, a plan or an output schema) is sent whole, once accepted.
func (a *aguiStream) finish(v runView) {
	defer a.rc.Flush()
	if !a.closeText() {
		return
	}
	if v.Status == runFailed {
		_, code, msg := runFailure(v)
		a.send(map[string]any{"type": "RUN_ERROR", "message": msg, "code": code})
		return
	}
	res := v.Result
	if _, code, msg, failed := faultOf(res); failed && res.Stop != runtime.StopCanceled {
		a.send(map[string]any{"type": "RUN_ERROR", "message": msg, "code": code})
		return
	}
	done := map[string]any{"type": "RUN_FINISHED", "threadId": a.thread, "runId": a.run}
	switch {
	case res.Stop == runtime.StopCanceled:
		done["outcome"] = map[string]any{"type": "cancelled"}
		a.send(done)
		return
	case res.Stop == runtime.StopAwaitingApproval && len(res.Pending) > 0:
		a.rec.mu.Lock()
		expires := a.rec.keepUntil
		a.rec.mu.Unlock()
		a.interrupt(res.Pending, expires)
		return
	}
	if res.Answer != "" && strings.TrimSpace(a.last.String()) != strings.TrimSpace(res.Answer) &&
		!a.message(fmt.Sprintf("%s-%d", a.id, v.Events+1), res.Answer) {
		return
	}
	result := map[string]any{"answer": res.Answer, "stop": res.Stop}
	if len(res.Output) > 0 {
		result["output"] = res.Output
	}
	done["result"], done["outcome"] = result, map[string]any{"type": "success"}
	a.send(done)
}

// interrupt ends the run paused: RUN_FINISHED with an interrupt per call that
// waits for a decision.
func (a *aguiStream) interrupt(calls []runtime.Approval, expires time.Time) {
	var interrupts []any
	for _, c := range calls {
		if c.Decision != nil {
			continue
		}
		in := map[string]any{"id": interruptID(a.id, c), "reason": "tool_call", "toolCallId": a.callRef(c.CallID),
			"responseSchema": map[string]any{"type": "object", "required": []string{"approved"},
				"properties": map[string]any{"approved": map[string]any{"type": "boolean"}, "reason": map[string]any{"type": "string"}}},
			"metadata": map[string]any{"agentrun": map[string]any{"runId": a.id, "callId": c.CallID, "tool": c.Tool,
				"arguments": c.Arguments, "argsHash": c.ArgsHash}}}
		if c.Message != "" {
			in["message"] = c.Message
		}
		if !expires.IsZero() {
			in["expiresAt"] = expires.UTC().Format(time.RFC3339)
		}
		interrupts = append(interrupts, in)
	}
	a.send(map[string]any{"type": "RUN_FINISHED", "threadId": a.thread, "runId": a.run,
		"outcome": map[string]any{"type": "interrupt", "interrupts": interrupts}})
	a.rc.Flush()
}
