package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Activity names, as a worker registers them and histories show them.
const (
	ActivityModel             = "agentrun.Model"
	ActivityTool              = "agentrun.Tool"
	ActivityFacts             = "agentrun.Store.Facts"
	ActivityConversation      = "agentrun.Store.Conversation"
	ActivitySeen              = "agentrun.Store.Seen"
	ActivitySeenEntities      = "agentrun.Store.SeenEntities"
	ActivityCommit            = "agentrun.Store.Commit"
	ActivityPausedRun         = "agentrun.Store.PausedRun"
	ActivityUpdatePaused      = "agentrun.Store.UpdatePaused"
	ActivityPausedRuns        = "agentrun.Store.PausedRuns"
	ActivityCacheLookup       = "agentrun.Knowledge.CacheLookup"
	ActivityCacheLearn        = "agentrun.Knowledge.CacheLearn"
	ActivityRetrieve          = "agentrun.Knowledge.Retrieve"
	errTypeModel              = "ModelError"
	errTypeNotIdempotentAgain = "NotIdempotent"
)

// Target names the agent a call goes to: a registered agent and the path of
// agents entries below it.
type Target struct {
	Agent string   `json:"agent"`
	Path  []string `json:"path,omitempty"`
}

func (t Target) String() string { return strings.Join(append([]string{t.Agent}, t.Path...), "/") }

// ModelCall is one model request of a run.
type ModelCall struct {
	Target
	Purpose    runtime.Purpose         `json:"purpose"`
	Messages   []model.Message         `json:"messages"`
	Tools      []model.ToolDef         `json:"tools,omitempty"`
	JSONSchema *model.JSONSchemaFormat `json:"json_schema,omitempty"`
	JSONObject bool                    `json:"json_object,omitempty"`
	MaxTokens  int                     `json:"max_tokens,omitempty"`
}

// modelFailure is a model's error as it crosses the history.
type modelFailure struct {
	Plain   bool        `json:"plain,omitempty"` // not a model.Error: its text as it was
	Status  int         `json:"status"`
	Message string      `json:"message"`
	Usage   model.Usage `json:"usage"`
}

// ToolCall is one tool call of a run: what tool.Input holds.
type ToolCall struct {
	Target
	Name           string         `json:"name"`
	CallID         string         `json:"call_id"`
	Args           map[string]any `json:"args"`
	User           tool.User      `json:"user"`
	Conversation   string         `json:"conversation,omitempty"`
	IdempotencyKey string         `json:"idempotency_key"`
	Timeout        time.Duration  `json:"timeout_ns"`
	Run            string         `json:"run,omitempty"` // the run's id (tool.Input.Run)
}

// ToolOutcome is what the tool returned: its output or its error, both the
// run's to act on (the activity succeeded either way).
type ToolOutcome struct {
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// StoreCall is one store operation of a run.
type StoreCall struct {
	Target
	UserID       string             `json:"user_id,omitempty"`
	Conversation string             `json:"conversation,omitempty"`
	Turns        int                `json:"turns,omitempty"`
	Kind         string             `json:"kind,omitempty"`
	ID           string             `json:"id,omitempty"`
	Kinds        []string           `json:"kinds,omitempty"`
	Record       *store.Record      `json:"record,omitempty"`
	Paused       *store.PausedRun   `json:"paused,omitempty"`
	Query        *store.PausedQuery `json:"query,omitempty"`
}

// KnowledgeCall is one lookup or write of a run's knowledge stages.
type KnowledgeCall struct {
	Target
	Query      knowledge.CacheQuery `json:"query"`
	Answer     string               `json:"answer,omitempty"`
	PerUser    bool                 `json:"per_user,omitempty"`
	TTL        time.Duration        `json:"ttl_ns,omitempty"`
	Collection string               `json:"collection,omitempty"`
	Text       string               `json:"text,omitempty"`
	K          int                  `json:"k,omitempty"`
	MinScore   float64              `json:"min_score,omitempty"`
}

// cacheLookup is a lookup's answer: the hit with its answer (which the
// runtime's JSON leaves out) and the error that may come with one.
type cacheLookup struct {
	Hit    *knowledge.CacheHit `json:"hit,omitempty"`
	Answer string              `json:"answer,omitempty"`
	Error  string              `json:"error,omitempty"`
}

// activities run the calls of the workflows on the real agents.
type activities struct {
	agents map[string]*runtime.Agent
}

func (a *activities) reach(t Target) (*runtime.Agent, error) {
	top := a.agents[t.Agent]
	if top == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("this worker runs no agent %q", t.Agent), "UnknownAgent", nil)
	}
	ag, err := top.Reach(t.Path)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "UnknownAgent", nil)
	}
	return ag, nil
}

// heartbeat tells the server the activity's worker is alive until stop is
// called, so a dead worker's call is retried after the heartbeat timeout rather
// than after the call's whole timeout.
func heartbeat(ctx context.Context) (stop func()) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

func (a *activities) Model(ctx context.Context, in ModelCall) (*model.Response, error) {
	ag, err := a.reach(in.Target)
	if err != nil {
		return nil, err
	}
	m := ag.Model(in.Purpose)
	if m == nil {
		return nil, temporal.NewNonRetryableApplicationError("the agent has no model", errTypeModel, nil, modelFailure{Message: "the agent has no model"})
	}
	defer heartbeat(ctx)()
	resp, err := complete(ctx, m, &model.Request{Messages: in.Messages, Tools: in.Tools, JSONSchema: in.JSONSchema,
		JSONObject: in.JSONObject, MaxTokens: in.MaxTokens})
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // the activity timed out or was canceled: Temporal decides
		}
		// The model client retried what it could: its error is the run's to act on.
		f := modelFailure{Plain: true, Message: err.Error()}
		if me := (*model.Error)(nil); errors.As(err, &me) {
			f = modelFailure{Status: me.Status, Message: me.Err.Error(), Usage: me.Usage}
		}
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), errTypeModel, nil, f)
	}
	return resp, nil
}

// complete calls the model, a panic in it being its error: retried, it would
// only panic again.
func complete(ctx context.Context, m model.Model, req *model.Request) (resp *model.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("the model failed unexpectedly: %v", p)
		}
	}()
	return m.Complete(ctx, req)
}

func (a *activities) Tool(ctx context.Context, in ToolCall) (ToolOutcome, error) {
	ag, err := a.reach(in.Target)
	if err != nil {
		return ToolOutcome{}, err
	}
	defer heartbeat(ctx)()
	callCtx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()
	out, err := ag.CallTool(callCtx, tool.Input{Args: in.Args, User: in.User, Conversation: in.Conversation,
		Name: in.Name, CallID: in.CallID, IdempotencyKey: in.IdempotencyKey, Timeout: in.Timeout, Run: in.Run})
	switch {
	case err != nil && ctx.Err() != nil:
		return ToolOutcome{}, err // the activity's own end: Temporal retries it, or not
	case err != nil && callCtx.Err() == context.DeadlineExceeded:
		return ToolOutcome{TimedOut: true, Error: err.Error()}, nil
	case err != nil:
		return ToolOutcome{Error: err.Error()}, nil
	}
	return ToolOutcome{Output: out}, nil
}

// storeErrors are the store's errors the runtime tells apart; they cross the
// history by name and are not retried.
var storeErrors = map[string]error{
	"ForeignConversation":  store.ErrForeignConversation,
	"ConversationNotFound": store.ErrConversationNotFound,
	"RunNotFound":          store.ErrRunNotFound,
	"PausedConflict":       store.ErrPausedConflict,
}

func storeError(err error) error {
	for name, known := range storeErrors {
		if errors.Is(err, known) {
			return temporal.NewNonRetryableApplicationError(err.Error(), name, nil)
		}
	}
	return err
}

func (a *activities) store(t Target) (store.Store, error) {
	ag, err := a.reach(t)
	if err != nil {
		return nil, err
	}
	if s := ag.Store(); s != nil {
		return s, nil
	}
	return nil, temporal.NewNonRetryableApplicationError("the agent has no store", "NoStore", nil)
}

func (a *activities) paused(t Target) (store.PausedRuns, error) {
	s, err := a.store(t)
	if err != nil {
		return nil, err
	}
	if p, ok := s.(store.PausedRuns); ok {
		return p, nil
	}
	return nil, temporal.NewNonRetryableApplicationError("the agent's store keeps no paused runs", "NoStore", nil)
}

func (a *activities) Facts(ctx context.Context, in StoreCall) ([]store.Fact, error) {
	s, err := a.store(in.Target)
	if err != nil {
		return nil, err
	}
	f, err := s.Facts(ctx, in.UserID)
	return f, storeError(err)
}

func (a *activities) Conversation(ctx context.Context, in StoreCall) (store.Conversation, error) {
	s, err := a.store(in.Target)
	if err != nil {
		return store.Conversation{}, err
	}
	c, err := s.Conversation(ctx, in.Conversation, in.Turns)
	return c, storeError(err)
}

func (a *activities) Seen(ctx context.Context, in StoreCall) (bool, error) {
	s, err := a.store(in.Target)
	if err != nil {
		return false, err
	}
	ok, err := s.Seen(ctx, in.Conversation, in.Kind, in.ID)
	return ok, storeError(err)
}

func (a *activities) SeenEntities(ctx context.Context, in StoreCall) (map[string][]string, error) {
	s, err := a.store(in.Target)
	if err != nil {
		return nil, err
	}
	m, err := s.SeenEntities(ctx, in.Conversation, in.Kinds...)
	return m, storeError(err)
}

func (a *activities) Commit(ctx context.Context, in StoreCall) error {
	s, err := a.store(in.Target)
	if err != nil {
		return err
	}
	return storeError(s.Commit(ctx, *in.Record))
}

func (a *activities) PausedRun(ctx context.Context, in StoreCall) (store.PausedRun, error) {
	p, err := a.paused(in.Target)
	if err != nil {
		return store.PausedRun{}, err
	}
	r, err := p.PausedRun(ctx, in.ID)
	return r, storeError(err)
}

func (a *activities) UpdatePaused(ctx context.Context, in StoreCall) error {
	p, err := a.paused(in.Target)
	if err != nil {
		return err
	}
	return storeError(p.UpdatePaused(ctx, *in.Paused))
}

func (a *activities) PausedRuns(ctx context.Context, in StoreCall) ([]store.PausedRun, error) {
	p, err := a.paused(in.Target)
	if err != nil {
		return nil, err
	}
	r, err := p.PausedRuns(ctx, *in.Query)
	return r, storeError(err)
}

func (a *activities) knowledge(t Target) (knowledge.Knowledge, error) {
	ag, err := a.reach(t)
	if err != nil {
		return nil, err
	}
	if k := ag.Knowledge(); k != nil {
		return k, nil
	}
	return nil, temporal.NewNonRetryableApplicationError("the agent has no knowledge", "NoKnowledge", nil)
}

func (a *activities) CacheLookup(ctx context.Context, in KnowledgeCall) (cacheLookup, error) {
	k, err := a.knowledge(in.Target)
	if err != nil {
		return cacheLookup{}, err
	}
	hit, err := k.CacheLookup(ctx, in.Query)
	if hit == nil && err != nil {
		return cacheLookup{}, err
	}
	out := cacheLookup{Hit: hit, Error: errString(err)}
	if hit != nil {
		out.Answer = hit.Answer
	}
	return out, nil
}

func (a *activities) CacheLearn(ctx context.Context, in KnowledgeCall) error {
	k, err := a.knowledge(in.Target)
	if err != nil {
		return err
	}
	return k.CacheLearn(ctx, in.Query, in.Answer, in.PerUser, in.TTL)
}

func (a *activities) Retrieve(ctx context.Context, in KnowledgeCall) ([]knowledge.Passage, error) {
	k, err := a.knowledge(in.Target)
	if err != nil {
		return nil, err
	}
	return k.Retrieve(ctx, in.Collection, in.Text, in.K, in.MinScore)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
