package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/spec"
)

// MCP server mode: every agent is a tool of an MCP server, over stdio (agentrun
// mcp) or streamable HTTP (/mcp). A tool call is a run of the agent, admitted,
// prepared and started as every run of the server is, for the principal of the
// call; the result is the run's answer, and its structured output when the agent
// has an output schema.

// principalOf finds the principal a tool call runs for: the one user of a stdio
// server, or the authenticated caller of the HTTP request that carried the call.
type principalOf func(*mcp.CallToolRequest) (Principal, bool)

// mcpTools is the MCP server of the agents and the agents its tools were made
// from, kept in step with the server's agents (a reload adds, changes and
// removes tools, and the SDK tells the clients).
type mcpTools struct {
	server *mcp.Server
	who    principalOf
	// settle: a call that sent progress pings the client before it answers, so
	// that the client has taken every notification before the result (stdio:
	// see settleProgress).
	settle bool

	mu     sync.Mutex
	agents map[string]*served
}

// mcpServer is the MCP server of the agents, whose calls run for who finds;
// settle is mcpTools.settle.
func (s *Server) mcpServer(who principalOf, settle bool) *mcpTools {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentrun", Title: "agentrun", Version: moduleVersion()}, &mcp.ServerOptions{
		Instructions: "Each tool is an agent: give it a question, and a conversation id to keep a conversation going.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	t := &mcpTools{server: srv, who: who, settle: settle}
	s.syncTools(t)
	return t
}

// syncTools gives t a tool for every agent the server serves now, and none for
// the agents it no longer serves.
func (s *Server) syncTools(t *mcpTools) {
	s.mu.RLock()
	now := make(map[string]*served, len(s.agents))
	for name, a := range s.agents {
		now[name] = a
	}
	s.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for name := range t.agents {
		if now[name] == nil {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		t.server.RemoveTools(gone...)
	}
	for name, a := range now {
		if t.agents[name] != a {
			t.server.AddTool(s.agentTool(a.Spec), s.askAgent(name, t.who, t.settle))
		}
	}
	t.agents = now
}

// agentTool is the tool an agent is: named after it, described as it is, taking
// a question and an optional conversation. An agent whose answer is always a JSON
// object of one schema declares it as the tool's output schema.
func (s *Server) agentTool(sp *spec.Spec) *mcp.Tool {
	desc := sp.Description
	if desc == "" {
		desc = "Ask the agent " + sp.Name + "."
	}
	t := &mcp.Tool{Name: sp.Name, Title: sp.Name, Description: desc, InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"question": map[string]any{"type": "string", "minLength": 1, "maxLength": s.limits.MaxInputChars,
				"description": "What to ask the agent."},
			"conversation": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$",
				"description": "A conversation id of your choosing: the agent gets the conversation's earlier turns, and this one is saved to it. Leave it out for a question with no history."},
		},
		"required":             []string{"question"},
		"additionalProperties": false,
	}}
	if schema := declaredOutput(sp); schema != nil {
		t.OutputSchema = schema
	}
	return t
}

// declaredOutput is the output schema of every answer of the agent, when that is
// one schema of a JSON object (MCP's structured content is an object): nil when
// the agent has none, or an intent of its answers with another.
func declaredOutput(sp *spec.Spec) map[string]any {
	if sp.Output == nil || sp.Output.Schema["type"] != "object" {
		return nil
	}
	for _, in := range sp.Intents {
		if in.Output != nil {
			return nil
		}
	}
	return sp.Output.Schema
}

// askArguments are a tool call's arguments.
type askArguments struct {
	Question     *string `json:"question"`
	Conversation string  `json:"conversation"`
}

// decodeAsk reads a call's arguments strictly: an argument the tool does not
// take (a user id, say) is an error, not ignored, so a caller learns that
// identity is not an argument.
func decodeAsk(raw json.RawMessage) (askArguments, error) {
	var args askArguments
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return args, errors.New("the arguments must be an object with a question")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return args, fmt.Errorf("the arguments must be {question: string, conversation?: string}: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if args.Question == nil {
		return args, errors.New("the arguments must have a question (a string)")
	}
	return args, nil
}

// toolError is a tool result that reports an error to the caller (and its
// model): MCP's isError, with the server's error code in _meta.
func toolError(code, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}},
		Meta: mcp.Meta{"agentrun/error": code}}
}

// askAgent is the handler of an agent's tool: one run of the agent per call;
// settle is mcpTools.settle.
func (s *Server) askAgent(name string, who principalOf, settle bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := who(req)
		if !ok {
			return nil, errors.New("the call has no authenticated caller")
		}
		args, err := decodeAsk(req.Params.Arguments)
		if err != nil {
			return toolError("invalid_arguments", err.Error()), nil
		}
		slot, no := s.admitRun(p)
		if no != nil {
			return toolError(no.code, no.msg), nil
		}
		var refused *mcp.CallToolResult
		fail := func(_ int, code, msg string) { refused = toolError(code, msg) }
		pr, ok := s.prepare(p, slot, name, runInput{text: *args.Question, conversation: args.Conversation}, fail)
		if !ok {
			return refused, nil
		}
		elicit := s.canElicit(req.Session)
		if !elicit {
			// A client that cannot be asked: a call that needs a person's approval is
			// refused, and the model told why.
			pr.req.Approvals = runtime.ApprovalsRefuse
		}
		declared := declaredOutput(pr.agent.Spec) != nil
		rec, _ := s.start(ctx, pr) // the call's end (a cancellation) cancels the run
		// A run resumed after an approval runs under the server's context: the
		// call's end cancels it too.
		defer context.AfterFunc(ctx, rec.stop)()
		return s.answerCall(ctx, req, p, rec, elicit, declared, settle), nil
	}
}

// answerCall follows a call's run to its end, sending progress as it works, and
// answers with its result. A run that pauses for approval asks the client's user
// (elicitation), then goes on with the decisions, as many times as it pauses.
// With settle, a call that sent progress settles it before its result.
func (s *Server) answerCall(ctx context.Context, req *mcp.CallToolRequest, p Principal, rec *runRecord, elicit, declared, settle bool) *mcp.CallToolResult {
	progress, sent := s.progressOf(ctx, req)
	answer := func(v runView) *mcp.CallToolResult {
		if settle && *sent > 0 {
			s.settleProgress(ctx, req.Session)
		}
		return runResult(v, declared)
	}
	after := 0
	for {
		var finished bool
		if after, finished = follow(ctx, rec, after, progress, func() bool { return true }); !finished {
			return toolError("canceled", "the call was canceled")
		}
		v := rec.snapshot()
		if !elicit || v.Status == runFailed || v.Result.Stop != runtime.StopAwaitingApproval {
			return answer(v)
		}
		if err := s.decideByElicitation(ctx, req.Session, p, rec.ID); err != nil {
			s.log.Warn("a run paused for approval could not be decided by its MCP client", "run", rec.ID, "error", err.Error())
			return answer(v)
		}
	}
}

// settleTimeout bounds how long a call's result waits for the client's answer
// to settleProgress's ping: a client that does not answer gets it late, not
// never.
const settleTimeout = 5 * time.Second

// settleProgress pings the client, and waits for its answer, before a call that
// sent progress answers, so that the client has taken every progress
// notification of the call before the result. On a byte stream (stdio), the
// last notifications and the result, written one after the other, often reach
// the client in one read; and the TypeScript SDK's client (as of 1.32) takes
// the messages of a read in order but runs a notification's handler a
// microtask later, while it takes a response at once and then forgets the
// request's progress token: the notifications that came with the result are
// dropped ("Received a progress notification for an unknown token";
// modelcontextprotocol/typescript-sdk#2580). A ping is a round trip: the client
// answers it after the notifications it read before it, so the result comes in
// a later read. (Over streamable HTTP each SSE event is read on its own, and
// the client's handlers run between them: no ping is needed.)
func (s *Server) settleProgress(ctx context.Context, ss *mcp.ServerSession) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if err := ss.Ping(ctx, nil); err != nil && ctx.Err() == nil {
		s.log.Debug("an MCP client's answer to a ping failed", "error", err.Error())
	}
}

// progressOf sends the caller a progress notification for each step of the run
// worth telling — a model's response, a tool call, a refusal, an approval asked
// for — when the call asked for progress (it has a progress token); else nothing.
// sent counts the notifications sent.
func (s *Server) progressOf(ctx context.Context, req *mcp.CallToolRequest) (each func([]runtime.Event, int) bool, sent *float64) {
	token := req.Params.GetProgressToken()
	var n float64
	if token == nil {
		return func([]runtime.Event, int) bool { return true }, &n
	}
	return func(events []runtime.Event, _ int) bool {
		for _, e := range events {
			msg := progressMessage(e)
			if msg == "" {
				continue
			}
			n++
			// A client that cannot take a notification loses it, not the run.
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: msg})
		}
		return true
	}, &n
}

// progressMessage is what a progress notification says of an event; "" for an
// event not worth one.
func progressMessage(e runtime.Event) string {
	switch e.Kind {
	case runtime.EventModelResponse:
		switch {
		case e.Purpose == runtime.PurposeJudge:
			return "the judge checked the answer"
		case e.Purpose == runtime.PurposeClassifier:
			return "the question was classified"
		case e.Calls == 1:
			return "the model asked for a tool call"
		case e.Calls > 1:
			return fmt.Sprintf("the model asked for %d tool calls", e.Calls)
		}
		return "the model answered"
	case runtime.EventToolCall:
		return "calling " + e.Tool
	case runtime.EventToolRefused:
		return e.Tool + " was refused"
	case runtime.EventApprovalRequested:
		return e.Tool + " waits for approval"
	case runtime.EventAgent:
		if e.Stop == "" {
			return "asking the agent " + e.Agent
		}
	}
	return ""
}

// runResult is a finished run as a tool result: its answer, and its structured
// output as the structured content. A run that could not run, ended on a fault
// (the model failing, the deadline, a cancellation) or, for a tool that declared
// an output schema, ended without a value for it, is an error result, so a client
// never takes a fallback message for the agent's answer.
func runResult(v runView, declared bool) *mcp.CallToolResult {
	if v.Status == runFailed {
		_, code, msg := runFailure(v)
		return toolError(code, msg)
	}
	res := v.Result
	meta := mcp.Meta{"agentrun/run": v.ID, "agentrun/stop": string(res.Stop)}
	if res.Intent != "" {
		meta["agentrun/intent"] = res.Intent
	}
	if res.Stop == runtime.StopAwaitingApproval {
		out := toolError("awaiting_approval", fmt.Sprintf("the run %s waits for a person's approval of %s; it goes on once it is decided (POST /v1/runs/%s/approvals/CALL_ID, or agentrun resume)",
			v.ID, pendingTools(res), v.ID))
		maps.Copy(out.Meta, meta)
		return out
	}
	if _, code, msg, failed := faultOf(res); failed {
		out := toolError(code, msg)
		maps.Copy(out.Meta, meta)
		return out
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Answer}}, Meta: meta}
	if trimmed := bytes.TrimSpace(res.Output); len(trimmed) > 0 && trimmed[0] == '{' {
		out.StructuredContent = json.RawMessage(trimmed)
	} else if declared {
		out.IsError = true
		out.Meta["agentrun/error"] = "no_structured_output"
		out.Content = append(out.Content, &mcp.TextContent{Text: fmt.Sprintf("(the run stopped with %s before its answer matched the output schema)", res.Stop)})
	}
	return out
}

// ServeMCP serves the agents as MCP tools on t (stdio: agentrun mcp) until the
// client leaves or ctx ends; every call runs for p. A call that sent progress
// pings the client before it answers (settleProgress).
func (s *Server) ServeMCP(ctx context.Context, t mcp.Transport, p Principal) error {
	tools := s.mcpServer(func(*mcp.CallToolRequest) (Principal, bool) { return p, true }, true)
	err := tools.server.Run(ctx, t)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// CheckPrincipal reports whether every agent can run for p: its user id, and
// each attribute, which some agent must declare and every agent that declares it
// must accept.
func (s *Server) CheckPrincipal(p Principal) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	declared := map[string]bool{}
	for _, name := range s.agentNamesLocked() {
		sp := s.agents[name].Spec
		var attrs []string
		for k, v := range p.User.Attributes {
			if slices.Contains(sp.Context.User, k) {
				attrs = append(attrs, k+"="+v)
				declared[k] = true
			}
		}
		if _, err := agentrun.User(sp, p.User.ID, attrs); err != nil {
			return fmt.Errorf("agent %s: %w", name, err)
		}
	}
	for k := range p.User.Attributes {
		if !declared[k] {
			return fmt.Errorf("no agent declares the user attribute %q (context.user)", k)
		}
	}
	return nil
}

// moduleVersion is agentrun's version as the build recorded it.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// stdioAuth is the authentication of a server that answers no HTTP (Options.Stdio):
// none accepted.
type stdioAuth struct{}

func (stdioAuth) Authenticate(*http.Request) (Principal, error) { return Principal{}, ErrNoCredentials }
