package spec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Each tool and MCP server records the values the environment put into its own
// configuration, and only those: not defaults, not values shorter than
// MinSecretLen, not another tool's. A URL keeps its scheme and host unrecorded.
func TestSecretsRecordedPerTool(t *testing.T) {
	env := map[string]string{
		"WEATHER_KEY": "wk-0123456789", "PATH_KEY": "pk-abcdef", "TOKEN": "tok-secret-1",
		"SHORT": "1", "OTHER": "other-secret", "HOOK": "https://hooks.example.com/services/T0/B0/xyz123?sig=s1g-value",
		"MCP_TOKEN": "mcp-token-9", "ANCHORED": "anchored-secret",
	}
	l := newTestLoader(t)
	l.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	src := `version: 1
name: a
description: "${OTHER}"
tools:
  - name: status
    parameters: {type: object, properties: {}}
    http: {url: "https://api.example.com/status", headers: &auth {X-Anchored: "${ANCHORED}"}}
  - name: weather
    parameters: {type: object, properties: {city: {type: string}}}
    http:
      url: "https://api.example.com/${PATH_KEY}/weather"
      query: {appid: "${WEATHER_KEY}", q: "{{ args.city }}", n: "${SHORT}", d: "${UNSET_VAR:-default-value}"}
      headers: *auth
  - name: notify
    parameters: {type: object, properties: {}}
    http: {method: POST, url: "${HOOK}"}
  - name: script
    parameters: {type: object, properties: {}}
    command: {run: [./script], env: {TOKEN: "${TOKEN}"}}
mcp_servers:
  - name: files
    command: [mcp-files]
    env: {TOKEN: "${MCP_TOKEN}"}
`
	s, diags := l.Load("secrets.yaml", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tests := []struct {
		name string
		got  Secrets
		want Secrets
	}{
		{"http query, path and an aliased header", s.Tools[1].Secrets, Secrets{{"PATH_KEY", "pk-abcdef"}, {"WEATHER_KEY", "wk-0123456789"}, {"ANCHORED", "anchored-secret"}}},
		{"a URL from the environment: path and query values, not the host", s.Tools[2].Secrets, Secrets{{"HOOK", "/services/T0/B0/xyz123"}, {"HOOK", "s1g-value"}}},
		{"command env", s.Tools[3].Secrets, Secrets{{"TOKEN", "tok-secret-1"}}},
		{"mcp server env", s.MCPServers[0].Secrets, Secrets{{"MCP_TOKEN", "mcp-token-9"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Clone(tt.got)
			want := slices.Clone(tt.want)
			slices.SortFunc(got, compareSecrets)
			slices.SortFunc(want, compareSecrets)
			if !slices.Equal(got, want) {
				t.Errorf("Secrets = %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func compareSecrets(a, b Secret) int {
	return cmp.Or(strings.Compare(a.Var, b.Var), strings.Compare(a.Value, b.Value))
}

// A value the agent hands a skill through with: from its environment is a secret of
// every tool of the pack, wherever ${options.NAME} puts it; the pack's own ${VAR}
// are its tools' too.
func TestSecretsThroughSkillOptions(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "skills", "weather"), 0o755)
	os.WriteFile(filepath.Join(dir, "skills", "weather", "skill.yaml"), []byte(`
name: weather
options:
  key: {type: string}
tools:
  - name: forecast
    parameters: {type: object, properties: {}}
    http:
      url: "https://api.example.com/forecast"
      query: {appid: "${options.key}"}
      headers: {X-Region: "${REGION_TOKEN}"}
`), 0o644)
	env := map[string]string{"WEATHER_KEY": "wk-from-agent", "REGION_TOKEN": "region-token"}
	l := newTestLoader(t)
	l.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, diags := l.Load(filepath.Join(dir, "agent.yaml"), []byte("version: 1\nname: a\nskills:\n  - use: ./skills/weather\n    with: {key: \"${WEATHER_KEY}\"}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := s.Tools[0].Secrets
	for _, want := range []Secret{{"WEATHER_KEY", "wk-from-agent"}, {"REGION_TOKEN", "region-token"}} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets = %v, lacks %v", got, want)
		}
	}
}

func TestMask(t *testing.T) {
	secrets := Secrets{{"KEY", "a+b/c=secret"}, {"LONG", "secret-and-more"}, {"INNER", "secret"}, {"TINY", "abc"}}
	tests := []struct{ name, in, want string }{
		{"as it is", "key a+b/c=secret here", "key [secret KEY] here"},
		{"query-escaped", "?appid=a%2Bb%2Fc%3Dsecret&q=x", "?appid=[secret KEY]&q=x"},
		{"path-escaped", "/a+b%2Fc=secret/weather", "/[secret KEY]/weather"},
		{"the longer value wins", "secret-and-more", "[secret LONG]"},
		{"a shorter one alone", "a secret", "a [secret INNER]"},
		{"short values are left alone", "abc", "abc"},
		{"nothing to mask", "dial tcp 127.0.0.1:1: connection refused", "dial tcp 127.0.0.1:1: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := secrets.Mask(tt.in); got != tt.want {
				t.Errorf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// A masked error keeps matching what the original matched, and its text cannot be
// recovered by unwrapping it.
func TestMaskError(t *testing.T) {
	secrets := Secrets{{"TOKEN", "tok-secret-1"}}
	err := secrets.MaskError(fmt.Errorf("call with tok-secret-1: %w", context.DeadlineExceeded))
	if err.Error() != "call with [secret TOKEN]: context deadline exceeded" {
		t.Errorf("text %q", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the masked error no longer matches context.DeadlineExceeded")
	}
	if errors.Unwrap(err) != nil {
		t.Error("the masked error unwraps to the unmasked one")
	}
	plain := errors.New("no secret here")
	if secrets.MaskError(plain) != plain {
		t.Error("an error without a secret should come back as it is")
	}
}
