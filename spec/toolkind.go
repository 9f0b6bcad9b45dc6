package spec

import (
	"maps"
	"slices"
	"strings"
)

// RunContext is a set of what a run carries about who is asking: the user, the
// conversation, the entities the conversation revealed. What reads any of it may
// differ from one user to another.
type RunContext uint8

const (
	ReadsUser RunContext = 1 << iota
	ReadsConversation
	ReadsSeen
)

// Rendered is one template or expression a tool kind evaluates on each call, with
// its place below the entry that holds it (["http", "headers", "X-User-Id"] below a
// tools entry).
type Rendered struct {
	Path     []string
	Template *Template // set for a template
	Expr     *Expr     // set for an expression
	// InPath: the template's values land in a URL's path, where the kind refuses
	// one that would make a segment empty, "." or "..".
	InPath bool
}

// Reads is what of the run context the template or expression reads.
func (r Rendered) Reads() RunContext {
	if r.Template != nil {
		return r.Template.Reads()
	}
	return r.Expr.Reads()
}

// ToolKind is the configuration of one tool kind: what a tools entry holds under
// the kind's key (http:, command:, mcp:, builtin:). It declares once what a call
// renders and what of the run it hands on; the checker compiles exactly the
// templates it declares, Compile derives from it whether a call depends on who
// asked (the FAQ cache's scope rule), and the assembly finds in it the user
// attributes that go into URLs. Tool.Config returns it, so a kind whose
// configuration does not say cannot be a kind; a test walks every template field of
// each kind's configuration and fails when Templates leaves one out.
type ToolKind interface {
	// Kind is the kind's key in a tools entry.
	Kind() string
	// Templates are the templates and expressions a call evaluates from the
	// entry's own configuration, with their paths below the tools entry.
	Templates() []Rendered
	// Passes is what of the run context a call hands on besides what Templates
	// render (a command's environment always holds the user's and the
	// conversation's ids). s is the spec, for a kind that reaches through another
	// of its entries (an mcp tool's server).
	Passes(s *Spec) RunContext
}

// BuiltinTool is a builtin tool's configuration: its name and with. A builtin is
// Go code handed the whole call (the user and the conversation included), so it is
// taken to pass them on.
type BuiltinTool struct {
	Name string
	With map[string]any
}

func (BuiltinTool) Kind() string             { return "builtin" }
func (BuiltinTool) Templates() []Rendered    { return nil }
func (BuiltinTool) Passes(*Spec) RunContext  { return ReadsUser | ReadsConversation }
func (*CommandTool) Kind() string            { return "command" }
func (*CommandTool) Passes(*Spec) RunContext { return ReadsUser | ReadsConversation }
func (*HTTPTool) Kind() string               { return "http" }
func (*HTTPTool) Passes(*Spec) RunContext    { return 0 }
func (*MCPTool) Kind() string                { return "mcp" }
func (*MCPTool) Templates() []Rendered       { return nil }

// Templates are the values of the program's environment.
func (c *CommandTool) Templates() []Rendered {
	return templateMap(c.Env, "command", "env")
}

// Templates are the URL, the headers, the query values and the body's string
// leaves (once the checker found them: BodyTemplates).
func (h *HTTPTool) Templates() []Rendered {
	out := []Rendered{{Path: []string{"http", "url"}, Template: &h.URL, InPath: true}}
	out = append(out, templateMap(h.Headers, "http", "headers")...)
	out = append(out, templateMap(h.Query, "http", "query")...)
	for _, k := range slices.Sorted(maps.Keys(h.BodyTemplates)) {
		out = append(out, Rendered{Path: append([]string{"http", "body"}, h.bodyPaths[k]...), Template: h.BodyTemplates[k]})
	}
	return out
}

// Passes is what the tool's server hands on (see MCPServer.RunContext).
func (m *MCPTool) Passes(s *Spec) RunContext {
	if srv := s.MCPServer(m.Server); srv != nil {
		return srv.RunContext()
	}
	return 0
}

// Templates are the server's headers, with their paths below the mcp_servers
// entry.
func (srv *MCPServer) Templates() []Rendered { return templateMap(srv.Headers, "headers") }

// RunContext is what of the run context the server's requests carry: what its
// headers render, and the user's credential when it forwards it. A stdio server
// gets no request to carry either.
func (srv *MCPServer) RunContext() RunContext {
	if srv.URL == "" {
		return 0
	}
	refs := readsOf(srv.Templates())
	if srv.ForwardAuth {
		refs |= ReadsUser
	}
	return refs
}

// MCPServer returns the named MCP server, or nil.
func (s *Spec) MCPServer(name string) *MCPServer {
	for i := range s.MCPServers {
		if s.MCPServers[i].Name == name {
			return &s.MCPServers[i]
		}
	}
	return nil
}

func templateMap(m map[string]*Template, path ...string) []Rendered {
	out := make([]Rendered, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, Rendered{Path: append(slices.Clip(path), k), Template: m[k]})
	}
	return out
}

func readsOf(rs []Rendered) RunContext {
	var refs RunContext
	for _, r := range rs {
		refs |= r.Reads()
	}
	return refs
}

// toolKinds is every tool kind, in the order the checker names them: a kind's key
// in a tools entry and its configuration there (nil when the entry has none).
var toolKinds = []struct {
	key    string
	config func(t *Tool) ToolKind
}{
	{"builtin", func(t *Tool) ToolKind {
		if t.Builtin == "" {
			return nil
		}
		return BuiltinTool{Name: t.Builtin, With: t.With}
	}},
	{"command", func(t *Tool) ToolKind { return orNil(t.Command) }},
	{"http", func(t *Tool) ToolKind { return orNil(t.HTTP) }},
	{"mcp", func(t *Tool) ToolKind { return orNil(t.MCP) }},
}

// orNil is c as a ToolKind, or a nil ToolKind for a nil pointer.
func orNil[T any, P interface {
	*T
	ToolKind
}](c P) ToolKind {
	if c == nil {
		return nil
	}
	return c
}

// ToolKindKeys lists the keys of every tool kind.
func ToolKindKeys() []string {
	out := make([]string, len(toolKinds))
	for i, k := range toolKinds {
		out[i] = k.key
	}
	return out
}

// Config is the configuration of the kind that runs the tool; nil if none is set.
func (t *Tool) Config() ToolKind {
	if cs := t.configs(); len(cs) > 0 {
		return cs[0]
	}
	return nil
}

// Kind names what runs the tool: builtin, command, http or mcp ("" if none is set).
func (t *Tool) Kind() string {
	if c := t.Config(); c != nil {
		return c.Kind()
	}
	return ""
}

// configs are the configurations of every kind the entry sets (one in a valid
// spec).
func (t *Tool) configs() []ToolKind {
	var out []ToolKind
	for _, k := range toolKinds {
		if c := k.config(t); c != nil {
			out = append(out, c)
		}
	}
	return out
}

func (t *Tool) kinds() []string {
	var ks []string
	for _, c := range t.configs() {
		ks = append(ks, c.Kind())
	}
	return ks
}

// RunContext is what of the run context the tool's calls depend on: what its
// kind's templates render and what the kind passes on (its ToolKind), the
// parameters bind fills, and what its accept rule reads. Zero means every user's
// call with the same arguments does the same.
func (s *Spec) ToolRunContext(t *Tool) RunContext {
	var refs RunContext
	if c := t.Config(); c != nil {
		refs = readsOf(c.Templates()) | c.Passes(s)
	}
	for _, from := range t.Bind {
		switch {
		case strings.HasPrefix(from, "user."):
			refs |= ReadsUser
		case strings.HasPrefix(from, "conversation."):
			refs |= ReadsConversation
		default:
			refs |= ReadsUser | ReadsConversation // an unknown key is the checker's; never taken as none
		}
	}
	return refs | t.Accept.Reads()
}
