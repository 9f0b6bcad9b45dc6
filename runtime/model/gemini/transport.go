package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxResponseBytes caps the body of one response, streamed or not: whatever a
// server sends, a model call holds at most this much.
const MaxResponseBytes = 16 << 20

// errAttemptTimeout is the cause of an attempt cut off at model.timeout.
var errAttemptTimeout = errors.New("attempt timed out")

// retryTransport bounds and retries attempts below the SDK. The SDK's own retry
// (HTTPOptions.RetryOptions) ignores Retry-After and Google's RetryInfo, and its
// timeout (HTTPOptions.Timeout) covers all attempts together; here each attempt
// gets model.timeout for its headers and its whole body, streamed or not, and a
// 408, 429 or 5xx answer or a failed connection is tried again up to retries
// times, after the wait the server asked for.
type retryTransport struct {
	base    http.RoundTripper
	retries int
	timeout time.Duration
	// backoff is the wait before retry n (1, 2, …) when the server names none.
	backoff func(n int) time.Duration
	// maxWait is the longest wait a server may ask for; a longer one is not
	// waited out: the answer goes back as it is (a fallback model may answer).
	maxWait time.Duration
	// wait sleeps for d unless ctx ends first (tests record the waits instead).
	wait func(ctx context.Context, d time.Duration) bool
}

// maxRetryWait is the longest Retry-After honoured.
const maxRetryWait = time.Minute

func defaultBackoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n-1, 4) // 0.5s, 1s, 2s, 4s, 8s
	return d/2 + rand.N(d/2+1)
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for n := 0; ; n++ {
		res, err, ctx, cancel := t.attempt(req, n)
		last := n >= t.retries || req.Context().Err() != nil || n > 0 && req.GetBody == nil && req.Body != nil
		if err != nil {
			cancel(nil)
			if last {
				return nil, err
			}
			if !t.wait(req.Context(), t.backoff(n+1)) {
				return nil, req.Context().Err()
			}
			continue
		}
		if !retryableStatus(res.StatusCode) || last {
			res.Body = &cancelBody{ReadCloser: res.Body, ctx: ctx, cancel: cancel, timeout: t.timeout}
			return res, nil
		}
		// Read the refusal (Google's RetryInfo is in it), then decide.
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		cancel(nil)
		wait, named := retryAfter(res.Header, body)
		if !named {
			wait = t.backoff(n + 1)
		}
		if wait > t.maxWait {
			res.Body = io.NopCloser(bytes.NewReader(body))
			return res, nil
		}
		if !t.wait(req.Context(), wait) {
			return nil, req.Context().Err()
		}
	}
}

// attempt sends try n of req under its own deadline; cancel ends it (for a
// response, once its body is closed).
func (t *retryTransport) attempt(req *http.Request, n int) (*http.Response, error, context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(t.timeout, func() { cancel(errAttemptTimeout) })
	stop := func(cause error) { timer.Stop(); cancel(cause) }
	r := req.Clone(ctx)
	if n > 0 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err, ctx, stop
		}
		r.Body = body
	}
	res, err := t.base.RoundTrip(r)
	if err != nil && errors.Is(context.Cause(ctx), errAttemptTimeout) {
		err = fmt.Errorf("%w: no answer within %s (model.timeout)", errAttemptTimeout, t.timeout)
	}
	return res, err, ctx, stop
}

func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// cancelBody ends its attempt's context when the body is closed, and says so
// when a read failed because the attempt ran out of time.
type cancelBody struct {
	io.ReadCloser
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.ctx), errAttemptTimeout) {
		err = fmt.Errorf("%w: the answer did not finish within %s (model.timeout)", errAttemptTimeout, b.timeout)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// retryAfter is the wait a refusal asks for: the Retry-After header (seconds or
// an HTTP date), else the retryDelay of a google.rpc.RetryInfo in the error's
// details ("37s"), which is how the Gemini API says it on a 429.
func retryAfter(h http.Header, body []byte) (time.Duration, bool) {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, true
		}
		if at, err := http.ParseTime(v); err == nil {
			return max(time.Until(at), 0), true
		}
	}
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0, false
	}
	for _, d := range e.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if w, err := time.ParseDuration(d.RetryDelay); err == nil && w >= 0 {
				return w, true
			}
		}
	}
	return 0, false
}
