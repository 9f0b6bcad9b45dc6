package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/tracecontext"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// DefaultConnectTimeout bounds connecting to a server and listing its tools.
const DefaultConnectTimeout = 30 * time.Second

// AuditRecord is one MCP tool call: who asked, what, and how it ended.
type AuditRecord struct {
	Time         time.Time      `json:"time"`
	Server       string         `json:"server"`
	Tool         string         `json:"tool"`
	Arguments    map[string]any `json:"arguments"`
	User         string         `json:"user"`
	Conversation string         `json:"conversation,omitempty"`
	// Credential is the fingerprint of the bearer token a forward_auth server's call
	// carried (tool.Credential.Fingerprint), never the token; User is its subject.
	Credential string `json:"credential,omitempty"`
	// Outcome is ok, tool_error, protocol_error, interrupted: the server stopped
	// during the call, which may have taken effect, and it was not sent again; or
	// no_credential: the server takes the user's token (forward_auth), the run had
	// none, and the call was not sent.
	Outcome  string        `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Options configure a Manager.
type Options struct {
	// Dir is the spec's directory: a stdio server's relative program and dir start there.
	Dir string
	// LookupEnv reads agentrun's environment for PATH and HOME; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// Audit receives every call; nil for none.
	Audit func(AuditRecord)
	// MaxSessions bounds the sessions each url server whose requests carry the user
	// keeps open, one per user (per distinct set of rendered headers):
	// DefaultMaxSessions when 0. IdleTimeout closes such a session once unused that
	// long: DefaultIdleTimeout when 0.
	MaxSessions int
	IdleTimeout time.Duration
}

// Manager holds the sessions with a spec's MCP servers.
type Manager struct {
	opts    Options
	servers map[string]*server
	order   []string
}

type server struct {
	spec spec.MCPServer
	// tools are as listed at start: what the agent offers does not change when a
	// restarted server lists others, or a user's session would list others.
	tools []*sdk.Tool
	// names are the allowed tools' names as the model sees them, by name on the server.
	names map[string]string
	// headers are a url server's headers rendered without a user, as the session
	// that listed the tools sent them.
	headers map[string]string
	// users are the sessions of a server whose requests carry the user; nil for
	// the others, whose calls share session.
	users *sessions

	mu      sync.Mutex
	session *sdk.ClientSession
	// restarted: a crashed stdio server is started again once, then its tools fail.
	restarted bool
}

// ServerError is a server that could not be started, or whose tools cannot all be
// offered to a model.
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string { return "MCP server " + e.Server + ": " + e.Err.Error() }
func (e *ServerError) Unwrap() error { return e.Err }

// Start connects to every server, lists its tools and names the allowed ones for the
// model. An error is a *ServerError; servers already connected are closed again.
func Start(ctx context.Context, servers []spec.MCPServer, opts Options) (*Manager, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	// Absolute, so a relative program is not resolved against the working directory twice.
	if dir, err := filepath.Abs(opts.Dir); err == nil {
		opts.Dir = dir
	}
	opts.MaxSessions = cmp.Or(opts.MaxSessions, DefaultMaxSessions)
	opts.IdleTimeout = cmp.Or(opts.IdleTimeout, DefaultIdleTimeout)
	m := &Manager{opts: opts, servers: map[string]*server{}}
	for _, sp := range servers {
		s, err := m.start(ctx, sp)
		if err != nil {
			m.Close()
			return nil, &ServerError{sp.Name, err}
		}
		m.servers[sp.Name] = s
		m.order = append(m.order, sp.Name)
	}
	if err := m.nameTools(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// start connects to a server and lists its tools. The session of a server whose
// requests carry the user is closed after listing: it had no user, and each user's
// calls go over a session of their own.
func (m *Manager) start(ctx context.Context, sp spec.MCPServer) (*server, error) {
	s := &server{spec: sp}
	if sp.URL != "" {
		// Rendered without a user: the run context is not there yet.
		headers, err := renderHeaders(sp, map[string]any{"user": map[string]any{}, "conversation": map[string]any{}})
		if err != nil {
			return nil, err
		}
		s.headers = headers
	}
	session, tools, err := m.connect(ctx, sp, s.headers)
	if err != nil {
		return nil, err
	}
	s.tools = tools
	if sp.RunContext() == 0 {
		s.session = session
		return s, nil
	}
	session.Close()
	s.users = newSessions(m.opts.MaxSessions, m.opts.IdleTimeout, func(ctx context.Context, headers map[string]string) (*sdk.ClientSession, error) {
		ctx, cancel := context.WithTimeout(ctx, connectTimeout(sp))
		defer cancel()
		return m.open(ctx, sp, headers)
	})
	return s, nil
}

func connectTimeout(sp spec.MCPServer) time.Duration {
	return cmp.Or(sp.ConnectTimeout.Duration, DefaultConnectTimeout)
}

// connect opens a session with a server and lists its tools, within the connect timeout.
func (m *Manager) connect(ctx context.Context, sp spec.MCPServer, headers map[string]string) (*sdk.ClientSession, []*sdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout(sp))
	defer cancel()
	session, err := m.open(ctx, sp, headers)
	if err != nil {
		return nil, nil, err
	}
	var tools []*sdk.Tool
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			session.Close()
			return nil, nil, fmt.Errorf("listing tools: %s", redact(err.Error(), &sp, headers))
		}
		tools = append(tools, tool)
	}
	for _, name := range sp.Tools {
		if !slices.ContainsFunc(tools, func(t *sdk.Tool) bool { return t.Name == name }) {
			session.Close()
			return nil, nil, fmt.Errorf("the allow list names %q, which the server does not offer", name)
		}
	}
	return session, tools, nil
}

// open opens a session (the initialize handshake) within ctx's deadline, the
// connect timeout. A url server's requests carry headers.
func (m *Manager) open(ctx context.Context, sp spec.MCPServer, headers map[string]string) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "agentrun", Version: "0.1.0"}, nil)
	session, err := client.Connect(ctx, m.transport(sp, headers), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("did not answer within %s", connectTimeout(sp))
		}
		return nil, fmt.Errorf("cannot connect: %s", redact(err.Error(), &sp, headers))
	}
	return session, nil
}

// nameTools gives every allowed tool the name the model sees. Chat APIs accept only
// ^[a-zA-Z0-9_-]{1,64}$ as a function name, and one tool named otherwise makes every
// model call of the run fail, while MCP allows dots, spaces and up to 128 characters.
// Such a tool is mapped to a valid name (spec.ModelToolNames) rather than refused,
// because refusing would take away a tool the agent was written to use for the sake
// of a name the model never needs to match; validate --live shows the mapped name.
// Two tools left with the same name are an error: the model could not tell them apart.
func (m *Manager) nameTools() error {
	type ref struct {
		s    *server
		tool string
	}
	var refs []ref
	var full []string
	for _, name := range m.order {
		s := m.servers[name]
		for _, t := range s.allowed() {
			refs = append(refs, ref{s, t.Name})
			full = append(full, s.spec.Prefix+t.Name)
		}
	}
	names := spec.ModelToolNames(full)
	first := map[string]int{}
	var clash *ServerError
	for i, name := range names {
		r := refs[i]
		if j, dup := first[name]; dup {
			if clash == nil {
				clash = &ServerError{r.s.spec.Name, &NameClash{Name: name, Tool: r.tool, OtherServer: refs[j].s.spec.Name, OtherTool: refs[j].tool}}
			} else {
				clash.Err.(*NameClash).More++
			}
			continue
		}
		first[name] = i
		if r.s.names == nil {
			r.s.names = map[string]string{}
		}
		r.s.names[r.tool] = name
	}
	if clash != nil {
		return clash
	}
	return nil
}

// NameClash is an allowed tool that the model would see under the name of another.
type NameClash struct {
	Name        string // the name both would have
	Tool        string // the tool, by its name on its server
	OtherServer string
	OtherTool   string
	More        int // further clashes like it
}

func (e *NameClash) Error() string {
	msg := fmt.Sprintf("its tool %q would be offered to the model as %q, like tool %q of MCP server %s", e.Tool, e.Name, e.OtherTool, e.OtherServer)
	if e.More > 0 {
		msg += fmt.Sprintf(" (and %d more tools alike)", e.More)
	}
	return msg + "; give one of the servers a prefix, or leave one tool out of its allow list (tools)"
}

// allowed are the server's tools the agent may use: its allow list, or all.
func (s *server) allowed() []*sdk.Tool {
	if s.spec.Tools == nil {
		return s.tools
	}
	var out []*sdk.Tool
	for _, t := range s.tools {
		if slices.Contains(s.spec.Tools, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// idempotent reports whether a call of the tool interrupted by a crash may be sent
// again: the spec says so, or the server's annotations say that repeating the call
// has no further effect (idempotentHint) or that the tool changes nothing (readOnlyHint).
func (s *server) idempotent(t *sdk.Tool) bool {
	if slices.Contains(s.spec.Idempotent, t.Name) {
		return true
	}
	return t.Annotations != nil && (t.Annotations.IdempotentHint || t.Annotations.ReadOnlyHint)
}

// renderHeaders renders a url server's headers in env, by their canonical names.
func renderHeaders(sp spec.MCPServer, env map[string]any) (map[string]string, error) {
	headers := make(map[string]string, len(sp.Headers))
	for k, t := range sp.Headers {
		v, err := t.Render(env)
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", k, err)
		}
		headers[http.CanonicalHeaderKey(k)] = v
	}
	return headers, nil
}

// transport builds the connection a server spec asks for: a url server's requests
// carry headers, all of a session's the same ones. A stdio server gets only the
// environment the spec declares, plus PATH and HOME: never agentrun's secrets.
func (m *Manager) transport(sp spec.MCPServer, headers map[string]string) sdk.Transport {
	if sp.URL != "" {
		return &sdk.StreamableClientTransport{Endpoint: sp.URL, HTTPClient: &http.Client{Transport: headerTransport{headers}}, DisableStandaloneSSE: true}
	}
	program := sp.Command[0]
	if strings.ContainsRune(program, filepath.Separator) && !filepath.IsAbs(program) {
		program = filepath.Join(m.opts.Dir, program)
	}
	cmd := exec.Command(program, sp.Command[1:]...)
	cmd.Dir = m.opts.Dir
	if sp.Dir != "" {
		cmd.Dir = sp.Dir
		if !filepath.IsAbs(sp.Dir) {
			cmd.Dir = filepath.Join(m.opts.Dir, sp.Dir)
		}
	}
	cmd.Env = []string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := m.opts.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range sp.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = nil // the server's own logging is not agentrun's output
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

type headerTransport struct{ headers map[string]string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	tracecontext.InjectHTTP(r.Context(), r.Header) // the run's trace continues in the server
	return http.DefaultTransport.RoundTrip(r)
}

// Tools are the servers' allowed tools for the runtime, named as the model sees them:
// with the server's prefix, and mapped when chat APIs would refuse that name.
func (m *Manager) Tools() []tool.ExternalTool { return m.Undeclared(nil) }

// Undeclared is Tools without the server tools that the spec declares itself
// (`mcp: {server, tool}`): a declared tool, maybe renamed, carries the spec's bind and
// accept rules, and its server tool must not be offered a second time without them.
func (m *Manager) Undeclared(declared []spec.Tool) []tool.ExternalTool {
	covered := map[[2]string]bool{}
	for _, t := range declared {
		if t.MCP != nil {
			covered[[2]string{t.MCP.Server, cmp.Or(t.MCP.Tool, t.Name)}] = true
		}
	}
	var out []tool.ExternalTool
	for _, name := range m.order {
		s := m.servers[name]
		for _, t := range s.allowed() {
			if covered[[2]string{name, t.Name}] {
				continue
			}
			out = append(out, tool.ExternalTool{Def: definition(s.names[t.Name], t), Impl: &serverTool{m: m, s: s, remote: t.Name, idempotent: s.idempotent(t)}})
		}
	}
	return out
}

// Offered is an allowed tool as the agent offers it.
type Offered struct {
	Server string
	Tool   string // its name on the server
	Name   string // the name the model sees: the prefix and Tool, unless that was mapped
	// Idempotent: a call interrupted by the server's crash is sent again after the restart.
	Idempotent bool
}

// Offered lists the allowed tools of every server, in the servers' order.
func (m *Manager) Offered() []Offered {
	var out []Offered
	for _, name := range m.order {
		s := m.servers[name]
		for _, t := range s.allowed() {
			out = append(out, Offered{Server: name, Tool: t.Name, Name: s.names[t.Name], Idempotent: s.idempotent(t)})
		}
	}
	return out
}

func definition(name string, t *sdk.Tool) model.ToolDef {
	params, _ := t.InputSchema.(map[string]any)
	if params == nil {
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return model.ToolDef{Name: name, Description: t.Description, Parameters: params}
}

// InputSchema returns the input schema a server gives for one of its tools.
func (m *Manager) InputSchema(server, tool string) (map[string]any, bool) {
	s := m.servers[server]
	if s == nil {
		return nil, false
	}
	for _, t := range s.tools {
		if t.Name == tool {
			params, _ := t.InputSchema.(map[string]any)
			return params, true
		}
	}
	return nil, false
}

// Register adds the mcp kind, for tools a spec declares one by one.
func (m *Manager) Register(r tool.Registry) {
	r["mcp"] = func(t *spec.Tool, _ string) (tool.Tool, error) {
		s := m.servers[t.MCP.Server]
		if s == nil {
			return nil, fmt.Errorf("MCP server %q is not connected", t.MCP.Server)
		}
		remote := cmp.Or(t.MCP.Tool, t.Name)
		i := slices.IndexFunc(s.tools, func(x *sdk.Tool) bool { return x.Name == remote })
		if i < 0 {
			return nil, fmt.Errorf("MCP server %s has no tool %q", s.spec.Name, remote)
		}
		return &serverTool{m: m, s: s, remote: remote, def: definition(t.Name, s.tools[i]), idempotent: s.idempotent(s.tools[i])}, nil
	}
}

// Close ends every session and stops every process the manager started.
func (m *Manager) Close() error {
	var errs []error
	for _, s := range m.servers {
		if s.users != nil {
			s.users.close()
		}
		s.mu.Lock()
		if s.session != nil {
			if err := s.session.Close(); err != nil && !errors.Is(err, context.Canceled) && !stoppedBySignal(err) {
				errs = append(errs, fmt.Errorf("MCP server %s: %v", s.spec.Name, err))
			}
			s.session = nil
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// stoppedBySignal reports a server process that ended on the signal Close sent it
// after it ignored its closed stdin: the expected end, not a failure.
func stoppedBySignal(err error) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && !exit.Exited()
}

// tool is one MCP tool as the runtime calls it.
type serverTool struct {
	m          *Manager
	s          *server
	remote     string
	def        model.ToolDef
	idempotent bool
}

var (
	_ tool.Tool       = (*serverTool)(nil)
	_ tool.Describer  = (*serverTool)(nil)
	_ tool.UserPasser = (*serverTool)(nil)
)

// PassesUser reports whether the server's requests carry the run context: its
// headers render the user or the conversation, or it forwards the user's credential.
func (t *serverTool) PassesUser() bool { return t.s.spec.RunContext() != 0 }

func (t *serverTool) Describe() tool.Info {
	return tool.Info{Description: t.def.Description, Parameters: t.def.Parameters}
}

func (t *serverTool) Call(ctx context.Context, in tool.Input) (string, error) {
	start := time.Now()
	var out, outcome string
	var err error
	if t.s.users != nil {
		out, outcome, err = t.callAs(ctx, in)
	} else {
		out, outcome, err = t.call(ctx, in.Args, in.IdempotencyKey)
	}
	if t.m.opts.Audit != nil {
		rec := AuditRecord{Time: start.UTC(), Server: t.s.spec.Name, Tool: t.remote, Arguments: in.Args, User: in.User.ID,
			Conversation: in.Conversation, Outcome: outcome, Duration: time.Since(start)}
		if t.s.spec.ForwardAuth {
			rec.Credential = in.User.Credential.Fingerprint()
		}
		if err != nil {
			rec.Error = err.Error()
		}
		t.m.opts.Audit(rec)
	}
	return out, err
}

// callAs sends a call over the session of the user's own headers, rendered in the
// run context with the user's bearer token as Authorization under forward_auth.
func (t *serverTool) callAs(ctx context.Context, in tool.Input) (string, string, error) {
	s := t.s
	headers, err := renderHeaders(s.spec, in.Env())
	if err != nil {
		return "", "protocol_error", fmt.Errorf("MCP server %s: %s", s.spec.Name, redact(err.Error(), &s.spec, s.headers))
	}
	if s.spec.ForwardAuth {
		if in.User.Credential.IsZero() {
			return "", "no_credential", fmt.Errorf("MCP server %s takes the bearer token of the user's request (forward_auth), and this run has none "+
				"(only runs agentrun serve starts for a request it authenticated have one; exec, Temporal workers and runs resumed after an approval have none); %s was not sent", s.spec.Name, t.remote)
		}
		headers["Authorization"] = "Bearer " + in.User.Credential.Token()
	}
	held, err := s.users.acquire(ctx, headers)
	if err != nil {
		return "", "protocol_error", fmt.Errorf("MCP server %s: %s", s.spec.Name, redact(err.Error(), &s.spec, headers))
	}
	args := in.Args
	if args == nil {
		args = map[string]any{} // servers validate arguments as an object
	}
	res, err := held.session.CallTool(ctx, callParams(t.remote, args, in.IdempotencyKey))
	var rpcErr *jsonrpc.Error
	s.users.release(held, err != nil && ctx.Err() == nil && !errors.As(err, &rpcErr))
	if err != nil {
		return "", "protocol_error", errors.New(redact(fmt.Sprintf("MCP server %s, tool %s: %v", s.spec.Name, t.remote, err), &s.spec, headers))
	}
	return answer(res)
}

func (t *serverTool) call(ctx context.Context, args map[string]any, key string) (string, string, error) {
	s := t.s
	s.mu.Lock()
	session := s.session
	s.mu.Unlock()
	if session == nil {
		return "", "protocol_error", fmt.Errorf("MCP server %s is not running", s.spec.Name)
	}
	if args == nil {
		args = map[string]any{} // servers validate arguments as an object
	}
	res, err := session.CallTool(ctx, callParams(t.remote, args, key))
	if t.died(ctx, err) {
		// A connection found closed before sending means the process died while idle:
		// the server never saw the call. Otherwise it may have acted before dying, and
		// sending the call again could do it twice (two orders, two payments).
		unsent := errors.Is(err, sdk.ErrConnectionClosed)
		session, err = t.restart(ctx, session)
		switch {
		case err != nil && unsent:
			return "", "protocol_error", fmt.Errorf("MCP server %s had stopped, and %v", s.spec.Name, err)
		case err != nil:
			return "", "interrupted", fmt.Errorf("the MCP server %s stopped during this call, and %v; whether %s took effect is unknown", s.spec.Name, err, t.remote)
		case !unsent && !t.idempotent:
			return "", "interrupted", fmt.Errorf("the MCP server %s stopped during this call and was restarted; whether %s took effect is unknown, so it was not sent again", s.spec.Name, t.remote)
		}
		res, err = session.CallTool(ctx, callParams(t.remote, args, key))
		if t.died(ctx, err) {
			t.stop(session)
			msg := fmt.Sprintf("MCP server %s, tool %s: it stopped again after one restart; its tools are unavailable for now", s.spec.Name, t.remote)
			if !t.idempotent && !errors.Is(err, sdk.ErrConnectionClosed) {
				return "", "interrupted", fmt.Errorf("%s, and whether %s took effect is unknown", msg, t.remote)
			}
			return "", "protocol_error", errors.New(msg)
		}
	}
	if err != nil {
		return "", "protocol_error", errors.New(redact(fmt.Sprintf("MCP server %s, tool %s: %v", s.spec.Name, t.remote, err), &s.spec, s.headers))
	}
	return answer(res)
}

// answer is a result as the model gets it: its text, or a tool error.
func answer(res *sdk.CallToolResult) (string, string, error) {
	text := contentText(res)
	if res.IsError {
		return "", "tool_error", errors.New(cmp.Or(text, "the tool failed"))
	}
	return text, "ok", nil
}

// MetaIdempotencyKey is the _meta key under which a call carries its idempotency
// key (tool.Input.IdempotencyKey): the same on every attempt of one call.
const MetaIdempotencyKey = "agentrun.dev/idempotency-key"

// callParams builds the parameters of one attempt. Each attempt gets its own _meta
// map, since the SDK adds the session's protocol version and client info to it.
func callParams(name string, args map[string]any, key string) *sdk.CallToolParams {
	params := &sdk.CallToolParams{Name: name, Arguments: args}
	if key != "" {
		params.Meta = sdk.Meta{MetaIdempotencyKey: key}
	}
	return params
}

// died reports whether a call failed because a stdio server's process is gone,
// rather than with an answer (a JSON-RPC error) from a live server.
func (t *serverTool) died(ctx context.Context, err error) bool {
	var rpcErr *jsonrpc.Error
	return err != nil && ctx.Err() == nil && len(t.s.spec.Command) > 0 && !errors.As(err, &rpcErr)
}

func (t *serverTool) stop(session *sdk.ClientSession) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	session.Close()
	if t.s.session == session {
		t.s.session = nil
	}
}

// restart starts a dead server again, once in the manager's life; the error says
// why it did not.
func (t *serverTool) restart(ctx context.Context, dead *sdk.ClientSession) (*sdk.ClientSession, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != dead { // another call restarted it already, or gave up on it
		if s.session == nil {
			return nil, errors.New("it is not running after its one restart; its tools are unavailable for now")
		}
		return s.session, nil
	}
	dead.Close()
	s.session = nil
	if s.restarted {
		return nil, errors.New("it was not restarted again after its one restart; its tools are unavailable for now")
	}
	s.restarted = true
	session, _, err := t.m.connect(ctx, s.spec, s.headers)
	if err != nil {
		return nil, fmt.Errorf("it could not be restarted: %v", err)
	}
	s.session = session
	return session, nil
}

// contentText joins a result's text parts, with notes for content a chat model cannot
// take. Structured content follows as JSON unless the text already carries it: a
// server may answer with the data there and only a stub ("ok") as text.
func contentText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[an image, %s]", c.MIMEType))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s]", c.MIMEType))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			}
		}
	}
	text := strings.Join(parts, "\n")
	if res.StructuredContent == nil {
		return text
	}
	data, value, err := normalize(res.StructuredContent)
	switch {
	case err != nil:
		return text
	case text == "":
		return data
	case carries(parts, value):
		return text
	}
	return text + "\n" + data
}

// normalize gives structured content as compact JSON, HTML characters kept as they
// are (a model reads them), and as the value that JSON decodes to.
func normalize(v any) (string, any, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", nil, err
	}
	data := strings.TrimSuffix(b.String(), "\n")
	var value any
	err := json.Unmarshal([]byte(data), &value)
	return data, value, err
}

// carries reports whether the text parts already hold the structured value: one of
// them is that JSON (in any formatting), or the value is a single string that is the
// text — as a server that sends {"content": text} beside the text does. A looser test
// (leaf values found somewhere in the text) would hide data: "1234" is inside "12345".
func carries(parts []string, value any) bool {
	for _, p := range parts {
		var v any
		if json.Unmarshal([]byte(p), &v) == nil && reflect.DeepEqual(v, value) {
			return true
		}
	}
	leaf, ok := singleString(value)
	return ok && (slices.Contains(parts, leaf) || leaf == strings.Join(parts, "\n"))
}

// singleString is the only leaf of a value when it has exactly one and it is a string.
func singleString(v any) (string, bool) {
	for {
		switch x := v.(type) {
		case string:
			return x, true
		case map[string]any:
			if len(x) != 1 {
				return "", false
			}
			for _, e := range x {
				v = e
			}
		case []any:
			if len(x) != 1 {
				return "", false
			}
			v = x[0]
		default:
			return "", false
		}
	}
}
