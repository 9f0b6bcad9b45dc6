package serve

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime"
)

// Bounds of GET /v1/runs.
const (
	maxListedRuns = 100
	// maxInputPreview is how many characters of a run's input its listing shows.
	maxInputPreview = 200
)

// runSummary is a run as GET /v1/runs lists it.
type runSummary struct {
	ID           string             `json:"id"`
	Agent        string             `json:"agent"`
	Conversation string             `json:"conversation,omitempty"`
	Status       runStatus          `json:"status"`
	Created      time.Time          `json:"created"`
	Input        string             `json:"input"` // its first characters
	Events       int                `json:"events"`
	Stop         runtime.StopReason `json:"stop,omitempty"`
}

func (r *runRecord) summary() runSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := runSummary{ID: r.ID, Agent: r.Agent, Conversation: r.Conversation, Status: r.status, Created: r.Created,
		Input: r.input, Events: r.firstSeq + len(r.events) - 1}
	if r.result != nil {
		v.Stop = r.result.Stop
	}
	return v
}

// preview is the first maxInputPreview characters of s.
func preview(s string) string {
	s = strings.TrimSpace(s)
	n := 0
	for i := range s {
		if n == maxInputPreview {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// ofUser returns user's runs this process holds, newest first, of the agent and
// conversation when they are not "".
func (g *runRegistry) ofUser(user, agent, conversation string) []*runRecord {
	g.mu.Lock()
	var out []*runRecord
	for _, r := range g.runs {
		if r.User == user && (agent == "" || r.Agent == agent) && (conversation == "" || r.Conversation == conversation) {
			out = append(out, r)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b *runRecord) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(len(out), maxListedRuns)]
}

// listRuns answers GET /v1/runs: the principal's runs this process holds (runs
// finished more than a while ago are forgotten), newest first.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, p Principal) {
	q := r.URL.Query()
	recs := s.runs.ofUser(p.User.ID, q.Get("agent"), q.Get("conversation"))
	out := make([]runSummary, 0, len(recs))
	for _, rec := range recs {
		out = append(out, rec.summary())
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}
