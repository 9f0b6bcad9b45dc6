package serve

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A web page of another origin may call the API only where serve.yaml's cors
// names its origin: a browser asks first (a preflight OPTIONS request, without
// credentials) and sends the request only if the answer allows it. Credentials
// are bearer tokens the page sends itself, never cookies, so the API allows no
// credentials mode.

// CORSConfig is serve.yaml's cors section.
type CORSConfig struct {
	// AllowedOrigins are the origins (scheme://host[:port]) whose pages may call
	// the API, or "*" for any; none: cross-origin requests are not allowed.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MaxAge is how long a browser may keep a preflight's answer; default 10m.
	MaxAge time.Duration `yaml:"max_age"`
}

// DefaultCORSMaxAge is CORSConfig.MaxAge's default.
const DefaultCORSMaxAge = 10 * time.Minute

// What a page may send and read: the headers of the API's requests and the
// headers of its answers that a page needs, those of the protocols' clients too
// (A2A's version and extensions, MCP's session and protocol version).
const (
	corsMethods        = "GET, POST, DELETE"
	corsRequestHeaders = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-Agentrun-Conversation, traceparent, " +
		"A2A-Version, A2A-Extensions, Mcp-Session-Id, MCP-Protocol-Version"
	corsExposedHeaders = "X-Agentrun-Run, Retry-After, X-Should-Retry, Mcp-Session-Id"
)

// validOrigin reports whether o is an origin as a browser sends it: an http or
// https scheme and a host, with no path, query or user.
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Path == "" &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil && o == u.Scheme+"://"+u.Host
}

// cors answers preflights and marks the answers a page of an allowed origin may
// read; without allowed origins it is h.
func (s *Server) cors(h http.Handler) http.Handler {
	c := s.opts.Config.CORS
	if len(c.AllowedOrigins) == 0 {
		return h
	}
	maxAge := c.MaxAge
	if maxAge == 0 {
		maxAge = DefaultCORSMaxAge
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			h.ServeHTTP(w, r)
			return
		}
		allowed := s.corsAllows(origin)
		hdr := w.Header()
		hdr.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		switch {
		case preflight && !allowed:
			writeError(w, http.StatusForbidden, "origin_not_allowed", "this server does not take requests from "+origin)
			return
		case preflight:
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Allow-Methods", corsMethods)
			hdr.Set("Access-Control-Allow-Headers", corsRequestHeaders)
			hdr.Set("Access-Control-Max-Age", strconv.Itoa(int(maxAge.Seconds())))
			w.WriteHeader(http.StatusNoContent)
			return
		case allowed:
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Expose-Headers", corsExposedHeaders)
		}
		h.ServeHTTP(w, r)
	})
}

// corsAllows reports whether the config lets pages of origin call the API.
func (s *Server) corsAllows(origin string) bool {
	allowed := s.opts.Config.CORS.AllowedOrigins
	return slices.Contains(allowed, "*") || slices.Contains(allowed, strings.TrimSuffix(origin, "/"))
}
