package agentrun

import (
	"strings"
	"testing"

	"github.com/agentrun/agentrun/spec"
)

// StoreURL's order: --store, then AGENTRUN_STORE, then memory.url, then memory.store's
// default place. Every case sets AGENTRUN_STORE itself, "" meaning unset.
func TestStoreURL(t *testing.T) {
	tests := []struct {
		name   string
		flag   string
		env    string
		memory spec.Memory
		want   string
		err    string
	}{
		{name: "default", want: DefaultStoreURL},
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
			got, err := StoreURL(tt.flag, tt.memory, nil)
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
