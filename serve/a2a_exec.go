package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentrun/agentrun/runtime"
)

// a2aExecutor is the SDK's agent executor: a new task starts the run its
// message's checks prepared (s.start, as every run), a task whose calls a
// message decided follows its resumed run, and both tell the run's events as
// the task's: working, the model's text as chunks of the answer artifact where
// the run streams it (never a draft: the runtime withholds those), tool calls
// as progress, then the answer and how it ended.
type a2aExecutor struct{ a *a2aService }

var _ a2asrv.AgentExecutor = (*a2aExecutor)(nil)

// a2aAnswer is the id of a task's answer artifact.
const a2aAnswer a2a.ArtifactID = "answer"

func (x *a2aExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		call := a2aCallFrom(ctx)
		switch {
		case call == nil || ec.User == nil || ec.User.Name != call.p.User.ID:
			yield(nil, a2a.ErrUnauthenticated)
		case ec.StoredTask != nil:
			x.goOn(ctx, call, ec, yield)
		default:
			x.start(ctx, call, ec, yield)
		}
	}
}

// start starts a new task's run and follows it.
func (x *a2aExecutor) start(ctx context.Context, call *a2aCall, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	pr := call.takePrepared()
	if pr == nil {
		yield(nil, errors.New("the request ended before its run started"))
		return
	}
	pr.text = call.streaming
	rec, ok := x.a.s.start(ctx, pr) // with its key (the message id), it outlives the request, as a task does
	if !ok {
		yield(nil, a2a.NewError(a2a.ErrInvalidParams, "this messageId was sent before with another message: give each message an id of its own"))
		return
	}
	task := a2a.NewSubmittedTask(ec, a2aKept(ec.Message))
	task.Metadata = map[string]any{a2aRunKey: rec.ID}
	if !yield(task, nil) {
		return
	}
	x.followRun(ctx, call, ec, rec, 0, yield)
}

// goOn goes on with a task after a message decided on its calls: it follows the
// resumed run, or waits for the calls still undecided.
func (x *a2aExecutor) goOn(ctx context.Context, call *a2aCall, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	call.mu.Lock()
	d := call.decided
	call.decided = nil
	call.mu.Unlock()
	switch {
	case d == nil: // the guard decides on, or refuses, every message to a task
		yield(a2a.NewStatusUpdateEvent(ec, ec.StoredTask.Status.State, ec.StoredTask.Status.Message), nil)
		return
	case d.out.Status != "resumed":
		yield(x.waiting(ec, d.out.pausedView), nil)
		return
	}
	rec := x.a.s.runs.get(d.runID, call.p.User.ID)
	if rec == nil {
		yield(a2aStatus(ec, a2a.TaskStateFailed, "the run goes on in another process: follow it with GET /v1/runs/"+d.runID, nil), nil)
		return
	}
	x.followRun(ctx, call, ec, rec, d.after, yield)
}

// followRun tells the run's events after sequence number after as the task's,
// then its outcome. It is one of the run's readers: a run whose task nobody
// follows any more is canceled after the resume grace.
func (x *a2aExecutor) followRun(ctx context.Context, call *a2aCall, ec *a2asrv.ExecutorContext, rec *runRecord, after int,
	yield func(a2a.Event, error) bool) {
	grace := x.a.s.opts.ResumeGrace
	rec.reading(+1, grace)
	defer rec.reading(-1, grace)
	if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
		return
	}
	st := &a2aStream{ec: ec}
	each := func(events []runtime.Event, _ int) bool {
		for _, e := range events {
			if ev := st.event(e); ev != nil && !yield(ev, nil) {
				return false
			}
		}
		return true
	}
	if _, ok := follow(ctx, rec, after, each, func() bool { return true }); !ok {
		return
	}
	for _, ev := range x.outcome(ctx, call, ec, rec) {
		if !yield(ev, nil) {
			return
		}
	}
}

// outcome is how the run's execution ended, as the task's last events: the
// answer and completed; input-required with the calls waiting for approval;
// failed for a fault (faultOf's message), canceled for a cancellation.
func (x *a2aExecutor) outcome(ctx context.Context, call *a2aCall, ec *a2asrv.ExecutorContext, rec *runRecord) []a2a.Event {
	// The SDK merges a status's metadata into its task's: the last progress is
	// cleared, so a task that is over shows none, and so is an expiry.
	meta := map[string]any{"agentrun_progress": nil, a2aExpiresKey: nil}
	v := rec.snapshot()
	if v.Status == runFailed {
		_, _, msg := runFailure(v)
		return []a2a.Event{a2aStatus(ec, a2a.TaskStateFailed, msg, meta)}
	}
	res := v.Result
	meta["agentrun_stop"] = string(res.Stop)
	switch _, _, msg, failed := faultOf(res); {
	case res.Stop == runtime.StopAwaitingApproval:
		paused, err := runtime.LoadPaused(ctx, x.a.s.pausedStore(), rec.ID, deciderOf(call.p))
		if err != nil {
			return []a2a.Event{a2aStatus(ec, a2a.TaskStateFailed, "the run paused for approval, but its approvals could not be read", meta)}
		}
		waiting := x.waiting(ec, viewPaused(paused))
		waiting.Metadata["agentrun_stop"] = meta["agentrun_stop"]
		return []a2a.Event{waiting}
	case res.Stop == runtime.StopCanceled:
		return []a2a.Event{a2aStatus(ec, a2a.TaskStateCanceled, msg, meta)}
	case failed:
		return []a2a.Event{a2aStatus(ec, a2a.TaskStateFailed, msg, meta)}
	}
	parts := []*a2a.Part{a2a.NewTextPart(res.Answer)}
	if len(res.Output) > 0 {
		var value any
		if json.Unmarshal(res.Output, &value) == nil {
			data := a2a.NewDataPart(value)
			data.MediaType = "application/json"
			parts = append(parts, data)
		}
	}
	// The whole answer replaces what was streamed of it (text before tool calls,
	// a fallback message after a stop): the artifact is the answer.
	answer := a2a.NewArtifactUpdateEvent(ec, a2aAnswer, parts...)
	answer.Artifact.Name = string(a2aAnswer)
	answer.Append, answer.LastChunk = false, true
	done := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)
	done.Metadata = meta
	return []a2a.Event{answer, done}
}

// waiting is the input-required status of a task whose run waits for approval:
// its message lists the calls waiting, as the approval endpoints show them (a
// text part for people, a data part for programs), and how to decide. Its
// metadata says until when the run waits, which the store keeps the task for.
func (x *a2aExecutor) waiting(ec *a2asrv.ExecutorContext, v pausedView) *a2a.TaskStatusUpdateEvent {
	pending := []runtime.Approval{}
	var lines []string
	for _, ap := range v.Approvals {
		if ap.Decision != nil {
			continue
		}
		pending = append(pending, ap)
		line := fmt.Sprintf("- %s (call_id %s) with %s", ap.Tool, ap.CallID, ap.Arguments)
		if ap.Message != "" {
			line += ": " + ap.Message
		}
		lines = append(lines, line)
	}
	expires := v.Expires.UTC().Format("2006-01-02 15:04:05 UTC")
	text := fmt.Sprintf("Every call is decided, but the run could not go on now: it does when its approvals expire, at %s.", expires)
	if len(pending) > 0 {
		text = fmt.Sprintf("The run waits for approval of %d call(s):\n%s\nAnswer \"approve\" or \"deny\" (one call waiting), "+
			"or send a data part {\"decision\": \"approve\" or \"reject\", \"call_id\": …} for each call, before %s.",
			len(pending), strings.Join(lines, "\n"), expires)
	}
	data := a2a.NewDataPart(a2aJSONValue(map[string]any{"run_id": v.RunID, "approvals": pending, "expires": v.Expires}))
	data.MediaType = "application/json"
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text), data))
	ev.Metadata = map[string]any{a2aExpiresKey: v.Expires.UTC().Format(time.RFC3339Nano), "agentrun_progress": nil}
	return ev
}

// a2aJSONValue is v as JSON decodes it (maps, slices, strings, float64s), the
// values a data part holds.
func a2aJSONValue(v any) any {
	data, _ := json.Marshal(v)
	var out any
	json.Unmarshal(data, &out)
	return out
}

// a2aStatus is a status update with a message from the agent, if text is set.
func a2aStatus(ec *a2asrv.ExecutorContext, state a2a.TaskState, text string, meta map[string]any) *a2a.TaskStatusUpdateEvent {
	var msg *a2a.Message
	if text != "" {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	}
	ev := a2a.NewStatusUpdateEvent(ec, state, msg)
	ev.Metadata = meta
	return ev
}

// Cancel cancels the task's run, if it runs, and the task.
func (x *a2aExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		// The task is canceled first, then its run stopped: a run stopped first ends
		// its own execution, whose end closes the task's queue before this
		// execution could write to it ("queue is closed").
		yield(a2aStatus(ec, a2a.TaskStateCanceled, "canceled by the client", nil), nil)
		if call := a2aCallFrom(ctx); call != nil && ec.StoredTask != nil {
			if id, _ := ec.StoredTask.Metadata[a2aRunKey].(string); id != "" {
				if rec := x.a.s.runs.get(id, call.p.User.ID); rec != nil {
					rec.stop()
				}
			}
		}
	}
}

// a2aStream turns a run's events into a task's.
type a2aStream struct {
	ec *a2asrv.ExecutorContext
	// streamed: this execution sent text of the answer already.
	streamed bool
	// paragraph: the model called tools since the last text, whose next text
	// starts a paragraph.
	paragraph bool
}

// event is e as an A2A event, or nil for one a task does not tell. Only the
// top run's are told: a sub-agent's are its own.
func (st *a2aStream) event(e runtime.Event) a2a.Event {
	if e.Depth > 0 {
		return nil
	}
	switch e.Kind {
	case runtime.EventText:
		text := e.Text
		if st.paragraph && st.streamed {
			text = "\n\n" + text
		}
		ev := a2a.NewArtifactUpdateEvent(st.ec, a2aAnswer, a2a.NewTextPart(text))
		ev.Artifact.Name = string(a2aAnswer)
		ev.Append = st.streamed // the first chunk starts the artifact afresh
		st.streamed, st.paragraph = true, false
		return ev
	case runtime.EventModelResponse:
		if e.Calls > 0 {
			st.paragraph = true
		}
	case runtime.EventToolCall, runtime.EventToolResult:
		progress := map[string]any{"event": string(e.Kind), "tool": e.Tool, "call_id": e.CallID}
		if e.Kind == runtime.EventToolResult {
			progress["ok"] = e.Error == ""
		}
		ev := a2a.NewStatusUpdateEvent(st.ec, a2a.TaskStateWorking, nil)
		ev.Metadata = map[string]any{"agentrun_progress": progress}
		return ev
	}
	return nil
}

// a2aKept is a message as its task's history keeps it: a file's bytes are not
// kept (its name, type and size are), so tasks stay small.
func a2aKept(msg *a2a.Message) *a2a.Message {
	kept := *msg
	kept.Parts = make(a2a.ContentParts, len(msg.Parts))
	for i, p := range msg.Parts {
		size := -1
		switch c := p.Content.(type) {
		case a2a.Raw:
			size = len(c)
		case a2a.URL:
			if strings.HasPrefix(string(c), "data:") {
				size = len(c)
			}
		}
		if size < 0 {
			kept.Parts[i] = p
			continue
		}
		kept.Parts[i] = &a2a.Part{Content: a2a.Text(fmt.Sprintf("[file %q of type %q, %d bytes: its content is not kept]", p.Filename, p.MediaType, size)),
			Metadata: map[string]any{"agentrun_file": map[string]any{"filename": p.Filename, "media_type": p.MediaType, "bytes": size}}}
	}
	return &kept
}
