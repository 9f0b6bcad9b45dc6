package serve

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/fixture"
	"github.com/agentrun/agentrun/schema"
	"github.com/agentrun/agentrun/spec"
)

// TestConfigFixtures checks every serve.yaml under testdata/invalid and requires
// exactly the diagnostics its comments declare, as spec's fixtures do.
func TestConfigFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 4 {
		t.Fatalf("only %v", files)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := LoadConfig(file)
			var diags spec.Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("error %v is not diagnostics", err)
			}
			var got []fixture.Diagnostic
			for _, d := range diags {
				if d.Pos.File != file {
					t.Errorf("diagnostic in %s", d.Pos.File)
				}
				got = append(got, fixture.Diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Summary: d.Summary(), Hint: d.Hint})
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fixture.Compare(t, fixture.Expected(string(src)), got)
		})
	}
}

// A config that is right loads, and an empty file is the empty config.
func TestLoadConfigValid(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "serve.yaml")
	src := "# yaml-language-server: $schema=schema/serve.schema.json\naddr: 127.0.0.1:9000\nauth:\n  tokens: [{sha256: " + strings.Repeat("ab", 32) +
		", user: alice, roles: [approver]}]\n  jwt: {hs256_secret_env: JWT_SECRET, issuer: i, audience: a, leeway: 1m}\nlimits: {max_concurrent: 4, run_timeout: 2m30s, rate_per_second: 0.5}\ngrace_period: 10s\n"
	empty := filepath.Join(dir, "empty.yaml")
	for name, content := range map[string]string{good: src, empty: "\n"} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9000" || c.Limits.RunTimeout != 150*time.Second || c.GracePeriod != 10*time.Second || c.Auth.JWT.Leeway != time.Minute ||
		c.Limits.RatePerSecond != 0.5 || c.Auth.Tokens[0].Roles[0] != RoleApprover {
		t.Errorf("decoded %+v", c)
	}
	if c, err := LoadConfig(empty); err != nil || c.Addr != DefaultAddr || c.GracePeriod != DefaultGracePeriod {
		t.Errorf("empty file: %+v, %v", c, err)
	}
}

// TestServeSchemaMatchesTypes walks serve.schema.json and Config side by side, as
// spec's TestSchemaMatchesTypes does for the agent schema: every property decodes
// into a field of the JSON type the schema says, every field is a property, and the
// roles are knownRoles; so the schema editors use and the decoder cannot drift.
func TestServeSchemaMatchesTypes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(schema.ServeJSON, &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc["definitions"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			return defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
		return s
	}
	checked := 0
	var walk func(path string, s map[string]any, typ reflect.Type)
	walk = func(path string, s map[string]any, typ reflect.Type) {
		s = resolve(s)
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		want := map[reflect.Kind]string{reflect.Struct: "object", reflect.Map: "object", reflect.Slice: "array", reflect.String: "string",
			reflect.Int: "integer", reflect.Int64: "integer", reflect.Float64: "number", reflect.Bool: "boolean"}[typ.Kind()]
		if typ == reflect.TypeFor[time.Duration]() {
			want = "string" // yaml.v3 decodes a duration from its text
		}
		if enum, ok := s["enum"].([]any); ok && path == ".auth.tokens[].roles[]" {
			var got []string
			for _, e := range enum {
				got = append(got, e.(string))
			}
			if !slices.Equal(got, knownRoles) {
				t.Errorf("%s: schema enum %v, knownRoles %v", path, got, knownRoles)
			}
			return
		}
		if s["type"] != want {
			t.Errorf("%s: Go %s, schema type %v", path, typ, s["type"])
			return
		}
		switch typ.Kind() {
		case reflect.Slice:
			walk(path+"[]", s["items"].(map[string]any), typ.Elem())
		case reflect.Map:
			walk(path+".*", s["additionalProperties"].(map[string]any), typ.Elem())
		case reflect.Struct:
			if s["additionalProperties"] != false {
				t.Errorf("%s: not a closed object", path)
			}
			props, _ := s["properties"].(map[string]any)
			fields := map[string]reflect.StructField{}
			for i := range typ.NumField() {
				if f := typ.Field(i); f.IsExported() {
					fields[strings.Split(f.Tag.Get("yaml"), ",")[0]] = f
				}
			}
			for name, p := range props {
				checked++
				f, ok := fields[name]
				if !ok {
					t.Errorf("%s.%s: in the schema, but %s has no field for it", path, name, typ)
					continue
				}
				walk(path+"."+name, p.(map[string]any), f.Type)
			}
			for name := range fields {
				if _, ok := props[name]; !ok {
					t.Errorf("%s.%s: field of %s, but not in the schema", path, name, typ)
				}
			}
		}
	}
	walk("", doc, reflect.TypeFor[Config]())
	if checked < 25 {
		t.Errorf("only %d properties compared", checked)
	}
}
