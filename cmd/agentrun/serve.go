package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/serve"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newServeCommand() *cobra.Command {
	var addr, config, st, model, index string
	var engine temporalFlags
	var insecure, ui bool
	cmd := &cobra.Command{
		Use:   "serve [flags] SPEC|DIR...",
		Short: "Serve agents over HTTP: a run API with SSE and an OpenAI-compatible endpoint",
		Long: "Serve agents over HTTP. Every spec is loaded, validated and compiled at start; any\n" +
			"error is printed and nothing is served. Requests authenticate with a bearer token\n" +
			"or a JWT (--config serve.yaml, see docs/serve.md); the authenticated user is the\n" +
			"run context tools bind, and nothing in a request can change it.\n\n" +
			"SIGTERM stops accepting connections, lets runs in flight finish within\n" +
			"grace_period, then cancels them and exits 0. SIGHUP reloads the specs, keeping the\n" +
			"old ones on any error.\n\n" +
			"With --engine temporal every run is a Temporal workflow that `agentrun worker`\n" +
			"processes run (give them the same specs and --store); the server authenticates,\n" +
			"stores decisions on approvals and streams each run's events as before.\n\n" +
			"With --ui the web console is served under /ui/ (and / leads there). Its pages\n" +
			"hold no data and need no token; every API call they make authenticates as any\n" +
			"other request does, with the token the page is given. For development on this\n" +
			"machine, without tokens and with reloading on save, use `agentrun dev`.",
		Example: "  agentrun serve --config serve.yaml examples/agents\n" +
			"  agentrun serve --insecure-no-auth --model test examples/agents/shop-support.yaml\n" +
			"  agentrun serve --config serve.yaml --ui examples/agents",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := serve.LoadConfig(config)
			if diags, ok := errors.AsType[spec.Diagnostics](err); ok {
				fmt.Fprint(cmd.ErrOrStderr(), formatDiagnostics(diags))
				return exitError{1}
			}
			if err != nil {
				return err
			}
			if addr != "" {
				cfg.Addr = addr
			}
			errOut := cmd.ErrOrStderr()
			logger := slog.New(slog.NewJSONHandler(errOut, nil))
			var topts agentrun.Options
			tel, err := setupTelemetry(cmd.Context(), &topts, logger)
			if err != nil {
				return err
			}
			defer shutdownTelemetry(tel)
			if err := engine.check(); err != nil {
				return err
			}
			opts := serve.Options{Config: cfg, Specs: args, Store: st, Model: model, Index: index,
				InsecureNoAuth: insecure, UI: ui, Logger: logger, Telemetry: topts.Telemetry, RecordContent: topts.RecordContent}
			var srv *serve.Server
			if engine.onTemporal() {
				// Payloads travel through the server's own store: the one it shares with
				// the workers. The server closes it.
				blobs := &lazyBlobs{open: func() (store.Store, error) { return srv.Store(), nil }}
				c, closeClient, err := engine.dialWith(cmd.Context(), errOut, blobs)
				if err != nil {
					return err
				}
				defer closeClient()
				opts.Engine = temporalEngine{c: c, at: engine.placement()}
			}
			srv, err = serve.New(cmd.Context(), opts)
			var diags spec.Diagnostics
			if errors.As(err, &diags) {
				fmt.Fprint(errOut, formatDiagnostics(diags))
				return exitError{1}
			}
			if err != nil {
				fmt.Fprintf(errOut, "agentrun serve: %v\n", err)
				return exitError{1}
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", cfg.Addr)
			if err != nil {
				fmt.Fprintf(errOut, "agentrun serve: %v\n", err)
				return exitError{1}
			}
			if insecure {
				fmt.Fprintln(errOut, "agentrun serve: WARNING: --insecure-no-auth: no authentication, every request runs as the user \"local\"")
			}
			fmt.Fprintf(errOut, "agentrun serve: listening on http://%s\n", ln.Addr())
			return serveUntilSignal(cmd.Context(), srv, ln, cfg, logger, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "", "the address to listen on (default "+serve.DefaultAddr+", or addr in the config)")
	f.StringVar(&config, "config", "", "the server's config: authentication and limits (`serve.yaml`)")
	f.BoolVar(&insecure, "insecure-no-auth", false, "no authentication, every request is the user \"local\" (loopback addresses only)")
	f.BoolVar(&ui, "ui", false, "serve the web console under /ui/ (its API calls authenticate as any request does)")
	f.StringVar(&st, "store", "", "the memory store's URL for every agent (default: AGENTRUN_STORE, else the first spec's memory.url, else .agentrun/state.db)")
	f.StringVar(&model, "model", "", "override every spec's model: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	f.StringVar(&index, "index", "", "the knowledge index file (default: AGENTRUN_INDEX, else knowledge.index, else .agentrun/knowledge.db)")
	engine.add(f, true)
	return cmd
}

// serveUntilSignal serves until SIGTERM or SIGINT (or ctx ends), reloading on
// SIGHUP (with reload, or when it is nil by reloading the specs and logging the
// outcome); then it stops accepting, gives runs in flight the grace period,
// cancels the rest and returns.
func serveUntilSignal(ctx context.Context, srv *serve.Server, ln net.Listener, cfg serve.Config, log *slog.Logger, reload func(context.Context)) error {
	hs := srv.HTTPServer()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	for {
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
			return shutdown(hs, srv, cfg.GracePeriod, log)
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				log.Info("shutting down", "signal", sig.String(), "grace_period", cfg.GracePeriod.String())
				return shutdown(hs, srv, cfg.GracePeriod, log)
			}
			if reload != nil {
				reload(ctx)
			} else if err := srv.Reload(ctx); err != nil {
				log.Error("reload failed: still serving the agents loaded before", "error", strings.TrimSpace(reloadError(err)))
			} else {
				log.Info("reloaded the specs")
			}
		}
	}
}

func reloadError(err error) string {
	var diags spec.Diagnostics
	if errors.As(err, &diags) {
		return formatDiagnostics(diags)
	}
	return err.Error()
}

// shutdown closes the listener and waits up to grace for the requests and the runs
// in flight (a streamed run may have no request left), then cancels the runs
// still going and waits for them and their handlers to answer.
func shutdown(hs *http.Server, srv *serve.Server, grace time.Duration, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(ctx)
	if err == nil {
		err = srv.WaitRuns(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		log.Info("grace period over: canceling the runs still in flight")
		srv.CancelRuns()
		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel2()
		err = errors.Join(hs.Shutdown(ctx2), srv.WaitRuns(ctx2))
	}
	if err != nil {
		hs.Close()
	}
	return nil
}
