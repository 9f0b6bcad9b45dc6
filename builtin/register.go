package builtin

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// Register adds the factory of every builtin tool to r, under "builtin:<name>".
func Register(r tool.Registry) {
	r["builtin:calculator"] = newCalculator
	r["builtin:read_file"] = newReadFile
	r["builtin:list_dir"] = newListDir
	r["builtin:write_file"] = newWriteFile
	r["builtin:http_get"] = newHTTPGet
	r["builtin:current_time"] = newCurrentTime
	r["builtin:run_command"] = newRunCommand
}

// describedTool is what every builtin is: a tool that describes itself to the model
// and says it passes nothing of the user on.
type describedTool interface {
	tool.Tool
	tool.Describer
	tool.UserPasser
}

// No builtin passes the user on: each works from its configuration and the model's
// arguments alone (run_command's programs get the base environment, no user id).
func (*calculator) PassesUser() bool  { return false }
func (*readFile) PassesUser() bool    { return false }
func (*listDir) PassesUser() bool     { return false }
func (*writeFile) PassesUser() bool   { return false }
func (*httpGet) PassesUser() bool     { return false }
func (*currentTime) PassesUser() bool { return false }
func (*runCommand) PassesUser() bool  { return false }

var (
	_ describedTool = (*calculator)(nil)
	_ describedTool = (*readFile)(nil)
	_ describedTool = (*listDir)(nil)
	_ describedTool = (*writeFile)(nil)
	_ describedTool = (*httpGet)(nil)
	_ describedTool = (*currentTime)(nil)
	_ describedTool = (*runCommand)(nil)
)

// toolName is the name the model calls the tool by, for messages that tell it how to
// call again; a spec may rename a builtin.
func toolName(t *spec.Tool, builtin string) string {
	if t.Name != "" {
		return t.Name
	}
	return builtin
}

// stringArg returns a string argument; ok is false when it is absent. The runtime has
// validated the arguments against the schema, but a clear error costs little when a
// caller did not.
func stringArg(args map[string]any, key string) (s string, ok bool, err error) {
	v, present := args[key]
	if !present || v == nil {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, fmt.Errorf("argument %s must be a string, not %s", key, describeValue(v))
	}
	return s, true, nil
}

func requiredString(args map[string]any, key string) (string, error) {
	s, ok, err := stringArg(args, key)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("argument %s is required", key)
	}
	return s, nil
}

// positiveIntArg returns an optional integer argument that must be at least 1, or def
// when it is absent.
func positiveIntArg(args map[string]any, key string, def int) (int, error) {
	v, present := args[key]
	if !present || v == nil {
		return def, nil
	}
	n, ok := toInt(v)
	if !ok {
		return 0, fmt.Errorf("argument %s must be an integer, not %s", key, describeValue(v))
	}
	if n < 1 {
		return 0, fmt.Errorf("argument %s must be at least 1, not %d", key, n)
	}
	return n, nil
}

// objectSchema builds the JSON schema of a tool's arguments.
func objectSchema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// formatNumber prints a float without binary noise: 15 significant digits hide the
// error of the last bit (0.1+0.2 is 0.3), and integral values print as integers.
func formatNumber(f float64) string {
	if f == 0 {
		return "0" // also for -0
	}
	return strconv.FormatFloat(f, 'g', 15, 64)
}

// byteCount prints a size for people and models alike.
func byteCount(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// excerpt returns at most n bytes of s on one line, for error messages.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
