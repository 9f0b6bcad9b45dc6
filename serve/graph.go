package serve

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/runtime/graph"
)

// getGraph answers GET /v1/agents/{name}/graph: the agent drawn as data, as
// `agentrun graph --format json` prints it. It holds nothing of any user.
func (s *Server) getGraph(w http.ResponseWriter, r *http.Request, _ Principal) {
	a, done := s.servedAgent(w, r.PathValue("name"))
	if a == nil {
		return
	}
	defer done()
	writeJSON(w, http.StatusOK, graph.Build(a.Agent.Agent, a.Spec))
}

// servedAgent is the named agent, counted as in use until done is called, or
// nil when there is none (answered 404).
func (s *Server) servedAgent(w http.ResponseWriter, name string) (a *served, done func()) {
	a, done = s.agent(name)
	if a == nil {
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("no agent %q; this server has %s", name, strings.Join(s.agentNames(), ", ")))
	}
	return a, done
}
