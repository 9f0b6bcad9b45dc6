package spec

import (
	"slices"
	"testing"
)

func TestInterpolate(t *testing.T) {
	env := map[string]string{"HOST": "api.example.com", "EMPTY": "", "CN": "小满"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, in, want string
		unset          []string
		wantErr        bool
	}{
		{name: "no variables", in: "plain text", want: "plain text"},
		{name: "set", in: "https://${HOST}/v1", want: "https://api.example.com/v1"},
		{name: "default unused", in: "${HOST:-localhost}", want: "api.example.com"},
		{name: "default used", in: "${PORT:-8080}", want: "8080"},
		{name: "empty uses default", in: "${EMPTY:-x}", want: "x"},
		{name: "empty without default", in: "[${EMPTY}]", want: "[]"},
		{name: "empty default", in: "${NOPE:-}", want: ""},
		{name: "unset", in: "key=${NOPE}", want: "key=", unset: []string{"NOPE"}},
		{name: "two unset", in: "${A}${B}", want: "", unset: []string{"A", "B"}},
		{name: "escaped dollar", in: "cost $$5 ${HOST}", want: "cost $5 api.example.com"},
		{name: "lone dollar", in: "$5 and $", want: "$5 and $"},
		{name: "utf-8 value", in: "${CN}客服", want: "小满客服"},
		{name: "default with colon", in: "${URL:-http://x:1}", want: "http://x:1"},
		{name: "unterminated", in: "${HOST", wantErr: true},
		{name: "bad name", in: "${1X}", wantErr: true},
		{name: "empty name", in: "${}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, unset, err := interpolate(tt.in, lookup)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got != tt.want || !slices.Equal(unset, tt.unset) {
				t.Errorf("interpolate(%q) = %q, unset %v; want %q, unset %v", tt.in, got, unset, tt.want, tt.unset)
			}
		})
	}
}

// A plain scalar is typed after interpolation, so numbers and booleans can come from
// the environment; a quoted one stays a string.
func TestInterpolatedTypes(t *testing.T) {
	l := newTestLoader(t)
	env := map[string]string{"TEMP": "0.7", "TURNS": "12", "NAME": "from-env"}
	l.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	src := "version: 1\nname: ${NAME}\nmodel:\n  temperature: ${TEMP}\n  name: \"${TURNS}\"\nguards:\n  max_turns: ${TURNS}\n  max_tool_rounds: ${ROUNDS:-3}\n"
	s, diags := l.Load("env.yaml", []byte(src))
	if len(diags) > 0 {
		t.Fatalf("unexpected diagnostics:\n%v", diags)
	}
	if s.Name != "from-env" || *s.Model.Temperature != 0.7 || s.Model.Name != "12" || s.Guards.MaxTurns != 12 || s.Guards.MaxToolRounds != 3 {
		t.Errorf("decoded %+v / %+v / %+v", s.Name, s.Model, s.Guards)
	}
}

// An unset variable is not an error where nothing needs its value, but the spec
// records it so a run can report it when it does.
func TestUnsetVariablesRecorded(t *testing.T) {
	l := newTestLoader(t)
	src := "version: 1\nname: a\nmodel:\n  api_key_env: MY_KEY\n  base_url: ${MY_BASE_URL}\n"
	s, diags := l.Load("unset.yaml", []byte(src))
	if len(diags) > 0 {
		t.Fatalf("unexpected diagnostics:\n%v", diags)
	}
	want := []UnsetVar{{Name: "MY_BASE_URL", Pos: Pos{File: "unset.yaml", Line: 5, Col: 13}, Path: "model.base_url"}}
	if !slices.Equal(s.Unset, want) {
		t.Errorf("Unset = %+v, want %+v", s.Unset, want)
	}
}
