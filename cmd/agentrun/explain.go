package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newExplainCommand() *cobra.Command {
	var intent, question, model string
	var set []string
	cmd := &cobra.Command{
		Use:   "explain SPEC",
		Short: "Show what the model would receive, per intent, with token estimates",
		Long: "Show what the model would receive for an intent — the system prompt, the tools\n" +
			"offered, the memory level, guards and judge — with estimated tokens per part and the\n" +
			"saving against offering every tool. Without --intent, a table of every intent.\n" +
			"--question runs only the router (offline with --model test or script:FILE).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if intent != "" && question != "" {
				return fmt.Errorf("give --intent or --question, not both")
			}
			agent, err := loadAgent(cmd, args[0], model, question != "")
			if err != nil {
				return err
			}
			defer agent.Close()
			s := agent.Spec
			user, err := agentrun.User(s, "explain", set)
			if err != nil {
				return fmt.Errorf("--set %w", err)
			}
			out := cmd.OutOrStdout()
			if question != "" {
				name, how, detail := agent.Route(cmd.Context(), runtime.Request{Input: question, User: user})
				fmt.Fprintf(out, "router: intent %s, by %s", cmp.Or(name, "(none)"), how)
				if detail != "" {
					fmt.Fprintf(out, " (%s)", detail)
				}
				fmt.Fprint(out, "\n\n")
				intent = name
			}
			if intent == "" && len(s.Intents) > 0 && question == "" {
				writeIntentTable(out, agent.Agent, s)
				warnRouting(cmd.ErrOrStderr(), args[0])
				return nil
			}
			if err := agentrun.CheckIntent(s, intent); err != nil {
				return fmt.Errorf("--%w", err)
			}
			plan, _ := agent.ExplainFor(intent, user.Attributes)
			writePlan(out, agent.Agent, plan, s)
			warnUnsetAttributes(cmd.ErrOrStderr(), agent.Agent, s, plan, user.Attributes)
			return nil
		},
	}
	cmd.Flags().StringVar(&intent, "intent", "", "the intent to explain")
	cmd.Flags().StringVar(&question, "question", "", "route this question, then explain its intent")
	cmd.Flags().StringArrayVar(&set, "set", nil, "a user attribute the prompt is rendered with, `key=value` (repeatable)")
	cmd.Flags().StringVar(&model, "model", "", "the model for --question's classifier: test, script:FILE, openai[:NAME], anthropic[:NAME] or gemini[:NAME]")
	return cmd
}

// warnRouting repeats validate's warnings of the spec at path about its routing
// (a rule that takes FAQ questions from a cached intent), beside the table of
// intents they concern.
func warnRouting(w io.Writer, path string) {
	loader, err := agentrun.NewLoader()
	if err != nil {
		return
	}
	var ds spec.Diagnostics
	for _, d := range loader.LoadFile(path).Diagnostics {
		if d.Severity == spec.Warning && strings.HasPrefix(d.Path, "intents.") && strings.Contains(d.Message, "FAQ question") {
			ds = append(ds, d)
		}
	}
	if len(ds) > 0 {
		fmt.Fprint(w, "\n"+formatDiagnostics(spec.FillEnds(ds)))
	}
}

// warnUnsetAttributes names each declared user attribute that was not given and
// that the rendered prompt would show (it renders as ""), and how to give it: the
// prompt rendered with a stand-in value for it differs.
func warnUnsetAttributes(w io.Writer, agent *runtime.Agent, s *spec.Spec, plan runtime.Plan, attrs map[string]string) {
	for _, name := range s.Context.User {
		if _, ok := attrs[name]; ok {
			continue
		}
		with := maps.Clone(attrs) // agentrun.User's map: never nil
		with[name] = "<" + name + ">"
		if other, _ := agent.ExplainFor(plan.Intent, with); other.SystemPrompt != plan.SystemPrompt {
			fmt.Fprintf(w, "agentrun: warning: user.%s is unset, so the prompt above shows it empty: give --set %s=VALUE\n", name, name)
		}
	}
}

// loadAgent assembles a spec's agent for inspection: no store, no MCP servers, and
// a model only when something will call it.
func loadAgent(cmd *cobra.Command, path, modelFlag string, needModel bool) (*agentrun.Agent, error) {
	if err := checkModelFlag(modelFlag); err != nil {
		return nil, err
	}
	s, err := loadSpec(cmd, path)
	if err != nil {
		return nil, err
	}
	return buildAgent(cmd, s, agentrun.Options{Model: modelFlag, Inspect: true, NoModel: !needModel})
}

func toolsTokens(defs []model.ToolDef) int {
	n := 0
	for _, d := range defs {
		n += model.ToolTokens(d)
	}
	return n
}

// saving describes what offering only these tools saves against offering all.
func saving(plan runtime.Plan) string {
	all, these := toolsTokens(plan.AllTools), toolsTokens(plan.Tools)
	if all == 0 || all == these {
		return "no saving: every tool is offered"
	}
	return fmt.Sprintf("saves ~%d tokens per model call (%d%%) against offering all %d tools", all-these, 100*(all-these)/all, len(plan.AllTools))
}

func writeIntentTable(w io.Writer, agent *runtime.Agent, s *spec.Spec) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INTENT\tKIND\tMEMORY\tTOOLS\tPROMPT\tTOOL TOKENS\tSAVING\tKNOWLEDGE")
	for _, in := range s.Intents {
		plan, _ := agent.Explain(in.Name)
		all, these := toolsTokens(plan.AllTools), toolsTokens(plan.Tools)
		pct := 0
		if all > 0 {
			pct = 100 * (all - these) / all
		}
		kind := string(plan.Kind)
		if plan.Agent != "" {
			kind = "→ " + plan.Agent // the agent's own prompt and tools apply, not these
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t~%d\t~%d\t~%d (%d%%)\t%s\n", plan.Intent, kind, plan.Memory,
			len(plan.Tools), len(plan.AllTools), model.EstimateTokens(plan.SystemPrompt), these, all-these, pct, knowledgeCell(plan))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nTokens are estimates (about 4 characters a token, one a token for CJK); offering every tool costs ~%d.\n", toolsTokens(agent.Tools()))
}

// knowledgeCell sums up an intent's knowledge stages for the table: the FAQ
// cache's threshold and the retrieval's token budget.
func knowledgeCell(plan runtime.Plan) string {
	var parts []string
	if c := plan.Cache; c != nil {
		parts = append(parts, fmt.Sprintf("cache ≥%.2f", c.Threshold))
	}
	if r := plan.RAG; r != nil {
		parts = append(parts, fmt.Sprintf("rag ≤%d tokens", r.MaxTokens))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// writeKnowledge shows an intent's FAQ cache and retrieval settings.
func writeKnowledge(w io.Writer, plan runtime.Plan) {
	if c := plan.Cache; c != nil {
		from := "collection " + c.Collection
		if c.Collection == "" {
			from = "learned answers only"
		}
		learn := "off"
		if c.Learn {
			learn = fmt.Sprintf("on (kept %s)", c.TTL)
		}
		fmt.Fprintf(w, "faq cache: %s · threshold %.2f · scope %s · learn %s · verify %s\n", from, c.Threshold, c.Scope, learn, c.Verify)
	}
	if r := plan.RAG; r != nil {
		fmt.Fprintf(w, "rag: collection %s · top_k %d · min_score %.2f · up to ~%d tokens of passages per run\n", r.Collection, r.TopK, r.MinScore, r.MaxTokens)
	}
}

func writePlan(w io.Writer, agent *runtime.Agent, plan runtime.Plan, s *spec.Spec) {
	title := "agent " + s.Name
	if plan.Intent != "" {
		title += fmt.Sprintf(" · intent %s (%s, memory %s)", plan.Intent, plan.Kind, plan.Memory)
	}
	fmt.Fprintf(w, "%s\n\n", title)
	if entry := s.SubAgent(plan.Agent); entry != nil && entry.Remote() {
		fmt.Fprintf(w, "hands its runs to remote agent %s at %s (A2A): the user's message is its task, its answer the run's, within its timeout and this agent's max_run_time\n",
			plan.Agent, remoteHost(entry.A2A.URL))
		return
	}
	if plan.Agent != "" {
		entry := s.SubAgent(plan.Agent)
		fmt.Fprintf(w, "hands its runs to agent %s (%s): its instructions, tools, guards and judge apply, within this agent's limits\n", plan.Agent, entry.Spec)
		fmt.Fprintf(w, "  agentrun explain %s\n", filepath.Join(filepath.Dir(s.Pos.File), entry.Spec))
		return
	}
	prompt := model.EstimateTokens(plan.SystemPrompt)
	fmt.Fprintf(w, "system prompt (~%d tokens):\n", prompt)
	for _, line := range strings.Split(strings.TrimRight(plan.SystemPrompt, "\n"), "\n") {
		fmt.Fprintf(w, "  │ %s\n", line)
	}
	tools := toolsTokens(plan.Tools)
	fmt.Fprintf(w, "\ntools offered: %d of %d (~%d tokens)\n", len(plan.Tools), len(plan.AllTools), tools)
	for _, d := range plan.Tools {
		fmt.Fprintf(w, "  %-22s ~%d tokens  %s\n", d.Name, model.ToolTokens(d), clip(d.Description, 70))
	}
	fmt.Fprintf(w, "  %s\n", saving(plan))
	st := agent.Settings()
	g := st.Guards
	fmt.Fprintf(w, "\nguards: max_turns %s · max_tool_rounds %s · duplicate_calls %s · max_parallel_tools %s · tool_timeout %s\n",
		setting(st, "guards.max_turns", g.MaxTurns), setting(st, "guards.max_tool_rounds", g.MaxToolRounds),
		g.DuplicateCalls, setting(st, "guards.max_parallel_tools", g.MaxParallelTools), g.ToolTimeout)
	if j := st.Judge; j != nil {
		fmt.Fprintf(w, "judge: %d criteria · max_retries %s · min_chars %d · on_error %s · on_exhausted %s\n",
			len(j.Criteria), setting(st, "judge.max_retries", j.MaxRetries), j.MinChars, j.OnError, j.OnExhausted)
	} else {
		fmt.Fprintln(w, "judge: none (every draft is accepted)")
	}
	if pm := plan.PlanMode; pm != nil {
		fmt.Fprintf(w, "plan mode: %s · required %v · max_steps %d · max_rejections %d\n", spec.PlanToolName, pm.Required, pm.MaxSteps, pm.MaxRejections)
	}
	writeKnowledge(w, plan)
	if s.Workflow != nil {
		writeWorkflowSteps(w, s.Workflow, st)
	}
	if r := plan.RAG; r != nil {
		fmt.Fprintf(w, "\nestimated per model call before the conversation: ~%d tokens (prompt ~%d + tools ~%d), plus up to ~%d of passages\n", prompt+tools, prompt, tools, r.MaxTokens)
		return
	}
	fmt.Fprintf(w, "\nestimated per model call before the conversation: ~%d tokens (prompt ~%d + tools ~%d)\n", prompt+tools, prompt, tools)
}
