package openai

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrun/agentrun/runtime/model"
)

// streamResponses streams a response of the Responses API, passing output text
// to onDelta as it arrives. The answer is read from the finished output items
// (response.output_item.done), so a function call's arguments are whole; a
// stream that ends before response.completed or response.incomplete is an
// error. model.timeout bounds each attempt as a whole, as for chat completions.
func (m *Model) streamResponses(ctx context.Context, params responses.ResponseNewParams, onDelta func(string)) (*model.Response, error) {
	clock, sctx := newStreamClock(ctx)
	defer clock.stop()
	var httpRes *http.Response
	s := m.responses.NewStreaming(sctx, params, option.WithHTTPClient(m.stream), option.WithResponseInto(&httpRes), clock.started())
	defer s.Close()
	clock.arm(s.Err() == nil, m.timeout)

	var acc responseAccumulator
	for s.Next() {
		if err := acc.add(s.Current(), onDelta); err != nil {
			return nil, m.redactErr(err)
		}
		if acc.final != nil {
			break
		}
	}
	if err := s.Err(); err != nil {
		return nil, m.streamFailed(ctx, clock, err, acc.events, httpRes)
	}
	if acc.final == nil {
		return nil, unfinished(ctx, acc.events, httpRes, "no response.completed")
	}
	out, err := finishResponse(acc.final, acc.items())
	return out, m.redactErr(err)
}

// responseAccumulator follows the events of one streamed response.
type responseAccumulator struct {
	events int
	// done are the finished output items by output_index, as raw JSON.
	done map[int64]string
	// final is the response of response.completed or response.incomplete.
	final *responses.Response
}

func (a *responseAccumulator) add(ev responses.ResponseStreamEventUnion, onDelta func(string)) error {
	a.events++
	switch ev.Type {
	case "response.output_text.delta":
		if ev.Delta != "" {
			onDelta(ev.Delta)
		}
	case "response.output_item.done":
		if a.done == nil {
			a.done = map[int64]string{}
		}
		a.done[ev.OutputIndex] = ev.Item.RawJSON()
	case "response.completed", "response.incomplete":
		r := ev.Response
		a.final = &r
	case "response.failed":
		return failedResponse(string(ev.Response.Error.Code), ev.Response.Error.Message, usageOfResponse(ev.Response.Usage))
	case "error":
		return failedResponse(ev.Code, ev.Message, model.Usage{})
	}
	// The other events (response.created, response.output_item.added, the
	// argument and reasoning summary deltas, …) only announce what the finished
	// items hold.
	return nil
}

// items are the output items in order: those of the final response, which lists
// them all, or, when it lists none (some servers send only the status), those
// the stream finished.
func (a *responseAccumulator) items() []string {
	if len(a.final.Output) > 0 {
		out := make([]string, len(a.final.Output))
		for i, it := range a.final.Output {
			out[i] = it.RawJSON()
		}
		return out
	}
	idx := make([]int64, 0, len(a.done))
	for i := range a.done {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = a.done[k]
	}
	return out
}

// redactErr cleans a model error's text of the API key, in case a server echoed
// it in a failure message.
func (m *Model) redactErr(err error) error {
	if me, ok := err.(*model.Error); ok && m.key != "" && strings.Contains(me.Err.Error(), m.key) {
		me.Err = model.Redacted(me.Err.Error(), m.key, nil)
	}
	return err
}
