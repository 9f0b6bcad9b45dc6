package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/propagation"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun/agentrun/console"
)

// maxHeaderTime bounds how long a client may take to send a request's headers.
const maxHeaderTime = 10 * time.Second

// HTTPServer is an http.Server for the Handler with the timeouts it needs: a
// request, headers and body, is read within limits.read_timeout (once its body is
// read, net/http lifts the read deadline, so a long run or stream is not cut), and
// there is no WriteTimeout, which would end SSE streams and long runs: each write
// of a stream has a deadline of its own.
func (s *Server) HTTPServer() *http.Server {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: min(maxHeaderTime, s.limits.ReadTimeout),
		ReadTimeout: s.limits.ReadTimeout, IdleTimeout: 2 * time.Minute}
	hs.RegisterOnShutdown(s.drainMCP) // an MCP session's GET stream would hold the shutdown
	return hs
}

// A route is one endpoint of the API: its pattern (method and path, as
// http.ServeMux reads it) and its handler, which gets the authenticated principal.
// Every route but the probes is authenticated, and every one is observed (access log,
// metrics) and bounded by the server's limits.
type route struct {
	pattern string
	handle  func(http.ResponseWriter, *http.Request, Principal)
	// attachments: the body may carry files, within limits.max_attachment_bytes.
	attachments bool
	// streamToken: a stream token of the run in the URL authenticates too.
	streamToken bool
}

// routes are the authenticated endpoints; docs/serve.md documents each, and
// TestEveryRouteIsAuthenticatedAndDocumented fails for one it does not or that
// answers without a token.
func (s *Server) routes() []route {
	return []route{
		{pattern: "GET /v1/agents", handle: s.listAgents},
		{pattern: "GET /v1/status", handle: s.getStatus},
		{pattern: "POST /v1/agents/{name}/runs", handle: s.createRun, attachments: true},
		{pattern: "GET /v1/runs", handle: s.listRuns},
		{pattern: "GET /v1/runs/{id}", handle: s.getRun},
		{pattern: "GET /v1/runs/{id}/events", handle: s.runEvents, streamToken: true},
		{pattern: "GET /v1/runs/{id}/requests/{seq}", handle: s.getRequest},
		{pattern: "POST /v1/runs/{id}/stream_token", handle: s.streamToken},
		{pattern: "POST /v1/runs/{id}/cancel", handle: s.cancelRun},
		{pattern: "GET /v1/runs/{id}/approvals", handle: s.getApprovals},
		{pattern: "POST /v1/runs/{id}/approvals/{call_id}", handle: s.decide},
		{pattern: "GET /v1/approvals", handle: s.listApprovals},
		{pattern: "GET /v1/conversations", handle: s.listConversations},
		{pattern: "GET /v1/conversations/{id}", handle: s.getConversation},
		{pattern: "DELETE /v1/conversations/{id}", handle: s.deleteConversation},
		{pattern: "GET /v1/me/memory", handle: s.getMemory},
		{pattern: "DELETE /v1/me/memory", handle: s.forgetMemory},
		{pattern: "GET /v1/models", handle: s.listModels},
		{pattern: "POST /v1/chat/completions", handle: s.chatCompletions, attachments: true},
		{pattern: "POST /v1/responses", handle: s.createResponse, attachments: true},
		{pattern: "GET /v1/responses/{id}", handle: s.getResponse},
		{pattern: "POST /v1/agents/{name}/agui", handle: s.aguiRun, attachments: true},
		{pattern: "GET /v1/agents/{name}/graph", handle: s.getGraph},
		{pattern: "POST /v1/agents/{name}/knowledge/probe", handle: s.probeKnowledge},
		// A2A (a2a.go); each agent's card is public, outside this table.
		{pattern: "POST /a2a/{name}", handle: s.a2aJSONRPC, attachments: true},
		{pattern: "POST /a2a/{name}/v0.3", handle: s.a2aJSONRPC03, attachments: true},
		{pattern: "POST /mcp", handle: s.serveMCP},
		{pattern: "GET /mcp", handle: s.serveMCP},
		{pattern: "DELETE /mcp", handle: s.serveMCP},
	}
}

// Handler is the server's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	open := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.observe(pattern, s.limits.MaxBodyBytes, h))
	}
	open("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	open("GET /readyz", s.ready)
	mux.Handle("GET /metrics", s.metrics.Handler())
	open("GET /a2a/{name}/.well-known/agent-card.json", s.a2aAgentCard)
	for _, rt := range s.routes() {
		bodyCap := s.limits.MaxBodyBytes
		if rt.attachments {
			bodyCap = s.limits.attachmentBodyBytes()
		}
		auth := s.authenticate(rt.handle)
		if rt.streamToken {
			auth = s.authenticateStream(rt.handle)
		}
		mux.Handle(rt.pattern, s.observe(rt.pattern, bodyCap, auth))
	}
	if s.opts.UI {
		ui := console.Handler()
		open("GET "+console.Prefix, ui.ServeHTTP)
		open("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, console.Prefix, http.StatusFound) })
	}
	open("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	switch {
	case s.opts.Dev:
		return loopbackOnly(mux, nil) // no CORS: a dev server answers its own pages only
	case s.opts.InsecureNoAuth:
		return loopbackOnly(s.cors(mux), s.corsAllows)
	}
	return s.cors(mux)
}

// apiError is the JSON body of an error of the run API.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, message
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// statusWriter remembers the status written, for the access log and metrics. It
// unwraps, so http.ResponseController still reaches the connection's Flush.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type principalKey struct{}

// observe logs and counts every request by its route pattern (never its path,
// which holds ids), and caps the body at bodyCap bytes.
func (s *Server) observe(route string, bodyCap int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		who := &Principal{} // authenticate fills it in
		// A caller's W3C traceparent makes its trace the parent of the run's; its
		// baggage is not taken: the server's tools would send it on to backends as
		// if the agent had set it.
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		r = r.WithContext(context.WithValue(ctx, principalKey{}, who))
		r.Body = http.MaxBytesReader(sw, r.Body, bodyCap)
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in a handler", "route", route, "panic", fmt.Sprint(p))
				if sw.status == 0 {
					writeError(sw, http.StatusInternalServerError, "internal", "the server failed to handle the request")
				}
			}
			d := time.Since(start)
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			s.metrics.Request(route, r.Method, status, d)
			attrs := []any{"method", r.Method, "route", route, "status", status, "duration_ms", float64(d.Microseconds()) / 1000, "bytes", sw.bytes}
			if who.User.ID != "" {
				attrs = append(attrs, "user", who.User.ID, "via", who.Via)
			}
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", argsToAttrs(attrs)...)
		}()
		h.ServeHTTP(sw, r)
	})
}

func argsToAttrs(args []any) []slog.Attr {
	out := make([]slog.Attr, 0, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		out = append(out, slog.Any(args[i].(string), args[i+1]))
	}
	return out
}

// authenticate finds the request's principal; without one the request is a 401.
func (s *Server) authenticate(h func(http.ResponseWriter, *http.Request, Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.auth.Authenticate(r)
		if err != nil {
			if !errors.Is(err, ErrNoCredentials) {
				s.log.Info("authentication failed", "route", r.Pattern, "error", err.Error())
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentrun"`)
			refuseBody(w, r)
			if isOpenAIRoute(r) {
				writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "missing or invalid credentials")
				return
			}
			if isA2ARoute(r) {
				writeJSONRPCError(w, http.StatusUnauthorized, a2aUnauthenticated, "missing or invalid credentials")
				return
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid credentials")
			return
		}
		if holder, ok := r.Context().Value(principalKey{}).(*Principal); ok {
			*holder = p
		}
		h(w, r, p)
	})
}

// refuseBody makes the answer to a request whose body the server does not read
// (unauthenticated, refused by a limit) its last on the connection, and reads
// nothing more of it: net/http would otherwise drain the body to reuse the
// connection, for as long as a client takes to trickle it.
func refuseBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

func isOpenAIRoute(r *http.Request) bool {
	return r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/models" ||
		r.URL.Path == "/v1/responses" || strings.HasPrefix(r.URL.Path, "/v1/responses/")
}

// ready answers 200 once agents are loaded and the store answers.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if len(s.agentNames()) == 0 {
		writeError(w, http.StatusServiceUnavailable, "not_ready", "no agents are loaded")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.Conversations(ctx, "readyz-probe"); err != nil {
		writeError(w, http.StatusServiceUnavailable, "not_ready", "the memory store does not answer")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "agents": len(s.agentNames())})
}

// decodeJSON reads a JSON request body into v: 415 for another content type, 413
// beyond the body cap, 408 for a body slower than limits.read_timeout, 400 for
// anything malformed. It reports whether to go on.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, fail func(status int, code, msg string)) bool {
	refuse := func(status int, code, msg string) bool {
		refuseBody(w, r)
		fail(status, code, msg)
		return false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return refuse(http.StatusUnsupportedMediaType, "unsupported_media_type", fmt.Sprintf("the body must be application/json, not %q", ct))
		}
	} else {
		return refuse(http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json (set Content-Type)")
	}
	// The whole body is read (MaxBytesReader caps it) before it is decoded, so an
	// over-cap body is a 413 wherever the cap falls, even in trailing whitespace.
	data, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return refuse(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit))
	case errors.As(err, &netErr) && netErr.Timeout():
		return refuse(http.StatusRequestTimeout, "request_timeout", "the body took longer to arrive than the server waits")
	case err != nil:
		return refuse(http.StatusBadRequest, "invalid_request", "the body could not be read")
	}
	if err := json.Unmarshal(data, v); err != nil {
		fail(http.StatusBadRequest, "invalid_json", "the body is not valid JSON: "+err.Error())
		return false
	}
	return true
}

// admit applies the concurrency caps and the rate limit to a run for p, before
// its body is read, so a body still arriving holds a slot: false after writing the
// 429. A run the caps refuse costs no rate token.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, p Principal, fail func(status int, code, msg string)) (release func(), ok bool) {
	release, no := s.admitRun(p)
	if no != nil {
		refuseBody(w, r)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(no.wait.Seconds()))))
		fail(http.StatusTooManyRequests, no.code, no.msg)
		return nil, false
	}
	return release, true
}

// refusal is why a run was not admitted, and how long to wait before trying again.
type refusal struct {
	code, msg string
	wait      time.Duration
}

// admitRun takes a run slot and a rate token for p, whatever the protocol asking:
// a nil release and the refusal when the caps or the rate are used up.
func (s *Server) admitRun(p Principal) (release func(), no *refusal) {
	release, full := s.limiter.acquire(p.User.ID)
	if full != "" {
		s.metrics.RateLimited(full)
		msg := fmt.Sprintf("too many runs in flight for this user (at most %d); try again shortly", s.limits.MaxConcurrentPerUser)
		if full == "total" {
			msg = "the server is running as many runs as it may; try again shortly"
		}
		return nil, &refusal{code: "too_many_runs", msg: msg, wait: time.Second}
	}
	if ok, wait := s.limiter.allow(p.User.ID, time.Now()); !ok {
		release()
		s.metrics.RateLimited("rate")
		return nil, &refusal{code: "rate_limited", msg: fmt.Sprintf("too many runs: at most %g a second", s.limits.RatePerSecond), wait: wait}
	}
	return release, nil
}

// withinRate takes one of the user's requests from their rate, or answers 429.
func (s *Server) withinRate(w http.ResponseWriter, r *http.Request, p Principal, fail func(status int, code, msg string)) bool {
	ok, wait := s.limiter.allow(p.User.ID, time.Now())
	if !ok {
		s.metrics.RateLimited("rate")
		refuseBody(w, r)
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		fail(http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("too many runs: at most %g a second", s.limits.RatePerSecond))
	}
	return ok
}
