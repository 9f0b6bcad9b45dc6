package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentrun/agentrun/runtime"
)

// errStreamIdle is the cause of a stream canceled because no data arrived in time.
var errStreamIdle = errors.New("stream idle")

// completeStream streams the response, passing text to onDelta as it arrives. Tool
// calls are returned only from a stream that ended with a finish_reason: a stream
// cut off earlier may hold half an argument object.
func (m *Model) completeStream(ctx context.Context, params oai.ChatCompletionNewParams, onDelta func(string)) (*runtime.ModelResponse, error) {
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}

	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var httpRes *http.Response
	// NewStreaming returns once the response headers are in (after the SDK's
	// retries); from then on the idle timer bounds each wait for more data.
	s := m.chat.NewStreaming(sctx, params, option.WithHTTPClient(m.stream), option.WithResponseInto(&httpRes))
	defer s.Close()
	idle := time.AfterFunc(m.timeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()

	var acc accumulator
	for s.Next() {
		idle.Reset(m.timeout)
		acc.add(s.Current(), onDelta)
	}
	if err := s.Err(); err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(sctx), errStreamIdle) {
			return nil, &runtime.ModelError{Err: fmt.Errorf("no data from the stream for %s", m.timeout)}
		}
		return nil, m.fail(ctx, err, httpRes)
	}
	if acc.finishReason == "" {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if acc.chunks == 0 && httpRes != nil {
			if ct := httpRes.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				return nil, &runtime.ModelError{Err: fmt.Errorf("the server did not stream (Content-Type %q)", ct)}
			}
		}
		return nil, &runtime.ModelError{Err: errors.New("the stream ended before the response was complete (no finish_reason)")}
	}
	out := acc.response()
	if err := checkTruncated(out); err != nil {
		return nil, err
	}
	return out, nil
}

// accumulator assembles choice 0 of a streamed response. It is written here rather
// than taken from openai.ChatCompletionAccumulator so that tool calls without a
// "type" or an "index" survive and nothing depends on JustFinishedToolCall timing.
type accumulator struct {
	chunks       int
	model        string
	content      strings.Builder
	refusal      strings.Builder
	calls        []*partialCall
	byIndex      map[int64]int // tool call index on the wire → position in calls
	finishReason string
	usage        runtime.Usage
}

type partialCall struct {
	id, name string
	args     strings.Builder
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
		for _, d := range c.Delta.ToolCalls {
			a.addToolCall(d)
		}
		if c.FinishReason != "" {
			a.finishReason = c.FinishReason
		}
	}
}

func (a *accumulator) addToolCall(d oai.ChatCompletionChunkChoiceDeltaToolCall) {
	if a.byIndex == nil {
		a.byIndex = map[int64]int{}
	}
	i, ok := a.byIndex[d.Index]
	// A new id at a known index is a new call: some servers send every call
	// whole, each without an index (so all at 0).
	if !ok || (d.ID != "" && a.calls[i].id != "" && d.ID != a.calls[i].id) {
		i = len(a.calls)
		a.byIndex[d.Index] = i
		a.calls = append(a.calls, &partialCall{})
	}
	c := a.calls[i]
	if d.ID != "" {
		c.id = d.ID
	}
	if d.Function.Name != "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
}

func (a *accumulator) response() *runtime.ModelResponse {
	msg := runtime.Message{Role: runtime.RoleAssistant, Content: a.content.String()}
	if msg.Content == "" {
		msg.Content = a.refusal.String()
	}
	for i, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, toolCall(i, c.id, c.name, c.args.String()))
	}
	return &runtime.ModelResponse{Message: msg, FinishReason: runtime.FinishReason(a.finishReason), Usage: a.usage, Model: a.model}
}
