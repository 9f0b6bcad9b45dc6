package main

import (
	"github.com/agentrun/agentrun/schema"
	"github.com/spf13/cobra"
)

func newSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON schema of agent specs",
		Long: "Print the JSON schema of agent specs. Point your editor at it, e.g. with the modeline\n" +
			"# yaml-language-server: $schema=path/to/agent.schema.json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(schema.JSON)
			return err
		},
	}
}
