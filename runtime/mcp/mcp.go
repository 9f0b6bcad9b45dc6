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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/runtime"
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
	Outcome      string         `json:"outcome"` // ok, tool_error, protocol_error
	Error        string         `json:"error,omitempty"`
	Duration     time.Duration  `json:"duration_ns"`
}

// Options configure a Manager.
type Options struct {
	// Dir is the spec's directory: a stdio server's relative program and dir start there.
	Dir string
	// LookupEnv reads agentrun's environment for PATH and HOME; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// Audit receives every call; nil for none.
	Audit func(AuditRecord)
}

// Manager holds the sessions with a spec's MCP servers.
type Manager struct {
	opts    Options
	servers map[string]*server
	order   []string
}

type server struct {
	spec    spec.MCPServer
	mu      sync.Mutex
	session *sdk.ClientSession
	tools   []*sdk.Tool
	// restarted: a crashed stdio server is started again once, then its tools fail.
	restarted bool
}

// Start connects to every server and lists its tools. An error names the server
// that failed; servers already connected are closed again.
func Start(ctx context.Context, servers []spec.MCPServer, opts Options) (*Manager, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	// Absolute, so a relative program is not resolved against the working directory twice.
	if dir, err := filepath.Abs(opts.Dir); err == nil {
		opts.Dir = dir
	}
	m := &Manager{opts: opts, servers: map[string]*server{}}
	for _, sp := range servers {
		s := &server{spec: sp}
		if err := m.connect(ctx, s); err != nil {
			m.Close()
			return nil, fmt.Errorf("MCP server %s: %w", sp.Name, err)
		}
		m.servers[sp.Name] = s
		m.order = append(m.order, sp.Name)
	}
	return m, nil
}

func (m *Manager) connect(ctx context.Context, s *server) error {
	timeout := s.spec.ConnectTimeout.Duration
	if timeout == 0 {
		timeout = DefaultConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	transport, err := m.transport(s.spec)
	if err != nil {
		return err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentrun", Version: "0.1.0"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("did not answer within %s", timeout)
		}
		return fmt.Errorf("cannot connect: %v", err)
	}
	var tools []*sdk.Tool
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			session.Close()
			return fmt.Errorf("listing tools: %v", err)
		}
		tools = append(tools, tool)
	}
	for _, name := range s.spec.Tools {
		if !slices.ContainsFunc(tools, func(t *sdk.Tool) bool { return t.Name == name }) {
			session.Close()
			return fmt.Errorf("the allow list names %q, which the server does not offer", name)
		}
	}
	s.session, s.tools = session, tools
	return nil
}

// transport builds the connection a server spec asks for. A stdio server gets only
// the environment the spec declares, plus PATH and HOME: never agentrun's secrets.
func (m *Manager) transport(sp spec.MCPServer) (sdk.Transport, error) {
	if sp.URL != "" {
		headers := map[string]string{}
		for k, t := range sp.Headers {
			// Headers are rendered once per connection; user-bound values would
			// need a connection per user, which an agentrun process does not keep.
			v, err := t.Render(map[string]any{"user": map[string]any{}, "conversation": map[string]any{}})
			if err != nil {
				return nil, fmt.Errorf("header %s: %v", k, err)
			}
			headers[k] = v
		}
		return &sdk.StreamableClientTransport{Endpoint: sp.URL, HTTPClient: &http.Client{Transport: headerTransport{headers}}, DisableStandaloneSSE: true}, nil
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
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

type headerTransport struct{ headers map[string]string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Tools are the servers' allowed tools for the runtime, named with the server's prefix.
func (m *Manager) Tools() []runtime.ExternalTool {
	var out []runtime.ExternalTool
	for _, name := range m.order {
		s := m.servers[name]
		for _, t := range s.tools {
			if s.spec.Tools != nil && !slices.Contains(s.spec.Tools, t.Name) {
				continue
			}
			out = append(out, runtime.ExternalTool{Def: definition(s.spec.Prefix+t.Name, t), Impl: &tool{m: m, s: s, remote: t.Name}})
		}
	}
	return out
}

func definition(name string, t *sdk.Tool) runtime.ToolDef {
	params, _ := t.InputSchema.(map[string]any)
	if params == nil {
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return runtime.ToolDef{Name: name, Description: t.Description, Parameters: params}
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
func (m *Manager) Register(r runtime.Registry) {
	r["mcp"] = func(t *spec.Tool, _ string) (runtime.Tool, error) {
		s := m.servers[t.MCP.Server]
		if s == nil {
			return nil, fmt.Errorf("MCP server %q is not connected", t.MCP.Server)
		}
		remote := cmp.Or(t.MCP.Tool, t.Name)
		i := slices.IndexFunc(s.tools, func(x *sdk.Tool) bool { return x.Name == remote })
		if i < 0 {
			return nil, fmt.Errorf("MCP server %s has no tool %q", s.spec.Name, remote)
		}
		return &tool{m: m, s: s, remote: remote, def: definition(t.Name, s.tools[i])}, nil
	}
}

// Close ends every session and stops every process the manager started.
func (m *Manager) Close() error {
	var errs []error
	for _, s := range m.servers {
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
type tool struct {
	m      *Manager
	s      *server
	remote string
	def    runtime.ToolDef
}

var (
	_ runtime.Tool      = (*tool)(nil)
	_ runtime.Describer = (*tool)(nil)
)

func (t *tool) Describe() runtime.ToolInfo {
	return runtime.ToolInfo{Description: t.def.Description, Parameters: t.def.Parameters}
}

func (t *tool) Call(ctx context.Context, in runtime.ToolInput) (string, error) {
	start := time.Now()
	out, outcome, err := t.call(ctx, in.Args)
	if t.m.opts.Audit != nil {
		rec := AuditRecord{Time: start.UTC(), Server: t.s.spec.Name, Tool: t.remote, Arguments: in.Args, User: in.User.ID,
			Conversation: in.Conversation, Outcome: outcome, Duration: time.Since(start)}
		if err != nil {
			rec.Error = err.Error()
		}
		t.m.opts.Audit(rec)
	}
	return out, err
}

func (t *tool) call(ctx context.Context, args map[string]any) (string, string, error) {
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
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if t.died(ctx, err) {
		// The process died: start it again, once, and try the call again.
		if session, err = t.restart(ctx, session); err == nil {
			res, err = session.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
			if t.died(ctx, err) {
				t.stop(session)
				err = errors.New("it stopped again after one restart; its tools are unavailable for now")
			}
		}
	}
	if err != nil {
		return "", "protocol_error", fmt.Errorf("MCP server %s, tool %s: %v", s.spec.Name, t.remote, err)
	}
	text := contentText(res)
	if res.IsError {
		return "", "tool_error", errors.New(cmp.Or(text, "the tool failed"))
	}
	return text, "ok", nil
}

// died reports whether a call failed because a stdio server's process is gone,
// rather than with an answer (a JSON-RPC error) from a live server.
func (t *tool) died(ctx context.Context, err error) bool {
	var rpcErr *jsonrpc.Error
	return err != nil && ctx.Err() == nil && len(t.s.spec.Command) > 0 && !errors.As(err, &rpcErr)
}

func (t *tool) stop(session *sdk.ClientSession) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	session.Close()
	if t.s.session == session {
		t.s.session = nil
	}
}

func (t *tool) restart(ctx context.Context, dead *sdk.ClientSession) (*sdk.ClientSession, error) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != dead { // another call restarted it already
		return s.session, nil
	}
	dead.Close()
	s.session = nil
	if s.restarted {
		return nil, fmt.Errorf("it stopped again after one restart; its tools are unavailable for now")
	}
	s.restarted = true
	if err := t.m.connect(ctx, s); err != nil {
		return nil, fmt.Errorf("it stopped and could not be restarted: %v", err)
	}
	return s.session, nil
}

// contentText joins a result's text parts; without any, it is the structured
// content as JSON, or a note about content a chat model cannot take.
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
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	return strings.Join(parts, "\n")
}
