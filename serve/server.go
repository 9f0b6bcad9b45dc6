package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Options are what New needs besides the config.
type Options struct {
	Config Config
	// Specs are agent spec files and directories holding them.
	Specs []string
	// Store is the memory store's URL for every agent ("" means AGENTRUN_STORE,
	// then the first spec's memory.url, then the default SQLite file).
	Store string
	// Model overrides every spec's model, as exec --model does.
	Model string
	// Index overrides the knowledge index file.
	Index string
	// InsecureNoAuth serves without authentication, as the one user "local"; New
	// refuses it unless Config.Addr is a loopback address.
	InsecureNoAuth bool
	// Stdio: the server answers no HTTP, its agents are served with ServeMCP
	// (agentrun mcp) for the one principal it is given. New needs no
	// authentication, and the Handler refuses every authenticated endpoint.
	Stdio bool
	// Logger receives the access log and the server's own messages.
	Logger *slog.Logger
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ResumeGrace is how long a streamed run nobody reads any more waits for a
	// reader to resume it (Last-Event-ID) before it is canceled; 0 means 10s.
	ResumeGrace time.Duration
	// Telemetry traces the runs; a request's traceparent becomes its run's parent.
	Telemetry     *telemetry.Telemetry
	RecordContent bool
	// Engine runs the runs elsewhere (a durable engine's workers); nil runs them
	// in this process.
	Engine Engine
	// UI serves the web console (package console) under /ui/.
	UI bool
	// Dev is `agentrun dev`: on a loopback address only, without authentication, a
	// request is the user its X-Agentrun-User header names (see devAuth); the
	// status endpoint shows the diagnostics of a spec that failed to load, and
	// every run keeps its model requests' messages for the console.
	Dev bool
}

// Engine runs the server's runs and resumes its paused runs, their events going
// to the request's Observer as they happen. The server decides, stores and
// authorizes everything else as it does for runs in this process.
type Engine interface {
	Run(ctx context.Context, agent *agentrun.Agent, req runtime.Request) (*runtime.Result, error)
	// Resume goes on with a paused run once its decisions are stored.
	Resume(ctx context.Context, agent *agentrun.Agent, req runtime.ResumeRequest) (*runtime.Result, error)
	// Placement is where the engine's runs execute: a paused run that waits
	// elsewhere is neither decided nor resumed by this server.
	Placement() runtime.Placement
}

// placement is where this server's runs execute.
func (s *Server) placement() runtime.Placement {
	if s.opts.Engine == nil {
		return runtime.Placement{}
	}
	return s.opts.Engine.Placement()
}

// DefaultResumeGrace is Options.ResumeGrace's default.
const DefaultResumeGrace = 10 * time.Second

// Server serves agents over HTTP. Build it with New, serve its Handler, and on
// shutdown call CancelRuns after the grace period, then Close.
type Server struct {
	opts    Options
	limits  Limits
	auth    Authenticator
	store   store.Store
	metrics *Metrics
	limiter *limiter
	tokens  *streamTokens // the stream tokens of GET /v1/runs/{id}/events
	runs    *runRegistry
	log     *slog.Logger
	// responses are the requests of stored Responses API responses, for their GET.
	responses responseBodies
	a2a       *a2aService // the A2A endpoints' tasks and handlers

	// runsCtx is the parent of every run: CancelRuns ends the ones still going.
	runsCtx    context.Context
	cancelRuns context.CancelFunc
	// running counts the runs in flight, with or without a request waiting on
	// them (a stream whose reader left), so shutdown can wait for all of them.
	running sync.WaitGroup

	mu     sync.RWMutex
	agents map[string]*served

	// resumeMu guards the resumptions of paused runs: stopping (shutdown began: no
	// more start) and resuming (the ids of runs this process is resuming).
	resumeMu    sync.Mutex
	stopping    bool
	resuming    map[string]bool
	stopSweeper context.CancelFunc
	sweeperDone chan struct{}

	mcp mcpHTTP // the state of /mcp

	status loadStatus // what became of the last load of the specs (GET /v1/status)
	// keptBytes counts the model requests' messages the runs keep (maxKeptBytes).
	keptBytes atomic.Int64
}

// served is one agent the server offers, with the runs using it, so a reload
// closes the old version only when they are done.
type served struct {
	*agentrun.Agent
	inUse sync.WaitGroup
}

// New loads, validates and compiles every agent; any problem is an error (a
// spec.Diagnostics for spec errors) and nothing is served.
func New(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.ResumeGrace == 0 {
		opts.ResumeGrace = DefaultResumeGrace
	}
	s := &Server{opts: opts, limits: opts.Config.Limits.withDefaults(), metrics: NewMetrics(), runs: newRunRegistry(), log: opts.Logger,
		tokens: newStreamTokens()}
	s.limiter = newLimiter(s.limits)
	s.a2a = newA2AService(s)
	switch {
	case opts.Stdio:
		s.auth = stdioAuth{}
	case opts.Dev:
		if !IsLoopback(opts.Config.Addr) {
			return nil, fmt.Errorf("agentrun dev lets every request choose its user: only on a loopback address (127.0.0.1, [::1], localhost), not %q", opts.Config.Addr)
		}
		s.auth = devAuth{}
	case opts.InsecureNoAuth:
		if !IsLoopback(opts.Config.Addr) {
			return nil, fmt.Errorf("--insecure-no-auth serves everyone as one user: only on a loopback address (127.0.0.1, [::1], localhost), not %q", opts.Config.Addr)
		}
		s.auth = insecureAuth{}
	default:
		if len(opts.Config.Auth.Tokens) == 0 && opts.Config.Auth.JWT == nil {
			return nil, errors.New("no authentication is configured: give --config with auth.tokens or auth.jwt (or, on a loopback address only, --insecure-no-auth)")
		}
		if s.auth, err = NewAuthenticator(opts.Config.Auth, opts.LookupEnv); err != nil {
			return nil, err
		}
	}
	agents, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	s.agents = agents
	s.status.record(nil, time.Now())
	s.runsCtx, s.cancelRuns = context.WithCancel(context.WithoutCancel(ctx))
	go s.runs.janitor(s.runsCtx)
	s.resuming = map[string]bool{}
	interval := opts.Config.Approvals.SweepInterval
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	var sweepCtx context.Context
	sweepCtx, s.stopSweeper = context.WithCancel(context.WithoutCancel(ctx))
	s.sweeperDone = make(chan struct{})
	go s.sweeper(sweepCtx, interval)
	return s, nil
}

// IsLoopback reports whether addr (host:port, or :port for every interface)
// listens on a loopback address only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// load builds every agent of the specs. The store is opened once, with the first
// load, and shared by all agents (conversations and memory are the user's, not an
// agent's).
func (s *Server) load(ctx context.Context) (map[string]*served, error) {
	// The docs put serve.yaml, recordings, tests and FAQ files beside the specs.
	files, walked, err := spec.SpecFilesSkipping(s.opts.Specs, func(f spec.File) {
		s.log.Info("not served: not an agent spec", "file", f.Path, "kind", string(f.Kind))
	})
	if err != nil {
		return nil, err
	}
	if walked.HasErrors() {
		return nil, walked.Errors()
	}
	var specs []*spec.Spec
	var diags spec.Diagnostics
	for _, f := range files {
		sp, err := agentrun.Load(f)
		var d spec.Diagnostics
		switch {
		case errors.As(err, &d):
			diags = append(diags, d...)
		case err != nil:
			return nil, err
		default:
			specs = append(specs, sp)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	if s.store == nil {
		url, err := agentrun.StoreURL(s.opts.Store, firstMemory(specs), firstFile(specs), s.opts.LookupEnv)
		if err != nil {
			return nil, err
		}
		if s.store, err = agentrun.OpenStore(url, firstMemory(specs).TTL.Duration); err != nil {
			return nil, fmt.Errorf("memory store: %w", err)
		}
	}
	agents := map[string]*served{}
	closeAll := func() {
		for _, a := range agents {
			a.Close()
		}
	}
	for _, sp := range specs {
		if prev, dup := agents[sp.Name]; dup {
			closeAll()
			return nil, fmt.Errorf("%s and %s both name an agent %q: agent names must be unique", prev.Spec.Pos.File, sp.Pos.File, sp.Name)
		}
		a, err := agentrun.Build(ctx, sp, agentrun.Options{Model: s.opts.Model, SharedStore: s.store, Index: s.opts.Index, LookupEnv: s.opts.LookupEnv,
			Telemetry: s.opts.Telemetry, RecordContent: s.opts.RecordContent})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", sp.Pos.File, err)
		}
		agents[sp.Name] = &served{Agent: a}
	}
	return agents, nil
}

// firstFile is the first spec's file, whose project directory holds the default store.
func firstFile(specs []*spec.Spec) string {
	if len(specs) == 0 {
		return ""
	}
	return specs[0].Pos.File
}

func firstMemory(specs []*spec.Spec) spec.Memory {
	if len(specs) == 0 {
		return spec.Memory{}
	}
	return specs[0].Memory
}

// Store is the store every agent of the server uses.
func (s *Server) Store() store.Store { return s.store }

// Reload loads the specs again. On any problem it keeps serving what it served
// and returns the problem; else new runs use the new agents, and each old agent
// is closed once its runs are done.
func (s *Server) Reload(ctx context.Context) error {
	agents, err := s.load(ctx)
	s.status.record(err, time.Now())
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.agents
	s.agents = agents
	s.mu.Unlock()
	for _, a := range old {
		go func() {
			a.inUse.Wait()
			a.Close()
		}()
	}
	return nil
}

// Files is what a watcher reloading the server watches: the spec files and
// directories of Options.Specs, and spec.Files of every agent served now.
// Paths are absolute, cleaned, sorted and unique.
func (s *Server) Files() []string {
	seen := map[string]bool{}
	for _, p := range s.opts.Specs {
		if abs, err := filepath.Abs(p); err == nil {
			seen[abs] = true
		}
	}
	s.mu.RLock()
	for _, a := range s.agents {
		for _, p := range spec.Files(a.Spec) {
			seen[p] = true
		}
	}
	s.mu.RUnlock()
	return slices.Sorted(maps.Keys(seen))
}

// agent returns the named agent, counted as in use until done is called.
func (s *Server) agent(name string) (a *served, done func()) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a = s.agents[name]
	if a == nil {
		return nil, nil
	}
	a.inUse.Add(1)
	return a, a.inUse.Done
}

func (s *Server) agentNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.agents))
	for n := range s.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CancelRuns cancels the runs still in flight: after SIGTERM's grace period.
func (s *Server) CancelRuns() { s.cancelRuns() }

// WaitRuns waits until no run is in flight, or ctx ends (its error then). It
// begins the shutdown: paused runs are no longer resumed by this process.
func (s *Server) WaitRuns(ctx context.Context) error {
	s.stopResumes()
	done := make(chan struct{})
	go func() {
		s.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close cancels the runs still in flight, waits for them to end (and store what
// they leave), then closes every agent and the store.
func (s *Server) Close() error {
	s.cancelRuns()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	s.WaitRuns(ctx)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, a := range s.agents {
		errs = append(errs, a.Close())
	}
	s.agents = nil
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if c, ok := s.auth.(io.Closer); ok { // a JWKS URL's refresh
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Metrics are the server's Prometheus metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// insecureAuth is --insecure-no-auth: everyone is the user "local".
type insecureAuth struct{}

func (insecureAuth) Authenticate(*http.Request) (Principal, error) {
	return Principal{User: tool.User{ID: "local", Attributes: map[string]string{}}, Via: "insecure"}, nil
}

// newID is a random id for runs and conversations.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
