package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

const maxRedirects = 5

// httpGet fetches a URL from an allow-listed host and returns the response text.
type httpGet struct {
	name     string
	allow    []hostRule
	maxBytes int
	timeout  time.Duration
	client   *http.Client
}

type httpGetConfig struct {
	AllowHosts []string `with:"allow_hosts"`
	MaxBytes   int      `with:"max_bytes"`
	Timeout    string   `with:"timeout"`
}

// hostRule is one allow_hosts entry: an exact host, or with wildcard set any
// subdomain of host (but not host itself, as `*.example.com` reads).
type hostRule struct {
	host     string
	wildcard bool
}

func (r hostRule) String() string {
	if r.wildcard {
		return "*." + r.host
	}
	return r.host
}

func (r hostRule) matches(host string) bool {
	if r.wildcard {
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

func newHTTPGet(t *spec.Tool, _ string) (tool.Tool, error) {
	cfg := httpGetConfig{MaxBytes: 256 << 10, Timeout: "10s"}
	if err := decodeWith("http_get", t.With, &cfg); err != nil {
		return nil, err
	}
	var problems []string
	if len(cfg.AllowHosts) == 0 {
		problems = append(problems, "http_get needs with.allow_hosts, the hosts it may fetch from "+
			"(like api.example.com or *.example.com); there is no default")
	}
	h := &httpGet{name: toolName(t, "http_get"), maxBytes: cfg.MaxBytes}
	for i, entry := range cfg.AllowHosts {
		rule, err := parseHostRule(entry)
		if err != nil {
			problems = append(problems, fmt.Sprintf("with.allow_hosts[%d]: %v", i, err))
			continue
		}
		h.allow = append(h.allow, rule)
	}
	if cfg.MaxBytes < 1 {
		problems = append(problems, fmt.Sprintf("with.max_bytes must be at least 1, not %d", cfg.MaxBytes))
	}
	timeout, err := time.ParseDuration(cfg.Timeout)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("with.timeout %q is not a duration; use a number with a unit, like 10s or 1m", cfg.Timeout))
	case timeout <= 0:
		problems = append(problems, fmt.Sprintf("with.timeout must be positive, not %s", cfg.Timeout))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	h.timeout = timeout
	h.client = &http.Client{Timeout: timeout, CheckRedirect: h.checkRedirect}
	return h, nil
}

func parseHostRule(entry string) (hostRule, error) {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(entry)), ".")
	wildcard := strings.HasPrefix(s, "*.")
	s = strings.TrimPrefix(s, "*.")
	if ip := strings.Trim(s, "[]"); !wildcard && net.ParseIP(ip) != nil {
		return hostRule{host: ip}, nil
	}
	switch {
	case s == "" || s == "*":
		return hostRule{}, fmt.Errorf("%q allows every host; list the hosts, like api.example.com or *.example.com", entry)
	case strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@"):
		return hostRule{}, fmt.Errorf("%q is not a host name; write only the host, like api.example.com", entry)
	case strings.Contains(s, ":"):
		return hostRule{}, fmt.Errorf("%q has a port; write only the host, which allows every port", entry)
	case strings.ContainsAny(s, "* \t"):
		return hostRule{}, fmt.Errorf("%q: a wildcard is only allowed as the first label, like *.example.com", entry)
	}
	return hostRule{host: s, wildcard: wildcard}, nil
}

func (h *httpGet) Describe() tool.Info {
	hosts := make([]string, len(h.allow))
	for i, r := range h.allow {
		hosts[i] = r.String()
	}
	example := "https://example.com/"
	if len(h.allow) > 0 {
		host := h.allow[0].host
		if h.allow[0].wildcard {
			host = "www." + host
		}
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		example = "https://" + host + "/"
	}
	return tool.Info{
		Description: fmt.Sprintf("Fetch a web page or API response with HTTP GET and return its text "+
			"(at most %s). Only these hosts are allowed: %s.", byteCount(int64(h.maxBytes)), strings.Join(hosts, ", ")),
		Parameters: objectSchema(map[string]any{
			"url": map[string]any{
				"type":        "string",
				"description": "The http or https URL to fetch.",
				"examples":    []any{example},
			},
		}, "url"),
	}
}

// checkURL refuses a URL that is not http(s) or whose host is not allowed; it runs
// before the first request and before following every redirect.
func (h *httpGet) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs can be fetched, not %q", u.Scheme+":")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return fmt.Errorf("the URL %q has no host", u.Redacted())
	}
	for _, r := range h.allow {
		if r.matches(host) {
			return nil
		}
	}
	hosts := make([]string, len(h.allow))
	for i, r := range h.allow {
		hosts[i] = r.String()
	}
	return fmt.Errorf("host %s is not allowed; %s may fetch only from %s", host, h.name, strings.Join(hosts, ", "))
}

// redirectError carries a refused redirect through http.Client, which wraps it.
type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

func (h *httpGet) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &redirectError{fmt.Sprintf("stopped after %d redirects", maxRedirects)}
	}
	if err := h.checkURL(req.URL); err != nil {
		return &redirectError{fmt.Sprintf("refused the redirect to %s: %v", req.URL.Redacted(), err)}
	}
	return nil
}

func (h *httpGet) Call(ctx context.Context, in tool.Input) (string, error) {
	raw, err := requiredString(in.Args, "url")
	if err != nil {
		return "", err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("%q is not a valid URL: %v", raw, errors.Unwrap(err))
	}
	if err := h.checkURL(u); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("cannot build the request: %v", err)
	}
	req.Header.Set("User-Agent", "agentrun-http_get")
	resp, err := h.client.Do(req)
	if err != nil {
		return "", h.requestError(ctx, u, err)
	}
	defer resp.Body.Close()

	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.maxBytes)+1))
	if err != nil {
		return "", fmt.Errorf("GET %s: reading the response: %v", u.Redacted(), err)
	}
	if resp.StatusCode >= 400 {
		msg := fmt.Sprintf("GET %s: %s", resp.Request.URL.Redacted(), resp.Status)
		if e := excerpt(string(body), 300); e != "" {
			msg += ": " + e
		}
		return "", errors.New(msg)
	}
	cut := len(body) > h.maxBytes
	if cut {
		body = []byte(validPrefix(string(body[:h.maxBytes]), h.maxBytes))
	}
	if bytes.IndexByte(body, 0) >= 0 {
		return "", fmt.Errorf("GET %s returned binary content (%s); %s returns text only",
			resp.Request.URL.Redacted(), resp.Header.Get("Content-Type"), h.name)
	}

	var out strings.Builder
	fmt.Fprintf(&out, "HTTP %s", resp.Status)
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		fmt.Fprintf(&out, ", Content-Type: %s", ct)
	}
	if final := resp.Request.URL; final.String() != u.String() {
		fmt.Fprintf(&out, ", redirected to %s", final.Redacted())
	}
	out.WriteString("\n\n")
	out.Write(body)
	if cut {
		fmt.Fprintf(&out, "\n[… cut at %s; the response is longer]", byteCount(int64(h.maxBytes)))
	}
	return out.String(), nil
}

// requestError explains a failed request without Go's nested error prefixes.
func (h *httpGet) requestError(ctx context.Context, u *url.URL, err error) error {
	var re *redirectError
	if errors.As(err, &re) {
		return fmt.Errorf("GET %s: %s", u.Redacted(), re.msg)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("GET %s: %v", u.Redacted(), ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("GET %s: no response within %s", u.Redacted(), h.timeout)
		}
		err = ue.Err
	}
	return fmt.Errorf("GET %s: %v", u.Redacted(), err)
}
