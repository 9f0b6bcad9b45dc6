package anthropic

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// MaxResponseBytes caps the body of one response, streamed or not: whatever a
// server sends, a model call holds at most this much. A real answer, even one with
// a thousand tool calls, is far smaller.
const MaxResponseBytes = 16 << 20

// errResponseTooLarge is what reading past MaxResponseBytes returns.
var errResponseTooLarge = errors.New("response too large")

// cappedTransport makes every response body fail once it passes limit bytes, so
// neither the SDK's reading of a whole body nor the stream decoder can grow without
// bound.
type cappedTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err == nil && res.Body != nil {
		res.Body = &cappedBody{ReadCloser: res.Body, limit: t.limit, left: t.limit}
	}
	return res, err
}

type cappedBody struct {
	io.ReadCloser
	limit int64
	left  int64 // bytes that may still be read
	err   error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// Read one byte more than allowed: a body of exactly the limit still ends in
	// io.EOF, a longer one fails.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = 0
		b.err = fmt.Errorf("%w: more than %d bytes", errResponseTooLarge, b.limit)
		return n, b.err
	}
	b.left -= int64(n)
	return n, err
}
