package runtime

// The approval stage of a run: a call whose tool asks for a person's approval
// waits, the run pauses (its record in the store, see pausedState) and a later
// execution resumes it once people decided (resume.go; decide.go records the
// decisions).

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/spec"
	"github.com/expr-lang/expr"
)

// Approval is a call that waits for a person's decision, as the people deciding see
// it.
type Approval struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Arguments are the model's, without bound values, as canonical JSON; ArgsHash
	// digests the tool and them, so a decision can say which arguments it saw.
	Arguments string `json:"arguments"`
	ArgsHash  string `json:"args_hash"`
	Message   string `json:"message,omitempty"` // the tool's approval.message, rendered
	// HashRequired: an earlier pause of the run had a call of this id (some model
	// servers reuse ids), so a decision must name ArgsHash — a late decision meant
	// for the earlier call must not land on this one.
	HashRequired bool      `json:"hash_required,omitempty"`
	Decision     *Decision `json:"decision,omitempty"`
}

// Decision is what became of a call that needed approval.
type Decision struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by,omitempty"` // who decided; "" when approval.on_timeout did
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
	// Expired: nobody decided before the run's approvals expired; on_timeout did.
	Expired bool `json:"expired,omitempty"`
}

// argsHash digests a call's tool and canonical model arguments.
func argsHash(tool, modelArgs string) string {
	sum := sha256.Sum256([]byte(tool + "\x00" + modelArgs))
	return hex.EncodeToString(sum[:])
}

// decidedBy says who decided, for events: the run's own user is "the user", never
// their id.
func decidedBy(d *Decision, user string) string {
	switch {
	case d.Expired:
		return "nobody decided in time"
	case d.By == user:
		return "decided by the user"
	}
	return "decided by " + d.By
}

// rejectionText is a rejected call's result, for the model: who rejected it and
// why. The run's user is named as "the user": a bound value the model never sees.
func rejectionText(tool string, d *Decision, user string) string {
	if d.Expired {
		return fmt.Sprintf("Rejected: %s was not run: it needed a person's approval and nobody approved it in time. Do not call it again; tell the user it was not done.", tool)
	}
	who := "the user"
	if d.By != user {
		who = "an approver (" + d.By + ")"
	}
	text := fmt.Sprintf("Rejected: %s was not run: %s rejected it", tool, who)
	if reason := strings.TrimRight(strings.TrimSpace(d.Reason), "."); reason != "" {
		text += ". Reason: " + reason
	}
	return text + ". Do not call it again with the same arguments; tell the user, or do what the reason asks."
}

// needsApproval reports whether a prepared call waits for a person, and the
// message they see. A when rule that fails to evaluate asks for approval: it fails
// closed, like an accept rule.
func (r *run) needsApproval(c *call) (bool, string) {
	rule := c.tool.spec.Approval
	if rule == nil {
		return false, ""
	}
	vars := r.vars
	vars.Args, vars.Seen, vars.InSeen = c.args, r.seenList, r.inSeen
	env := spec.EnvApproval.Values(&vars)
	note := ""
	if rule.When != nil && rule.When.Program != nil {
		out, err := expr.Run(rule.When.Program, env)
		if ok, isBool := out.(bool); err == nil && isBool && !ok {
			return false, ""
		}
		if err != nil {
			note = "(the approval rule could not be checked: " + err.Error() + ")"
		}
	}
	msg := ""
	if t := rule.Message; t != nil {
		var err error
		if msg, err = t.Render(env); err != nil {
			msg = t.Source
		}
	}
	return true, strings.TrimSpace(msg + " " + note)
}

// awaitApproval decides what becomes of a call that needs approval: it waits for
// one (true), or is refused because this run cannot ask (false).
func (r *run) awaitApproval(c *call, message string) bool {
	why := ""
	switch {
	case r.req.Approvals == ApprovalsRefuse:
		why = "approvals cannot be asked for on this channel"
	case r.agent.PausedRuns() == nil:
		why = "this agent has no store to keep the run while it waits"
	case r.req.Ephemeral:
		why = "this run keeps no state to wait in"
	}
	if why == "" {
		c.approval = &Approval{CallID: c.tc.ID, Tool: c.tc.Name, Arguments: c.modelArgs, ArgsHash: argsHash(c.tc.Name, c.modelArgs),
			Message: message, HashRequired: slices.Contains(r.resume.decided, c.tc.ID)}
		return true
	}
	result := fmt.Sprintf("Refused: %s needs a person's approval and %s, so it was not run. Tell the user it needs approval and cannot be done here.", c.tc.Name, why)
	r.refuse(c, RefusedNoApproval, result, why)
	return false
}

// pause stores the run with the calls of the last response — those that ran with
// their results, those that wait with their approvals — and stops it with
// awaiting_approval. A run whose context ended, or whose record the store refuses,
// cannot be resumed: its waiting calls are refused instead and it goes on (false).
func (r *run) pause(calls []call) bool {
	err := r.ctx.Err()
	if err == nil {
		err = r.storePaused(calls)
	}
	if err == nil {
		return true
	}
	for i := range calls {
		if c := &calls[i]; c.approval != nil {
			c.approval = nil
			r.refuse(c, RefusedNoApproval, fmt.Sprintf("Refused: %s needs a person's approval and the request for it could not be stored, so it was not run. Tell the user it could not be done now.", c.tc.Name), err.Error())
		}
	}
	return false
}

// discardPause deletes the record a pause that reported a failure may have written
// all the same (a reply lost after the write): nobody may resume a run that went on
// without its waiting calls. A first pause's record has version 1; a record that is
// not there, or that another execution changed, is left alone.
func (r *run) discardPause(id string) {
	if r.resume.id != "" {
		return // a resumed run's record is deleted, or kept, by its own final commit
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), commitTimeout)
	defer cancel()
	r.agent.store.Commit(ctx, store.Record{UserID: r.req.User.ID, Resumed: id, ResumedVersion: 1})
}

func (r *run) storePaused(calls []call) error {
	a := r.agent
	now := a.now(r.req.Host)
	id := cmp.Or(r.req.RunID, r.resume.id, r.id)
	st := r.snapshot()
	var pending []Approval
	for i := range calls {
		c := &calls[i]
		st.Calls = append(st.Calls, pausedCall{ToolCall: c.tc, Outcome: c.outcome, Refusal: c.refusal, Result: c.result,
			ModelArgs: c.modelArgs, Ran: c.ran, Discarded: c.discarded, Duration: c.duration, Approval: c.approval})
		if c.approval != nil {
			pending = append(pending, *c.approval)
		}
	}
	state, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rec := store.PausedRun{ID: id, UserID: r.req.User.ID, Agent: a.spec.Name, Status: store.PauseWaiting, Version: r.resume.version + 1,
		Created: now.UTC(), Expires: now.Add(a.settings.Approval.Timeout).UTC(), State: state}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), commitTimeout)
	defer cancel()
	if err := a.store.Commit(ctx, store.Record{UserID: r.req.User.ID, Pause: &rec}); err != nil {
		r.emit(Event{Kind: EventMemory, Error: err.Error(), Message: "the run could not be paused for approval"})
		r.discardPause(id)
		return err
	}
	for _, p := range pending {
		r.emit(Event{Kind: EventApprovalRequested, Tool: p.Tool, CallID: p.CallID, Args: p.Arguments, Message: p.Message})
	}
	r.result.RunID, r.result.Pending = id, pending
	names := make([]string, len(pending))
	for i, p := range pending {
		names[i] = p.Tool + " (" + p.CallID + ")"
	}
	r.stopWith(StopAwaitingApproval, "waiting for approval of "+strings.Join(names, ", "), "")
	return nil
}
