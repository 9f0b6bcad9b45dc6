package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentrun/agentrun/runtime/model"
)

// errStreamTotal is the cause of a stream canceled because the attempt that
// answered took longer than the timeout.
var errStreamTotal = errors.New("stream too long")

// completeStream streams one answer, passing text to onDelta as it arrives. An
// answer is returned only from a stream that reached message_stop: one cut off
// earlier may hold half a tool input.
//
// model.timeout bounds each attempt as a whole: the wait for the headers (the
// transport's ResponseHeaderTimeout, after which the SDK may retry) and the whole
// stream from the start of the attempt that answered.
func (m *Model) completeStream(ctx context.Context, p sdk.MessageNewParams, onDelta func(string)) (*turn, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var httpRes *http.Response
	var attempt time.Time
	started := option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		attempt = time.Now()
		return next(req)
	})
	s := m.msgs.NewStreaming(sctx, p, option.WithHTTPClient(m.stream), option.WithResponseInto(&httpRes), started)
	defer s.Close()
	if s.Err() == nil && !attempt.IsZero() {
		deadline := time.AfterFunc(time.Until(attempt.Add(m.timeout)), func() { cancel(errStreamTotal) })
		defer deadline.Stop()
	}

	acc := &accumulator{onDelta: onDelta}
	for s.Next() {
		if err := acc.add(s.Current()); err != nil {
			return nil, err
		}
	}
	if err := s.Err(); err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(sctx), errStreamTotal) {
			what := "the stream did not finish"
			if acc.events == 0 {
				what = "no data came from the stream"
			}
			return nil, &model.Error{Err: fmt.Errorf("%s within %s (model.timeout)", what, m.timeout), Usage: acc.usage()}
		}
		return nil, m.fail(ctx, err, httpRes)
	}
	if !acc.stopped {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if acc.events == 0 && httpRes != nil {
			if ct := httpRes.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				return nil, &model.Error{Err: fmt.Errorf("the server did not stream (Content-Type %q)", ct)}
			}
		}
		return nil, &model.Error{Err: errors.New("the stream ended before the answer was complete (no message_stop)"), Usage: acc.usage()}
	}
	return acc.turn(), nil
}

// accumulator assembles a streamed answer from its events: message_start,
// content_block_start / _delta / _stop for each block by index, message_delta
// (the stop reason and the final usage) and message_stop. Pings are dropped by
// the SDK; an error event ends the stream with the API's error.
type accumulator struct {
	onDelta func(string)
	events  int
	model   string
	stop    string
	stopped bool
	blocks  []*block
	byIndex map[int64]*block
	// The usage counts; message_delta's are cumulative and replace those of
	// message_start they repeat.
	input, cacheRead, cacheWrite, output int64
}

// block is one content block as it streams.
type block struct {
	typ       string
	start     json.RawMessage // content_block_start's block, for types read as they came
	text      strings.Builder // text, thinking, or a tool's partial input JSON
	signature string
	id, name  string
	data      string // redacted_thinking
}

func (a *accumulator) add(ev sdk.MessageStreamEventUnion) error {
	a.events++
	switch ev.Type {
	case "message_start":
		a.model = string(ev.Message.Model)
		u := ev.Message.Usage
		a.input, a.cacheRead, a.cacheWrite, a.output = u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens
	case "content_block_start":
		cb := ev.ContentBlock
		b := &block{typ: cb.Type, start: json.RawMessage(cb.RawJSON()), id: cb.ID, name: cb.Name, data: cb.Data, signature: cb.Signature}
		b.text.WriteString(cb.Text)
		b.text.WriteString(cb.Thinking)
		if a.byIndex == nil {
			a.byIndex = map[int64]*block{}
		}
		a.byIndex[ev.Index] = b
		a.blocks = append(a.blocks, b)
		if cb.Text != "" && cb.Type == "text" {
			a.onDelta(cb.Text)
		}
	case "content_block_delta":
		b := a.byIndex[ev.Index]
		if b == nil {
			return &model.Error{Err: fmt.Errorf("the stream sent a delta for block %d before its start", ev.Index)}
		}
		a.delta(b, ev.Delta)
	case "message_delta":
		a.stop = string(ev.Delta.StopReason)
		u := ev.Usage
		a.output = u.OutputTokens
		if u.JSON.InputTokens.Valid() {
			a.input = u.InputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			a.cacheRead = u.CacheReadInputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			a.cacheWrite = u.CacheCreationInputTokens
		}
	case "message_stop":
		a.stopped = true
	}
	return nil
}

func (a *accumulator) delta(b *block, d sdk.MessageStreamEventUnionDelta) {
	switch d.Type {
	case "text_delta":
		b.text.WriteString(d.Text)
		if b.typ == "text" && d.Text != "" {
			a.onDelta(d.Text)
		}
	case "input_json_delta":
		b.text.WriteString(d.PartialJSON)
	case "thinking_delta":
		b.text.WriteString(d.Thinking)
	case "signature_delta":
		b.signature += d.Signature
	}
}

func (a *accumulator) usage() model.Usage {
	return usageOf(a.input, a.cacheRead, a.cacheWrite, a.output)
}

// turn is the assembled answer. Each block is written back as the JSON the
// unstreamed API would have sent for it, so that a thinking block goes back with
// the very text and signature it came with.
func (a *accumulator) turn() *turn {
	t := &turn{stop: a.stop, usage: a.usage(), model: a.model}
	for _, b := range a.blocks {
		var raw json.RawMessage
		switch b.typ {
		case "text":
			t.text.WriteString(b.text.String())
			raw = encode(map[string]any{"type": "text", "text": b.text.String()})
		case "thinking":
			t.thinking = append(t.thinking, b.text.String())
			raw = encode(map[string]any{"type": "thinking", "thinking": b.text.String(), "signature": b.signature})
			t.blocks = append(t.blocks, raw)
		case "redacted_thinking":
			raw = encode(map[string]any{"type": "redacted_thinking", "data": b.data})
			t.blocks = append(t.blocks, raw)
		case "tool_use":
			args := b.text.String()
			t.calls = append(t.calls, model.ToolCall{ID: b.id, Name: b.name, Arguments: args})
			raw = withInput(b.start, args)
		default: // a server tool's blocks: as they started, with any input streamed
			raw = withInput(b.start, b.text.String())
		}
		t.raw = append(t.raw, raw)
	}
	return t
}

// encode is v's JSON with HTML characters left as they are.
func encode(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // maps of strings always encode
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
}

// withInput is a block as content_block_start sent it, with the input that
// streamed after it, when that is whole JSON.
func withInput(start json.RawMessage, input string) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(start, &fields) != nil {
		return start
	}
	if strings.TrimSpace(input) == "" {
		if _, ok := fields["input"]; !ok {
			return start
		}
		input = "{}"
	}
	if !json.Valid([]byte(input)) {
		return start
	}
	fields["input"] = json.RawMessage(input)
	b, err := json.Marshal(fields)
	if err != nil {
		return start
	}
	return b
}
