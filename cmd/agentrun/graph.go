package main

import (
	"encoding/json"
	"fmt"

	"github.com/agentrun/agentrun/runtime/graph"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newGraphCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph SPEC",
		Short: "Print a Mermaid diagram of the compiled agent",
		Long: "Print a Mermaid flowchart of the compiled agent: intents → domains → tools, and the\n" +
			"run's state machine with its guards. Paste it into any Mermaid renderer, or\n" +
			"`agentrun graph spec.yaml > agent.mmd`. --format json prints the same graph as data\n" +
			"(nodes, edges, groups), as serve's GET /v1/agents/{name}/graph answers.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "mermaid" && format != "json" {
				return fmt.Errorf("unknown --format %q: use mermaid or json", format)
			}
			agent, err := loadAgent(cmd, args[0], "", false)
			if err != nil {
				return err
			}
			defer agent.Close()
			g := graph.Build(agent.Agent, agent.Spec)
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(g)
			}
			return graph.WriteMermaid(cmd.OutOrStdout(), g)
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "output format: mermaid (a flowchart) or json (nodes, edges and groups)")
	return cmd
}

// setting shows an effective value, marked when the spec left it to its default.
func setting(st *spec.Settings, key string, v any) string { return graph.Setting(st, key, v) }

// remoteHost is the host of a remote agent's URL, as the graph names it.
func remoteHost(raw string) string { return graph.RemoteHost(raw) }
