package spec

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr/types"
	"go.yaml.in/yaml/v3"
)

// checker runs the semantic checks that a JSON schema cannot express: names are
// unique, references resolve, expressions and templates compile against their typed
// environments, regular expressions compile, numbers agree with each other.
type checker struct {
	*document
	spec   *Spec
	loader *Loader

	user      types.Map
	tools     map[string]int // declared tool → index in spec.Tools
	mcpTools  map[string]string
	openMCP   []string // MCP servers without an allow list: any tool name may come from them
	intents   map[string]int
	domains   map[string]int
	toolNames []string

	// ownTools and ownFilters count the tools and filters declared in this
	// checker's document; the rest came from skill packs, which were checked in
	// their own files.
	ownTools, ownFilters int
	// extraTools and extraKinds are what a skill's checker may refer to beyond its
	// own file: the agent's and the other skills' tools and collected kinds.
	extraTools map[string]bool
	extraKinds []string
	disabled   map[string]bool
	rules      *Rules // the intents' routing rules, compiled when a check needs them
}

func (c *checker) check() {
	s := c.spec
	c.user = userType(s.Context.User)
	c.setSources()
	c.checkContext()
	for _, m := range []struct {
		model *Model
		at    []string
	}{{&s.Model, []string{"model"}}, {s.Routing.Model, []string{"routing", "model"}}, {jmodel(s.Judge), []string{"judge", "model"}}} {
		if m.model != nil && m.model.Script != "" && m.model.Provider != ProviderScript {
			c.warnf(c.at(append(m.at, "script")...).keyPos(c.file), "set provider: script, or remove script", "script is used by the script provider only")
		}
	}
	c.checkModelAPI()
	c.checkModels()
	c.checkMCPServers()
	c.checkTools()
	c.checkAgents()
	c.checkDomains()
	c.checkIntents()
	c.checkRouting()
	c.checkMemory()
	c.checkGuards()
	c.checkBudget()
	c.checkJudge()
	c.checkApproval()
	c.checkFilters()
	c.checkKnowledge()
	c.checkWorkflow()
	c.checkOutputs()
	c.checkDurations()
	c.compileTemplate(&s.Instructions, EnvInstructions.Types(VarTypes{User: c.user}), c.at("instructions"))
	c.checkUnused()
}

func jmodel(j *Judge) *Model {
	if j == nil {
		return nil
	}
	return j.Model
}

func (c *checker) setSources() {
	src := func(tokens ...string) Source {
		at := c.at(tokens...)
		return Source{Pos: at.pos, Path: at.path}
	}
	s := c.spec
	for i := range s.Tools[:c.ownTools] {
		s.Tools[i].Source = src("tools", strconv.Itoa(i))
		if a := s.Tools[i].Approval; a != nil {
			a.Source = src("tools", strconv.Itoa(i), "approval")
		}
	}
	for i := range s.Skills {
		s.Skills[i].Source = src("skills", strconv.Itoa(i))
	}
	for i := range s.MCPServers {
		s.MCPServers[i].Source = src("mcp_servers", strconv.Itoa(i))
	}
	for i := range s.Domains {
		s.Domains[i].Source = src("domains", s.Domains[i].Name)
	}
	for i := range s.Intents {
		s.Intents[i].Source = src("intents", s.Intents[i].Name)
	}
	for i := range s.Filters[:c.ownFilters] {
		s.Filters[i].Source = src("filters", strconv.Itoa(i))
	}
	for i := range s.Memory.Facts.FromTools {
		s.Memory.Facts.FromTools[i].Source = src("memory", "facts", "from_tools", strconv.Itoa(i))
	}
	if s.Judge != nil {
		s.Judge.Source = src("judge")
	}
	if c.at("approval").node != nil {
		s.Approval.Source = src("approval")
	}
	if c.at("embeddings").node != nil {
		s.Embeddings.Source = src("embeddings")
	}
	if c.at("knowledge").node != nil {
		s.Knowledge.Source = src("knowledge")
	}
	for i := range s.Knowledge.Collections {
		s.Knowledge.Collections[i].Source = src("knowledge", "collections", s.Knowledge.Collections[i].Name)
	}
	for i := range s.Intents {
		in := &s.Intents[i]
		if in.Cache != nil {
			in.Cache.Source = src("intents", in.Name, "cache")
		}
		if in.RAG != nil {
			in.RAG.Source = src("intents", in.Name, "rag")
		}
	}
}

func (c *checker) checkContext() {
	seen := map[string]int{}
	for i, a := range c.spec.Context.User {
		at := c.at("context", "user", strconv.Itoa(i))
		if a == "id" {
			c.errorf(at, "user.id is always there; list only the other attributes", "%q is reserved", a)
		}
		if first, dup := seen[a]; dup {
			c.errorf(at, fmt.Sprintf("first listed at context.user[%d]", first), "duplicate user attribute %q", a)
		}
		seen[a] = i
	}
}

// shellCommand finds a shell asked to interpret a command string: the program (or
// the program that env starts) is a shell, and an option before its script is -c,
// a combined -ec, /c, /k or -Command. It returns the shell's index and that option.
func shellCommand(run []string) (int, string, bool) {
	i := 0
	if len(run) > 0 && filepath.Base(run[0]) == "env" {
		for i = 1; i < len(run) && (strings.HasPrefix(run[i], "-") || strings.Contains(run[i], "=")); i++ {
		}
	}
	if i >= len(run) || !slices.Contains(shells, strings.ToLower(filepath.Base(run[i]))) {
		return 0, "", false
	}
	for _, opt := range run[i+1:] {
		lower := strings.ToLower(opt)
		switch {
		case lower == "/c" || lower == "/k" || strings.HasPrefix(lower, "-command") || strings.HasPrefix(lower, "-encodedcommand"):
			return i, opt, true
		case strings.HasPrefix(lower, "--"):
			continue
		case strings.HasPrefix(lower, "-"):
			if strings.Contains(lower[1:], "c") {
				return i, opt, true
			}
		default:
			return 0, "", false // the script the shell runs: its arguments are its own
		}
	}
	return 0, "", false
}

// IsShell reports whether a program (by its base name) is a shell, which would run
// any command string it is given.
func IsShell(program string) bool {
	return slices.Contains(shells, strings.ToLower(filepath.Base(program)))
}

var shells = []string{"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "cmd", "cmd.exe", "powershell", "powershell.exe", "pwsh", "pwsh.exe"}

func (c *checker) checkTools() {
	s := c.spec
	c.tools = map[string]int{}
	for i := range s.Tools[:c.ownTools] {
		t := &s.Tools[i]
		idx := strconv.Itoa(i)
		at := c.at("tools", idx)
		if t.Name == "" && t.Builtin != "" {
			t.Name = t.Builtin
		}
		kinds := t.kinds()
		switch {
		case t.Name == "" && !c.failed[c.at("tools", idx, "name").path]:
			c.errorf(at, "every tool except a builtin needs a name the model calls it by", "tool needs a name")
		case t.Enabled != nil && !*t.Enabled:
			c.disabled[t.Name] = true // a disabled tool takes no name: another may have it
		case t.Name != "":
			if first, dup := c.tools[t.Name]; dup {
				c.errorf(c.nameAt(i), fmt.Sprintf("first declared at line %d", c.at("tools", strconv.Itoa(first)).pos.Line), "duplicate tool name %q", t.Name)
			} else if srv, dup := c.mcpTools[t.Name]; dup && t.MCP == nil {
				c.errorf(c.nameAt(i), "rename the tool, or give the server a prefix", "tool %q is also allowed from MCP server %q", t.Name, srv)
			} else {
				c.tools[t.Name] = i
				c.toolNames = append(c.toolNames, t.Name)
			}
		}
		switch len(kinds) {
		case 0:
			c.errorf(at, "add builtin, command, http or mcp", "tool %q does not say what runs it", t.Name)
		case 1:
		default:
			slices.SortFunc(kinds, func(a, b string) int { return comparePos(c.at("tools", idx, a).pos, c.at("tools", idx, b).pos) })
			c.errorf(c.at("tools", idx, kinds[1]).keyPos(c.file), "a tool has exactly one of builtin, command, http and mcp", "tool %q has both %s and %s", t.Name, kinds[0], kinds[1])
		}
		if t.With != nil && t.Builtin == "" {
			c.errorf(c.at("tools", idx, "with").keyPos(c.file), "with configures builtin tools", "with without builtin")
		}
		c.checkParameters(t, idx)
		c.checkBind(t, idx)
		vars := VarTypes{Args: toolArgsType(t), User: c.user}
		c.checkToolKind(t, idx, EnvToolTemplate.Types(vars))
		if t.Accept != nil {
			c.compileExpr(t.Accept, EnvAccept.Types(vars), true, c.at("tools", idx, "accept"))
		} else if t.AcceptMessage != "" {
			c.warnf(c.at("tools", idx, "accept_message").keyPos(c.file), "add accept, the rule the message explains", "accept_message without accept is never shown")
		}
		for _, k := range slices.Sorted(maps.Keys(t.Collect)) {
			c.compileExpr(t.Collect[k], EnvCollect.Types(vars), false, c.at("tools", idx, "collect", k))
		}
		c.checkToolApproval(t, idx, EnvApproval.Types(vars))
	}
	c.registerSkillTools()
	c.checkSeen()
}

// checkToolApproval compiles a tool's approval.when and approval.message. Any scalar
// decodes as an empty approval (every call), so one other than always is caught here,
// from the node, as is a list; the schema leaves both to this check (checkedShape).
func (c *checker) checkToolApproval(t *Tool, idx string, env exprEnv) {
	at := c.at("tools", idx, "approval")
	if n := resolveAlias(at.node); n != nil && n.Kind != yaml.MappingNode {
		if (n.Kind != yaml.ScalarNode || n.Value != "always") && !c.failed[at.path] {
			c.errorf(at, approvalScalarHint(n), "approval is `always` or a mapping with when and message")
		}
		return
	}
	if t.Approval == nil {
		return
	}
	c.compileExpr(t.Approval.When, env, true, c.at("tools", idx, "approval", "when"))
	c.compileTemplate(t.Approval.Message, env, c.at("tools", idx, "approval", "message"))
}

// approvalScalarHint says what the author of a wrong approval value probably meant.
func approvalScalarHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		switch strings.ToLower(n.Value) {
		case "true", "yes", "on":
			return "write approval: always to have a person decide every call"
		case "false", "no", "off":
			return "remove approval to let calls run without asking"
		}
		if hint := suggest(n.Value, []string{"always"}); hint != "" {
			return hint
		}
	}
	return "write approval: always, or a mapping such as {when: 'args.amount > 100', message: …}"
}

// registerSkillTools adds the tools skill packs brought, checked in their own files,
// and reports a name declared twice with both places.
func (c *checker) registerSkillTools() {
	s := c.spec
	for i := c.ownTools; i < len(s.Tools); i++ {
		t := &s.Tools[i]
		if t.Enabled != nil && !*t.Enabled {
			c.disabled[t.Name] = true
			continue
		}
		first, dup := c.tools[t.Name]
		if !dup {
			c.tools[t.Name] = i
			c.toolNames = append(c.toolNames, t.Name)
			continue
		}
		other := s.Tools[first]
		where := "this agent"
		if other.Skill != "" {
			where = "skill " + other.Skill
		}
		notes := []Note{{Pos: other.Pos, Message: "the other " + t.Name}}
		for _, ref := range s.Skills {
			if ref.Pack != nil && ref.Pack.Name == t.Skill {
				notes = append(notes, Note{Pos: ref.Pos, Message: "the skill as this agent uses it"})
			}
		}
		c.diags = append(c.diags, c.withEnd(Diagnostic{Severity: Error, Pos: t.Pos, Path: t.Path + ".name",
			Message: fmt.Sprintf("tool %q of skill %s is also declared by %s", t.Name, t.Skill, where),
			Hint:    "rename one of them; tool names are shared by the agent and all its skills",
			Notes:   notes}))
	}
}

func (c *checker) nameAt(i int) location {
	at := c.at("tools", strconv.Itoa(i), "name")
	if at.node == nil {
		at = c.at("tools", strconv.Itoa(i), "builtin")
	}
	return at
}

// toolArgsType is the type of `args` in a tool's expressions. Builtin and MCP tools
// bring their parameters at run time, so their arguments are an open map there.
func toolArgsType(t *Tool) types.Type {
	if t.Builtin != "" || t.MCP != nil {
		return types.TypeOf(map[string]any{})
	}
	return argsType(t.Parameters, t.Bind)
}

// checkParameters validates a tool's parameters against the JSON-schema metaschema,
// with each error at its place inside the parameters.
func (c *checker) checkParameters(t *Tool, idx string) {
	at := c.at("tools", idx, "parameters")
	if at.node == nil || c.failed[at.path] {
		return
	}
	if t.Builtin != "" || t.MCP != nil {
		kind := "builtin"
		if t.MCP != nil {
			kind = "MCP"
		}
		c.errorf(at.keyPos(c.file), "remove parameters", "%s tools bring their own parameters", kind)
		return
	}
	c.budget = maxJSONNodes
	value, _ := c.toJSON(at.node, at.path)
	params, _ := value.(map[string]any)
	t.Parameters = params
	if err := c.loader.schemas.meta.Validate(value); err != nil {
		c.schemaErrors(err, c.loader.schemas, []string{"tools", idx, "parameters"})
		return
	}
	if typ, ok := params["type"]; ok && typ != "object" {
		c.errorf(c.at("tools", idx, "parameters", "type"), "function-calling APIs take an object of named arguments", "parameters must have type object, not %v", typ)
	}
}

// checkBind makes sure bound parameters come from a known context key and stay out of
// the parameters the model sees, so the model can neither read nor forge them.
func (c *checker) checkBind(t *Tool, idx string) {
	keys := []string{"user.id", "conversation.id"}
	for _, a := range c.spec.Context.User {
		keys = append(keys, "user."+a)
	}
	props, _ := t.Parameters["properties"].(map[string]any)
	required, _ := t.Parameters["required"].([]any)
	if t.Builtin != "" && len(t.Bind) > 0 {
		c.errorf(c.at("tools", idx, "bind").keyPos(c.file), "bind fills parameters of command, http and mcp tools", "builtin tools take no bound parameters")
		return
	}
	for _, param := range slices.Sorted(maps.Keys(t.Bind)) {
		from := t.Bind[param]
		at := c.at("tools", idx, "bind", param)
		if !slices.Contains(keys, from) {
			hint := suggest(from, keys)
			if hint == "" {
				hint = "known keys: " + strings.Join(keys, ", ")
				if strings.HasPrefix(from, "user.") {
					hint += "; declare user attributes under context.user"
				}
			}
			c.errorf(at, hint, "unknown context key %q", from)
		}
		if _, exposed := props[param]; exposed {
			c.errorf(at.keyPos(c.file), fmt.Sprintf("remove %q from parameters.properties: bind fills it and the model must not see or set it", param), "bound parameter %q is also a model-visible parameter", param)
		} else if slices.Contains(required, any(param)) {
			c.errorf(at.keyPos(c.file), fmt.Sprintf("remove %q from parameters.required: bind fills it", param), "bound parameter %q is listed as required from the model", param)
		}
	}
}

// checkToolKind checks the configuration of the tool's kind, then compiles every
// template the kind declares it renders (ToolKind.Templates), at its place.
func (c *checker) checkToolKind(t *Tool, idx string, env exprEnv) {
	switch {
	case t.Command != nil:
		if i, opt, ok := shellCommand(t.Command.Run); ok {
			c.errorf(c.at("tools", idx, "command", "run", strconv.Itoa(i)), "list the program and its arguments directly; the arguments arrive as JSON on stdin",
				"command tools run without a shell: %s %s would interpret a command string", t.Command.Run[i], opt)
		}
		c.checkCommandProgram(t.Command.Run, idx)
	case t.HTTP != nil:
		h := t.HTTP
		c.checkURL(c.at("tools", idx, "http", "url"), h.URL.Source)
		c.checkRedirects(h, idx)
		if body := c.at("tools", idx, "http", "body"); body.node != nil {
			h.BodyTemplates, h.bodyPaths = map[string]*Template{}, map[string][]string{}
			v, _ := c.toJSON(body.node, body.path)
			h.Body = v // JSON values, as the schema saw them (no YAML timestamps)
			walkBody(h, v, nil, "")
		}
	case t.MCP != nil:
		c.checkMCPTool(t, idx)
	}
	if k := t.Config(); k != nil {
		for _, r := range k.Templates() {
			c.compileRendered(r, env, append([]string{"tools", idx}, r.Path...))
		}
	}
}

// compileRendered compiles a template or expression a kind declares, at tokens.
func (c *checker) compileRendered(r Rendered, env exprEnv, tokens []string) {
	if r.Template != nil {
		c.compileTemplate(r.Template, env, c.at(tokens...))
	} else if r.Expr != nil {
		c.compileExpr(r.Expr, env, false, c.at(tokens...))
	}
}

// checkMCPTool checks that an mcp tool's server exists and allows the tool.
func (c *checker) checkMCPTool(t *Tool, idx string) {
	at := c.at("tools", idx, "mcp", "server")
	server := c.spec.MCPServer(t.MCP.Server)
	if server == nil {
		var names []string
		for _, s := range c.spec.MCPServers {
			names = append(names, s.Name)
		}
		c.errorf(at, suggest(t.MCP.Server, names), "unknown MCP server %q", t.MCP.Server)
		return
	}
	remote := cmp.Or(t.MCP.Tool, t.Name)
	if server.Tools != nil && !slices.Contains(server.Tools, remote) {
		c.errorf(c.at("tools", idx, "mcp"), "add it to the server's tools allow list", "tool %q is not in MCP server %q's allow list", remote, server.Name)
	}
}

// checkURL rejects a URL whose fixed start is not http(s). Templates and unset
// variables may supply the start at run time, so those are not judged here.
func (c *checker) checkURL(at location, url string) {
	if at.node == nil || c.unset[at.node].vars != nil || strings.HasPrefix(url, "{{") || c.failed[at.path] {
		return
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		c.errorf(at, "write the whole address, like https://api.example.com/v1", "URL %q must start with http:// or https://", url)
	}
}

// walkBody finds the templates in the string leaves of an HTTP body, each with its
// path below the body as a key (rel) and as YAML keys (tokens); the checker
// compiles them with the kind's other templates.
func walkBody(h *HTTPTool, v any, tokens []string, rel string) {
	switch x := v.(type) {
	case string:
		h.BodyTemplates[rel] = &Template{Source: x}
		h.bodyPaths[rel] = tokens
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			walkBody(h, x[k], append(slices.Clip(tokens), k), joinKey(rel, k))
		}
	case []any:
		for i, e := range x {
			walkBody(h, e, append(slices.Clip(tokens), strconv.Itoa(i)), rel+"["+strconv.Itoa(i)+"]")
		}
	}
}

var seenCallRe = regexp.MustCompile(`seen\(\s*["']([^"']*)["']\s*\)`)

// checkSeen makes sure every seen("kind") in an accept rule, an approval's when or
// an approval's message names a kind some tool collects; otherwise the rule could
// never pass, and the condition never hold.
func (c *checker) checkSeen() {
	kinds := slices.Clone(c.extraKinds)
	for _, t := range c.spec.Tools {
		kinds = append(kinds, slices.Sorted(maps.Keys(t.Collect))...)
	}
	for i, t := range c.spec.Tools[:c.ownTools] {
		idx := strconv.Itoa(i)
		if t.Accept != nil && t.Accept.Program != nil {
			c.checkSeenIn(t.Accept.Source, kinds, c.at("tools", idx, "accept"))
		}
		if a := t.Approval; a != nil {
			if a.When != nil && a.When.Program != nil {
				c.checkSeenIn(a.When.Source, kinds, c.at("tools", idx, "approval", "when"))
			}
			if a.Message != nil && slices.ContainsFunc(a.Message.Parts, func(p TemplatePart) bool { return p.Program != nil }) {
				c.checkSeenIn(a.Message.Source, kinds, c.at("tools", idx, "approval", "message"))
			}
		}
	}
}

// checkSeenIn reports each seen("kind") in src, the compiled source at at, whose kind
// no tool collects.
func (c *checker) checkSeenIn(src string, kinds []string, at location) {
	for _, m := range seenCallRe.FindAllStringSubmatchIndex(src, -1) {
		kind := src[m[2]:m[3]]
		if slices.Contains(kinds, kind) {
			continue
		}
		at.pos, at.end = c.spanInScalar(at.node, m[2], m[3])
		hint := suggest(kind, kinds)
		if hint == "" {
			hint = fmt.Sprintf("declare collect: {%s: …} on the tool whose results reveal them", kind)
		}
		c.errorf(at, hint, "seen(%q): no tool collects %q", kind, kind)
	}
}

// toolRef reports a reference to a tool that is neither declared nor allowed from an
// MCP server. With an MCP server that lists no tools it can only warn.
func (c *checker) toolRef(name string, tokens ...string) {
	if _, ok := c.tools[name]; ok || c.extraTools[name] || c.spec.SubAgent(name) != nil {
		return // an agents entry is offered as a tool too
	}
	if _, ok := c.mcpTools[name]; ok {
		return
	}
	at := c.at(tokens...)
	if c.failed[at.path] {
		return
	}
	if c.disabled[name] {
		c.errorf(at, "enable it, or remove this reference", "tool %q is disabled (enabled: false)", name)
		return
	}
	candidates := append(slices.Clone(c.toolNames), slices.Sorted(maps.Keys(c.mcpTools))...)
	for _, a := range c.spec.Agents {
		candidates = append(candidates, a.Name)
	}
	if name == PlanToolName {
		c.errorf(at, "plan mode offers it without being listed: set plan on the agent or the intent", "%s is the built-in plan tool", name)
		return
	}
	if seen, ok := mcpRenamed(c.spec.MCPServers)[name]; ok {
		c.errorf(at, fmt.Sprintf("write %q, the name the model sees", seen), "MCP tool %q is offered to the model as %q: chat APIs refuse its name", name, seen)
		return
	}
	if len(c.openMCP) > 0 {
		c.warnf(at, suggest(name, candidates), "tool %q is not declared; it must come from MCP server %s", name, strings.Join(c.openMCP, " or "))
		return
	}
	c.errorf(at, suggest(name, candidates), "unknown tool %q", name)
}

func (c *checker) toolList(names []string, tokens ...string) {
	seen := map[string]bool{}
	for i, n := range names {
		t := append(slices.Clip(tokens), strconv.Itoa(i))
		if seen[n] {
			c.warnf(c.at(t...), "", "tool %q is listed twice", n)
		}
		seen[n] = true
		c.toolRef(n, t...)
	}
}

func (c *checker) checkDomains() {
	c.domains = map[string]int{}
	for i, d := range c.spec.Domains {
		c.domains[d.Name] = i
		c.toolList(d.Tools, "domains", d.Name, "tools")
	}
}

func (c *checker) checkIntents() {
	c.intents = map[string]int{}
	domainNames := make([]string, 0, len(c.spec.Domains))
	for _, d := range c.spec.Domains {
		domainNames = append(domainNames, d.Name)
	}
	llm := cmp.Or(c.spec.Routing.Recognizer, DefaultRecognizer) == RecognizerLLM
	for i := range c.spec.Intents {
		in := &c.spec.Intents[i]
		c.intents[in.Name] = i
		if in.Domain != "" {
			if _, ok := c.domains[in.Domain]; !ok {
				hint := suggest(in.Domain, domainNames)
				if hint == "" && len(domainNames) == 0 {
					hint = "declare it under domains"
				}
				c.errorf(c.at("intents", in.Name, "domain"), hint, "unknown domain %q", in.Domain)
			}
		}
		c.toolList(in.Tools, "intents", in.Name, "tools")
		for j, p := range in.Patterns {
			c.compileRegex(p, c.at("intents", in.Name, "patterns", strconv.Itoa(j)))
		}
		if in.Description == "" && llm {
			c.warnf(c.at("intents", in.Name).keyPos(c.file), "the classifier chooses intents by their descriptions", "intent %q has no description", in.Name)
		}
	}
}

func (c *checker) compileRegex(r *Regex, at location) {
	if r == nil || r.Source == "" || c.failed[at.path] {
		return
	}
	re, err := regexp.Compile(r.Source)
	if err != nil {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "error parsing regexp: ")
		c.errorf(at, "agentrun uses Go (RE2) syntax: no lookaround or backreferences", "invalid regular expression: %s", msg)
		return
	}
	r.Re = re
}

func (c *checker) intentNames() []string {
	out := make([]string, len(c.spec.Intents))
	for i, in := range c.spec.Intents {
		out[i] = in.Name
	}
	return out
}

func (c *checker) checkRouting() {
	r := c.spec.Routing
	names := c.intentNames()
	if r.Fallback != "" {
		if _, ok := c.intents[r.Fallback]; !ok {
			c.errorf(c.at("routing", "fallback"), suggest(r.Fallback, names), "fallback intent %q is not declared", r.Fallback)
		}
	}
	if r.Recognizer == RecognizerRules || r.Recognizer == RecognizerOff {
		for _, key := range []string{"min_confidence", "history", "model"} {
			if at := c.at("routing", key); at.node != nil {
				c.warnf(at.keyPos(c.file), "", "%s applies to the llm recognizer only", key)
			}
		}
	}
	if len(names) == 0 {
		if r.Recognizer == RecognizerLLM || r.Recognizer == RecognizerRules {
			c.errorf(c.at("routing", "recognizer"), "declare intents, or set recognizer: off", "recognizer %s needs intents", r.Recognizer)
		}
		return
	}
	if r.Fallback == "" && r.Recognizer != RecognizerOff {
		c.warnf(c.at("routing").keyPos(c.file), "name the intent unrecognised requests get, e.g. fallback: other", "routing.fallback is not set")
	}
	if r.Recognizer == RecognizerRules {
		for _, in := range c.spec.Intents {
			if len(in.Keywords) == 0 && len(in.Patterns) == 0 && in.Name != r.Fallback {
				c.warnf(c.at("intents", in.Name).keyPos(c.file), "add keywords or patterns", "intent %q has no rules the rules recognizer could match", in.Name)
			}
		}
	}
}

func (c *checker) checkMemory() {
	m := c.spec.Memory
	if m.URL != "" && m.Store != "" && c.unset[c.at("memory", "url").node].vars == nil && !urlNamesStore(m.URL, m.Store) {
		c.errorf(c.at("memory", "url"), map[StoreKind]string{StoreSQLite: "a sqlite store takes sqlite:path.db or sqlite:///abs/path.db",
			StoreRedis: "a redis store takes redis://host:6379/0 or rediss://…", StoreMemory: "a memory store takes memory:",
			StorePostgres: "a postgres store takes postgres://user@host:5432/db or postgresql://…"}[m.Store],
			"URL %q does not match store %s", m.URL, m.Store)
	}
	if m.URL == "" && (m.Store == StoreRedis || m.Store == StorePostgres) {
		c.warnf(c.at("memory", "store"), "set memory.url, or AGENTRUN_STORE when running", "%s store without url", m.Store)
	}
	for i := range m.Facts.FromTools {
		rule := &m.Facts.FromTools[i]
		idx := strconv.Itoa(i)
		tokens := []string{"memory", "facts", "from_tools", idx}
		var args types.Type = types.Any // an unknown tool is reported once, on `on`
		if t, ok := c.tools[rule.On]; ok {
			args = toolArgsType(&c.spec.Tools[t])
		} else if rule.On != "" {
			c.toolRef(rule.On, append(tokens, "on")...)
		}
		env := EnvFactRule.Types(VarTypes{Args: args, User: c.user})
		c.compileExpr(rule.When, env, true, c.at(append(tokens, "when")...))
		for _, op := range []struct {
			key string
			m   map[string]*Expr
		}{{"set", rule.Set}, {"append", rule.Append}} {
			for _, k := range slices.Sorted(maps.Keys(op.m)) {
				c.compileExpr(op.m[k], env, false, c.at(append(tokens, op.key, k)...))
			}
		}
		if len(rule.Set) == 0 && len(rule.Append) == 0 && len(rule.Delete) == 0 {
			c.errorf(c.at(tokens...), "add set, append or delete", "fact rule on %q does nothing", rule.On)
		}
	}
	if sum := m.Facts.Summary; sum != nil && sum.Fact != "" && len(sum.Keys) > 0 {
		c.errorf(c.at("memory", "facts", "summary", "keys").keyPos(c.file), "the summary is either one fact or a list of keys", "summary has both fact and keys")
	}
}

func urlNamesStore(url string, store StoreKind) bool {
	kind, err := StoreKindOf(url)
	return err == nil && kind == store
}

func (c *checker) checkGuards() {
	g := c.spec.Guards
	if g.MaxTurns > 0 && g.MaxToolRounds > g.MaxTurns {
		c.errorf(c.at("guards", "max_tool_rounds"), "each tool round takes a model turn: lower max_tool_rounds or raise max_turns",
			"max_tool_rounds (%d) is more than max_turns (%d) and can never be reached", g.MaxToolRounds, g.MaxTurns)
	}
}

// checkApproval checks the agent-level approval settings, which only tools with
// approval use.
func (c *checker) checkApproval() {
	at := c.at("approval")
	if at.node == nil || c.failed[at.path] {
		return
	}
	if t := c.at("approval", "timeout"); t.node != nil && !c.failed[t.path] && t.node.Kind == yaml.ScalarNode {
		if d, err := time.ParseDuration(t.node.Value); err == nil && d <= 0 { // an overflow is checkDurations's
			c.errorf(t, "give how long a paused run waits for decisions, like 24h or 30m", "must be more than 0, got %s", t.node.Value)
		}
	}
	if !slices.ContainsFunc(c.spec.Tools, func(t Tool) bool { return t.Approval != nil }) {
		c.warnf(at.keyPos(c.file), "add approval to the tools whose calls a person must decide, or remove these settings", "approval settings without any tool that needs approval")
	}
}

func (c *checker) checkJudge() {
	j := c.spec.Judge
	if j != nil && len(j.Criteria) == 0 {
		c.warnf(c.at("judge").keyPos(c.file), "list what a complete answer must do, e.g. \"Every question in the user's message is answered.\"", "judge has no criteria")
	}
}

func (c *checker) checkFilters() {
	names := map[string]bool{}
	for i := range c.spec.Filters[:c.ownFilters] {
		f := &c.spec.Filters[i]
		idx := strconv.Itoa(i)
		at := c.at("filters", idx)
		if f.Name != "" {
			if names[f.Name] {
				c.errorf(c.at("filters", idx, "name"), "", "duplicate filter name %q", f.Name)
			}
			names[f.Name] = true
		}
		action := f.EffectiveAction()
		allowed := f.On.Actions()
		known := allowed != nil
		hint := fmt.Sprintf("actions on %s: %s", f.On, joinValues(allowed, ", "))
		switch {
		case !known:
		case action == "":
			c.errorf(at, hint, "filter needs an action")
		case !f.On.Allows(action):
			if !c.failed[c.at("filters", idx, "action").path] {
				c.errorf(c.at("filters", idx, "action"), hint, "action %s does not apply on %s", action, f.On)
			}
		case action == ActionRedact && f.Redact == nil:
			c.errorf(at, "give the pattern to mask: redact: '\\b1\\d{10}\\b'", "redact action without a redact pattern")
		case action == ActionTruncate && f.MaxChars == 0:
			c.errorf(at, "", "truncate action without max_chars")
		}
		if len(f.Tools) > 0 && f.On != StageToolResult && known {
			c.errorf(c.at("filters", idx, "tools").keyPos(c.file), "", "tools applies to on: tool_result only")
		}
		c.toolList(f.Tools, "filters", idx, "tools")
		c.compileRegex(f.Redact, c.at("filters", idx, "redact"))
		if known {
			c.compileExpr(f.When, FilterEnv(f.On).Types(VarTypes{User: c.user}), true, c.at("filters", idx, "when"))
		}
		c.unusedFilterKeys(f, action, idx)
	}
}

// unusedFilterKeys warns about keys that the filter's action ignores.
func (c *checker) unusedFilterKeys(f *Filter, action FilterAction, idx string) {
	if action == "" {
		return
	}
	set := map[string]bool{"replacement": f.Replacement != "", "max_chars": f.MaxChars != 0, "message": f.Message != ""}
	for _, k := range FilterKeys {
		if set[k.Key] && !slices.Contains(k.Actions, action) {
			c.warnf(c.at("filters", idx, k.Key).keyPos(c.file), "", "%s has no effect with action %s (only with %s)", k.Key, action, joinOr(k.Actions))
		}
	}
}

// joinOr lists values for a message: "a", "a or b", "a, b or c".
func joinOr[T ~string](vs []T) string {
	if len(vs) < 2 {
		return joinValues(vs, "")
	}
	return joinValues(vs[:len(vs)-1], ", ") + " or " + string(vs[len(vs)-1])
}

// joinValues joins the values of a vocabulary for a message.
func joinValues[T ~string](vs []T, sep string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return strings.Join(out, sep)
}

// listedTools are the names the domains' and intents' tools lists name.
func (c *checker) listedTools() map[string]bool {
	used := map[string]bool{}
	for _, d := range c.spec.Domains {
		for _, t := range d.Tools {
			used[t] = true
		}
	}
	for _, in := range c.spec.Intents {
		for _, t := range in.Tools {
			used[t] = true
		}
	}
	return used
}

// checkUnused warns about declared tools that no intent can ever offer.
func (c *checker) checkUnused() {
	if len(c.spec.Intents) == 0 {
		return
	}
	used := c.listedTools()
	for i, t := range c.spec.Tools {
		if t.Name == "" || used[t.Name] || t.Enabled != nil && !*t.Enabled {
			continue
		}
		at := location{pos: t.Pos, path: t.Path}
		if i < c.ownTools {
			at = c.nameAt(i)
		}
		c.warnf(at, "list it under a domain or an intent, or remove it", "tool %q is not offered by any intent", t.Name)
	}
}

// checkDurations parses every duration again: the schema's pattern admits values
// such as 9999999999h that overflow, which would otherwise silently become zero.
func (c *checker) checkDurations() {
	paths := [][]string{{"model", "timeout"}, {"routing", "model", "timeout"}, {"judge", "model", "timeout"},
		{"memory", "ttl"}, {"guards", "tool_timeout"}, {"guards", "max_run_time"}, {"approval", "timeout"}}
	for i := range c.spec.Tools[:c.ownTools] {
		paths = append(paths, []string{"tools", strconv.Itoa(i), "timeout"})
	}
	for i := range c.spec.MCPServers {
		paths = append(paths, []string{"mcp_servers", strconv.Itoa(i), "connect_timeout"})
	}
	for _, p := range paths {
		at := c.at(p...)
		if at.node == nil || c.failed[at.path] || at.node.Kind != yaml.ScalarNode {
			continue
		}
		if _, err := time.ParseDuration(at.node.Value); err != nil {
			c.errorf(at, "use a number with a unit: 500ms, 30s, 2m, 1h30m", "invalid duration %q: out of range", at.node.Value)
		}
	}
}
