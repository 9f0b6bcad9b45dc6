package builtin

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/kinds"
	"github.com/agentrun/agentrun/spec"
)

// runCommand runs one of a fixed list of programs with the arguments the model
// gives, without a shell: no pipes, no globbing, no $(…), and no program outside the
// list. It backs the shell skill.
type runCommand struct {
	name    string
	allow   []string
	dir     string
	timeout time.Duration
}

type runCommandConfig struct {
	Allow   []string `with:"allow"`
	Dir     string   `with:"dir"`
	Timeout string   `with:"timeout"`
}

func newRunCommand(t *spec.Tool, dir string) (runtime.Tool, error) {
	cfg := runCommandConfig{Dir: ".", Timeout: "10s"}
	if err := decodeWith("run_command", t.With, &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Allow) == 0 {
		return nil, fmt.Errorf("run_command needs with.allow, the programs it may run (like [ls, git]); there is no default")
	}
	for _, p := range cfg.Allow {
		if spec.IsShell(p) || slices.Contains(launchers, filepath.Base(p)) {
			return nil, fmt.Errorf("with.allow: %s would run any command it is given; list the programs themselves", p)
		}
	}
	timeout, err := time.ParseDuration(cfg.Timeout)
	if err != nil || timeout <= 0 {
		return nil, fmt.Errorf("with.timeout %q is not a positive duration like 10s", cfg.Timeout)
	}
	root, err := resolveRoot(cfg.Dir, dir)
	if err != nil {
		return nil, fmt.Errorf("with.dir: %v", err)
	}
	return &runCommand{name: toolName(t, "run_command"), allow: cfg.Allow, dir: root, timeout: timeout}, nil
}

// launchers run the program named in their arguments, so listing one would allow
// everything, like a shell.
var launchers = []string{"env", "xargs", "nohup", "nice", "timeout", "sudo", "doas", "exec", "watch", "strace", "time"}

func (r *runCommand) Describe() runtime.ToolInfo {
	allow := make([]any, len(r.allow))
	for i, p := range r.allow {
		allow[i] = p
	}
	return runtime.ToolInfo{
		Description: fmt.Sprintf("Run one of these programs with arguments, without a shell (no pipes, globs or "+
			"variables): %v. Output is its standard output.", r.allow),
		Parameters: objectSchema(map[string]any{
			"command": map[string]any{"type": "string", "enum": allow, "description": "The program to run."},
			"args":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Its arguments, one per item.", "examples": []any{[]any{}}},
		}, "command"),
	}
}

func (r *runCommand) Call(ctx context.Context, in runtime.ToolInput) (string, error) {
	command, err := requiredString(in.Args, "command")
	if err != nil {
		return "", err
	}
	if !slices.Contains(r.allow, command) {
		return "", fmt.Errorf("%s is not one of the programs this tool may run: %v", command, r.allow)
	}
	path, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("%s is not installed here", command)
	}
	argv := []string{path}
	if raw, ok := in.Args["args"].([]any); ok {
		for _, a := range raw {
			s, ok := a.(string)
			if !ok {
				return "", fmt.Errorf("argument args must hold strings, not %s", describeValue(a))
			}
			argv = append(argv, s)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	out, err := kinds.RunProgram(ctx, argv, r.dir, kinds.BaseEnv(), nil)
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("%s did not finish within %s", command, r.timeout)
	}
	return out, err
}
