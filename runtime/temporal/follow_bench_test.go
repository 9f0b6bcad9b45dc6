package temporal_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/desktest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/runtime/tool"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/grpc"
)

// deskTurns is the desk's four model calls — three tool rounds and the answer
// — chosen by how many tool results the request holds, so any number of runs
// can share it; each call takes delay, as a model's would.
func deskTurns(delay time.Duration) model.Model {
	calls := []model.ToolCall{
		{ID: "c1", Name: "lookup", Arguments: `{"order":"A1"}`},
		{ID: "c2", Name: "create_ticket", Arguments: `{"order":"A1","text":"broken"}`},
		{ID: "c3", Name: "lookup", Arguments: `{"order":"A2"}`},
	}
	return modelFunc(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		results := 0
		for _, m := range req.Messages {
			if m.Role == model.RoleTool {
				results++
			}
		}
		usage := model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
		if results < len(calls) {
			return &model.Response{Message: model.Message{Role: model.RoleAssistant, ToolCalls: calls[results : results+1]},
				FinishReason: model.FinishToolCalls, Usage: usage}, nil
		}
		return &model.Response{Message: model.Message{Role: model.RoleAssistant, Content: "Done."}, FinishReason: model.FinishStop, Usage: usage}, nil
	})
}

// rpcCounter counts a client's calls to the cluster by method.
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.mu.Lock()
	r.calls[method]++
	r.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *rpcCounter) count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

func (r *rpcCounter) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = map[string]int{}
	return out
}

// latencies records how long each event took from the workflow task that made
// it (its time is the task's, in workflow time) to the follower.
type latencies struct {
	mu    sync.Mutex
	total time.Duration
	n     int
}

func (l *latencies) Observe(e runtime.Event) {
	d := time.Since(e.Time)
	l.mu.Lock()
	l.total += d
	l.n++
	l.mu.Unlock()
}

// pollFollow is how Follow followed a run before it watched the history: the
// events query every interval until the run ends. It is the baseline of
// BenchmarkFollow.
func pollFollow(ctx context.Context, c client.Client, run client.WorkflowRun, obs runtime.Observer, interval time.Duration) error {
	done := make(chan error, 1)
	var out temporal.RunOutput
	go func() { done <- run.Get(ctx, &out) }()
	seen := 0
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			for _, e := range out.Events[min(seen, len(out.Events)):] {
				obs.Observe(e)
			}
			return err
		case <-tick.C:
			v, err := c.QueryWorkflow(ctx, run.GetID(), "", temporal.QueryEvents, seen)
			if err != nil {
				continue
			}
			var events []runtime.Event
			if v.Get(&events) == nil {
				for _, e := range events {
					obs.Observe(e)
				}
				seen += len(events)
			}
		}
	}
}

// BenchmarkFollow follows runs of the desk (four model calls, three tool
// calls) on the embedded server, by polling the events query every 200 ms (as
// Follow did) and by watching the run's history (as it does), with an instant
// model and one whose calls take 250 ms. It reports how long an event took to
// reach the follower, the follower's calls to the cluster per run, and the
// run's history length:
//
//	go test ./runtime/temporal -run '^$' -bench Follow -benchtime 10x
func BenchmarkFollow(b *testing.B) {
	desktest.NewBackend(b)
	for _, delay := range []time.Duration{0, 250 * time.Millisecond} {
		ts := temporaltest.NewServer()
		rpcs := &rpcCounter{calls: map[string]int{}}
		follower := ts.NewClientWithOptions(client.Options{ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rpcs.intercept)}}})
		w := newWorker(b, ts.GetDefaultClient(), "follow", compileWith(b, deskSpec, deskTurns(delay)))
		starter := compileWith(b, deskSpec, nil)
		for _, mode := range []string{"poll_200ms", "watch_history"} {
			b.Run(fmt.Sprintf("model_%s/%s", delay, mode), func(b *testing.B) {
				var lat latencies
				var calls, queries, history int
				for b.Loop() {
					run, err := temporal.Start(context.Background(), follower, "follow", starter, runtime.Request{Input: "file it", User: tool.User{ID: "u-1"}}, temporal.StartOptions{})
					if err != nil {
						b.Fatal(err)
					}
					rpcs.take() // the start is not following
					if mode == "poll_200ms" {
						err = pollFollow(context.Background(), follower, run, &lat, 200*time.Millisecond)
					} else {
						_, err = temporal.Follow(context.Background(), follower, run, temporal.FollowOptions{Observer: &lat})
					}
					if err != nil {
						b.Fatal(err)
					}
					for method, n := range rpcs.take() {
						calls += n
						if method == queryMethod {
							queries += n
						}
					}
					desc, err := follower.DescribeWorkflowExecution(context.Background(), run.GetID(), "")
					if err != nil {
						b.Fatal(err)
					}
					history += int(desc.GetWorkflowExecutionInfo().GetHistoryLength())
				}
				b.ReportMetric(float64(lat.total.Milliseconds())/float64(lat.n), "ms/event")
				b.ReportMetric(float64(calls)/float64(b.N), "rpcs/run")
				b.ReportMetric(float64(queries)/float64(b.N), "queries/run")
				b.ReportMetric(float64(history)/float64(b.N), "history/run")
			})
		}
		w.Stop()
		ts.Stop()
	}
}

// BenchmarkConcurrentRuns runs 200 runs of the desk at once (an instant model),
// in process and on the embedded server — with the worker's default options,
// and with more pollers — and reports the wall time of the 200:
//
//	go test ./runtime/temporal -run '^$' -bench ConcurrentRuns -benchtime 3x
func BenchmarkConcurrentRuns(b *testing.B) {
	const runs = 200
	desktest.NewBackend(b)
	req := runtime.Request{Input: "file it", User: tool.User{ID: "u-1"}}
	all := func(b *testing.B, one func() error) {
		var failed atomic.Value
		var wg sync.WaitGroup
		for range runs {
			wg.Go(func() {
				if err := one(); err != nil {
					failed.Store(err)
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("in_process", func(b *testing.B) {
		a := compileWith(b, deskSpec, deskTurns(0))
		for b.Loop() {
			all(b, func() error {
				res, err := a.Run(context.Background(), req)
				if err == nil && res.Stop != runtime.StopCompleted {
					err = fmt.Errorf("stop %s", res.Stop)
				}
				return err
			})
		}
	})
	for _, tc := range []struct {
		name string
		opts worker.Options
	}{
		{"temporal_default_worker", worker.Options{}},
		{"temporal_8_pollers", worker.Options{MaxConcurrentWorkflowTaskPollers: 8, MaxConcurrentActivityTaskPollers: 8}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ts := temporaltest.NewServer()
			defer ts.Stop()
			c := ts.GetDefaultClient()
			w := worker.New(c, "many", tc.opts)
			if err := temporal.Register(w, []*runtime.Agent{compileWith(b, deskSpec, deskTurns(0))}, temporal.Options{}); err != nil {
				b.Fatal(err)
			}
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			starter := compileWith(b, deskSpec, nil)
			for b.Loop() {
				all(b, func() error {
					run, err := temporal.Start(context.Background(), c, "many", starter, req, temporal.StartOptions{})
					if err != nil {
						return err
					}
					var out temporal.RunOutput
					if err := run.Get(context.Background(), &out); err != nil {
						return err
					}
					if out.Result.Stop != runtime.StopCompleted {
						return fmt.Errorf("stop %s", out.Result.Stop)
					}
					return nil
				})
			}
		})
	}
}
