package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// build makes a tool the way the runtime does: through the registry Register fills.
func build(t *testing.T, builtin string, with map[string]any, dir string) (tool.Tool, error) {
	t.Helper()
	r := tool.Registry{}
	Register(r)
	st := &spec.Tool{Builtin: builtin, With: with}
	factory, ok := r[tool.Key(st)]
	if !ok {
		t.Fatalf("no factory for %s", tool.Key(st))
	}
	return factory(st, dir)
}

func mustBuild(t *testing.T, builtin string, with map[string]any, dir string) tool.Tool {
	t.Helper()
	tool, err := build(t, builtin, with, dir)
	if err != nil {
		t.Fatalf("build %s: %v", builtin, err)
	}
	return tool
}

func call(tl tool.Tool, args map[string]any) (string, error) {
	return tl.Call(context.Background(), tool.Input{Args: args, User: tool.User{ID: "u1"}})
}

// writeFiles creates files under dir; a name ending in / is a directory.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks not available: %v", err)
	}
}

func wantErrContains(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestRegisterAddsEveryBuiltinOfTheSchema(t *testing.T) {
	// The schema's builtin enum is the list a spec may use; every name needs a factory.
	raw, err := os.ReadFile("../schema/agent.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Definitions struct {
			Tool struct {
				Properties struct {
					Builtin struct {
						Enum []string `json:"enum"`
					} `json:"builtin"`
				} `json:"properties"`
			} `json:"tool"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	names := doc.Definitions.Tool.Properties.Builtin.Enum
	if len(names) == 0 {
		t.Fatal("no builtin enum found in the schema")
	}
	r := tool.Registry{}
	Register(r)
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	for _, n := range names {
		if _, ok := r["builtin:"+n]; !ok {
			t.Errorf("builtin %q of the schema has no factory", n)
		}
	}
	if len(r) != len(names) {
		t.Errorf("registry has %v, schema lists %v", keys, names)
	}
}

// minimalWith is the smallest configuration each builtin builds with.
func minimalWith(dir string) map[string]map[string]any {
	return map[string]map[string]any{
		"calculator":   nil,
		"read_file":    nil,
		"list_dir":     nil,
		"write_file":   {"root": dir},
		"http_get":     {"allow_hosts": []any{"api.example.com"}},
		"current_time": nil,
	}
}

// TestDescribeExamplesAreValidArguments checks what the offline test model relies on:
// every parameters schema compiles as draft 2020-12, the first example of each
// property forms arguments the schema accepts, and the tool runs with them.
func TestDescribeExamplesAreValidArguments(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"README.md": "hello\n"})
	for name, with := range minimalWith(dir) {
		t.Run(name, func(t *testing.T) {
			tl := mustBuild(t, name, with, dir)
			d, ok := tl.(tool.Describer)
			if !ok {
				t.Fatal("tool does not implement tool.Describer")
			}
			info := d.Describe()
			if info.Description == "" {
				t.Error("empty description")
			}
			// Round-trip through JSON as the schema goes to the model and the validator.
			raw, err := json.Marshal(info.Parameters)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("mem://params.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("mem://params.json")
			if err != nil {
				t.Fatalf("parameters are not a valid schema: %v", err)
			}
			var params struct {
				Type       string                    `json:"type"`
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
			}
			if err := json.Unmarshal(raw, &params); err != nil {
				t.Fatal(err)
			}
			if params.Type != "object" {
				t.Errorf("parameters type = %q, want object", params.Type)
			}
			args := map[string]any{}
			for prop, s := range params.Properties {
				ex, _ := s["examples"].([]any)
				if len(ex) == 0 {
					if slices.Contains(params.Required, prop) {
						t.Errorf("required property %q has no examples", prop)
					}
					continue
				}
				args[prop] = ex[0]
			}
			argsRaw, _ := json.Marshal(args)
			inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(argsRaw))
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("example arguments %s do not validate: %v", argsRaw, err)
			}
			if name == "http_get" {
				return // the example host is not reachable from a test
			}
			// Arguments arrive as decoded JSON, numbers as float64.
			var decoded map[string]any
			if err := json.Unmarshal(argsRaw, &decoded); err != nil {
				t.Fatal(err)
			}
			if _, err := call(tl, decoded); err != nil {
				t.Errorf("call with example arguments %s: %v", argsRaw, err)
			}
		})
	}
}
