package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/agentrun/agentrun/runtime/tool"
)

// transport is the agent's HTTP: it reaches the agent's scheme and host only
// (a card's endpoint or a redirect elsewhere is refused), adds the token there,
// and reads each response up to limit bytes.
type transport struct {
	base         http.RoundTripper
	scheme, host string // lower case
	header       string
	value        tool.Credential // the header's value; zero without auth
	limit        int64
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != t.scheme || strings.ToLower(r.URL.Host) != t.host {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("refused to reach %s://%s: agentrun reaches this agent only on %s://%s", r.URL.Scheme, r.URL.Host, t.scheme, t.host)
	}
	if !t.value.IsZero() {
		r = r.Clone(r.Context())
		r.Header.Set(t.header, t.value.Token())
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	state, _ := r.Context().Value(limitKey{}).(*limitState)
	resp.Body = &limitedBody{body: resp.Body, left: t.limit, state: state}
	return resp, nil
}

// limitKey holds a call's limitState in its context.
type limitKey struct{}

// limitState says whether a response of the call went over the bound: the SDK
// wraps the read error in its own words, which may not keep it.
type limitState struct{ exceeded atomic.Bool }

func withLimit(ctx context.Context) (context.Context, *limitState) {
	s := &limitState{}
	return context.WithValue(ctx, limitKey{}, s), s
}

var errTooLarge = errors.New("the response is over the size limit")

// limitedBody fails a read past left bytes.
type limitedBody struct {
	body  io.ReadCloser
	left  int64
	state *limitState
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.body.Read(one[:]); n == 0 && err != nil {
			return 0, err // the body ends right at the bound
		}
		if b.state != nil {
			b.state.exceeded.Store(true)
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }
