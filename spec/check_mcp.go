package spec

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// checkMCPServers checks the mcp_servers entries: each a process (command) or an
// endpoint (url) with the keys that apply to it, and the tools they allow.
func (c *checker) checkMCPServers() {
	seen := map[string]int{}
	allowed := map[string]string{} // tool name with the prefix → its server
	for i, srv := range c.spec.MCPServers {
		idx := strconv.Itoa(i)
		at := c.at("mcp_servers", idx)
		if first, dup := seen[srv.Name]; dup && srv.Name != "" {
			c.errorf(c.at("mcp_servers", idx, "name"), fmt.Sprintf("first declared at line %d", c.at("mcp_servers", strconv.Itoa(first)).pos.Line), "duplicate MCP server name %q", srv.Name)
		}
		seen[srv.Name] = i
		switch {
		case len(srv.Command) == 0 && srv.URL == "":
			c.errorf(at, "give command (a stdio server) or url (a streamable HTTP server)", "MCP server %q needs command or url", srv.Name)
		case len(srv.Command) > 0 && srv.URL != "":
			c.errorf(c.at("mcp_servers", idx, "url"), "a server is either a process (command) or an endpoint (url)", "MCP server %q has both command and url", srv.Name)
		case srv.URL != "":
			for _, key := range []string{"env", "dir"} {
				if c.at("mcp_servers", idx, key).node != nil {
					c.errorf(c.at("mcp_servers", idx, key).keyPos(c.file), "", "%s applies to stdio servers (command), not to url", key)
				}
			}
			c.checkURL(c.at("mcp_servers", idx, "url"), srv.URL)
			if host, plain := plainRemoteHTTP(srv.URL); srv.ForwardAuth && plain {
				c.warnf(c.at("mcp_servers", idx, "forward_auth"), "use https://, so that the tokens are encrypted on the way",
					"forward_auth sends users' bearer tokens to %s over plain http", host)
			}
		case len(srv.Headers) > 0:
			c.errorf(c.at("mcp_servers", idx, "headers").keyPos(c.file), "", "headers apply to url servers, not to command")
		}
		if srv.ForwardAuth && len(srv.Command) > 0 && srv.URL == "" {
			c.errorf(c.at("mcp_servers", idx, "forward_auth").keyPos(c.file), "a process agentrun starts gets no request to carry a token; forward_auth is for url servers",
				"forward_auth applies to url servers, not to command")
		}
		for _, k := range slices.Sorted(maps.Keys(srv.Env)) {
			if strings.Contains(srv.Env[k], "{{") {
				c.errorf(c.at("mcp_servers", idx, "env", k), "the environment is fixed when the server starts; use ${VAR} for values from agentrun's environment", "MCP server env is not a template")
			}
		}
		for _, r := range srv.Templates() {
			c.compileRendered(r, EnvMCPHeaders.Types(VarTypes{User: c.user}), append([]string{"mcp_servers", idx}, r.Path...))
		}
		if replaceRefused(srv.Prefix) != srv.Prefix {
			c.errorf(c.at("mcp_servers", idx, "prefix"), "use letters, digits, _ and -", "prefix %q has characters chat APIs refuse in tool names", srv.Prefix)
		}
		if srv.Tools == nil {
			c.openMCP = append(c.openMCP, srv.Name)
		}
		for j, t := range srv.Tools {
			name := srv.Prefix + t
			if other, dup := allowed[name]; dup {
				c.errorf(c.at("mcp_servers", idx, "tools", strconv.Itoa(j)), "", "tool %q is already allowed from MCP server %q", name, other)
			}
			allowed[name] = srv.Name
		}
		for j, t := range srv.Idempotent {
			if srv.Tools == nil || slices.Contains(srv.Tools, t) {
				continue
			}
			hint := suggest(t, srv.Tools)
			if bare, ok := strings.CutPrefix(t, srv.Prefix); ok && srv.Prefix != "" && slices.Contains(srv.Tools, bare) {
				hint = fmt.Sprintf("idempotent names tools by their names on the server, without the prefix: %q", bare)
			}
			c.errorf(c.at("mcp_servers", idx, "idempotent", strconv.Itoa(j)), cmp.Or(hint, "add it to the server's tools allow list, or remove it here"),
				"tool %q is not in MCP server %q's allow list", t, srv.Name)
		}
	}
	// Domains, intents, filters and fact rules name an MCP tool as the model sees it.
	c.mcpTools = mcpToolNames(c.spec.MCPServers)
}

// plainRemoteHTTP reports an http:// URL whose host is not this machine, and the host.
func plainRemoteHTTP(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return "", false
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return host, host != "localhost" && (ip == nil || !ip.IsLoopback())
}
