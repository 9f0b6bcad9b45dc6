package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentrun/agentrun/runtime/model"
)

// errStreamTotal is the cause of a stream canceled because the attempt that
// answered took longer than the timeout.
var errStreamTotal = errors.New("stream too long")

// completeStream streams the response, passing text to onDelta as it arrives. Tool
// calls are returned only from a stream that ended with a finish_reason: a stream
// cut off earlier may hold half an argument object.
//
// model.timeout bounds each attempt as a whole, as the http.Client timeout does
// for an unstreamed one: the wait for the headers (the transport's
// ResponseHeaderTimeout, after which the SDK may retry) and the whole stream, so a
// server that trickles or never ends is cut off. A silent gap cannot outlast the
// attempt, so no separate idle timer is needed.
func (m *Model) completeStream(ctx context.Context, params oai.ChatCompletionNewParams, onDelta func(string)) (*model.Response, error) {
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}

	clock, sctx := newStreamClock(ctx)
	defer clock.stop()
	var httpRes *http.Response
	// NewStreaming returns once the response headers are in, after the SDK's
	// retries; the body is read below.
	s := m.chat.NewStreaming(sctx, params, option.WithHTTPClient(m.stream), option.WithResponseInto(&httpRes), clock.started())
	defer s.Close()
	clock.arm(s.Err() == nil, m.timeout)

	var acc accumulator
	for s.Next() {
		acc.add(s.Current(), onDelta)
	}
	if err := s.Err(); err != nil {
		return nil, m.streamFailed(ctx, clock, err, acc.chunks, httpRes)
	}
	if acc.finishReason == "" {
		return nil, unfinished(ctx, acc.chunks, httpRes, "no finish_reason")
	}
	out := acc.response()
	if err := checkTruncated(out); err != nil {
		return nil, err
	}
	return out, nil
}

// streamFailed is the error of a stream that broke after events events.
func (m *Model) streamFailed(ctx context.Context, clock *streamClock, err error, events int, httpRes *http.Response) error {
	if clock.expired(ctx) {
		what := "the stream did not finish"
		if events == 0 {
			what = "no data came from the stream"
		}
		return &model.Error{Err: fmt.Errorf("%s within %s (model.timeout)", what, m.timeout)}
	}
	return m.fail(ctx, err, httpRes)
}

// unfinished is the error of a stream that ended without its last event (what
// names it): the caller gave up, the server did not stream at all, or it stopped.
func unfinished(ctx context.Context, events int, httpRes *http.Response, what string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if events == 0 && httpRes != nil {
		if ct := httpRes.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			return &model.Error{Err: fmt.Errorf("the server did not stream (Content-Type %q)", ct)}
		}
	}
	return &model.Error{Err: fmt.Errorf("the stream ended before the response was complete (%s)", what)}
}

// streamClock bounds a streamed attempt as a whole: from the start of the attempt
// that answered (the SDK may have retried before it) to the end of its stream.
type streamClock struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	attempt time.Time
	timer   *time.Timer
}

// newStreamClock derives the context the stream runs in.
func newStreamClock(ctx context.Context) (*streamClock, context.Context) {
	c := &streamClock{}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	return c, c.ctx
}

// started is the request option that notes when each attempt starts.
func (c *streamClock) started() option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		c.attempt = time.Now()
		return next(req)
	})
}

// arm starts the countdown once a stream answered (ok); a request that failed
// has no stream to time.
func (c *streamClock) arm(ok bool, timeout time.Duration) {
	if ok && !c.attempt.IsZero() {
		c.timer = time.AfterFunc(time.Until(c.attempt.Add(timeout)), func() { c.cancel(errStreamTotal) })
	}
}

func (c *streamClock) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel(nil)
}

// expired reports whether the stream was cut off by the clock rather than by the
// caller giving up (parent).
func (c *streamClock) expired(parent context.Context) bool {
	return parent.Err() == nil && errors.Is(context.Cause(c.ctx), errStreamTotal)
}

// accumulator assembles choice 0 of a streamed response. It is written here rather
// than taken from openai.ChatCompletionAccumulator so that tool calls without a
// "type", an "index" or an "id" survive and nothing depends on JustFinishedToolCall
// timing. It holds no more than the stream sent, which the transport caps.
type accumulator struct {
	chunks  int
	model   string
	content strings.Builder
	refusal strings.Builder
	// reasoning collects the text of each reasoning field by its wire name.
	reasoning    [len(reasoningFields)]strings.Builder
	calls        []*partialCall
	byIndex      map[int64]int  // tool call index on the wire → position in calls
	byID         map[string]int // tool call id → position in calls
	current      int            // position of the call the last delta went to
	finishReason string
	usage        model.Usage
}

type partialCall struct {
	id, name string
	args     strings.Builder
	extra    map[string]json.RawMessage
}

func (a *accumulator) add(ch oai.ChatCompletionChunk, onDelta func(string)) {
	a.chunks++
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.JSON.Usage.Valid() {
		a.usage = usage(ch.Usage)
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		if d := c.Delta.Content; d != "" {
			a.content.WriteString(d)
			onDelta(d)
		}
		a.refusal.WriteString(c.Delta.Refusal)
		for i, name := range reasoningFields {
			a.reasoning[i].WriteString(jsonString(c.Delta.JSON.ExtraFields[name]))
		}
		for _, d := range c.Delta.ToolCalls {
			a.addToolCall(d)
		}
		if c.FinishReason != "" {
			a.finishReason = c.FinishReason
		}
	}
}

// addToolCall adds a delta to the call it continues, or starts a new call: on a
// new index; on a new id (some servers send every call whole, all at index 0); and,
// when the delta has neither (some gateways in front of Gemini), on a function name
// for a call that has one already. Arguments of different calls never merge.
func (a *accumulator) addToolCall(d oai.ChatCompletionChunkChoiceDeltaToolCall) {
	if a.byIndex == nil {
		a.byIndex = map[int64]int{}
		a.byID = map[string]int{}
	}
	i := a.callFor(d)
	a.current = i
	c := a.calls[i]
	if d.ID != "" && c.id == "" {
		c.id = d.ID
		a.byID[d.ID] = i
	}
	if d.Function.Name != "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
	// The SDK marks fields it has no type for as invalid; their raw text is exact.
	for k, f := range d.JSON.ExtraFields {
		if raw := f.Raw(); raw != "" && raw != "null" && !standardCallFields[k] {
			if c.extra == nil {
				c.extra = map[string]json.RawMessage{}
			}
			c.extra[k] = json.RawMessage(raw)
		}
	}
}

func (a *accumulator) callFor(d oai.ChatCompletionChunkChoiceDeltaToolCall) int {
	switch {
	case d.JSON.Index.Valid(): // present and not null; Index == 0 may be absent
		i, ok := a.byIndex[d.Index]
		if ok && (d.ID == "" || a.calls[i].id == "" || d.ID == a.calls[i].id) {
			return i
		}
		i = a.newCall()
		a.byIndex[d.Index] = i
		return i
	case d.ID != "":
		if i, ok := a.byID[d.ID]; ok {
			return i
		}
		return a.newCall()
	case len(a.calls) == 0 || d.Function.Name != "" && a.startsAnother(d.Function.Name):
		return a.newCall()
	}
	return a.current
}

// startsAnother reports whether a name in a delta without id or index begins a new
// call: the current one has a name, and either this one differs or the current
// call's arguments are already whole (some gateways repeat the name in every chunk).
func (a *accumulator) startsAnother(name string) bool {
	c := a.calls[a.current]
	if c.name == "" {
		return false
	}
	if name != c.name {
		return true
	}
	args := strings.TrimSpace(c.args.String())
	return args != "" && json.Valid([]byte(args))
}

func (a *accumulator) newCall() int {
	a.calls = append(a.calls, &partialCall{})
	return len(a.calls) - 1
}

func (a *accumulator) response() *model.Response {
	msg := model.Message{Role: model.RoleAssistant, Content: a.content.String()}
	if msg.Content == "" {
		msg.Content = a.refusal.String()
	}
	for i, name := range reasoningFields {
		if text := a.reasoning[i].String(); text != "" {
			msg.Reasoning = &model.Reasoning{Field: name, Text: text}
			break
		}
	}
	for _, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, toolCall(c.id, c.name, c.args.String(), c.extra))
	}
	return &model.Response{Message: msg, FinishReason: model.FinishReason(a.finishReason), Usage: a.usage, Model: a.model}
}
