package serve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
)

// A browser's EventSource cannot send an Authorization header. A page that
// follows a run asks for a stream token first, with its bearer token, and opens
// the run's events with the token in the URL: it reads that run's events, of that
// user, for streamTokenTTL, and nothing else. Runs live in their process, so the
// tokens are signed with a key of the process's own.

// streamTokenTTL is how long a stream token opens its run's events (a stream
// opened in time goes on; an EventSource that reconnects later needs a new one).
const streamTokenTTL = 5 * time.Minute

// StreamTokenParam is the query parameter of GET /v1/runs/{id}/events that
// carries a stream token.
const StreamTokenParam = "stream_token"

// streamTokens issues and checks the tokens of one process.
type streamTokens struct{ key []byte }

func newStreamTokens() *streamTokens {
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	return &streamTokens{key: key}
}

func (t *streamTokens) sign(payload string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue is a token for user to read run's events until expires.
func (t *streamTokens) issue(user, run string, expires time.Time) string {
	payload := strconv.FormatInt(expires.Unix(), 10) + "\n" + run + "\n" + user
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + t.sign(payload)
}

// check returns the user a token lets read run's events at now, or false.
func (t *streamTokens) check(token, run string, now time.Time) (string, bool) {
	enc, sig, ok := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil || !hmac.Equal([]byte(sig), []byte(t.sign(string(raw)))) {
		return "", false
	}
	parts := strings.SplitN(string(raw), "\n", 3)
	if len(parts) != 3 || parts[1] != run {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || now.Unix() >= exp {
		return "", false
	}
	return parts[2], true
}

// streamToken answers POST /v1/runs/{id}/stream_token: a token that opens the
// run's events, for the run's own user.
func (s *Server) streamToken(w http.ResponseWriter, r *http.Request, p Principal) {
	rec := s.runs.get(r.PathValue("id"), p.User.ID)
	if rec == nil {
		writeError(w, http.StatusNotFound, "run_not_found", "no such run")
		return
	}
	expires := time.Now().Add(streamTokenTTL)
	token := s.tokens.issue(p.User.ID, rec.ID, expires)
	writeJSON(w, http.StatusOK, map[string]any{"token": token, "expires_at": expires.UTC().Format(time.RFC3339),
		"events_url": "/v1/runs/" + rec.ID + "/events?" + StreamTokenParam + "=" + token})
}

// authenticateStream is authenticate for a run's events, which also opens with a
// stream token of that run in the URL, when the request has no Authorization.
func (s *Server) authenticateStream(h func(http.ResponseWriter, *http.Request, Principal)) http.Handler {
	withHeader := s.authenticate(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := r.URL.Query().Get(StreamTokenParam)
		if token == "" || r.Header.Get("Authorization") != "" {
			withHeader.ServeHTTP(w, r)
			return
		}
		user, ok := s.tokens.check(token, r.PathValue("id"), time.Now())
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthorized", "the stream token is not valid for this run, or has expired: ask for another")
			return
		}
		p := Principal{User: tool.User{ID: user}, Via: "stream token"}
		if holder, ok := r.Context().Value(principalKey{}).(*Principal); ok {
			*holder = p
		}
		h(w, r, p)
	})
}
