package httpcap

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrTooLarge is what reading a body past its limit returns.
var ErrTooLarge = errors.New("response too large")

// Transport makes every response body fail once it passes Limit bytes.
type Transport struct {
	Base  http.RoundTripper
	Limit int64
}

func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.Base.RoundTrip(req)
	if err == nil && res.Body != nil {
		res.Body = &body{ReadCloser: res.Body, limit: t.Limit, left: t.Limit}
	}
	return res, err
}

type body struct {
	io.ReadCloser
	limit int64
	left  int64 // bytes that may still be read
	err   error
}

func (b *body) Read(p []byte) (int, error) {
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
		b.err = fmt.Errorf("%w: more than %d bytes", ErrTooLarge, b.limit)
		return n, b.err
	}
	b.left -= int64(n)
	return n, err
}
