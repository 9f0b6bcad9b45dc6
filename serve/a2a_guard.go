package serve

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/attach"
)

// a2aGuard is the SDK's call interceptor: before the SDK handles a call, it
// makes the principal the call's user, answers a task or context that is not
// the caller's as not found, and for a message checks, admits and prepares the
// run it starts or records the decisions it makes, so every refusal is a plain
// A2A error and nothing has started.
type a2aGuard struct{ a *a2aService }

var _ a2asrv.CallInterceptor = a2aGuard{}

func (g a2aGuard) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	call := a2aCallFrom(ctx)
	if call == nil {
		return ctx, nil, a2a.ErrUnauthenticated
	}
	cc.User = a2asrv.NewAuthenticatedUser(call.p.User.ID, nil)
	var id a2a.TaskID
	switch r := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		call.streaming = cc.Method() == "SendStreamingMessage"
		res, err := g.a.beforeMessage(ctx, call, r)
		if res != nil { // a message sent before: the task as it stands
			return ctx, res, nil
		}
		return ctx, nil, err
	case *a2a.GetTaskRequest:
		id = r.ID
	case *a2a.CancelTaskRequest:
		id = r.ID
	case *a2a.SubscribeToTaskRequest:
		id = r.ID
	default:
		return ctx, nil, nil
	}
	// Checked here, not by the SDK's handler alone: its answers for a task of
	// another user that is in flight differ from those for no task.
	if !g.a.tasks.owns(ctx, id) {
		return ctx, nil, errNoTask
	}
	return ctx, nil, nil
}

func (g a2aGuard) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

// beforeMessage checks a message: one to a task waiting for approval decides
// on its calls; any other starts a task, whose run it admits and prepares.
// A message sent before (its messageId) gets its task as it stands (res).
func (a *a2aService) beforeMessage(ctx context.Context, call *a2aCall, req *a2a.SendMessageRequest) (res *a2a.Task, err error) {
	msg := req.Message
	if msg == nil || msg.ID == "" || len(msg.Parts) == 0 {
		return nil, nil // the SDK's handler refuses it
	}
	// Refused here what the SDK's handler would refuse after this check: a
	// decision is recorded here, and must not be for a message it then refuses.
	if err := a2aCheckMessage(msg, a.s.limits.MaxInputChars); err != nil {
		return nil, err
	}
	if msg.TaskID != "" {
		return a.beforeDecision(ctx, call, msg)
	}
	digest := a2aDigest(msg)
	if id, ok := a.tasks.byMessage(call.p.User.ID, call.agent, msg.ID, digest); ok {
		if id == "" {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "this messageId was sent before with another message: give each message an id of its own")
		}
		stored, err := a.tasks.Get(ctx, id)
		if err != nil {
			return nil, errNoTask
		}
		return stored.Task, nil
	}
	if msg.ContextID != "" {
		switch known, err := a.knownContext(ctx, call.p.User.ID, msg.ContextID); {
		case err != nil:
			return nil, a2a.NewError(a2a.ErrInternalError, "the memory store did not answer")
		case !known:
			return nil, errNoContext
		}
	}
	text, parts, err := a2aInput(msg, a.s.limits.attachLimits())
	if err != nil {
		return nil, err
	}
	slot, no := a.s.admitRun(call.p)
	if no != nil {
		return nil, a2aFailure(http.StatusTooManyRequests, no.code, no.msg)
	}
	if msg.ContextID == "" {
		// A new context, which its run's conversation is: the SDK takes the message's.
		msg.ContextID = a2a.NewContextID()
	}
	var failure error
	pr, ok := a.s.prepare(call.p, slot, call.agent, runInput{text: text, parts: parts, conversation: msg.ContextID},
		func(status int, code, msg string) { failure = a2aFailure(status, code, msg) })
	if !ok {
		return nil, failure
	}
	pr.key = &runKey{user: call.p.User.ID, key: a2aMessageKey(call.agent, msg.ID), digest: digest}
	call.mu.Lock()
	call.pr, call.key = pr, pr.key
	call.mu.Unlock()
	return nil, nil
}

// a2aMessageKey is a message's Idempotency-Key among the user's runs: the space
// keeps it apart from any a client can send in the header.
func a2aMessageKey(agent, messageID string) string { return "a2a " + agent + " " + messageID }

// a2aDigest digests what a message asks, so a repeat is told from another
// message under the same id.
func a2aDigest(msg *a2a.Message) [sha256.Size]byte {
	data, _ := json.Marshal(struct {
		ContextID string           `json:"c"`
		Parts     a2a.ContentParts `json:"p"`
		Metadata  map[string]any   `json:"m"`
		Refs      []a2a.TaskID     `json:"r"`
	}{msg.ContextID, msg.Parts, msg.Metadata, msg.ReferenceTasks})
	return sha256.Sum256(append([]byte("a2a\n"), data...))
}

// knownContext reports whether contextID is the caller's: the context of one of
// their tasks, or one of their conversations. Only the caller's own are looked
// at, so another user's is unknown, as one that does not exist.
func (a *a2aService) knownContext(ctx context.Context, user, contextID string) (bool, error) {
	if !validConversationID(contextID) {
		return false, nil
	}
	if a.tasks.hasContext(user, contextID) {
		return true, nil
	}
	conv, err := a.s.store.Conversation(ctx, storeConversation(user, contextID), 1)
	return err == nil && conv.User == user, err
}

// a2aInput is a message's input: its text parts, joined, and its files (raw
// bytes or URLs) as the run API's attachments are read and bounded. A data part
// is no input: it decides on a task's calls.
func a2aInput(msg *a2a.Message, lim attach.Limits) (string, []model.Part, error) {
	var texts []string
	var files []model.Part
	for i, p := range msg.Parts {
		shown := p.Filename
		if shown == "" {
			shown = fmt.Sprintf("parts[%d]", i)
		}
		var f model.Part
		var err error
		switch c := p.Content.(type) {
		case a2a.Text:
			texts = append(texts, string(c))
			continue
		case a2a.Raw:
			f, err = attach.FromBytes(p.Filename, p.MediaType, c, lim)
		case a2a.URL:
			if strings.HasPrefix(string(c), "data:") {
				f, err = attach.FromDataURL(string(c), p.Filename, lim)
			} else {
				f, err = attach.FromURL(string(c), p.MediaType, "")
			}
		default:
			return "", nil, a2a.NewError(a2a.ErrUnsupportedContentType,
				fmt.Sprintf("%s: a data part is taken only as a decision, by a task waiting for approval", shown))
		}
		if err != nil {
			status, code := attachmentFailure(err)
			return "", nil, a2aFailure(status, code, shownAs(err, p.Filename, shown).Error())
		}
		files = append(files, f)
	}
	if err := lim.Check(files); err != nil {
		status, code := attachmentFailure(err)
		return "", nil, a2aFailure(status, code, err.Error())
	}
	return strings.Join(texts, "\n"), files, nil
}

// beforeDecision checks a message to an existing task: the task must be the
// caller's and wait for approval, and the message must decide on its calls,
// which it does here, as the approval endpoint would. A message the task has
// already (a repeat) gets the task as it stands.
func (a *a2aService) beforeDecision(ctx context.Context, call *a2aCall, msg *a2a.Message) (*a2a.Task, error) {
	stored, err := a.tasks.Get(ctx, msg.TaskID)
	if err != nil {
		return nil, errNoTask
	}
	task := stored.Task
	switch {
	case slices.ContainsFunc(task.History, func(m *a2a.Message) bool { return m.ID == msg.ID }):
		return task, nil
	case msg.ContextID != "" && msg.ContextID != task.ContextID:
		return nil, a2a.NewError(a2a.ErrInvalidParams, "the message's contextId is not its task's")
	case task.Status.State != a2a.TaskStateInputRequired:
		return nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf(
			"the task is %s and takes no more messages: send a new message, with its contextId to go on in its context", a2aStateName(task.Status.State)))
	}
	runID, _ := task.Metadata[a2aRunKey].(string)
	paused, err := runtime.LoadPaused(ctx, a.s.pausedStore(), runID, deciderOf(call.p))
	if err != nil {
		return nil, a2aApprovalError(err)
	}
	decisions, err := a2aDecisions(msg, paused, a2aShown(task))
	if err != nil {
		return nil, err
	}
	after := 0
	if rec := a.s.runs.get(runID, call.p.User.ID); rec != nil {
		after = rec.snapshot().Events
	}
	d := &a2aDecided{runID: runID, after: after}
	for _, dr := range decisions {
		if d.out, err = a.s.decideCall(ctx, call.p, runID, dr); err != nil {
			// The decisions before it stay recorded, as separate calls of the
			// approval endpoint would.
			return nil, a2aApprovalError(err)
		}
	}
	call.mu.Lock()
	call.decided = d
	call.mu.Unlock()
	return nil, nil
}

// a2aStateName is a task state as people read it: "input-required".
func a2aStateName(s a2a.TaskState) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}

// a2aApprovalError tells an error of the approval API as an A2A error, with the
// approval endpoint's message and code.
func a2aApprovalError(err error) error {
	status, code, msg := approvalProblem(err)
	kind := a2a.ErrInvalidParams
	switch {
	case code == "run_not_found":
		msg = "the task's run no longer waits for approval"
	case status >= 500:
		kind = a2a.ErrInternalError
	}
	return a2a.NewError(kind, msg).WithErrorInfoMeta(map[string]string{"agentrun_code": code})
}

// a2aDecisionPart is a data part that decides on one call.
type a2aDecisionPart struct {
	Decision string `json:"decision"` // approve, or reject (deny)
	CallID   string `json:"call_id"`  // may be left out when one call waits
	Reason   string `json:"reason"`
	ArgsHash string `json:"args_hash"`
}

// a2aMaxMessageExtras bounds what a message carries besides its text and files
// (metadata, extensions, references, data parts), all of which its task's
// history keeps.
const a2aMaxMessageExtras = 16 << 10

// a2aCheckMessage refuses a message the SDK's handler would refuse (it has no
// role, or a part that is null) and one whose text or extras are over their
// bounds, before anything of it is recorded or kept.
func a2aCheckMessage(msg *a2a.Message, maxChars int) error {
	if msg.Role == "" {
		return a2a.NewError(a2a.ErrInvalidParams, "message role is required")
	}
	chars := 0
	extras := []any{msg.Metadata, msg.Extensions, msg.ReferenceTasks}
	for i, p := range msg.Parts {
		if p == nil {
			return a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("parts[%d] is null", i))
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			chars += utf8.RuneCountInString(string(c))
		case a2a.Data:
			extras = append(extras, c.Value)
		}
		extras = append(extras, p.Metadata)
	}
	if chars > maxChars {
		return a2aFailure(http.StatusRequestEntityTooLarge, "input_too_long", fmt.Sprintf("the message's text is %d characters; at most %d", chars, maxChars))
	}
	if b, _ := json.Marshal(extras); len(b) > a2aMaxMessageExtras {
		return a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("the message's metadata, extensions, references and data parts are over %d bytes", a2aMaxMessageExtras))
	}
	return nil
}

// a2aShown is what the task's input-required status showed its client: the
// calls waiting, each with the hash of the arguments shown.
func a2aShown(task *a2a.Task) map[string]string {
	shown := map[string]string{}
	if task.Status.Message == nil {
		return shown
	}
	for _, p := range task.Status.Message.Parts {
		d, ok := p.Content.(a2a.Data)
		if !ok {
			continue
		}
		raw, _ := json.Marshal(d.Value)
		var v struct {
			Approvals []runtime.Approval `json:"approvals"`
		}
		if json.Unmarshal(raw, &v) == nil {
			for _, ap := range v.Approvals {
				shown[ap.CallID] = ap.ArgsHash
			}
		}
	}
	return shown
}

// a2aDecisions reads a message's decisions on the calls of paused: a data part
// per call, or the text "approve" or "deny" when one call waits. A decision is
// on the call the task showed, with the arguments it showed: when the run waits
// on other calls than those (it went on meanwhile), the client must read the
// task again.
func a2aDecisions(msg *a2a.Message, paused *runtime.Paused, shown map[string]string) ([]runtime.DecideRequest, error) {
	undecided := paused.Undecided()
	for _, id := range undecided {
		if _, ok := shown[id]; !ok {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "the task waits on other calls than it showed: read it again (GetTask) and decide on those")
		}
	}
	how := `decide with a data part {"decision": "approve" or "reject", "call_id": …} for each call waiting, or the text "approve" or "deny" when one call waits`
	var out []runtime.DecideRequest
	var text []string
	for _, p := range msg.Parts {
		switch c := p.Content.(type) {
		case a2a.Text:
			text = append(text, string(c))
		case a2a.Data:
			raw, _ := json.Marshal(c.Value)
			var d a2aDecisionPart
			if err := json.Unmarshal(raw, &d); err != nil {
				return nil, a2a.NewError(a2a.ErrInvalidParams, "a data part is not a decision: "+how)
			}
			if d.CallID == "" && len(undecided) == 1 {
				d.CallID = undecided[0]
			}
			approve, ok := a2aDecisionWord(d.Decision)
			if !ok || d.CallID == "" {
				return nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("not a decision (%q on call %q): %s", d.Decision, d.CallID, how))
			}
			if d.ArgsHash == "" {
				d.ArgsHash = shown[d.CallID]
			}
			out = append(out, runtime.DecideRequest{CallID: d.CallID, Approve: approve, Reason: d.Reason, ArgsHash: d.ArgsHash})
		default:
			return nil, a2a.NewError(a2a.ErrInvalidParams, "a task waiting for approval takes no files: "+how)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	word := strings.TrimRight(strings.ToLower(strings.TrimSpace(strings.Join(text, " "))), ".!")
	approve, ok := a2aDecisionWord(word)
	switch {
	case !ok:
		return nil, a2a.NewError(a2a.ErrInvalidParams, "the task waits for approval: "+how)
	case len(undecided) != 1:
		return nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("%d calls wait for a decision: %s", len(undecided), how))
	}
	return []runtime.DecideRequest{{CallID: undecided[0], Approve: approve, ArgsHash: shown[undecided[0]]}}, nil
}

// a2aDecisionWord reads a decision: approve, or reject or deny.
func a2aDecisionWord(s string) (approve, ok bool) {
	switch strings.ToLower(s) {
	case "approve":
		return true, true
	case "reject", "deny":
		return false, true
	}
	return false, false
}
