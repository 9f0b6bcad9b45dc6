package spec

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// checkAgents checks the agents entries, the intents that hand their runs to one,
// and plan mode. It runs after checkTools, when every tool name is known, and
// before domains and intents, whose tools lists may name agents.
func (c *checker) checkAgents() {
	s := c.spec
	seen := map[string]int{}
	for i := range s.Agents {
		a := &s.Agents[i]
		idx := strconv.Itoa(i)
		nameAt := c.at("agents", idx, "name")
		if nameAt.node != nil && !c.failed[nameAt.path] {
			c.checkAgentName(a.Name, nameAt, seen, i)
		}
		switch {
		case c.failed[a.Path]:
		case a.Spec != "" && a.A2A != nil:
			c.errorf(c.at("agents", idx, "a2a").keyPos(c.file), "an agent is a spec file run here (spec) or a remote agent (a2a), not both",
				"agent %q has both spec and a2a", a.Name)
		case a.A2A != nil:
			c.checkA2A(a, idx)
		case a.Spec == "":
			c.errorf(c.at("agents", idx), "give spec (the agent's spec file) or a2a (a remote A2A agent's url)", "agent %q needs spec or a2a", a.Name)
		case a.Description == "" && !c.hasErrorAt(c.at("agents", idx, "spec").path):
			// Loading took the sub-spec's own description when this entry had none.
			c.errorf(c.at("agents", idx), "the model chooses an agent by its description: add description here or in "+a.Spec,
				"agent %q has no description, and neither has %s", a.Name, a.Spec)
		}
	}
	c.checkAgentIntents()
	c.checkUnusedAgents()
	c.checkPlan()
}

// checkAgentName makes sure the model can call the agent by its name as a tool, and
// that no other tool has it.
func (c *checker) checkAgentName(name string, at location, seen map[string]int, i int) {
	clash := func(msg, note string, pos Pos) {
		d := Diagnostic{Severity: Error, Pos: at.pos, Path: at.path, Message: msg,
			Hint: "rename the agent or the tool: the model calls both by their names"}
		if pos.Line > 0 {
			d.Notes = []Note{{Pos: pos, Message: note}}
		}
		c.diags = append(c.diags, c.withEnd(d))
	}
	switch {
	case !ToolNameValid(name):
		c.errorf(at, "use 1 to 64 of A-Z, a-z, 0-9, _ and -: the model calls the agent as a tool by this name", "agent name %q is not a valid tool name", name)
		return
	case name == PlanToolName:
		c.errorf(at, "rename the agent", "%q is the name of the built-in plan tool", name)
	}
	if first, dup := seen[name]; dup {
		c.errorf(at, fmt.Sprintf("first declared at line %d", c.at("agents", strconv.Itoa(first)).pos.Line), "duplicate agent name %q", name)
		return
	}
	seen[name] = i
	if t, ok := c.tools[name]; ok {
		tool := c.spec.Tools[t]
		where := "this agent's"
		if tool.Skill != "" {
			where = "skill " + tool.Skill + "'s"
		}
		clash(fmt.Sprintf("agent %q has the name of %s tool %q", name, where, name), "the tool", tool.Pos)
	} else if srv, ok := c.mcpTools[name]; ok {
		clash(fmt.Sprintf("agent %q has the name of a tool allowed from MCP server %q", name, srv), "", Pos{})
	}
}

// hasErrorAt reports whether an error was reported at the YAML path.
func (c *checker) hasErrorAt(path string) bool {
	return slices.ContainsFunc(c.diags, func(d Diagnostic) bool { return d.Severity == Error && d.Path == path })
}

// agentKeys are the keys an intent that hands its runs to an agent may not set,
// each with what the agent brings instead.
var agentKeys = []struct{ key, brings string }{
	{"domain", "its own tools"}, {"tools", "its own tools"}, {"cache", "its own cache"},
	{"rag", "its own retrieval"}, {"plan", "its own plan mode"}, {"output", "its own output"},
}

// checkAgentIntents checks the intents with agent: the agent must be declared, and
// the intent sets nothing the agent's run would ignore.
func (c *checker) checkAgentIntents() {
	names := make([]string, len(c.spec.Agents))
	for i, a := range c.spec.Agents {
		names[i] = a.Name
	}
	for _, in := range c.spec.Intents {
		if in.Agent == "" {
			continue
		}
		at := c.at("intents", in.Name, "agent")
		if c.spec.SubAgent(in.Agent) == nil && !c.failed[at.path] {
			hint := suggest(in.Agent, names)
			switch {
			case hint != "":
			case len(names) == 0:
				hint = "declare it under agents"
			default:
				hint = "agents: " + strings.Join(names, ", ")
			}
			c.errorf(at, hint, "unknown agent %q", in.Agent)
		}
		for _, k := range agentKeys {
			if kat := c.at("intents", in.Name, k.key); kat.node != nil {
				c.errorf(kat.keyPos(c.file), "remove it: the agent brings "+k.brings,
					"intent %q hands its runs to agent %q, so it cannot set %s", in.Name, in.Agent, k.key)
			}
		}
	}
}

// checkUnusedAgents warns about agents no intent offers or hands runs to, as
// checkUnused does for tools.
func (c *checker) checkUnusedAgents() {
	if len(c.spec.Intents) == 0 {
		return
	}
	used := c.listedTools()
	for _, in := range c.spec.Intents {
		used[in.Agent] = true
	}
	for i, a := range c.spec.Agents {
		if a.Name == "" || used[a.Name] {
			continue
		}
		c.warnf(c.at("agents", strconv.Itoa(i), "name"), "list it in the tools of a domain or an intent, name it in an intent's agent, or remove it",
			"agent %q is not offered by any intent", a.Name)
	}
}

// checkPlan records where plan mode is set and, when it is on anywhere, refuses a
// tool that would take the built-in plan tool's name.
func (c *checker) checkPlan() {
	s := c.spec
	var on []Note
	if s.Plan != nil {
		at := c.at("plan").keyPos(c.file)
		s.Plan.Source = Source{Pos: at.pos, Path: at.path}
		on = append(on, Note{Pos: at.pos, Message: "plan mode is on here"})
	}
	for i := range s.Intents {
		in := &s.Intents[i]
		if in.Plan != nil {
			at := c.at("intents", in.Name, "plan").keyPos(c.file)
			in.Plan.Source = Source{Pos: at.pos, Path: at.path}
			on = append(on, Note{Pos: at.pos, Message: "plan mode is on here"})
		}
	}
	if len(on) == 0 {
		return
	}
	const hint = "rename the tool: plan mode offers its own " + PlanToolName + " tool"
	for i, t := range s.Tools {
		if t.Name != PlanToolName || t.Enabled != nil && !*t.Enabled {
			continue
		}
		at := location{pos: t.Pos, path: t.Path + ".name"}
		if i < c.ownTools {
			at = c.nameAt(i)
		}
		c.diags = append(c.diags, c.withEnd(Diagnostic{Severity: Error, Pos: at.pos, Path: at.path, Hint: hint, Notes: on[:1],
			Message: fmt.Sprintf("tool %q has the name of the built-in plan tool", t.Name)}))
	}
	for i, srv := range s.MCPServers {
		for j, t := range srv.Tools {
			if srv.Prefix+t != PlanToolName {
				continue
			}
			at := c.at("mcp_servers", strconv.Itoa(i), "tools", strconv.Itoa(j))
			c.diags = append(c.diags, c.withEnd(Diagnostic{Severity: Error, Pos: at.pos, Path: at.path, Notes: on[:1],
				Hint:    "give the server a prefix: plan mode offers its own " + PlanToolName + " tool",
				Message: fmt.Sprintf("MCP tool %q has the name of the built-in plan tool", PlanToolName)}))
		}
	}
}

// headerName is an HTTP header's name (RFC 9110's token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// checkA2A checks a remote agent's entry: a description (its card is not read
// here), a URL agentrun can reach without credentials in it, and auth that does
// not go out in the clear.
func (c *checker) checkA2A(a *SubAgent, idx string) {
	if a.Description == "" {
		c.errorf(c.at("agents", idx), "describe what the agent does: its card is read only when it is first called, and the model chooses agents by their descriptions",
			"remote agent %q has no description", a.Name)
	}
	at := c.at("agents", idx, "a2a", "url")
	if at.node == nil || c.failed[at.path] || c.unset[at.node].vars != nil {
		return
	}
	u, err := url.Parse(a.A2A.URL)
	switch {
	case err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https":
		c.errorf(at, "write the agent's base URL, like https://agents.example.com/refunds (its card is at …/.well-known/agent-card.json)",
			"remote agent URL %q is not an http:// or https:// URL with a host", a.A2A.URL)
		return
	case u.User != nil:
		c.errorf(at, "take the token from the environment with auth: {token_env: NAME}", "remote agent URL %q holds credentials", u.Redacted())
		return
	}
	auth := a.A2A.Auth
	if auth == nil {
		return
	}
	if host, plain := plainRemoteHTTP(a.A2A.URL); plain {
		c.warnf(c.at("agents", idx, "a2a", "auth").keyPos(c.file), "use https://, so that the token is encrypted on the way",
			"remote agent %q gets the token in %s over plain http to %s", a.Name, auth.TokenEnv, host)
	}
	if auth.Header != "" && !headerName.MatchString(auth.Header) {
		c.errorf(c.at("agents", idx, "a2a", "auth", "header"), "use a header name such as X-API-Key", "%q is not an HTTP header name", auth.Header)
	}
}
