package main

import (
	"fmt"

	"github.com/agentrun/agentrun/schema"
	"github.com/spf13/cobra"
)

func newSchemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema [agent|skill|test|eval|serve]",
		Short: "Print the JSON schema of agent specs, skill packs, scenario tests, eval files or serve.yaml",
		Long: "Print a JSON schema: agent specs (the default), skill packs (skill.yaml; it refers\n" +
			"to agent.schema.json beside it), scenario tests (*.test.yaml), eval files (kind: eval;\n" +
			"they refer to agent.schema.json and test.schema.json beside them) or serve's config\n" +
			"(serve.yaml). Point your editor at\n" +
			"it, e.g. with the modeline # yaml-language-server: $schema=path/to/agent.schema.json",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"agent", "skill", "test", "eval", "serve"},
		RunE: func(cmd *cobra.Command, args []string) error {
			which := "agent"
			if len(args) > 0 {
				which = args[0]
			}
			doc, ok := map[string][]byte{"agent": schema.JSON, "skill": schema.SkillJSON, "test": schema.TestJSON, "eval": schema.EvalJSON, "serve": schema.ServeJSON}[which]
			if !ok {
				return fmt.Errorf("unknown schema %q: use agent, skill, test, eval or serve", which)
			}
			_, err := cmd.OutOrStdout().Write(doc)
			return err
		},
	}
}
