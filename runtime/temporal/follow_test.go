package temporal_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/runtime/tool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/grpc"
)

const queryMethod = "/temporal.api.workflowservice.v1.WorkflowService/QueryWorkflow"

// Follow asks the workflow for its events when the run moves, not on a timer:
// the events of the run's first turns reach the follower while its second
// model call is still in flight, and while that call waits the follower asks
// nothing; once it answers, the rest arrive, each event once and in order.
func TestFollowAsksOnlyWhenTheRunMoves(t *testing.T) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	desktest.NewBackend(t)
	release := make(chan struct{})
	turns := deskTurns(0)
	model := modelFunc(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		if len(req.Messages) > 2 { // after the first tool result
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return turns.Complete(ctx, req)
	})
	w := newWorker(t, ts.GetDefaultClient(), "follow", compileWith(t, deskSpec, model))
	defer w.Stop()
	rpcs := &rpcCounter{calls: map[string]int{}}
	c := ts.NewClientWithOptions(client.Options{ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rpcs.intercept)}}})

	run, err := temporal.Start(context.Background(), c, "follow", compileWith(t, deskSpec, nil), runtime.Request{Input: "file it", User: tool.User{ID: "u-1"}}, temporal.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secondCall := make(chan struct{})
	var once sync.Once
	var seen events
	observer := runtime.ObserverFunc(func(e runtime.Event) {
		seen.Observe(e)
		if e.Kind == runtime.EventModelRequest && e.Turn == 2 {
			once.Do(func() { close(secondCall) })
		}
	})
	followed := make(chan *runtime.Result, 1)
	go func() {
		res, err := temporal.Follow(context.Background(), c, run, temporal.FollowOptions{Observer: observer})
		if err != nil {
			t.Error(err)
		}
		followed <- res
	}()
	select {
	case <-secondCall:
	case <-time.After(time.Minute):
		t.Fatal("the second model call's request never reached the follower")
	}
	// The query of the last move (the model's activity being scheduled may be
	// one) may still be under way on a loaded machine: once the follower has
	// been quiet a while, it must stay quiet while the run waits. A follower on
	// a timer never settles, or asks again within the second.
	asked, settled := rpcs.count(queryMethod), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Since(settled) < 300*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if n := rpcs.count(queryMethod); n != asked {
			asked, settled = n, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower never stopped asking for events while the run waited on its model")
		}
	}
	time.Sleep(time.Second) // what a follower does while nothing happens
	if n := rpcs.count(queryMethod) - asked; n != 0 {
		t.Errorf("the follower asked for events %d times while the run waited on its model", n)
	}
	close(release)
	res := <-followed
	if res == nil || res.Stop != runtime.StopCompleted {
		t.Fatalf("result %+v", res)
	}
	var out temporal.RunOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.all) != len(out.Events) {
		t.Fatalf("the follower saw %d events, the run made %d", len(seen.all), len(out.Events))
	}
	for i := range out.Events {
		if seen.all[i].Kind != out.Events[i].Kind || seen.all[i].Turn != out.Events[i].Turn {
			t.Fatalf("event %d: saw %s (turn %d), the run made %s (turn %d)", i, seen.all[i].Kind, seen.all[i].Turn, out.Events[i].Kind, out.Events[i].Turn)
		}
	}
}
