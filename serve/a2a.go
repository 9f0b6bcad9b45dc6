package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentrun/agentrun/spec"
)

// A2A: every agent is an A2A agent, through the official Go SDK's JSON-RPC
// handler (A2A 1.0, and 0.3 for older clients) and its task machinery, with
// this package's task store, executor and checks. An A2A task is a run of the
// agent (its id in the task's metadata), a context is a conversation of the
// caller's, and the authenticated principal is the only identity: the SDK's
// user is set from it, never from the request.

// Task metadata keys: the task's run id, and until when a task waiting for
// approval waits.
const (
	a2aRunKey     = "agentrun_run_id"
	a2aExpiresKey = "agentrun_approvals_expire"
)

// a2aService is the A2A side of a Server.
type a2aService struct {
	s       *Server
	tasks   *a2aTaskStore
	handler a2asrv.RequestHandler
	v1, v03 http.Handler
}

func newA2AService(s *Server) *a2aService {
	a := &a2aService{s: s, tasks: newA2ATaskStore(s.limits.RunTimeout)}
	panicked := func(r any) error {
		s.log.Error("panic in the A2A handler", "panic", fmt.Sprint(r))
		return a2a.ErrInternalError
	}
	a.handler = a2asrv.NewHandler(&a2aExecutor{a: a},
		a2asrv.WithTaskStore(a.tasks),
		a2asrv.WithCallInterceptors(a2aGuard{a: a}),
		a2asrv.WithCapabilityChecks(&a2a.AgentCapabilities{Streaming: true}),
		// The SDK's own log lines are debug and info chatter but for its warnings.
		a2asrv.WithLogger(slog.New(minLevel{Handler: s.log.Handler(), min: slog.LevelWarn})),
		a2asrv.WithExecutionPanicHandler(panicked))
	opts := []a2asrv.TransportOption{a2asrv.WithTransportKeepAlive(heartbeat), a2asrv.WithTransportPanicHandler(panicked)}
	a.v1 = a2asrv.NewJSONRPCHandler(a.handler, opts...)
	a.v03 = a2av0.NewJSONRPCHandler(a.handler, opts...)
	return a
}

// minLevel is a log handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// a2aCall is one A2A request: who makes it, to which agent, and what the checks
// before the SDK's handler prepared for the executor.
type a2aCall struct {
	p     Principal
	agent string
	// streaming: the request asks for a stream, whose readers get the model's text.
	streaming bool

	mu sync.Mutex
	// pr is a new task's run, admitted and prepared, until the executor takes it.
	pr *prepared
	// key is a new task's message id, and its digest, for the store.
	key *runKey
	// decided is the outcome of a message that decided a paused run's calls.
	decided *a2aDecided
}

// a2aDecided is what a message that decided on a task's calls left for its
// execution to follow.
type a2aDecided struct {
	runID string
	after int // the sequence number of the run's last event before it resumed
	out   decisionView
}

type a2aCallKey struct{}

func a2aCallFrom(ctx context.Context) *a2aCall {
	c, _ := ctx.Value(a2aCallKey{}).(*a2aCall)
	return c
}

// takePrepared hands the prepared run to the executor, once.
func (c *a2aCall) takePrepared() *prepared {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.pr
	c.pr = nil
	return pr
}

// a2aJSONRPC answers POST /a2a/{name}: A2A 1.0's JSON-RPC binding.
func (s *Server) a2aJSONRPC(w http.ResponseWriter, r *http.Request, p Principal) {
	s.a2a.serve(w, r, p, s.a2a.v1)
}

// a2aJSONRPC03 answers POST /a2a/{name}/v0.3: A2A 0.3's JSON-RPC binding
// (message/send, message/stream, tasks/get, tasks/cancel), for older clients.
func (s *Server) a2aJSONRPC03(w http.ResponseWriter, r *http.Request, p Principal) {
	s.a2a.serve(w, r, p, s.a2a.v03)
}

func (a *a2aService) serve(w http.ResponseWriter, r *http.Request, p Principal, h http.Handler) {
	name := r.PathValue("name")
	ag, release := a.s.agent(name)
	if ag == nil {
		refuseBody(w, r)
		writeJSONRPCError(w, http.StatusNotFound, -32601,
			fmt.Sprintf("no agent %q; this server has %s", name, strings.Join(a.s.agentNames(), ", ")))
		return
	}
	release() // prepare holds the agent for the run it starts
	call := &a2aCall{p: p, agent: name}
	rc := http.NewResponseController(w)
	h.ServeHTTP(&a2aWriter{ResponseWriter: w, rc: rc}, r.WithContext(context.WithValue(r.Context(), a2aCallKey{}, call)))
	rc.SetWriteDeadline(time.Time{})
	if pr := call.takePrepared(); pr != nil { // the SDK refused the request before its run started
		pr.done()
	}
}

// a2aWriter is the SDK's response writer: it flushes (the SDK's streams need an
// http.Flusher), and each write has a deadline, so a client that stops reading
// loses its stream rather than holding it for ever.
type a2aWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (w *a2aWriter) Write(b []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return w.ResponseWriter.Write(b)
}

func (w *a2aWriter) Flush() { w.rc.Flush() }

func (w *a2aWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isA2ARoute reports whether r is for an A2A JSON-RPC endpoint, whose errors are
// JSON-RPC errors.
func isA2ARoute(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/a2a/") && r.Method == http.MethodPost
}

// a2aUnauthenticated is the JSON-RPC error code of a request without valid
// credentials (the SDK's for a2a.ErrUnauthenticated).
const a2aUnauthenticated = -31401

// writeJSONRPCError answers a request the SDK never saw with a JSON-RPC error.
func writeJSONRPCError(w http.ResponseWriter, status, code int, message string) {
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": message}})
}

// a2aFailure turns a refusal of the run API's checks (prepare's, the
// attachments', the limits') into the A2A error that tells it, with the run
// API's code in the error's details.
func a2aFailure(status int, code, msg string) error {
	kind := a2a.ErrInvalidParams
	switch {
	case status == http.StatusTooManyRequests, status >= 500:
		kind = a2a.ErrServerError
	case status == http.StatusUnsupportedMediaType:
		kind = a2a.ErrUnsupportedContentType
	case status == http.StatusForbidden:
		kind = a2a.ErrUnauthorized
	case status == http.StatusNotFound:
		kind = a2a.ErrInvalidRequest
	}
	return a2a.NewError(kind, msg).WithErrorInfoMeta(map[string]string{"agentrun_code": code})
}

// a2aAgentCard answers GET /a2a/{name}/.well-known/agent-card.json. Cards are
// public, as A2A means them to be, so clients discover an agent before they
// authenticate: a card says what the spec says (name, description, intents)
// and how to authenticate, nothing of any user, and an unknown name is not
// told which names there are.
func (s *Server) a2aAgentCard(w http.ResponseWriter, r *http.Request) {
	a, release := s.agent(r.PathValue("name"))
	if a == nil {
		writeError(w, http.StatusNotFound, "unknown_agent", "no such agent")
		return
	}
	sp := a.Spec
	release()
	producer, _ := a2av0.NewStaticAgentCardProducer(s.a2aCard(sp, requestBase(r))).(a2asrv.AgentCardJSONProducer)
	data, err := producer.CardJSON(r.Context())
	if err != nil {
		s.log.Error("an agent card does not encode", "agent", sp.Name, "error", err.Error())
		writeError(w, http.StatusInternalServerError, "internal", "the agent card could not be made")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache") // it follows the specs, which a reload changes
	w.Write(data)
}

// requestBase is the server's URL as the request reached it: its Host, and
// https when it came over TLS or through a proxy that says so.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// a2aInputModes are the media types a task takes: text, and the files the
// server takes (the agent's model may take fewer: a file it cannot is refused).
var a2aInputModes = []string{"text/plain", "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"}

// a2aCard is an agent's card, its endpoints under base.
func (s *Server) a2aCard(sp *spec.Spec, base string) *a2a.AgentCard {
	endpoint := base + "/a2a/" + sp.Name
	card := &a2a.AgentCard{
		Name:        sp.Name,
		Description: sp.Description,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: endpoint, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: endpoint + "/v0.3", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  a2aInputModes,
		DefaultOutputModes: []string{"text/plain"},
	}
	structured := sp.Output != nil
	for _, in := range sp.Intents {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: in.Name, Name: in.Name, Description: in.Description,
			Examples: in.Examples, Tags: []string{}})
		structured = structured || in.Output != nil
	}
	if len(card.Skills) == 0 {
		card.Skills = []a2a.AgentSkill{{ID: sp.Name, Name: sp.Name, Description: sp.Description, Tags: []string{}}}
	}
	if structured {
		card.DefaultOutputModes = append(card.DefaultOutputModes, "application/json")
	}
	if !s.opts.InsecureNoAuth {
		scheme := a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "a token of the server's auth.tokens, or a JWT its auth.jwt accepts"}
		if len(s.opts.Config.Auth.Tokens) == 0 {
			scheme.BearerFormat = "JWT"
		}
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": scheme}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{"bearer": a2a.SecuritySchemeScopes{}}}
	}
	// The version is a digest of what the card says, so a client sees it change.
	data, _ := json.Marshal(card)
	sum := sha256.Sum256(data)
	card.Version = hex.EncodeToString(sum[:6])
	return card
}

// errNoContext answers a contextId that is none of the caller's: not told apart
// from another user's, which it may well be.
var errNoContext = a2a.NewError(a2a.ErrTaskNotFound,
	"no such context: give the contextId of one of your tasks or conversations, or none to start a new one")

// errNoTask answers a task id that is none of the caller's, another user's
// alike.
var errNoTask = a2a.NewError(a2a.ErrTaskNotFound, "task not found")
