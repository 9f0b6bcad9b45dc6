package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/temporal"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// Engines a run can run on.
const (
	engineLocal    = "local"
	engineTemporal = "temporal"
)

// temporalFlags say where the Temporal cluster is and how to reach it.
type temporalFlags struct {
	engine, address, namespace, queue string
	tls                               temporalTLS
}

func (t *temporalFlags) add(f *pflag.FlagSet, withEngine bool) {
	if withEngine {
		f.StringVar(&t.engine, "engine", engineLocal, "where the run runs, an `ENGINE`: local (this process) or temporal (a workflow that agentrun worker runs)")
	}
	f.StringVar(&t.address, "temporal", "", "the Temporal frontend `HOST:PORT` (default: TEMPORAL_ADDRESS, else 127.0.0.1:7233)")
	f.StringVar(&t.namespace, "namespace", "", "the Temporal namespace (default: TEMPORAL_NAMESPACE, else default)")
	f.StringVar(&t.queue, "task-queue", temporal.DefaultTaskQueue, "the task queue the workers of these agents poll")
	t.tls.add(f)
}

// hostPort is the cluster's address: --temporal, else TEMPORAL_ADDRESS, else
// the SDK's default.
func (t *temporalFlags) hostPort() string {
	return cmp.Or(t.address, os.Getenv("TEMPORAL_ADDRESS"), client.DefaultHostPort)
}

func (t *temporalFlags) namespaceName() string {
	return cmp.Or(t.namespace, os.Getenv("TEMPORAL_NAMESPACE"), client.DefaultNamespace)
}

// placement is where a run resumed with these flags executes: a paused run
// waiting elsewhere is refused before any decision is stored.
func (t *temporalFlags) placement() runtime.Placement {
	if !t.onTemporal() {
		return runtime.Placement{}
	}
	return runtime.Placement{Engine: runtime.EngineTemporal, Address: t.hostPort(), Namespace: t.namespaceName(), TaskQueue: t.queue}
}

func (t *temporalFlags) check() error {
	switch t.engine {
	case "", engineLocal, engineTemporal:
		return nil
	}
	return fmt.Errorf("--engine %q: the engines are local and temporal", t.engine)
}

func (t *temporalFlags) onTemporal() bool { return t.engine == engineTemporal }

// resumeFlags are the flags a printed resume command needs to reach the run.
func (t *temporalFlags) resumeFlags() []string {
	if !t.onTemporal() {
		return nil
	}
	out := []string{"--engine", engineTemporal}
	if t.address != "" {
		out = append(out, "--temporal", t.address)
	}
	if t.namespace != "" {
		out = append(out, "--namespace", t.namespace)
	}
	return append(out, t.tls.flags()...)
}

// dialTimeout bounds the first call to the cluster: a cluster that is down, or
// refuses the client's TLS, fails the command rather than hang it.
const dialTimeout = 15 * time.Second

// dial connects to the Temporal cluster; its SDK logs only warnings, to errOut.
// Payloads above temporal.DefaultInlineLimit travel by reference to the store
// at blobs (the workers' store), unless it ends with the process (memory:).
func (t *temporalFlags) dial(ctx context.Context, errOut io.Writer, blobs string) (client.Client, func(), error) {
	if blobs == "" || isProcessLocal(blobs) {
		return t.dialWith(ctx, errOut, nil)
	}
	return t.dialWith(ctx, errOut, blobsAt(blobs))
}

// dialWith is dial with the store payloads travel through; nil keeps them inline.
func (t *temporalFlags) dialWith(ctx context.Context, errOut io.Writer, blobs *lazyBlobs) (client.Client, func(), error) {
	opts := client.Options{
		HostPort:  t.hostPort(),
		Namespace: t.namespaceName(),
		Logger:    tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	if err := t.tls.apply(&opts); err != nil {
		return nil, nil, err
	}
	closeStore := func() {}
	if blobs != nil {
		closeStore = blobs.shut
		opts.DataConverter = (&temporal.Codec{Blobs: blobs}).DataConverter()
	}
	dialCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := client.DialContext(dialCtx, opts)
	if err != nil {
		closeStore()
		return nil, nil, failure{fmt.Errorf("temporal at %s: %w%s", opts.HostPort, err, dialHint(opts, err))}
	}
	return c, func() { c.Close(); closeStore() }, nil
}

// dialHint says what of the client's TLS may be missing when a cluster that
// answered cut the connection: a secured cluster's refusal says little.
func dialHint(o client.Options, err error) string {
	if strings.Contains(err.Error(), "connection refused") {
		return "" // nothing listens there: TLS is not the question
	}
	switch cfg := o.ConnectionOptions.TLS; {
	case cfg == nil:
		return " (no TLS was used: a secured cluster needs --temporal-tls, or --temporal-tls-ca, and for mutual TLS --temporal-tls-cert and --temporal-tls-key)"
	case len(cfg.Certificates) == 0:
		return " (no client certificate was shown: a cluster that wants mutual TLS needs --temporal-tls-cert and --temporal-tls-key)"
	}
	return ""
}

// lazyBlobs opens the store the first time a payload needs it: most runs have
// none that large, and a client that only starts runs need not open a store.
// An open that failed is tried again at the next payload.
type lazyBlobs struct {
	// open opens the store; close, when set, closes what open opened.
	open  func() (store.Store, error)
	close func(store.Store)

	mu    sync.Mutex
	store store.Store
}

// blobsAt opens the store at url when a payload needs it, and closes it with close.
func blobsAt(url string) *lazyBlobs {
	return &lazyBlobs{open: func() (store.Store, error) { return agentrun.OpenStore(url, 0) }, close: func(s store.Store) { s.Close() }}
}

func (l *lazyBlobs) blobs() (store.Blobs, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		st, err := l.open()
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		l.store = st
	}
	b, ok := l.store.(store.Blobs)
	if !ok {
		return nil, errors.New("the store keeps no blobs: large payloads cannot travel by reference")
	}
	return b, nil
}

func (l *lazyBlobs) PutBlob(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	b, err := l.blobs()
	if err != nil {
		return err
	}
	return b.PutBlob(ctx, key, data, ttl)
}

func (l *lazyBlobs) Blob(ctx context.Context, key string) ([]byte, error) {
	b, err := l.blobs()
	if err != nil {
		return nil, err
	}
	return b.Blob(ctx, key)
}

func (l *lazyBlobs) shut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store != nil && l.close != nil {
		l.close(l.store)
	}
}

func newWorkerCommand() *cobra.Command {
	var t temporalFlags
	var store, model string
	var heartbeat time.Duration
	cmd := &cobra.Command{
		Use:   "worker --temporal HOST:PORT [--namespace NS] [--task-queue QUEUE] SPEC|DIR...",
		Short: "Run agents' runs as Temporal workflows",
		Long: "Poll a Temporal task queue and run the runs that `exec --engine temporal` (or any\n" +
			"Temporal client) starts there, for the agents of the specs given (directories are\n" +
			"searched for specs). The run's decisions run in the workflow; every model, tool,\n" +
			"store and knowledge call is an activity, so a run survives the loss of the worker\n" +
			"running it: another worker of the queue goes on from the call in flight. Run as\n" +
			"many workers as you like; all of a queue's workers must load the same specs.\n\n" +
			"Stops on SIGINT or SIGTERM once the calls in flight ended.",
		Example: "  agentrun worker --temporal 127.0.0.1:7233 examples/agents\n" +
			"  agentrun worker --temporal temporal.internal:7233 --namespace support --task-queue shop shop.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorker(cmd, args, t, store, model, heartbeat)
		},
	}
	f := cmd.Flags()
	t.add(f, false)
	f.StringVar(&store, "store", "", "the memory store's URL (default: AGENTRUN_STORE, memory.url, "+agentrun.DefaultStoreURL+"); workers on several machines need a shared one (redis:, postgres:)")
	f.StringVar(&model, "model", "", "override the model: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	f.DurationVar(&heartbeat, "heartbeat", 10*time.Second, "how soon a model or tool call whose worker stopped is tried again elsewhere")
	return cmd
}

func runWorker(cmd *cobra.Command, args []string, t temporalFlags, store, model string, heartbeat time.Duration) error {
	errOut := cmd.ErrOrStderr()
	if err := checkModelFlag(model); err != nil {
		return err
	}
	files, diags, err := spec.SpecFiles(args)
	if err != nil {
		return err
	}
	if diags.HasErrors() {
		fmt.Fprint(errOut, formatDiagnostics(diags))
		return exitError{1}
	}
	// The models' and tools' calls are traced as exec traces them (OTEL_* settings).
	opts := agentrun.Options{Model: model, Store: store, Remember: true}
	tel, err := setupTelemetry(cmd.Context(), &opts, slog.New(slog.NewTextHandler(errOut, nil)))
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	var agents []*runtime.Agent
	var blobs string
	for _, file := range files {
		s, err := loadSpec(cmd, file)
		if err != nil {
			return err
		}
		a, err := buildAgent(cmd, s, opts)
		if err != nil {
			return err
		}
		defer a.Close()
		agents = append(agents, a.Agent)
		if blobs == "" {
			blobs, _ = agentrun.StoreURL(store, s.Memory, s.Pos.File, nil)
		}
	}
	c, closeClient, err := t.dial(cmd.Context(), errOut, blobs)
	if err != nil {
		return err
	}
	defer closeClient()
	w := worker.New(c, t.queue, worker.Options{WorkerStopTimeout: 30 * time.Second})
	if err := temporal.Register(w, agents, temporal.Options{Heartbeat: heartbeat, Address: t.hostPort()}); err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	for _, a := range agents {
		fmt.Fprintf(errOut, "worker: %s (digest %s) on task queue %s\n", a.Name(), a.Digest(), t.queue)
	}
	<-cmd.Context().Done()
	fmt.Fprintln(errOut, "worker: stopping once the calls in flight end")
	w.Stop()
	return nil
}

// runOnTemporal starts the run as a workflow and follows it: its events go to
// the observers as the workflow makes them; a run that waits for approvals
// returns paused, the workflow waiting for `agentrun resume --engine temporal`.
func runOnTemporal(cmd *cobra.Command, t temporalFlags, blobs string, agent *agentrun.Agent, req runtime.Request) (*runtime.Result, error) {
	ctx := cmd.Context()
	c, closeClient, err := t.dial(ctx, cmd.ErrOrStderr(), blobs)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	run, err := temporal.Start(ctx, c, t.queue, agent.Agent, req, temporal.StartOptions{ExtractFacts: true})
	if err != nil {
		return nil, err
	}
	res, err := temporal.Follow(ctx, c, run, temporal.FollowOptions{Observer: req.Observer, ReturnPaused: true})
	if errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("stopped following run %s; it goes on as a workflow", run.GetID())
	}
	return res, err
}

// resumeOnTemporal tells a run's workflow that its decisions are stored and
// follows it from there.
func resumeOnTemporal(cmd *cobra.Command, t temporalFlags, blobs, runID string, obs runtime.Observer) (*runtime.Result, error) {
	ctx := cmd.Context()
	c, closeClient, err := t.dial(ctx, cmd.ErrOrStderr(), blobs)
	if err != nil {
		return nil, err
	}
	defer closeClient()
	from, err := temporal.EventCount(ctx, c, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s on Temporal: %w", runID, err)
	}
	if err := temporal.Decided(ctx, c, runID); err != nil {
		return nil, err
	}
	return temporal.Follow(ctx, c, c.GetWorkflow(ctx, runID, ""), temporal.FollowOptions{Observer: obs, From: from, ReturnPaused: true})
}

// temporalEngine runs serve's runs as workflows on the workers of a task queue.
type temporalEngine struct {
	c  client.Client
	at runtime.Placement
}

func (e temporalEngine) Placement() runtime.Placement { return e.at }

func (e temporalEngine) Run(ctx context.Context, agent *agentrun.Agent, req runtime.Request) (*runtime.Result, error) {
	run, err := temporal.Start(ctx, e.c, e.at.TaskQueue, agent.Agent, req, temporal.StartOptions{})
	if err != nil {
		return nil, err
	}
	return e.follow(ctx, run, temporal.FollowOptions{Observer: req.Observer, ReturnPaused: true})
}

func (e temporalEngine) Resume(ctx context.Context, _ *agentrun.Agent, req runtime.ResumeRequest) (*runtime.Result, error) {
	from, err := temporal.EventCount(ctx, e.c, req.RunID)
	if err != nil {
		return nil, err
	}
	if err := temporal.Decided(ctx, e.c, req.RunID); err != nil {
		return nil, err
	}
	return e.follow(ctx, e.c.GetWorkflow(ctx, req.RunID, ""), temporal.FollowOptions{Observer: req.Observer, From: from, ReturnPaused: true})
}

// follow follows a run; one whose caller went away (its request, the server's
// shutdown) is canceled, as a run in the server's process would be.
func (e temporalEngine) follow(ctx context.Context, run client.WorkflowRun, o temporal.FollowOptions) (*runtime.Result, error) {
	res, err := temporal.Follow(ctx, e.c, run, o)
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		e.c.CancelWorkflow(cctx, run.GetID(), "")
	}
	return res, err
}
