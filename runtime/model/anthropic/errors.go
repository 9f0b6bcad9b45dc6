package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/agentrun/agentrun/internal/httpcap"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/agentrun/agentrun/runtime/model"
)

// StatusOverloaded is the status Anthropic answers with when it is overloaded.
const StatusOverloaded = 529

// errorStatus is the HTTP status each of the API's error types comes with, for an
// error that arrives as an event in a stream whose status was 200.
var errorStatus = map[sdk.ErrorType]int{
	sdk.ErrorTypeInvalidRequestError: http.StatusBadRequest,
	sdk.ErrorTypeAuthenticationError: http.StatusUnauthorized,
	sdk.ErrorTypeBillingError:        http.StatusPaymentRequired,
	sdk.ErrorTypePermissionError:     http.StatusForbidden,
	sdk.ErrorTypeNotFoundError:       http.StatusNotFound,
	"request_too_large":              http.StatusRequestEntityTooLarge,
	sdk.ErrorTypeRateLimitError:      http.StatusTooManyRequests,
	sdk.ErrorTypeAPIError:            http.StatusInternalServerError,
	sdk.ErrorTypeTimeoutError:        http.StatusGatewayTimeout,
	sdk.ErrorTypeOverloadedError:     StatusOverloaded,
}

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
	var apiErr *sdk.Error
	status := 0
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.StatusCode
		if s, ok := errorStatus[apiErr.Type()]; ok && status < 400 {
			status = s // an error event in a stream that began with 200
		}
	case res != nil && res.StatusCode >= 400:
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
	if status == StatusOverloaded {
		text = "Overloaded"
	}
	if text == "" {
		text = "error"
	}
	if apiErr != nil {
		if t := apiErr.Type(); t != "" {
			text += " (" + string(t) + ")"
		}
		if apiErr.Message != "" {
			text += ": " + apiErr.Message
		}
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		text = fmt.Sprintf("%s refused the API key: %s", m.baseURL, text)
	case http.StatusNotFound:
		text = fmt.Sprintf("model %q does not exist at %s (or that is not the Anthropic Messages API): %s", m.name, m.baseURL, text)
	}
	// *sdk.Error is not kept as the cause: it holds the request, whose
	// Authorization header carries the key.
	return &model.Error{Status: status, Err: model.Redacted(text, m.key, nil)}
}
