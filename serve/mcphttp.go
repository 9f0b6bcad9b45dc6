package serve

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// /mcp: the agents' MCP server over streamable HTTP (the SDK's handler), behind
// the server's authentication. The caller of each request is the principal of
// the calls it carries, and a session belongs to the user who opened it: another
// user's session id is not found, as one that does not exist.

const (
	// mcpSessionHeader carries a streamable HTTP session's id.
	mcpSessionHeader = "Mcp-Session-Id"
	// mcpSessionIdle is how long a session may go without a request before it is
	// closed.
	mcpSessionIdle = 30 * time.Minute
	// maxMCPSessionsPerUser and maxMCPSessions bound the open sessions: each holds
	// memory, and a GET stream a connection.
	maxMCPSessionsPerUser = 32
	maxMCPSessions        = 4096
	// mcpAuthenticated stands for the caller's credentials in the requests the
	// SDK's handler reads: the server authenticated them already, and the token
	// is not to reach the SDK's request metadata.
	mcpAuthenticated = "authenticated-by-agentrun"
)

// mcpCallerKey is the request context's key of the authenticated principal, for
// the SDK's token verifier to hand it on to the tool calls.
type mcpCallerKey struct{}

// mcpPrincipal is the key of the principal in a call's auth.TokenInfo.Extra.
const mcpPrincipal = "agentrun.principal"

// mcpHTTP is the state of /mcp: made once, at its first request.
type mcpHTTP struct {
	once    sync.Once
	tools   *mcpTools
	handler http.Handler

	mu       sync.Mutex
	owners   map[string]string // session id → the user who opened it
	inFlight map[string]int    // session id → its POSTs in flight
	draining bool              // the server is shutting down: idle sessions close
}

func (s *Server) mcpHandler() *mcpHTTP {
	m := &s.mcp
	m.once.Do(func() {
		m.owners, m.inFlight = map[string]string{}, map[string]int{}
		m.tools = s.mcpServer(callerOf, false)
		sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m.tools.server },
			&mcp.StreamableHTTPOptions{SessionTimeout: mcpSessionIdle, MaxRequestBodyBytes: s.limits.MaxBodyBytes, Logger: s.log})
		verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
			p, ok := r.Context().Value(mcpCallerKey{}).(Principal)
			if !ok {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: p.User.ID, Extra: map[string]any{mcpPrincipal: p}}, nil
		}
		m.handler = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
	})
	return m
}

// callerOf is the principal of a call over HTTP: the authenticated caller of the
// request that carried it.
func callerOf(req *mcp.CallToolRequest) (Principal, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return Principal{}, false
	}
	p, ok := req.Extra.TokenInfo.Extra[mcpPrincipal].(Principal)
	return p, ok
}

// serveMCP answers POST, GET and DELETE /mcp: a session's messages, its stream
// of server messages, its end.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, p Principal) {
	m := s.mcpHandler()
	s.syncTools(m.tools) // after a reload, the tools of the agents served now
	id := r.Header.Get(mcpSessionHeader)
	switch {
	case id != "" && m.owner(id) != p.User.ID:
		refuseBody(w, r)
		http.Error(w, "session not found", http.StatusNotFound)
		return
	case id == "" && r.Method == http.MethodPost && !m.room(p.User.ID):
		refuseBody(w, r)
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many open MCP sessions; close one (DELETE /mcp) or wait for one to expire", http.StatusTooManyRequests)
		return
	}
	if id != "" && r.Method == http.MethodPost { // a GET stream is no request of the session's to wait for
		m.begin(id)
		defer m.end(id)
	}
	r = r.Clone(context.WithValue(r.Context(), mcpCallerKey{}, p))
	r.Header.Set("Authorization", "Bearer "+mcpAuthenticated)
	m.handler.ServeHTTP(&mcpWriter{ResponseWriter: w, m: m, r: r, user: p.User.ID}, r)
}

// owner is the user who opened a session; "" for a session /mcp did not open.
func (m *mcpHTTP) owner(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owners[id]
}

// room reports whether user may open another session, forgetting first the
// sessions that ended (by DELETE, idleness or a failed start) when the caps are
// reached.
func (m *mcpHTTP) room(user string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.countLocked(user) < maxMCPSessionsPerUser && len(m.owners) < maxMCPSessions {
		return true
	}
	live := map[string]bool{}
	for ss := range m.tools.server.Sessions() {
		live[ss.ID()] = true
	}
	for id := range m.owners {
		if !live[id] {
			delete(m.owners, id)
		}
	}
	return m.countLocked(user) < maxMCPSessionsPerUser && len(m.owners) < maxMCPSessions
}

func (m *mcpHTTP) countLocked(user string) int {
	n := 0
	for _, u := range m.owners {
		if u == user {
			n++
		}
	}
	return n
}

func (m *mcpHTTP) begin(id string) {
	m.mu.Lock()
	m.inFlight[id]++
	m.mu.Unlock()
}

// end counts a session's request out; once the server is shutting down, a
// session with none left is closed, which ends its GET stream.
func (m *mcpHTTP) end(id string) {
	m.mu.Lock()
	m.inFlight[id]--
	idle := m.inFlight[id] <= 0
	if idle {
		delete(m.inFlight, id)
	}
	draining := m.draining
	m.mu.Unlock()
	if idle && draining {
		m.close(id)
	}
}

// drain begins the shutdown (http.Server.RegisterOnShutdown): the sessions with
// no request in flight close now, ending their GET streams, which would hold the
// shutdown for its whole grace period; the others once their requests are done.
func (s *Server) drainMCP() {
	m := &s.mcp
	m.mu.Lock()
	m.draining = true
	var idle []string
	for id := range m.owners {
		if m.inFlight[id] == 0 {
			idle = append(idle, id)
		}
	}
	m.mu.Unlock()
	for _, id := range idle {
		m.close(id)
	}
}

// close ends the session with the id, if it is still open.
func (m *mcpHTTP) close(id string) {
	if m.tools == nil {
		return
	}
	for ss := range m.tools.server.Sessions() {
		if ss.ID() == id {
			ss.Close()
			return
		}
	}
}

// mcpWriter binds the session a request opens to its user, as the SDK's answer
// names it, and forgets one it ends; every write of a stream has a deadline, so
// a client that stops reading loses its stream rather than holding it.
type mcpWriter struct {
	http.ResponseWriter
	m       *mcpHTTP
	r       *http.Request
	user    string
	written bool
}

func (w *mcpWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		w.bind(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *mcpWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.written = true
		w.bind(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return w.ResponseWriter.Write(b)
}

func (w *mcpWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *mcpWriter) bind(code int) {
	asked := w.r.Header.Get(mcpSessionHeader)
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	switch id := w.Header().Get(mcpSessionHeader); {
	case asked == "" && id != "" && code < 300:
		w.m.owners[id] = w.user
	case asked != "" && w.r.Method == http.MethodDelete && code < 300:
		delete(w.m.owners, asked)
	}
}
