package serve

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
)

// A client that retries a request whose run already called a tool would call
// it again: its first request timed out, or the connection broke, and the run
// went on. A request with an Idempotency-Key is run once per user and key: a
// repeat follows the first run — waits for it, or streams it from the start —
// and answers what it answered.

// IdempotencyHeader names the request header that makes a request that starts
// a run safe to repeat.
const IdempotencyHeader = "Idempotency-Key"

// maxIdempotencyKey bounds a key's length.
const maxIdempotencyKey = 255

// runKey is a request's claim to its run: the user and their key, and a digest
// of what was asked, so the key reused for another request is told apart.
type runKey struct {
	user, key string
	digest    [sha256.Size]byte
}

// requestKey reads the Idempotency-Key of r, a request to endpoint with body:
// false when the key is malformed (the answer is written).
func requestKey(r *http.Request, user, endpoint string, body any, fail func(status int, code, msg string)) (*runKey, bool) {
	key := r.Header.Get(IdempotencyHeader)
	if len(key) > maxIdempotencyKey || strings.ContainsFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		fail(http.StatusBadRequest, "invalid_idempotency_key", "an Idempotency-Key is 1 to 255 printable ASCII characters, without spaces")
		return nil, false
	}
	data, _ := json.Marshal(body) // a decoded request: it marshals
	return &runKey{user: user, key: key, digest: sha256.Sum256(append([]byte(endpoint+"\n"), data...))}, true
}

type userKey struct{ user, key string }

// keyed returns the run started for k, or nil; conflict: the key was used for
// another request.
func (g *runRegistry) keyed(k *runKey) (rec *runRecord, conflict bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keyedLocked(k)
}

func (g *runRegistry) keyedLocked(k *runKey) (*runRecord, bool) {
	rec := g.keys[userKey{k.user, k.key}]
	if rec == nil {
		return nil, false
	}
	return rec, rec.key.digest != k.digest
}

// keyConflict is the answer to a key reused for another request.
func keyConflict(fail func(status int, code, msg string)) {
	fail(http.StatusUnprocessableEntity, "idempotency_key_reused",
		"this Idempotency-Key was used for another request; use a new key for a new request")
}

// requestOnce reads the body of a request with an Idempotency-Key into body
// and, when a run was started with the key, answers from it (follow): repeated.
// A request without a key is left unread (key nil), to be read after it is
// admitted; ok is false when the request was answered with an error.
func (s *Server) requestOnce(w http.ResponseWriter, r *http.Request, p Principal, endpoint string, body any,
	fail func(status int, code, msg string), follow func(*runRecord)) (key *runKey, repeated, ok bool) {
	if r.Header.Get(IdempotencyHeader) == "" {
		return nil, false, true
	}
	// A repeat follows its run: it takes no slot and starts nothing.
	if !decodeJSON(w, r, body, fail) {
		return nil, false, false
	}
	if key, ok = requestKey(r, p.User.ID, endpoint, body, fail); !ok {
		return nil, false, false
	}
	rec, conflict := s.runs.keyed(key)
	switch {
	case conflict:
		keyConflict(fail)
		return nil, false, false
	case rec != nil:
		if s.withinRate(w, r, p, fail) { // a repeat takes no run slot, but counts in the rate
			follow(rec)
		}
		return key, true, true
	}
	return key, false, true
}

// await waits for a run to finish as one of its readers, so a run that may
// outlive its request (it has a key) is not canceled while someone waits for
// it; false: the client left first.
func (s *Server) await(r *http.Request, rec *runRecord) bool {
	rec.reading(+1, s.opts.ResumeGrace)
	defer rec.reading(-1, s.opts.ResumeGrace)
	select {
	case <-rec.done:
		return true
	case <-r.Context().Done():
		return false
	}
}

// accept takes a run request once: a repeat of an earlier request's
// Idempotency-Key follows that request's run; else the request is admitted (a
// run slot, which the caller then owns) and its body read into body. ok is false
// when the request has been answered already.
func (s *Server) accept(w http.ResponseWriter, r *http.Request, p Principal, endpoint string, body any,
	fail func(status int, code, msg string), follow func(*runRecord)) (key *runKey, slot func(), ok bool) {
	key, repeated, ok := s.requestOnce(w, r, p, endpoint, body, fail, follow)
	if repeated || !ok {
		return nil, nil, false
	}
	if slot, ok = s.admit(w, r, p, fail); !ok {
		return nil, nil, false
	}
	if key == nil && !decodeJSON(w, r, body, fail) {
		slot()
		return nil, nil, false
	}
	return key, slot, true
}
