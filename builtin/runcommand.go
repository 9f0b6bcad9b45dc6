package builtin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/runtime/tool/kinds"
	"github.com/agentrun/agentrun/spec"
)

// runCommand runs one of a fixed list of programs with the arguments the model
// gives, without a shell: no pipes, no globbing, no $(…), and no program outside the
// list. A program that runs code given in its arguments is listed only with an explicit
// opt-in, and each program's arguments may be narrowed by rules. It backs the shell
// skill.
type runCommand struct {
	name     string
	programs []allowedProgram
	dir      string
	timeout  time.Duration
}

// runCommandConfig is run_command's `with:`. Allow's entries are names or mappings,
// which decodeWith does not read: decodeAllow does.
type runCommandConfig struct {
	Allow   []allowedProgram `with:"allow"`
	Dir     string           `with:"dir"`
	Timeout string           `with:"timeout"`
}

func newRunCommand(t *spec.Tool, dir string) (tool.Tool, error) {
	cfg := runCommandConfig{Dir: ".", Timeout: "10s"}
	// decodeWith skips a null value, so it checks every other key (and lists allow
	// among the known ones) while allow is left to decodeAllow.
	with := maps.Clone(t.With)
	rawAllow := with["allow"]
	if _, set := with["allow"]; set {
		with["allow"] = nil
	}
	var problems []string
	if err := decodeWith("run_command", with, &cfg); err != nil {
		problems = append(problems, err.Error())
	}
	var bad []string
	cfg.Allow, bad = decodeAllow(rawAllow)
	problems = append(problems, bad...)
	if len(cfg.Allow) == 0 && len(bad) == 0 {
		problems = append(problems, "run_command needs with.allow, the programs it may run (like [ls, wc]); there is no default")
	}
	timeout, err := time.ParseDuration(cfg.Timeout)
	if err != nil || timeout <= 0 {
		problems = append(problems, fmt.Sprintf("with.timeout %q is not a positive duration like 10s", cfg.Timeout))
	}
	root, err := resolveRoot(cfg.Dir, dir)
	if err != nil {
		problems = append(problems, fmt.Sprintf("with.dir: %v", err))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return &runCommand{name: toolName(t, "run_command"), programs: cfg.Allow, dir: root, timeout: timeout}, nil
}

func (r *runCommand) Describe() tool.Info {
	names := make([]any, len(r.programs))
	described := make([]string, len(r.programs))
	for i, p := range r.programs {
		names[i] = p.Program
		described[i] = p.describeRules()
	}
	return tool.Info{
		Description: fmt.Sprintf("Run one of these programs with arguments, without a shell (no pipes, globs or "+
			"variables): %s. Output is its standard output.", strings.Join(described, ", ")),
		Parameters: objectSchema(map[string]any{
			"command": map[string]any{"type": "string", "enum": names, "description": "The program to run."},
			"args":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Its arguments, one per item.", "examples": []any{[]any{}}},
		}, "command"),
	}
}

func (r *runCommand) Call(ctx context.Context, in tool.Input) (string, error) {
	command, err := requiredString(in.Args, "command")
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(r.programs, func(p allowedProgram) bool { return p.Program == command })
	if i < 0 {
		return "", fmt.Errorf("%s is not one of the programs this tool may run: %s", command, strings.Join(r.programNames(), ", "))
	}
	program := r.programs[i]
	var args []string
	if raw, ok := in.Args["args"].([]any); ok {
		for _, a := range raw {
			s, ok := a.(string)
			if !ok {
				return "", fmt.Errorf("argument args must hold strings, not %s", describeValue(a))
			}
			args = append(args, s)
		}
	}
	if err := program.checkArgs(args); err != nil {
		return "", err
	}
	path, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("%s is not installed here", command)
	}
	// Judged again where it runs: PATH may lead somewhere else than at validate time.
	if why := program.refusal(path); why != "" {
		return "", fmt.Errorf("%s is not run: %s", command, why)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	out, err := kinds.RunProgram(ctx, append([]string{path}, args...), r.dir, kinds.BaseEnv(), nil)
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("%s did not finish within %s", command, r.timeout)
	}
	return out, err
}

func (r *runCommand) programNames() []string {
	names := make([]string, len(r.programs))
	for i, p := range r.programs {
		names[i] = p.Program
	}
	return names
}
