package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/runtime"
)

// Approvals over MCP. A tool call whose run needs a person's approval asks the
// client's user with MCP elicitation — a form with approve and reason — when the
// client offers it: the run pauses, as on the run API, each call is decided with
// the user's answer as the principal's decision, and the run resumes under its
// id, all within the one tool call. A client without elicitation cannot be asked,
// and such calls are refused.

// elicitationFrom is the first protocol version whose server-to-client requests
// are not plain requests (multi round-trip results): those clients are not
// asked.
const elicitationFrom = "2026-07-28"

// approvalForm is the elicitation form of one call's decision.
var approvalForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Approve",
			"description": "Run the call (true), or refuse it (false)."},
		"reason": map[string]any{"type": "string", "title": "Reason", "maxLength": 1000,
			"description": "Why: the agent reads it with a refusal."},
	},
	"required": []string{"approve"},
}

// maxShownArgs caps the arguments an approval's question shows.
const maxShownArgs = 500

// canElicit reports whether the client of ss can be asked for decisions: it
// offers form elicitation on a protocol that sends the server's requests as
// such, and the server's store keeps paused runs.
func (s *Server) canElicit(ss *mcp.ServerSession) bool {
	if ss == nil || s.pausedStore() == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil || ip.ProtocolVersion >= elicitationFrom {
		return false
	}
	caps := ip.Capabilities.Elicitation
	return caps.Form != nil || caps.URL == nil // neither: form, as before modes
}

// decideByElicitation asks the client's user about each undecided call of a
// paused run, records the answers as p's decisions and resumes the run. A call
// the user declines, or whose question they dismiss, is refused. An error leaves
// the run paused with the decisions taken so far, for the run API or the expiry.
func (s *Server) decideByElicitation(ctx context.Context, ss *mcp.ServerSession, p Principal, runID string) error {
	who := deciderOf(p)
	paused, err := runtime.LoadPaused(ctx, s.pausedStore(), runID, who)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(ctx, paused.Expires)
	defer cancel()
	for _, a := range paused.Approvals {
		if a.Decision != nil {
			continue
		}
		approve, reason, err := elicitDecision(ctx, ss, a)
		if err != nil {
			return err
		}
		paused, err = runtime.Decide(ctx, s.pausedStore(), runID, who,
			runtime.DecideRequest{CallID: a.CallID, Approve: approve, Reason: reason, ArgsHash: a.ArgsHash}, time.Now())
		if err != nil {
			return err
		}
		decision := "reject"
		if approve {
			decision = "approve"
		}
		s.metrics.ApprovalDecided(s.agentLabel(paused.Agent), decision, 1)
		s.log.Info("approval decided", "run", runID, "agent", paused.Agent, "call", a.CallID, "decision", decision,
			"by", p.User.ID, "via", "mcp")
	}
	if len(paused.Undecided()) > 0 {
		return runtime.ErrUndecided
	}
	return s.resume(ctx, paused, who)
}

// elicitDecision asks the client's user about one call.
func elicitDecision(ctx context.Context, ss *mcp.ServerSession, a runtime.Approval) (approve bool, reason string, err error) {
	question := a.Message
	if question == "" {
		question = "Let the agent call " + a.Tool + "?"
	}
	args := a.Arguments
	if utf8.RuneCountInString(args) > maxShownArgs {
		args = string([]rune(args)[:maxShownArgs]) + "…"
	}
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: fmt.Sprintf("%s\n\n%s %s", question, a.Tool, args), RequestedSchema: approvalForm})
	if err != nil {
		return false, "", err
	}
	switch res.Action {
	case "accept":
		approve, _ = res.Content["approve"].(bool)
		reason, _ = res.Content["reason"].(string)
	case "decline":
		reason = "the user declined"
	case "cancel":
		reason = "the user dismissed the question"
	default:
		return false, "", errors.New("an elicitation answer with the action " + res.Action)
	}
	return approve, strings.TrimSpace(reason), nil
}

// pendingTools names the tools a paused run's calls wait to run.
func pendingTools(res *runtime.Result) string {
	var names []string
	for _, a := range res.Pending {
		names = append(names, a.Tool)
	}
	if len(names) == 0 {
		return "a tool call"
	}
	return strings.Join(names, ", ")
}
