package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/serve"
	"github.com/agentrun/agentrun/spec"
)

type mcpOptions struct {
	config, store, model, index, user string
	set                               []string
}

func newMCPCommand() *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:   "mcp [flags] SPEC|DIR...",
		Short: "Serve agents as MCP tools over stdio, for Claude Desktop, IDEs and other agents",
		Long: "Serve agents as the tools of a Model Context Protocol server on stdin and stdout, for\n" +
			"an MCP client that starts this command (Claude Desktop, an IDE, another agent). Each\n" +
			"agent is a tool named after it: it takes a question and an optional conversation id,\n" +
			"and answers with the agent's answer (and its structured output, when the spec has an\n" +
			"output schema), sending progress notifications while the run works.\n\n" +
			"Specs are loaded, validated and built as `agentrun serve` does; any error is printed\n" +
			"and nothing is served. Every call runs for one user, --user with the attributes\n" +
			"--set gives (bound into tools, never shown to the model); --config serve.yaml gives\n" +
			"the limits (its auth is not used). A call that needs a person's approval asks the\n" +
			"client's user when the client supports elicitation, and is refused otherwise.\n\n" +
			"stdout carries the protocol only: logs go to stderr, as JSON lines. The server ends\n" +
			"when the client closes stdin, or on SIGINT or SIGTERM; runs in flight are canceled.",
		Example: "  agentrun mcp --user u-42 examples/agents/shop-support.yaml\n" +
			"  agentrun mcp --model test examples/agents/code-assistant.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runMCP(cmd, args, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "a server config for the limits (`serve.yaml`; its auth is not used)")
	f.StringVar(&o.store, "store", "", "the memory store's URL for every agent (default: AGENTRUN_STORE, else the first spec's memory.url, else .agentrun/state.db)")
	f.StringVar(&o.model, "model", "", "override every spec's model: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	f.StringVar(&o.index, "index", "", "the knowledge index file (default: AGENTRUN_INDEX, else knowledge.index, else .agentrun/knowledge.db)")
	f.StringVar(&o.user, "user", "cli-user", "the user every call runs for (bound into tools, never shown to the model)")
	f.StringArrayVar(&o.set, "set", nil, "a user attribute, `key=value` (repeatable)")
	return cmd
}

func runMCP(cmd *cobra.Command, specs []string, o mcpOptions) error {
	errOut := cmd.ErrOrStderr()
	cfg, err := serve.LoadConfig(o.config)
	if diags, ok := errors.AsType[spec.Diagnostics](err); ok {
		fmt.Fprint(errOut, formatDiagnostics(diags))
		return exitError{1}
	}
	if err != nil {
		return err
	}
	p := serve.Principal{User: tool.User{ID: o.user, Attributes: map[string]string{}}, Via: "stdio"}
	for _, kv := range o.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
		p.User.Attributes[k] = v
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(errOut, nil))
	var topts agentrun.Options
	tel, err := setupTelemetry(ctx, &topts, logger)
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tel)
	srv, err := serve.New(ctx, serve.Options{Config: cfg, Specs: specs, Store: o.store, Model: o.model, Index: o.index,
		Stdio: true, Logger: logger, Telemetry: topts.Telemetry, RecordContent: topts.RecordContent})
	var diags spec.Diagnostics
	if errors.As(err, &diags) {
		fmt.Fprint(errOut, formatDiagnostics(diags))
		return exitError{1}
	}
	if err != nil {
		fmt.Fprintf(errOut, "agentrun mcp: %v\n", err)
		return exitError{1}
	}
	defer srv.Close()
	if err := srv.CheckPrincipal(p); err != nil {
		return fmt.Errorf("--user, --set: %w", err)
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}}
	if err := srv.ServeMCP(ctx, t, p); err != nil {
		return failure{fmt.Errorf("mcp: %w", err)}
	}
	return nil
}

// nopWriteCloser is stdout as the transport's writer: the process closes it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
