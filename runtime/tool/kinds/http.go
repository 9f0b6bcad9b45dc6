package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/agentrun/agentrun/internal/tracecontext"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const (
	maxHTTPResponse = 1 << 20
	maxRedirects    = 10 // as many as net/http follows by default

	// idempotencyHeader carries the call's idempotency key, the same on every attempt
	// of one call (IETF draft-ietf-httpapi-idempotency-key-header).
	idempotencyHeader = "Idempotency-Key"
)

// HTTP calls an endpoint whose URL, headers, query and body are templates over the
// arguments and the run context. Values placed into the URL's path are escaped, so
// an argument cannot walk the path (`../admin`) or add a query, and a value that
// would still make a path segment empty, `.` or `..` is refused. Redirects are
// followed only as the spec's redirects key allows. The call's idempotency key goes
// out as the Idempotency-Key header, unless the spec's headers set one.
type HTTP struct {
	cfg       *spec.HTTPTool
	method    string
	redirects spec.RedirectPolicy
	allow     []spec.RedirectHost
	client    *http.Client
	secrets   spec.Secrets
}

var _ tool.Tool = (*HTTP)(nil)

// NewHTTP builds an http tool.

// toolTransport is the http tools' connection pool, shared by every tool of the
// process: Go's default keeps 2 idle connections per host, so under a server's
// load most calls to one backend would open and close a connection.
var toolTransport = func() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = 64
	t.MaxIdleConns = 256
	return tracecontext.Transport(t) // the run's trace continues in the backend (W3C traceparent)
}()

func NewHTTP(t *spec.Tool, dir string) (tool.Tool, error) {
	if t.HTTP == nil {
		return nil, errors.New("http is not configured")
	}
	method := t.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	h := &HTTP{cfg: t.HTTP, method: method, redirects: t.HTTP.Redirects.Effective(), secrets: t.Secrets}
	switch h.redirects {
	case spec.RedirectNone, spec.RedirectSameHost:
	case spec.RedirectAllow:
		for i, entry := range t.HTTP.Redirects.Allow {
			host, err := spec.ParseRedirectHost(entry)
			if err != nil {
				return nil, fmt.Errorf("redirects.allow[%d]: %v", i, err)
			}
			h.allow = append(h.allow, host)
		}
	default:
		return nil, fmt.Errorf("redirects: %q is not none, same_host or {allow: [hosts]}", h.redirects)
	}
	h.client = &http.Client{CheckRedirect: h.checkRedirect, Transport: toolTransport}
	return h, nil
}

// Call makes the request. Its errors never show a query value or a header value
// (they often carry a key or a bound user id) nor a value of the tool's Secrets:
// the URL is named as scheme://host/path?name=…, and the rest of the text, a
// server's answer included, is masked.
func (h *HTTP) Call(ctx context.Context, in tool.Input) (string, error) {
	req, sent, err := h.request(ctx, in)
	if err != nil {
		return "", h.mask(err, sent)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", h.mask(fmt.Errorf("%s %s: %v", h.method, shownURL(req.URL), withoutURL(err)), sent)
	}
	defer resp.Body.Close()
	out := &limitedBuffer{max: maxHTTPResponse}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return "", h.mask(fmt.Errorf("reading the response: %v", err), sent)
	}
	if resp.StatusCode >= 400 {
		return "", h.mask(fmt.Errorf("HTTP %s: %s", resp.Status, tail(strings.TrimSpace(out.String()), 1000)), sent)
	}
	return out.String(), nil
}

// request renders the call's request. sent holds the query and header values it
// carries, so far as they were rendered, for mask.
func (h *HTTP) request(ctx context.Context, in tool.Input) (req *http.Request, sent []string, err error) {
	env := in.Env()
	u, err := renderURL(&h.cfg.URL, env)
	if err != nil {
		return nil, nil, err
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, nil, fmt.Errorf("url: the rendered URL does not parse: %v", withoutURL(err))
	}
	q := parsed.Query()
	for _, vs := range q {
		sent = append(sent, vs...)
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" || parsed.Host == "" {
		return nil, sent, fmt.Errorf("url: %s is not an http(s) URL", shownURL(parsed))
	}
	if len(h.cfg.Query) > 0 {
		for k, t := range h.cfg.Query {
			v, err := t.Render(env)
			if err != nil {
				return nil, sent, renderError("query "+k, err)
			}
			q.Set(k, v)
			sent = append(sent, v)
		}
		parsed.RawQuery = q.Encode()
	}
	var body io.Reader
	if b, ok, err := h.body(env, in.Args); err != nil {
		return nil, sent, err
	} else if ok {
		body = bytes.NewReader(b)
	}
	req, err = http.NewRequestWithContext(ctx, h.method, parsed.String(), body)
	if err != nil {
		return nil, sent, fmt.Errorf("%s %s: %v", h.method, shownURL(parsed), withoutURL(err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	if in.IdempotencyKey != "" {
		req.Header.Set(idempotencyHeader, in.IdempotencyKey) // the spec's own header, set below, wins
	}
	for k, t := range h.cfg.Headers {
		v, err := t.Render(env)
		if err != nil {
			return nil, sent, renderError("header "+k, err)
		}
		sent = append(sent, v)
		if strings.ContainsAny(v, "\r\n") {
			return nil, sent, fmt.Errorf("header %s: a value may not contain line breaks", k)
		}
		req.Header.Set(k, v)
	}
	return req, sent, nil
}

// mask hides in err's text the values the request carried in its query and
// headers (as "…", the way shownURL shows them) and the tool's secrets.
func (h *HTTP) mask(err error, sent []string) error {
	placeholders := h.secrets.Placeholders()
	for _, v := range sent {
		if _, secret := placeholders[v]; !secret {
			placeholders[v] = "…"
		}
	}
	if masked := spec.Mask(err.Error(), placeholders); masked != err.Error() {
		return errors.New(masked)
	}
	return err
}

// shownURL is u as an error names it: scheme, host and path, which say which
// request failed, and the names of its query parameters without their values.
// The user info is left out.
func shownURL(u *url.URL) string {
	shown := (&url.URL{Scheme: u.Scheme, Opaque: u.Opaque, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
	names := slices.Sorted(maps.Keys(u.Query()))
	for i, name := range names {
		names[i] = url.QueryEscape(name) + "=…"
	}
	if len(names) > 0 {
		shown += "?" + strings.Join(names, "&")
	}
	return shown
}

// withoutURL is a *url.Error's cause, without the URL it quotes in full.
func withoutURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// renderError is a template's failure without the template's text, which holds
// whatever ${VAR} put into it: the part of the request names the template.
func renderError(part string, err error) error {
	if cause := errors.Unwrap(err); cause != nil {
		err = cause
	}
	return fmt.Errorf("%s: %v", part, err)
}

// body renders the configured body, or sends the arguments for methods that carry
// one when none is configured.
func (h *HTTP) body(env map[string]any, args map[string]any) ([]byte, bool, error) {
	if h.cfg.Body == nil {
		switch h.method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			b, err := json.Marshal(args)
			return b, true, err
		}
		return nil, false, nil
	}
	v, err := h.cfg.RenderBody(env)
	if err != nil {
		return nil, false, renderError("body", err)
	}
	b, err := json.Marshal(v)
	return b, true, err
}

// redirectError is a refused redirect; http.Client hands it back inside a *url.Error.
type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

// checkRedirect runs before every redirect is followed. Go's client copies the first
// request's headers onto each hop, dropping only Authorization and Cookie, and only
// for another host name (not another port): so a hop to another origin that the spec
// allows is sent without any of the tool's headers (they may carry bound values or
// secrets) and without a Referer (which names the first URL), and a hop that would
// re-send the body there (307, 308) is refused. The idempotency key, which names
// the run, is not sent there either.
func (h *HTTP) checkRedirect(req *http.Request, via []*http.Request) error {
	from, to := via[0].URL, req.URL
	where := to.Host
	if !strings.EqualFold(to.Scheme, from.Scheme) {
		where = to.Scheme + "://" + to.Host
	}
	refuse := func(why string) error {
		return &redirectError{fmt.Sprintf("the server redirected to %s, which this tool may not follow%s", where, why)}
	}
	switch {
	case len(via) >= maxRedirects:
		return &redirectError{fmt.Sprintf("stopped after %d redirects", maxRedirects)}
	case h.redirects == spec.RedirectNone:
		return refuse(": it follows no redirects")
	case spec.SameOrigin(from, to):
		return nil
	case h.redirects != spec.RedirectAllow || !slices.ContainsFunc(h.allow, func(a spec.RedirectHost) bool { return a.Matches(to) }):
		return refuse("")
	case to.Scheme != "https" && (to.Scheme != "http" || from.Scheme == "https"):
		return refuse(" over " + to.Scheme)
	case req.Body != nil && req.Body != http.NoBody:
		return &redirectError{fmt.Sprintf("the server asked to send the request body on to %s; this tool sends its body only to %s", where, from.Host)}
	}
	for k := range h.cfg.Headers {
		req.Header.Del(k)
	}
	req.Header.Del(idempotencyHeader)
	req.Header.Del("Referer")
	return nil
}

// urlPart is the part of a URL that text rendered at some point lands in.
type urlPart int

const (
	inBase     urlPart = iota // before "://": the value is the base URL
	inHost                    // after "://", before the path
	inPath                    // after the first "/" past the host
	inQuery                   // after "?"
	inFragment                // after "#"
)

func partAfter(prefix string) urlPart {
	_, rest, ok := strings.Cut(prefix, "://")
	if !ok {
		return inBase
	}
	i := strings.IndexAny(rest, "/?#")
	if i < 0 {
		return inHost
	}
	switch rest = rest[i:]; {
	case strings.Contains(rest, "#"):
		return inFragment
	case strings.Contains(rest, "?"):
		return inQuery
	}
	return inPath
}

// valueSpan is where one rendered value landed in the URL.
type valueSpan struct {
	start, end int
	value      string
}

// renderURL renders a URL template, escaping each value for the part of the URL it
// lands in: path-escaped in the path (so it stays one segment), query-escaped after
// a "?" (so it cannot add parameters). A value at the very start (a base URL) is kept
// as it is; one inside the host may hold only host characters, so it cannot move the
// request to another host. A path segment that a value makes empty, "." or ".." is
// refused: the server would read it as a step in the path, not as the value.
func renderURL(t *spec.Template, env map[string]any) (string, error) {
	var spans []valueSpan
	var hostErr error
	u, err := t.RenderEscaped(env, func(before, value string) string {
		out := value
		switch partAfter(before) {
		case inHost:
			if hostErr == nil && strings.ContainsFunc(value, notHostChar) {
				hostErr = fmt.Errorf("url: the value %q cannot be part of the URL's host, which may hold only letters, digits, \".\", \"-\", \"_\" and \":\"", value)
			}
		case inPath, inFragment:
			out = url.PathEscape(value)
		case inQuery:
			out = url.QueryEscape(value)
		}
		spans = append(spans, valueSpan{len(before), len(before) + len(out), value})
		return out
	})
	if err != nil {
		return "", renderError("url", err)
	}
	if hostErr != nil {
		return "", hostErr
	}
	if err := checkPath(u, spans); err != nil {
		return "", err
	}
	return u, nil
}

func notHostChar(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(".-_:", r)
}

// checkPath checks every segment of u's path that holds (part of) a rendered value,
// or where a value rendered as nothing; segments written in the spec are its
// author's business.
func checkPath(u string, spans []valueSpan) error {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return nil // not a URL; the caller refuses it
	}
	i := strings.IndexAny(rest, "/?#")
	if i < 0 || rest[i] != '/' {
		return nil
	}
	start := len(u) - len(rest) + i
	end := len(u)
	if j := strings.IndexAny(u[start:], "?#"); j >= 0 {
		end = start + j
	}
	for s := start + 1; s <= end; {
		e := end
		if j := strings.IndexByte(u[s:end], '/'); j >= 0 {
			e = s + j
		}
		for _, sp := range spans {
			touches := sp.start < e && s < sp.end
			if sp.start == sp.end {
				touches = s <= sp.start && sp.start <= e
			}
			if !touches {
				continue
			}
			decoded, err := url.PathUnescape(u[s:e])
			if err != nil {
				decoded = u[s:e]
			}
			if part, bad := dotSegment(decoded); bad {
				return fmt.Errorf("url: the value %q cannot go into the URL's path, where it would make %s; "+
					"a value in the path may not be empty, \".\" or \"..\", nor make such a segment with \"/\"", sp.value, describeSegment(part))
			}
			break
		}
		s = e + 1
	}
	return nil
}

// dotSegment looks at a path segment as a server sees it once decoded and returns
// the part a server could take as a step in the path: empty, "." or "..". A decoded
// "/" (and, on some servers, "\") splits the segment; Tomcat-like servers drop
// ";params"; a server that decodes twice turns "%2e%2e" into "..".
func dotSegment(decoded string) (part string, bad bool) {
	for range 3 {
		for _, p := range strings.Split(strings.ReplaceAll(decoded, `\`, "/"), "/") {
			p, _, _ = strings.Cut(p, ";")
			if p == "" || p == "." || p == ".." {
				return p, true
			}
		}
		next, err := url.PathUnescape(decoded)
		if err != nil || next == decoded {
			break
		}
		decoded = next
	}
	return "", false
}

func describeSegment(part string) string {
	if part == "" {
		return "an empty segment"
	}
	return fmt.Sprintf("the segment %q", part)
}

// CheckPathValue reports why v, rendered alone into a path segment of an http tool's
// URL, would be refused (see renderURL); nil if it would not. The edge uses it on
// run-context values, which the model cannot correct.
func CheckPathValue(v string) error {
	if part, bad := dotSegment(v); bad {
		return fmt.Errorf("it would make %s in a URL's path", describeSegment(part))
	}
	return nil
}
