package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// toolGrace is how much longer than its timeout a tool's activity may take: the
// tool's own context ends first and the activity reports a timeout, which is the
// run's to act on rather than a lost worker's to retry — also for a tool that
// returns late, ignoring its context, as a run in process waits for it. A lost
// worker is found by its heartbeats, long before.
const toolGrace = time.Minute

// rewire is the workflow's copy of a registered agent: every model, tool, store
// and knowledge call goes to an activity.
func rewire(name string, a *runtime.Agent, o Options) *runtime.Agent {
	target := func(path []string) Target { return Target{Agent: name, Path: path} }
	return a.Rewire(runtime.Wiring{
		Model: func(path []string, p runtime.Purpose, m model.Model) model.Model {
			return modelProxy{target: target(path), purpose: p, o: o, asked: m}
		},
		Tool: func(path []string, t *spec.Tool, _ tool.Tool) tool.Tool {
			return toolProxy{target: target(path), retry: t.Retryable(), o: o}
		},
		Store: func(path []string, s store.Store) store.Store {
			p := storeProxy{target: target(path), o: o}
			if _, ok := s.(store.PausedRuns); ok {
				return pausedStoreProxy{p}
			}
			return p
		},
		Knowledge: func(path []string, _ knowledge.Knowledge) knowledge.Knowledge {
			return knowledgeProxy{target: target(path), o: o}
		},
	})
}

// errOutsideWorkflow is a stand-in called by code that does not run in a
// workflow: a bug of this package's.
var errOutsideWorkflow = errors.New("temporal: an activity stand-in was called outside a workflow")

// execute runs an activity from the workflow context ctx carries and waits for it.
func execute(ctx context.Context, ao workflow.ActivityOptions, name string, in, out any) error {
	w := workflowOf(ctx)
	if w == nil {
		return errOutsideWorkflow
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(w, ao), name, in).Get(w, out)
}

// detached is ctx with a workflow context that the run's end does not cancel:
// what a run writes when it ends must be written whatever ended it.
func detached(ctx context.Context) context.Context {
	w := workflowOf(ctx)
	if w == nil {
		return ctx
	}
	d, _ := workflow.NewDisconnectedContext(w)
	return withWorkflow(ctx, d)
}

type modelProxy struct {
	target  Target
	purpose runtime.Purpose
	o       Options
	// asked is the model the activity calls, asked only which parts it takes: a
	// pure answer, the same in the workflow as in the worker.
	asked model.Model
}

func (m modelProxy) TakesPart(p model.Part) error { return model.TakesPart(m.asked, p) }

func (m modelProxy) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	ao := workflow.ActivityOptions{StartToCloseTimeout: m.o.ModelTimeout, HeartbeatTimeout: m.o.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: int32(m.o.ModelAttempts), NonRetryableErrorTypes: []string{errTypeModel, "UnknownAgent"}}}
	in := ModelCall{Target: m.target, Purpose: m.purpose, Messages: req.Messages, Tools: req.Tools, JSONSchema: req.JSONSchema,
		JSONObject: req.JSONObject, MaxTokens: req.MaxTokens}
	var resp model.Response
	if err := execute(ctx, ao, ActivityModel, in, &resp); err != nil {
		return nil, modelError(ctx, err)
	}
	return &resp, nil
}

// modelError turns an activity's failure back into what the model returned.
func modelError(ctx context.Context, err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == errTypeModel {
		var f modelFailure
		if ae.Details(&f) == nil {
			if f.Plain {
				return errors.New(f.Message)
			}
			return &model.Error{Status: f.Status, Err: errors.New(f.Message), Usage: f.Usage}
		}
	}
	if w := workflowOf(ctx); w != nil && w.Err() != nil {
		return err // the run ended: it says why
	}
	return &model.Error{Err: fmt.Errorf("the model call failed on every attempt: %w", err)}
}

type toolProxy struct {
	target Target
	retry  bool
	o      Options
}

func (t toolProxy) Call(ctx context.Context, in tool.Input) (string, error) {
	attempts := int32(1)
	if t.retry {
		attempts = int32(t.o.ToolAttempts)
	}
	ao := workflow.ActivityOptions{StartToCloseTimeout: in.Timeout + toolGrace, HeartbeatTimeout: t.o.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: attempts, NonRetryableErrorTypes: []string{"UnknownAgent"}}}
	call := ToolCall{Target: t.target, Name: in.Name, CallID: in.CallID, Args: in.Args, User: in.User, Conversation: in.Conversation,
		IdempotencyKey: in.IdempotencyKey, Timeout: in.Timeout, Run: in.Run}
	var out ToolOutcome
	err := execute(ctx, ao, ActivityTool, call, &out)
	switch {
	case err != nil && workflowOf(ctx).Err() != nil:
		return "", err // the run ended: it says why
	case err != nil && !t.retry:
		return "", fmt.Errorf("%s may have run, but the worker running it was lost before it reported (%v); the tool is not idempotent, so it was not run again", in.Name, rootCause(err))
	case err != nil:
		return "", fmt.Errorf("%s could not be run (%d attempts): %v", in.Name, attempts, rootCause(err))
	case out.TimedOut:
		return "", fmt.Errorf("%w: %s", tool.ErrTimeout, out.Error)
	case out.Error != "":
		return "", errors.New(out.Error)
	}
	return out.Output, nil
}

// rootCause is the innermost error of an activity's failure: the timeout or
// the error itself rather than "activity error (…)".
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func storeOptions(o Options) workflow.ActivityOptions {
	types := []string{"UnknownAgent", "NoStore", "NoKnowledge"}
	for name := range storeErrors {
		types = append(types, name)
	}
	return workflow.ActivityOptions{StartToCloseTimeout: o.StoreTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			MaximumAttempts: int32(o.StoreAttempts), NonRetryableErrorTypes: types}}
}

// fromStore turns an activity's failure back into the store's error.
func fromStore(err error) error {
	if err == nil {
		return nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		if known, ok := storeErrors[ae.Type()]; ok {
			return knownError{msg: ae.Message(), known: known}
		}
		return errors.New(ae.Message())
	}
	return rootCause(err)
}

type knownError struct {
	msg   string
	known error
}

func (e knownError) Error() string { return e.msg }
func (e knownError) Unwrap() error { return e.known }

type storeProxy struct {
	target Target
	o      Options
}

func (s storeProxy) call(ctx context.Context, name string, in StoreCall, out any) error {
	in.Target = s.target
	return fromStore(execute(ctx, storeOptions(s.o), name, in, out))
}

// write runs a store write once: a write whose worker was lost may have been
// made, and making it again would find its own claim of a paused run taken. The
// run reports a write that failed.
func (s storeProxy) write(ctx context.Context, name string, in StoreCall) error {
	in.Target = s.target
	ao := storeOptions(s.o)
	ao.RetryPolicy.MaximumAttempts = 1
	return fromStore(execute(detached(ctx), ao, name, in, nil))
}

func (s storeProxy) Facts(ctx context.Context, userID string) ([]store.Fact, error) {
	var out []store.Fact
	err := s.call(ctx, ActivityFacts, StoreCall{UserID: userID}, &out)
	return out, err
}

func (s storeProxy) Conversation(ctx context.Context, id string, turns int) (store.Conversation, error) {
	var out store.Conversation
	err := s.call(ctx, ActivityConversation, StoreCall{Conversation: id, Turns: turns}, &out)
	return out, err
}

func (s storeProxy) Seen(ctx context.Context, conversation, kind, id string) (bool, error) {
	var out bool
	err := s.call(ctx, ActivitySeen, StoreCall{Conversation: conversation, Kind: kind, ID: id}, &out)
	return out, err
}

func (s storeProxy) SeenEntities(ctx context.Context, conversation string, kinds ...string) (map[string][]string, error) {
	var out map[string][]string
	err := s.call(ctx, ActivitySeenEntities, StoreCall{Conversation: conversation, Kinds: kinds}, &out)
	return out, err
}

// Commit is retried like a read: its key makes the store apply it once, so a
// commit whose reply was lost is not made twice.
func (s storeProxy) Commit(ctx context.Context, rec store.Record) error {
	if rec.Key == "" {
		rec.Key = commitKey(ctx)
	}
	return s.call(detached(ctx), ActivityCommit, StoreCall{Record: &rec}, nil)
}

type commitsKey struct{}

// withCommits counts the commits of one workflow execution, for their keys.
func withCommits(ctx context.Context) context.Context {
	return context.WithValue(ctx, commitsKey{}, new(int))
}

// commitKey names the next commit of the workflow execution: the same on every
// attempt of its activity (the input is recorded once) and on every replay.
func commitKey(ctx context.Context) string {
	w, n := workflowOf(ctx), ctx.Value(commitsKey{})
	count, ok := n.(*int)
	if w == nil || !ok {
		return ""
	}
	*count++
	return fmt.Sprintf("temporal/%s/%d", workflow.GetInfo(w).WorkflowExecution.RunID, *count)
}

var errNotInWorkflow = errors.New("not available to a run on Temporal")

func (storeProxy) Conversations(context.Context, string) ([]string, error) {
	return nil, errNotInWorkflow
}
func (storeProxy) DeleteConversation(context.Context, string, string) error { return errNotInWorkflow }
func (storeProxy) Forget(context.Context, string) error                     { return errNotInWorkflow }
func (storeProxy) Close() error                                             { return nil }

type pausedStoreProxy struct{ storeProxy }

func (s pausedStoreProxy) PausedRun(ctx context.Context, id string) (store.PausedRun, error) {
	var out store.PausedRun
	err := s.call(ctx, ActivityPausedRun, StoreCall{ID: id}, &out)
	return out, err
}

func (s pausedStoreProxy) UpdatePaused(ctx context.Context, p store.PausedRun) error {
	return s.write(ctx, ActivityUpdatePaused, StoreCall{Paused: &p})
}

func (s pausedStoreProxy) PausedRuns(ctx context.Context, q store.PausedQuery) ([]store.PausedRun, error) {
	var out []store.PausedRun
	err := s.call(ctx, ActivityPausedRuns, StoreCall{Query: &q}, &out)
	return out, err
}

type knowledgeProxy struct {
	target Target
	o      Options
}

// call runs a knowledge call as the run bounds it (knowledge stages have a
// timeout of their own): one attempt of that long, as in process.
func (k knowledgeProxy) call(ctx context.Context, name string, in KnowledgeCall, out any) error {
	in.Target = k.target
	ao := storeOptions(k.o)
	if d := callTimeout(ctx); d > 0 {
		ao.StartToCloseTimeout, ao.RetryPolicy.MaximumAttempts = d, 1
	}
	err := execute(ctx, ao, name, in, out)
	if err == nil {
		return nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return errors.New(ae.Message())
	}
	return rootCause(err)
}

func (k knowledgeProxy) CacheLookup(ctx context.Context, q knowledge.CacheQuery) (*knowledge.CacheHit, error) {
	var out cacheLookup
	if err := k.call(ctx, ActivityCacheLookup, KnowledgeCall{Query: q}, &out); err != nil {
		return nil, err
	}
	var err error
	if out.Error != "" {
		err = errors.New(out.Error)
	}
	if out.Hit != nil {
		out.Hit.Answer = out.Answer
	}
	return out.Hit, err
}

func (k knowledgeProxy) CacheLearn(ctx context.Context, q knowledge.CacheQuery, answer string, perUser bool, ttl time.Duration) error {
	return k.call(ctx, ActivityCacheLearn, KnowledgeCall{Query: q, Answer: answer, PerUser: perUser, TTL: ttl}, nil)
}

func (k knowledgeProxy) Retrieve(ctx context.Context, collection, query string, n int, minScore float64) ([]knowledge.Passage, error) {
	var out []knowledge.Passage
	err := k.call(ctx, ActivityRetrieve, KnowledgeCall{Collection: collection, Text: query, K: n, MinScore: minScore}, &out)
	return out, err
}
