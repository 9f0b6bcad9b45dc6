package spec

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr"
)

// toolCommonKeys are the keys of a tools entry that belong to every kind. A field
// of Tool that is neither one of these nor a kind of toolKinds fails
// TestEveryToolFieldIsAKindOrCommon: a new kind must be added to toolKinds, where
// its configuration has to be a ToolKind.
var toolCommonKeys = []string{"name", "description", "parameters", "with", "bind", "accept", "accept_message",
	"collect", "timeout", "max_output", "enabled", "approval", "idempotent"}

func TestEveryToolFieldIsAKindOrCommon(t *testing.T) {
	kinds := ToolKindKeys()
	typ := reflect.TypeFor[Tool]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" || key == "" {
			continue
		}
		if !slices.Contains(kinds, key) && !slices.Contains(toolCommonKeys, key) {
			t.Errorf("Tool.%s (%s:) is neither a tool kind in toolKinds nor a key every kind shares", f.Name, key)
		}
	}
}

// Every template or expression a kind's configuration holds is one its
// declaration returns: otherwise the checker would not compile it, and a template
// that renders user.id would not make the FAQ cache keep that user's answers apart.
func TestToolKindsDeclareEveryTemplate(t *testing.T) {
	typ := reflect.TypeFor[Tool]()
	for _, k := range toolKinds {
		t.Run(k.key, func(t *testing.T) {
			tool := &Tool{}
			f := fieldByYAMLKey(typ, k.key)
			if f == nil {
				t.Fatalf("Tool has no field for the kind %s", k.key)
			}
			field := reflect.ValueOf(tool).Elem().FieldByIndex(f.Index)
			var reachable []reachableTemplate
			if field.Kind() == reflect.String {
				field.SetString("x") // builtin: its configuration is the name and with
				fillTemplates(reflect.ValueOf(&tool.With).Elem(), "with", &reachable)
			} else {
				fillTemplates(field, k.key, &reachable)
			}
			cfg := tool.Config()
			if cfg == nil || cfg.Kind() != k.key {
				t.Fatalf("Config() = %v, want the %s kind's configuration", cfg, k.key)
			}
			if missing := undeclared(cfg.Templates(), reachable); len(missing) > 0 {
				t.Errorf("the %s kind's Templates leaves out %v", k.key, missing)
			}
		})
	}
	t.Run("mcp server", func(t *testing.T) {
		srv := &MCPServer{}
		var reachable []reachableTemplate
		fillTemplates(reflect.ValueOf(srv).Elem(), "mcp_servers[0]", &reachable)
		if missing := undeclared(srv.Templates(), reachable); len(missing) > 0 {
			t.Errorf("MCPServer.Templates leaves out %v", missing)
		}
	})
}

// grpcTool is a made-up kind that renders its metadata but declares only its
// target: the check above must catch it.
type grpcTool struct {
	Target   Template             `yaml:"target"`
	Metadata map[string]*Template `yaml:"metadata"`
}

func (g *grpcTool) Kind() string { return "grpc" }
func (g *grpcTool) Templates() []Rendered {
	return []Rendered{{Path: []string{"grpc", "target"}, Template: &g.Target}}
}
func (g *grpcTool) Passes(*Spec) RunContext { return 0 }

func TestAKindThatForgetsATemplateIsCaught(t *testing.T) {
	g := &grpcTool{}
	var reachable []reachableTemplate
	fillTemplates(reflect.ValueOf(g).Elem(), "grpc", &reachable)
	missing := undeclared(g.Templates(), reachable)
	if !slices.Equal(missing, []string{"grpc.Metadata[k]"}) {
		t.Fatalf("undeclared = %v, want the metadata caught", missing)
	}
	// Without the check, the metadata's user.id is invisible: with a fixed target
	// the kind says its calls depend on no one.
	g.Target = Template{Source: "dns:///svc", Parts: []TemplatePart{{Text: "dns:///svc"}}}
	if refs := readsOf(g.Templates()) | g.Passes(nil); refs != 0 {
		t.Fatalf("the declared templates read %b", refs)
	}
}

type reachableTemplate struct {
	path string
	ptr  any // *Template or *Expr
}

// userID is a compiled template part that renders user.id.
var userID = func() TemplatePart {
	p, err := expr.Compile("user.id")
	if err != nil {
		panic(err)
	}
	return TemplatePart{Program: p}
}()

// fillTemplates sets every Template and Expr reachable from v through exported
// fields, pointers, maps and slices to one that reads user.id, and records where.
func fillTemplates(v reflect.Value, path string, out *[]reachableTemplate) {
	switch v.Type() {
	case reflect.TypeFor[Template]():
		tp := v.Addr().Interface().(*Template)
		*tp = Template{Source: "{{ user.id }}", Parts: []TemplatePart{userID}}
		*out = append(*out, reachableTemplate{path, tp})
		return
	case reflect.TypeFor[Expr]():
		e := v.Addr().Interface().(*Expr)
		*e = Expr{Source: "user.id", Program: userID.Program}
		*out = append(*out, reachableTemplate{path, e})
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillTemplates(v.Elem(), path, out)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fillTemplates(v.Field(i), path+"."+f.Name, out)
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.Pointer {
			return // a map of values holds no template a declaration could point to
		}
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem().Elem())
		fillTemplates(e.Elem(), path+"[k]", out)
		m.SetMapIndex(reflect.ValueOf("k"), e)
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		v.Set(s)
		fillTemplates(s.Index(0), path+"[0]", out)
	}
}

// undeclared lists the reachable templates the declaration does not return.
func undeclared(declared []Rendered, reachable []reachableTemplate) []string {
	var missing []string
	for _, r := range reachable {
		if !slices.ContainsFunc(declared, func(d Rendered) bool {
			return (d.Template != nil && any(d.Template) == r.ptr) || (d.Expr != nil && any(d.Expr) == r.ptr)
		}) {
			missing = append(missing, r.path)
		}
	}
	return missing
}

func fieldByYAMLKey(typ reflect.Type, key string) *reflect.StructField {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k == key {
			return &f
		}
	}
	return nil
}

// What a tool's calls depend on comes from its kind's declaration, bind and accept.
func TestToolRunContext(t *testing.T) {
	const get = "  - name: t\n    parameters: {type: object, properties: {q: {type: string}}}\n"
	tests := []struct {
		name string
		yaml string
		want RunContext
	}{
		{"an http tool with only the model's arguments", get + "    http: {url: \"https://example.com/menu/{{ args.q }}\"}\n", 0},
		{"the user in the URL", get + "    http: {url: \"https://example.com/users/{{ user.id }}/orders\"}\n", ReadsUser},
		{"the user in a header", get + "    http: {url: \"https://example.com/o\", headers: {X-User: \"{{ user.id }}\"}}\n", ReadsUser},
		{"a user attribute in the query", get + "    http: {url: \"https://example.com/o\", query: {tenant: \"{{ user.tenant }}\"}}\n", ReadsUser},
		{"the conversation in the body", get + "    http: {url: \"https://example.com/o\", method: POST, body: {c: [\"{{ conversation.id }}\"]}}\n", ReadsConversation},
		{"a bound parameter", "  - name: t\n    parameters: {type: object, properties: {}}\n    bind: {uid: user.id}\n    http: {url: \"https://example.com/o\"}\n", ReadsUser},
		{"an accept rule on seen entities", get + "    http: {url: \"https://example.com/o\"}\n    accept: 'args.q in seen(\"orders\")'\n    collect: {orders: 'result'}\n", ReadsSeen},
		{"a command, whose environment always holds the user", get + "    command: {run: [cat]}\n", ReadsUser | ReadsConversation},
		{"a builtin, handed the whole call", "  - builtin: calculator\n", ReadsUser | ReadsConversation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nname: a\nmodel: {name: m}\ninstructions: hi\ncontext: {user: [tenant]}\ntools:\n" + tt.yaml
			s := loadToolSpec(t, src)
			if got := s.ToolRunContext(&s.Tools[0]); got != tt.want {
				t.Fatalf("ToolRunContext = %b, want %b", got, tt.want)
			}
		})
	}
}

func TestMCPServerRunContext(t *testing.T) {
	tests := []struct {
		name string
		srv  string
		want RunContext
	}{
		{"a stdio server", "{name: s, command: [srv]}", 0},
		{"a url server with fixed headers", "{name: s, url: \"https://mcp.example.com\", headers: {X-Key: k}}", 0},
		{"a url server with the user in a header", "{name: s, url: \"https://mcp.example.com\", headers: {X-User: \"{{ user.id }}\"}}", ReadsUser},
		{"a url server forwarding the credential", "{name: s, url: \"https://mcp.example.com\", forward_auth: true}", ReadsUser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nname: a\nmodel: {name: m}\ninstructions: hi\nmcp_servers: [" + tt.srv + "]\ntools:\n  - name: t\n    mcp: {server: s}\n"
			s := loadToolSpec(t, src)
			if got := s.ToolRunContext(&s.Tools[0]); got != tt.want {
				t.Fatalf("ToolRunContext = %b, want %b", got, tt.want)
			}
		})
	}
}

func loadToolSpec(t *testing.T, src string) *Spec {
	t.Helper()
	l, err := NewLoader()
	if err != nil {
		t.Fatal(err)
	}
	s, diags := l.Load(filepath.Join(t.TempDir(), "agent.yaml"), []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return s
}
