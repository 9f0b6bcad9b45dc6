package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
)

const maxHTTPResponse = 1 << 20

// HTTP calls an endpoint whose URL, headers, query and body are templates over the
// arguments and the run context. Values placed into the URL's path are escaped, so
// an argument cannot walk the path (`../admin`) or add a query.
type HTTP struct {
	cfg    *spec.HTTPTool
	method string
	client *http.Client
}

var _ runtime.Tool = (*HTTP)(nil)

// NewHTTP builds an http tool.
func NewHTTP(t *spec.Tool, dir string) (runtime.Tool, error) {
	if t.HTTP == nil {
		return nil, errors.New("http is not configured")
	}
	method := t.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	return &HTTP{cfg: t.HTTP, method: method, client: &http.Client{}}, nil
}

func (h *HTTP) Call(ctx context.Context, in runtime.ToolInput) (string, error) {
	env := in.Env()
	u, err := renderURL(&h.cfg.URL, env)
	if err != nil {
		return "", err
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return "", fmt.Errorf("the tool's URL %q is not an http(s) URL", u)
	}
	if len(h.cfg.Query) > 0 {
		q := parsed.Query()
		for k, t := range h.cfg.Query {
			v, err := t.Render(env)
			if err != nil {
				return "", fmt.Errorf("query %s: %v", k, err)
			}
			q.Set(k, v)
		}
		parsed.RawQuery = q.Encode()
	}
	var body io.Reader
	if b, ok, err := h.body(env, in.Args); err != nil {
		return "", err
	} else if ok {
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, h.method, parsed.String(), body)
	if err != nil {
		return "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	for k, t := range h.cfg.Headers {
		v, err := t.Render(env)
		if err != nil {
			return "", fmt.Errorf("header %s: %v", k, err)
		}
		if strings.ContainsAny(v, "\r\n") {
			return "", fmt.Errorf("header %s: a value may not contain line breaks", k)
		}
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%s %s: %v", h.method, parsed.Redacted(), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	out := &limitedBuffer{max: maxHTTPResponse}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return "", fmt.Errorf("reading the response: %v", err)
	}
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("HTTP %s: %s", resp.Status, tail(strings.TrimSpace(out.String()), 1000))
	}
	return out.String(), nil
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
		return nil, false, err
	}
	b, err := json.Marshal(v)
	return b, true, err
}

// renderURL renders a URL template, path-escaping every value that lands after the
// host. A value that forms the scheme and host (a base URL from a template) is kept.
func renderURL(t *spec.Template, env map[string]any) (string, error) {
	u, err := t.RenderEscaped(env, func(before, value string) string {
		if pastHost(before) {
			return url.PathEscape(value)
		}
		return value
	})
	if err != nil {
		return "", fmt.Errorf("url: %v", err)
	}
	return u, nil
}

func pastHost(prefix string) bool {
	_, rest, ok := strings.Cut(prefix, "://")
	return ok && strings.Contains(rest, "/")
}
