package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/httpcap"

	"google.golang.org/genai"

	"github.com/agentrun/agentrun/runtime/model"
)

// fail turns an SDK error into what Complete returns: the context's error when the
// caller gave up, else a *model.Error whose text never holds the API key.
func (m *Model) fail(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, httpcap.ErrTooLarge) {
		return &model.Error{Err: fmt.Errorf("the response is larger than %d MiB, the most one model call reads", MaxResponseBytes>>20), Refused: true}
	}
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code == 0 {
		return &model.Error{Err: model.Redacted(err.Error(), m.key, err)}
	}
	status := apiErr.Code
	text := http.StatusText(status)
	if apiErr.Status != "" && !strings.HasPrefix(apiErr.Status, fmt.Sprint(status)) {
		text = apiErr.Status // INVALID_ARGUMENT, RESOURCE_EXHAUSTED, …
	}
	if text == "" {
		text = "error"
	}
	if msg := strings.TrimSpace(apiErr.Message); msg != "" {
		text += ": " + clip(msg)
	}
	// The configuration errors (see model.Error.Misconfigured) name what is
	// wrong, so that whoever reads them knows which setting to change.
	switch {
	case status == http.StatusBadRequest && keyInvalid(apiErr):
		// The Gemini API answers a bad key with 400 API_KEY_INVALID, not 401; it
		// is reported as 401 so that no retry or fallback asks again with it.
		text = fmt.Sprintf("%s refused the API key (HTTP 400, API_KEY_INVALID): %s", m.baseURL, text)
		status = http.StatusUnauthorized
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		text = fmt.Sprintf("%s refused the credentials: %s", m.baseURL, text)
	case status == http.StatusNotFound:
		text = fmt.Sprintf("model %q does not exist at %s (or it does not support generateContent): %s", m.name, m.baseURL, text)
	}
	// genai.APIError is not kept as the cause: its details may quote the request.
	return &model.Error{Status: status, Err: model.Redacted(text, m.key, nil)}
}

// keyInvalid reports Google's answer to a key it does not know: a
// google.rpc.ErrorInfo with reason API_KEY_INVALID.
func keyInvalid(e genai.APIError) bool {
	for _, d := range e.Details {
		if r, _ := d["reason"].(string); r == "API_KEY_INVALID" {
			return true
		}
	}
	return false
}

func clip(s string) string {
	const limit = 800
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}
