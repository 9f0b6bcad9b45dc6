package agentrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/spec"
)

// StoreURL's order: --store, then AGENTRUN_STORE, then memory.url, then memory.store's
// default place. Every case sets AGENTRUN_STORE itself, "" meaning unset.
func TestStoreURL(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		flag   string
		env    string
		memory spec.Memory
		want   string
		err    string
	}{
		{name: "default", want: "sqlite:" + filepath.Join(dir, ".agentrun", "state.db")},
		{name: "memory kind", memory: spec.Memory{Store: "memory"}, want: "memory:"},
		{name: "spec url", memory: spec.Memory{Store: "redis", URL: "redis://spec:6379/0"}, want: "redis://spec:6379/0"},
		{name: "env over spec", env: "sqlite:/env.db", memory: spec.Memory{URL: "redis://spec:6379/0"}, want: "sqlite:/env.db"},
		{name: "env over memory kind", env: "sqlite:/env.db", memory: spec.Memory{Store: "memory"}, want: "sqlite:/env.db"},
		{name: "flag over env", flag: "memory:", env: "sqlite:/env.db", memory: spec.Memory{URL: "redis://spec:6379/0"}, want: "memory:"},
		{name: "redis without url", memory: spec.Memory{Store: "redis"}, err: "memory.store is redis but no URL is given"},
		{name: "postgres without url", memory: spec.Memory{Store: "postgres"}, err: "memory.store is postgres but no URL is given"},
		{name: "postgres url", memory: spec.Memory{Store: "postgres", URL: "postgres://db:5432/a"}, want: "postgres://db:5432/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AGENTRUN_STORE", tt.env)
			got, err := StoreURL(tt.flag, tt.memory, filepath.Join(dir, "agent.yaml"), nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("StoreURL = %q, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("StoreURL = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// ProjectDir: the nearest directory upwards with a .agentrun/, inside a repository
// only; else the spec's own directory.
func TestProjectDir(t *testing.T) {
	root := t.TempDir()
	mkdir := func(parts ...string) string {
		p := filepath.Join(append([]string{root}, parts...)...)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mkdir("repo", ".git")
	mkdir("repo", "agents", "billing")
	mkdir("project", ".git")
	mkdir("project", ".agentrun")
	mkdir("project", "agents", "support")
	mkdir(".agentrun") // above both repositories: never theirs
	mkdir("loose", ".agentrun")
	mkdir("loose", "agents")
	tests := []struct {
		name, spec, want string
	}{
		{"no .agentrun yet: the spec's directory", "repo/agents/billing/a.yaml", "repo/agents/billing"},
		{"the project's .agentrun, from a subfolder", "project/agents/support/a.yaml", "project"},
		{"the project's .agentrun, beside it", "project/a.yaml", "project"},
		{"outside a repository, only the spec's own directory", "loose/agents/a.yaml", "loose/agents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := ProjectDir(filepath.Join(root, tt.spec)), filepath.Join(root, tt.want); got != want {
				t.Errorf("ProjectDir = %s, want %s", got, want)
			}
		})
	}
	// Without a spec the working directory is the start; relative specs resolve against it.
	t.Chdir(filepath.Join(root, "project", "agents"))
	if got, want := ProjectDir(""), filepath.Join(root, "project"); got != want {
		t.Errorf(`ProjectDir("") = %s, want %s`, got, want)
	}
	if got, want := ProjectDir(filepath.Join("support", "a.yaml")), filepath.Join(root, "project"); got != want {
		t.Errorf("ProjectDir(relative) = %s, want %s", got, want)
	}
}

// Every store kind of the spec's vocabulary has a row in the store table: one that
// lacked it would panic when a URL named it.
func TestEveryStoreKindHasARow(t *testing.T) {
	for _, kind := range spec.StoreKinds {
		row, ok := storeKinds[kind]
		if !ok || row.open == nil || row.place == nil {
			t.Errorf("store kind %s: no row in storeKinds with open and place", kind)
		}
	}
	if len(storeKinds) != len(spec.StoreKinds) {
		t.Errorf("storeKinds has %d rows for %d kinds", len(storeKinds), len(spec.StoreKinds))
	}
}

func TestStatePlace(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for loc, want := range map[string]string{
		"memory:":                                       "in this process",
		"redis://:secret@cache:6379/0":                  "on redis",
		"postgres://u:secret@db:5432/agents":            "on postgres",
		"sqlite:" + filepath.Join(cwd, "x", "state.db"): filepath.Join("x", "state.db"),
		"/elsewhere/index.db":                           "/elsewhere/index.db",
	} {
		if got := StatePlace(loc); got != want {
			t.Errorf("StatePlace(%q) = %q, want %q", loc, got, want)
		}
	}
}
