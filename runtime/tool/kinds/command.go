package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Output caps of a command's streams; the runtime cuts what reaches the model further.
const (
	maxCommandStdout = 1 << 20
	maxCommandStderr = 8 << 10
)

// inheritedEnv are the only variables of agentrun's own environment a command gets:
// enough to find programs and write temporary files, never a secret such as the
// model's API key.
var inheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// Command runs a program without a shell. The arguments (bound parameters included)
// arrive as a JSON object on stdin; stdout is the result; a non-zero exit is an error.
// Its environment holds the basics (inheritedEnv), AGENTRUN_USER_ID,
// AGENTRUN_CONVERSATION_ID, AGENTRUN_IDEMPOTENCY_KEY (the same on every attempt of
// one call) and what the spec's env declares.
//
// Its errors are masked with the tool's Secrets: a failing program that prints its
// environment or arguments must not hand the spec's tokens to the model.
type Command struct {
	run     []string
	dir     string
	env     map[string]*spec.Template
	secrets spec.Secrets
}

var _ tool.Tool = (*Command)(nil)

// NewCommand builds a command tool; relative paths resolve against the spec's dir.
func NewCommand(t *spec.Tool, dir string) (tool.Tool, error) {
	cfg := t.Command
	if cfg == nil || len(cfg.Run) == 0 {
		return nil, errors.New("command.run is empty")
	}
	run := append([]string(nil), cfg.Run...)
	if strings.ContainsRune(run[0], filepath.Separator) && !filepath.IsAbs(run[0]) {
		run[0] = filepath.Join(dir, run[0])
	}
	workDir := dir
	if cfg.Dir != "" {
		workDir = cfg.Dir
		if !filepath.IsAbs(workDir) {
			workDir = filepath.Join(dir, workDir)
		}
	}
	return &Command{run: run, dir: workDir, env: cfg.Env, secrets: t.Secrets}, nil
}

func (c *Command) Call(ctx context.Context, in tool.Input) (string, error) {
	out, err := c.call(ctx, in)
	return out, c.secrets.MaskError(err)
}

func (c *Command) call(ctx context.Context, in tool.Input) (string, error) {
	stdin, err := json.Marshal(in.Args)
	if err != nil {
		return "", err
	}
	env := append(BaseEnv(), "AGENTRUN_USER_ID="+in.User.ID, "AGENTRUN_CONVERSATION_ID="+in.Conversation)
	if in.IdempotencyKey != "" {
		env = append(env, "AGENTRUN_IDEMPOTENCY_KEY="+in.IdempotencyKey)
	}
	if len(c.env) > 0 {
		vars := in.Env()
		for k, t := range c.env {
			v, err := t.Render(vars)
			if err != nil {
				return "", renderError("env "+k, err)
			}
			env = append(env, k+"="+v)
		}
	}
	return RunProgram(ctx, c.run, c.dir, env, stdin)
}

// RunProgram runs argv without a shell in dir with exactly env, feeding stdin. Its
// standard output is the result, cut at 1 MiB; a non-zero exit is an error carrying
// the end of its standard error; on cancellation the whole process group is killed.
func RunProgram(ctx context.Context, argv []string, dir string, env []string, stdin []byte) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &limitedBuffer{max: maxCommandStdout}
	stderr := &limitedBuffer{max: maxCommandStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	killGroupOnCancel(cmd)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		var exit *exec.ExitError
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if errors.As(err, &exit) {
			return "", fmt.Errorf("%s exited with status %d: %s", filepath.Base(argv[0]), exit.ExitCode(), tail(msg, 2000))
		}
		return "", fmt.Errorf("cannot run %s: %v", filepath.Base(argv[0]), err)
	}
	return stdout.String(), nil
}

// BaseEnv is the part of agentrun's own environment a program gets: enough to find
// programs and write temporary files, never a secret such as the model's API key.
func BaseEnv() []string {
	env := make([]string, 0, len(inheritedEnv))
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
