package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// heartbeat is how often a stream with nothing to say sends a comment, so proxies
// and clients see the connection is alive.
const heartbeat = 15 * time.Second

// streamWriteTimeout bounds each write of a stream: a client that stops reading
// loses its stream, rather than holding a handler and its events for ever.
const streamWriteTimeout = 30 * time.Second

type agentView struct {
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	Intents     []intentView `json:"intents"`
}

type intentView struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, p Principal) {
	s.mu.RLock()
	out := make([]agentView, 0, len(s.agents))
	for _, name := range s.agentNamesLocked() {
		sp := s.agents[name].Spec
		v := agentView{Name: sp.Name, Description: sp.Description, Intents: []intentView{}}
		for _, in := range sp.Intents {
			v.Intents = append(v.Intents, intentView{Name: in.Name, Description: in.Description})
		}
		out = append(out, v)
	}
	s.mu.RUnlock()
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

func (s *Server) agentNamesLocked() []string {
	names := make([]string, 0, len(s.agents))
	for n := range s.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runRequest is the body of POST /v1/agents/{name}/runs. The user is the
// principal's: no field of the body names one.
type runRequest struct {
	Input        string          `json:"input"`
	Attachments  []runAttachment `json:"attachments"`
	Conversation string          `json:"conversation"`
	Intent       string          `json:"intent"`
	Stream       bool            `json:"stream"`
}

// runInput is what a client asks a run to take: its text and files, and the
// conversation and intent it names.
type runInput struct {
	text         string
	parts        []model.Part
	conversation string
	intent       string
}

// prepared is a run ready to start: its agent, request and admission.
type prepared struct {
	agent        *served
	req          runtime.Request
	conversation string // as the client names it (req.Conversation is the store's id)
	done         func() // releases the agent and the run slot
	timeout      time.Duration
	// orphanable: a streamed run, which waits ResumeGrace for a reader to come
	// back before it is canceled. Other runs have a request waiting on them.
	orphanable bool
	key        *runKey // the request's Idempotency-Key, if it has one
	// text: a streamed request, whose readers get the model's text as it comes
	// (where the agent shows it: see runtime's Request.OnDelta).
	text bool
}

// maxConversationID bounds a conversation id a client names.
const maxConversationID = 128

// validConversationID reports whether a client's conversation id is one the
// server accepts: 1 to 128 of A-Z a-z 0-9 . _ : -
func validConversationID(id string) bool {
	if id == "" || len(id) > maxConversationID {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// storeConversation is the store's id of a principal's conversation: ids are the
// principal's own, so one user can neither probe nor take another's ("/" cannot
// be part of a user id, see agentrun.User).
func storeConversation(user, id string) string { return user + "/" + id }

// prepare checks a run for p, admitted with slot; on failure it has given slot
// back and written the error with fail.
func (s *Server) prepare(p Principal, slot func(), name string, in runInput, fail func(status int, code, msg string)) (*prepared, bool) {
	a, release := s.agent(name)
	if a == nil {
		slot()
		fail(http.StatusNotFound, "unknown_agent", fmt.Sprintf("no agent %q; this server has %s", name, strings.Join(s.agentNames(), ", ")))
		return nil, false
	}
	bad := func(status int, code, msg string) (*prepared, bool) {
		slot()
		release()
		fail(status, code, msg)
		return nil, false
	}
	switch n := utf8.RuneCountInString(in.text); {
	case strings.TrimSpace(in.text) == "" && len(in.parts) == 0:
		return bad(http.StatusBadRequest, "invalid_request", "input is empty")
	case n > s.limits.MaxInputChars:
		return bad(http.StatusRequestEntityTooLarge, "input_too_long", fmt.Sprintf("input is %d characters; at most %d", n, s.limits.MaxInputChars))
	}
	if err := agentrun.CheckIntent(a.Spec, in.intent); err != nil {
		return bad(http.StatusBadRequest, "unknown_intent", err.Error())
	}
	if err := a.CheckParts(in.parts); err != nil {
		status, code := attachmentFailure(err)
		return bad(status, code, err.Error())
	}
	if in.conversation != "" && !validConversationID(in.conversation) {
		return bad(http.StatusBadRequest, "invalid_conversation", "a conversation id is 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'")
	}
	attrs := make([]string, 0, len(p.User.Attributes))
	for k, v := range p.User.Attributes {
		if containsString(a.Spec.Context.User, k) { // attributes the spec does not declare are not the agent's
			attrs = append(attrs, k+"="+v)
		}
	}
	user, err := agentrun.User(a.Spec, p.User.ID, attrs)
	if err != nil {
		return bad(http.StatusForbidden, "unusable_identity", "the authenticated identity cannot be used by this agent: "+err.Error())
	}
	user.Credential = p.User.Credential // for MCP servers with forward_auth
	pr := &prepared{agent: a, done: func() { slot(); release() }, timeout: s.limits.RunTimeout, conversation: in.conversation,
		req: runtime.Request{Input: in.text, Parts: in.parts, User: user, Intent: in.intent}}
	if in.conversation != "" {
		pr.req.Conversation = storeConversation(user.ID, in.conversation)
		pr.req.TraceConversation = in.conversation
	}
	return pr, true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// start runs a prepared run in the background under ctx (ended by the client
// leaving, for a run it waits on) and the server's runs context (ended after a
// shutdown's grace period). The run's events go to its record and the metrics.
//
// A run with a key (pr.key) outlives its request, as a streamed one does, so
// that a repeat of the request can follow it. When the key's run was started
// first, by a request that came in meanwhile, that run is returned instead and
// pr is released; ok is false when that request asked for something else.
func (s *Server) start(ctx context.Context, pr *prepared) (rec *runRecord, ok bool) {
	if pr.key != nil {
		ctx, pr.orphanable = context.WithoutCancel(ctx), true
	}
	ctx, cancel := context.WithTimeout(ctx, pr.timeout)
	name := pr.agent.Spec.Name
	rec = newRunRecord(newID("run_"), name, pr.req.User.ID, pr.conversation, cancel)
	rec.orphanable, rec.key, rec.input = pr.orphanable, pr.key, preview(pr.req.Input)
	s.keepRequests(rec)
	if pr.key == nil {
		s.runs.add(rec)
	} else if first, conflict := s.runs.addKeyed(rec); first != rec {
		cancel()
		pr.done()
		return first, !conflict
	}
	stop := context.AfterFunc(s.runsCtx, cancel)
	pr.req.RunID = rec.ID // a run paused for approval keeps this id when it resumes
	pr.req.Observer = s.runObserver(rec, name)
	if pr.text {
		pr.req.OnDelta = rec.text
	}
	s.metrics.RunStarted(name)
	s.running.Add(1)
	go s.execute(rec, name, pr.req, pr.done, stop, cancel, func() (*runtime.Result, error) {
		if s.opts.Engine != nil {
			return s.opts.Engine.Run(ctx, pr.agent.Agent, pr.req)
		}
		return pr.agent.Run(ctx, pr.req)
	})
	return rec, true
}

// runObserver sends a run's events to its record and the metrics.
func (s *Server) runObserver(rec *runRecord, agent string) runtime.Observer {
	metricsObs := s.metrics.Observer(agent)
	return runtime.ObserverFunc(func(e runtime.Event) {
		rec.Observe(e)
		metricsObs.Observe(e)
	})
}

// execute runs one execution of a run (its start, or the resumption of a paused
// run) in the goroutine the caller started after s.running.Add(1), and records
// how it ended. done, stop and cancel are called when it is over.
func (s *Server) execute(rec *runRecord, name string, req runtime.Request, done func(), stop func() bool, cancel context.CancelFunc,
	run func() (*runtime.Result, error)) {
	defer s.running.Done()
	defer done()
	defer stop()
	defer cancel()
	defer func() {
		// A bug in a run must not take the server and every other run down.
		if p := recover(); p != nil {
			s.log.Error("a run panicked", "run", rec.ID, "agent", name, "panic", fmt.Sprint(p))
			s.metrics.RunFinished(name, nil, 0)
			rec.finish(nil, fmt.Errorf("internal error: %v", p))
		}
	}()
	started := time.Now()
	res, err := run()
	s.metrics.RunFinished(name, res, time.Since(started))
	s.logRun(rec, req, res, err, time.Since(started))
	if err == nil && res != nil && res.Stop == runtime.StopAwaitingApproval {
		s.keepPaused(rec)
	}
	rec.finish(res, err)
}

// logRun writes one line per run: who, which agent and intent, how it ended; the
// input and the answer only when the config's log_messages asks for them.
func (s *Server) logRun(rec *runRecord, req runtime.Request, res *runtime.Result, err error, d time.Duration) {
	attrs := []slog.Attr{slog.String("run", rec.ID), slog.String("agent", rec.Agent), slog.String("user", req.User.ID),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000)}
	if err != nil {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "run failed", append(attrs, slog.String("error", err.Error()))...)
		return
	}
	attrs = append(attrs, slog.String("intent", res.Intent), slog.String("stop", string(res.Stop)), slog.Int("turns", res.Turns),
		slog.Int64("tokens", res.Usage.TotalTokens))
	if res.Cache != "" {
		attrs = append(attrs, slog.String("cache", string(res.Cache)))
	}
	if s.opts.Config.LogMessages {
		attrs = append(attrs, slog.String("input", req.Input), slog.String("answer", res.Answer))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "run", attrs...)
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request, p Principal) {
	fail := func(status int, code, msg string) { writeError(w, status, code, msg) }
	var body runRequest
	follow := func(rec *runRecord) {
		if body.Stream {
			s.stream(w, r, rec, 0)
		} else if s.await(r, rec) {
			s.writeRunResult(w, rec)
		}
	}
	key, slot, ok := s.accept(w, r, p, "runs "+r.PathValue("name"), &body, fail, follow)
	if !ok {
		return
	}
	pr, ok := s.prepareRun(p, slot, r.PathValue("name"), body, fail)
	if !ok {
		return
	}
	ctx := r.Context() // a run waited on lives as long as the request: a client that leaves cancels it
	if body.Stream {
		// A streamed run may outlive its first reader for ResumeGrace, so a client can
		// reconnect with Last-Event-ID; with nobody reading it is canceled.
		ctx, pr.orphanable, pr.text = context.WithoutCancel(ctx), true, true
	}
	pr.key = key
	rec, ok := s.start(ctx, pr)
	if !ok {
		keyConflict(fail)
		return
	}
	follow(rec)
}

// prepareRun prepares the run a run request asks for.
func (s *Server) prepareRun(p Principal, slot func(), name string, body runRequest, fail func(status int, code, msg string)) (*prepared, bool) {
	parts, err := runParts(body.Attachments, s.limits.attachLimits())
	if err != nil {
		slot()
		status, code := attachmentFailure(err)
		fail(status, code, err.Error())
		return nil, false
	}
	return s.prepare(p, slot, name, runInput{text: body.Input, parts: parts, conversation: body.Conversation, intent: body.Intent}, fail)
}

// writeRunResult answers a finished run: its Result, or the reason it could not
// run (another user's conversation is not found).
func (s *Server) writeRunResult(w http.ResponseWriter, rec *runRecord) {
	v := rec.snapshot()
	if v.Status == runFailed {
		status, code, msg := runFailure(v)
		writeError(w, status, code, msg)
		return
	}
	w.Header().Set("X-Agentrun-Run", rec.ID)
	writeJSON(w, http.StatusOK, map[string]any{"id": rec.ID, "conversation": rec.Conversation, "result": v.Result})
}

// runFailure is how a run that could not start is told to its client. A run in
// another user's conversation is "no such conversation", as a GET of it is: the
// error's text, which names the conversation's owner, stays in the server.
func runFailure(v runView) (status int, code, msg string) {
	switch {
	case errors.Is(v.err, store.ErrForeignConversation):
		return http.StatusNotFound, "conversation_not_found", "no such conversation"
	case errors.Is(v.err, runtime.ErrResuming):
		return http.StatusConflict, "run_resuming", "the run is being resumed by another process"
	}
	return http.StatusInternalServerError, "run_failed", "the run could not start"
}

// sseName is an event kind's SSE event name: its kind, except the approval
// events, named as the API's other dotted names.
func sseName(k runtime.EventKind) string {
	switch k {
	case runtime.EventApprovalRequested:
		return "approval.requested"
	case runtime.EventApprovalDecided:
		return "approval.decided"
	}
	return string(k)
}

// stream writes a run's events as server-sent events from after sequence number
// after, then its result, with a heartbeat comment while nothing happens. Every
// event has an id: a client that reconnects with Last-Event-ID gets the rest.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, rec *runRecord, after int) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Agentrun-Run", rec.ID)
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	rec.reading(+1, s.opts.ResumeGrace)
	defer rec.reading(-1, s.opts.ResumeGrace)
	send := func(events []runtime.Event, first int) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		for i, e := range events {
			var data []byte
			if e.Kind == resultKind { // an earlier execution's result: the run paused, then resumed
				if data = rec.earlierResult(first + i); data == nil {
					continue
				}
			} else {
				var err error
				if data, err = json.Marshal(e); err != nil {
					continue
				}
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", first+i, sseName(e.Kind), data); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	idle := func() bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, err := fmt.Fprint(w, ": heartbeat\n\n")
		return err == nil && rc.Flush() == nil
	}
	for {
		var ok bool
		if after, ok = follow(r.Context(), rec, after, send, idle); !ok {
			return
		}
		// (A run resumed meanwhile is running again: its stream goes on.)
		if v := rec.snapshot(); v.Status != runRunning {
			if after > v.Events { // the reader has the result already
				return
			}
			rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", v.Events+1, resultKind, v.resultEvent)
			rc.Flush()
			return
		}
	}
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, p Principal) {
	rec := s.runs.get(r.PathValue("id"), p.User.ID)
	if rec == nil {
		writeError(w, http.StatusNotFound, "run_not_found", "no such run")
		return
	}
	writeJSON(w, http.StatusOK, rec.snapshot())
}

// runEvents streams a run's events, resuming after Last-Event-ID.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request, p Principal) {
	rec := s.runs.get(r.PathValue("id"), p.User.ID)
	if rec == nil {
		writeError(w, http.StatusNotFound, "run_not_found", "no such run")
		return
	}
	after := 0
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", "Last-Event-ID must be an event's id")
			return
		}
		after = n
	}
	if v := rec.snapshot(); v.Status != runRunning && after > v.Events {
		w.WriteHeader(http.StatusNoContent) // the reader has everything, the result too: EventSource stops
		return
	}
	s.stream(w, r, rec, after)
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, p Principal) {
	rec := s.runs.get(r.PathValue("id"), p.User.ID)
	if rec == nil {
		writeError(w, http.StatusNotFound, "run_not_found", "no such run")
		return
	}
	if v := rec.snapshot(); v.Status != runRunning {
		writeJSON(w, http.StatusOK, map[string]any{"id": rec.ID, "status": v.Status})
		return
	}
	rec.stop()
	writeJSON(w, http.StatusAccepted, map[string]any{"id": rec.ID, "status": "canceling"})
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request, p Principal) {
	stored, err := s.store.Conversations(r.Context(), p.User.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
		return
	}
	ids := []string{}
	for _, id := range stored {
		if own, ok := strings.CutPrefix(id, storeConversation(p.User.ID, "")); ok {
			ids = append(ids, own)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"conversations": ids})
}

// conversationTurns is how many turns GET /v1/conversations/{id} returns at most.
const conversationTurns = 1000

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("id")
	if !validConversationID(id) {
		writeError(w, http.StatusNotFound, "conversation_not_found", "no such conversation")
		return
	}
	conv, err := s.store.Conversation(r.Context(), storeConversation(p.User.ID, id), conversationTurns)
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
	case conv.User != p.User.ID: // another user's, or none: the same answer
		writeError(w, http.StatusNotFound, "conversation_not_found", "no such conversation")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "turns": conv.Turns, "messages": conv.Messages})
	}
}

func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request, p Principal) {
	id := r.PathValue("id")
	err := store.ErrConversationNotFound
	if validConversationID(id) {
		err = s.store.DeleteConversation(r.Context(), p.User.ID, storeConversation(p.User.ID, id))
	}
	switch {
	case errors.Is(err, store.ErrConversationNotFound):
		writeError(w, http.StatusNotFound, "conversation_not_found", "no such conversation")
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request, p Principal) {
	facts, err := s.store.Facts(r.Context(), p.User.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
		return
	}
	if facts == nil {
		facts = []store.Fact{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": p.User.ID, "facts": facts})
}

func (s *Server) forgetMemory(w http.ResponseWriter, r *http.Request, p Principal) {
	// The answers the FAQ caches learned for the user alone go first: a failure
	// then leaves the store as it was, and the request can be repeated.
	cleared := map[string]bool{} // agents may share an index: clear each once
	for _, name := range s.agentNames() {
		a, release := s.agent(name)
		if a == nil {
			continue
		}
		loc := a.IndexLocation()
		if cleared[loc] {
			release()
			continue
		}
		cleared[loc] = true
		_, err := a.ForgetLearned(r.Context(), p.User.ID)
		release()
		if err != nil {
			s.log.Warn("forgetting a user's learned answers failed", "agent", name, "error", err.Error())
			writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the knowledge index did not answer")
			return
		}
	}
	if err := s.store.Forget(r.Context(), p.User.ID); err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the memory store did not answer")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
