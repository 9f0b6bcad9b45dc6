package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/skills"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newSkillsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skills",
		Short: "List the bundled skills, or show one skill pack",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the bundled skills",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loader, err := agentrun.NewLoader()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tTOOLS\tDESCRIPTION")
			for _, name := range loader.BundledSkills() {
				s, _, err := loadSkill(loader, name)
				if err != nil {
					return err
				}
				p := s.Skills[0].Pack
				var tools []string
				for _, t := range p.Tools {
					tools = append(tools, t.Name)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Version, strings.Join(tools, ", "), p.Description)
			}
			tw.Flush()
			fmt.Fprintln(cmd.OutOrStdout(), "\nUse one in an agent with `skills: [NAME]`, or `- use: NAME` with options under `with:`.")
			return nil
		},
	}
	show := &cobra.Command{
		Use:   "show NAME|PATH",
		Short: "Show a skill pack: options, requirements, tools with their schemas, filters",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			loader, err := agentrun.NewLoader()
			if err != nil {
				return err
			}
			s, agent, err := loadSkill(loader, args[0])
			if err != nil {
				return err
			}
			pack := s.Skills[0].Pack
			writeSkill(cmd.OutOrStdout(), pack, agent)
			var readme []byte
			if bundled, ok := strings.CutPrefix(pack.Dir, spec.BundledPrefix); ok {
				readme, _ = fs.ReadFile(skills.Bundled(), path.Join(bundled, "README.md"))
			} else {
				readme, _ = spec.ReadFile(filepath.Join(pack.Dir, "README.md"), spec.MaxFileSize) // a regular file, capped
			}
			if len(readme) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%s", readme)
			}
			return nil
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

// loadSkill loads a skill through a one-line agent that uses it, so it is read,
// checked and compiled exactly as agents get it. Required options get placeholders.
func loadSkill(loader *spec.Loader, use string) (*spec.Spec, *runtime.Agent, error) {
	with := map[string]any{}
	if first, diags := loader.Load("skill", agentUsing(use, with)); first != nil && first.Skills[0].Pack != nil {
		for _, o := range first.Skills[0].Pack.Options {
			if o.Required && o.Default == nil {
				with[o.Name] = placeholder(o.Type)
			}
		}
	} else if diags.HasErrors() {
		return nil, nil, errors.New(strings.TrimSpace(formatDiagnostics(diags.Errors())))
	}
	s, diags := loader.Load("skill", agentUsing(use, with))
	if diags.HasErrors() {
		return nil, nil, errors.New(strings.TrimSpace(formatDiagnostics(diags.Errors())))
	}
	agent, cdiags := runtime.Compile(s, runtime.Options{Tools: agentrun.Registry()})
	if cdiags.HasErrors() {
		return nil, nil, fmt.Errorf("%s", cdiags.Error())
	}
	return s, agent, nil
}

func agentUsing(use string, with map[string]any) []byte {
	w, _ := json.Marshal(with)
	u, _ := json.Marshal(use)
	return []byte(fmt.Sprintf("version: 1\nname: skill-show\nskills:\n  - use: %s\n    with: %s\n", u, w))
}

func placeholder(typ string) any {
	switch typ {
	case "array":
		return []any{"example"}
	case "boolean":
		return false
	case "integer", "number":
		return 1
	case "object":
		return map[string]any{}
	}
	return "https://example.com" // a placeholder that also passes for a URL
}

func writeSkill(w io.Writer, p *spec.SkillPack, agent *runtime.Agent) {
	fmt.Fprintf(w, "skill %s — %s\n", strings.TrimSpace(p.Name+" "+p.Version), p.Description)
	if len(p.Options) > 0 {
		fmt.Fprintln(w, "\noptions (under with:):")
		for _, o := range p.Options {
			def := "required"
			if !o.Required {
				b, _ := json.Marshal(o.Default)
				def = "default " + string(b)
			}
			fmt.Fprintf(w, "  %-12s %-8s %-18s %s\n", o.Name, o.Type, def, o.Description)
		}
	}
	if r := p.Requires; len(r.Env) > 0 || len(r.Commands) > 0 {
		fmt.Fprintf(w, "\nrequires: env %v, programs %v\n", r.Env, r.Commands)
	}
	if text := strings.TrimSpace(p.Instructions.Source); text != "" {
		fmt.Fprintf(w, "\ninstructions:\n  %s\n", strings.ReplaceAll(text, "\n", "\n  "))
	}
	fmt.Fprintln(w, "\ntools:")
	for _, d := range agent.Tools() {
		params, _ := json.MarshalIndent(d.Parameters, "    ", "  ")
		fmt.Fprintf(w, "  %s — %s\n    %s\n", d.Name, d.Description, params)
	}
	if len(p.Filters) > 0 {
		fmt.Fprintln(w, "\nfilters:")
		for _, f := range p.Filters {
			fmt.Fprintf(w, "  on %s, %s", f.On, f.Action)
			if len(f.Tools) > 0 {
				fmt.Fprintf(w, " for %s", strings.Join(f.Tools, ", "))
			}
			if f.When != nil {
				fmt.Fprintf(w, " when %s", f.When.Source)
			}
			fmt.Fprintln(w)
		}
	}
}
