package serve

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
)

// Bounds of the model requests runs keep for the console: a request's messages
// larger than maxKeptRequest are not kept, nor any once a run has kept
// maxKeptRequests bytes of them, or the server's runs maxKeptBytes.
const (
	maxKeptRequest  = 1 << 20
	maxKeptRequests = 4 << 20
	maxKeptBytes    = 256 << 20
)

// keptRequest is a model request's messages, as JSON, kept with its run.
type keptRequest struct {
	purpose  runtime.Purpose
	offered  []string
	messages json.RawMessage
}

// keepsRequests: the runs keep their model requests' messages, which the console
// shows (Options.UI and Options.Dev). Elsewhere nobody asks for them, and they
// would hold every run's conversation in memory for as long as the run is kept.
func (s *Server) keepsRequests() bool { return s.opts.UI || s.opts.Dev }

// keepRequests makes rec keep its model requests when the server's runs do.
func (s *Server) keepRequests(rec *runRecord) {
	rec.keepRequests, rec.keptBytes = s.keepsRequests(), &s.keptBytes
}

// sentJSON is messages as JSON, the bytes of their files and the providers'
// opaque reasoning blocks left out (a file's size stays), or nil when it is
// larger than maxKeptRequest.
func sentJSON(messages []model.Message) json.RawMessage {
	size := 0
	for _, m := range messages {
		size += len(m.Content)
		for _, c := range m.ToolCalls {
			size += len(c.Arguments)
		}
	}
	if size > maxKeptRequest {
		return nil // not worth encoding to find out
	}
	out := make([]model.Message, len(messages))
	for i, m := range messages {
		if m.Reasoning != nil {
			rs := *m.Reasoning
			rs.Blocks = nil
			m.Reasoning = &rs
		}
		if len(m.Parts) > 0 {
			parts := make([]model.Part, len(m.Parts))
			for j, p := range m.Parts {
				if p.Size == 0 {
					p.Size = int64(len(p.Data))
				}
				p.Data = nil
				parts[j] = p
			}
			m.Parts = parts
		}
		out[i] = m
	}
	data, err := json.Marshal(out)
	if err != nil || len(data) > maxKeptRequest {
		return nil
	}
	return data
}

// keepRequestLocked keeps the messages of the model request that is event seq.
func (r *runRecord) keepRequestLocked(seq int, e runtime.Event, messages json.RawMessage) {
	if messages == nil || r.requestBytes+len(messages) > maxKeptRequests {
		return
	}
	if r.keptBytes.Add(int64(len(messages))) > maxKeptBytes {
		r.keptBytes.Add(-int64(len(messages)))
		return
	}
	if r.requests == nil {
		r.requests = map[int]keptRequest{}
	}
	r.requests[seq] = keptRequest{purpose: e.Purpose, offered: e.Offered, messages: messages}
	r.requestBytes += len(messages)
}

// forgetRequestsLocked drops the requests kept before sequence number before,
// giving their bytes back to the server's budget.
func (r *runRecord) forgetRequestsLocked(before int) {
	for seq, k := range r.requests {
		if seq < before {
			r.requestBytes -= len(k.messages)
			r.keptBytes.Add(-int64(len(k.messages)))
			delete(r.requests, seq)
		}
	}
}

func (r *runRecord) request(seq int) (keptRequest, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.requests[seq]
	return k, ok
}

// getRequest answers GET /v1/runs/{id}/requests/{seq}: the messages of the model
// request that is the run's event seq.
func (s *Server) getRequest(w http.ResponseWriter, r *http.Request, p Principal) {
	rec := s.runs.get(r.PathValue("id"), p.User.ID)
	if rec == nil {
		writeError(w, http.StatusNotFound, "run_not_found", "no such run")
		return
	}
	seq, err := strconv.Atoi(r.PathValue("seq"))
	if err != nil || seq < 1 {
		writeError(w, http.StatusBadRequest, "invalid_request", "seq must be the id of one of the run's events")
		return
	}
	k, ok := rec.request(seq)
	if !ok {
		writeError(w, http.StatusNotFound, "request_not_kept",
			"no model request's messages are kept for that event: they are kept under serve --ui and agentrun dev, for model requests of runs this process holds, within a few MiB per run")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"seq": seq, "purpose": k.purpose, "offered": k.offered, "messages": k.messages})
}
