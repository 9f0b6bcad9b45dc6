package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/internal/httpcap"

	oai "github.com/openai/openai-go/v3"

	"github.com/agentrun/agentrun/runtime/model"
)

// fail turns an SDK error into what Complete returns: the context's error when the
// caller gave up, else a *model.Error whose text never holds the API key.
// res is the last HTTP response, if any.
func (m *Model) fail(ctx context.Context, err error, res *http.Response) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, httpcap.ErrTooLarge) {
		return &model.Error{Err: fmt.Errorf("the response is larger than %d MiB, the most one model call reads", MaxResponseBytes>>20), Refused: true}
	}
	var apiErr *oai.Error
	status := 0
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.StatusCode
	case res != nil && res.StatusCode >= 400:
		// An error body the SDK cannot decode (Ollama's {"error":"…"}) comes back
		// as a JSON error without the status.
		status = res.StatusCode
	}
	if status == 0 {
		msg := err.Error()
		var netErr net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
			msg = fmt.Sprintf("no answer within the %s timeout: %s", m.timeout, msg)
		}
		return &model.Error{Err: model.Redacted(msg, m.key, err)}
	}
	text := http.StatusText(status)
	if text == "" {
		text = "error"
	}
	detail := ""
	if apiErr != nil {
		detail = apiErr.Message
	}
	if detail == "" && res != nil {
		detail = errorDetail(res)
	}
	if detail != "" {
		text += ": " + detail
	}
	// The configuration errors (see model.Error.Misconfigured) name what is
	// wrong, so that whoever reads them knows which setting to change.
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		text = fmt.Sprintf("%s refused the API key: %s", m.baseURL, text)
	case http.StatusNotFound:
		text = fmt.Sprintf("model %q does not exist at %s (or that is not an OpenAI-compatible API): %s", m.name, m.baseURL, text)
	}
	// *openai.Error is not kept as the cause: it holds the request, whose
	// Authorization header carries the key.
	return &model.Error{Status: status, Err: model.Redacted(text, m.key, nil)}
}

// errorDetail finds the message in an error body, whichever of the common shapes
// the server uses ({"error":{"message"}}, {"error":"…"}, {"message"}, {"detail"}),
// or else quotes the start of the body.
func errorDetail(res *http.Response) string {
	if res.Body == nil {
		return ""
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 8<<10))
	var shapes struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &shapes) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var flat string
		switch {
		case json.Unmarshal(shapes.Error, &nested) == nil && nested.Message != "":
			return nested.Message
		case json.Unmarshal(shapes.Error, &flat) == nil && flat != "":
			return flat
		case shapes.Message != "":
			return shapes.Message
		case shapes.Detail != nil:
			if s, ok := shapes.Detail.(string); ok {
				return s
			}
			b, _ := json.Marshal(shapes.Detail)
			return clip(string(b))
		}
	}
	return clip(strings.Join(strings.Fields(string(body)), " "))
}

func clip(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}
