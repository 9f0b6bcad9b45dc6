package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The values of the environment variables a spec names never reach the result,
// the trace or the progress on stderr, even when a tool's error would quote them:
// an http tool whose backend refuses the connection (its key in the query, a
// header and the path) and a command that prints its environment as it fails.
func TestExecToolErrorsHideSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	secrets := map[string]string{"WEATHER_KEY": "wk-0123456789abcdef", "HEADER_KEY": "hk-fedcba9876543210", "PATH_KEY": "pk-5555aaaa", "TOKEN": "tok-secret-0123"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "lookup")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := writeFile(t, "weather.yaml", `version: 1
name: weather
instructions: Answer with the weather.
tools:
  - name: weather
    description: The weather in a city.
    parameters: {type: object, properties: {city: {type: string, default: Copenhagen}}, required: [city]}
    http:
      url: "http://`+refused+`/${PATH_KEY}/weather"
      query: {appid: "${WEATHER_KEY}", q: "{{ args.city }}"}
      headers: {X-Api-Key: "${HEADER_KEY}"}
  - name: lookup
    description: Look a city up.
    parameters: {type: object, properties: {city: {type: string, default: Copenhagen}}, required: [city]}
    command: {run: [`+script+`], env: {TOKEN: "${TOKEN}"}}
`)
	trace := filepath.Join(dir, "trace.jsonl")
	code, stdout, stderr := runCLI(t, "exec", "--model", "test", "--trace", trace, agent, "Weather in Copenhagen?")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	_, result, _ := runCLI(t, "exec", "--model", "test", "--json", "-q", agent, "Weather in Copenhagen?")
	outputs := map[string]string{"answer": stdout, "progress": stderr, "trace": string(raw), "--json result": result}
	for name, out := range outputs {
		for k, v := range secrets {
			if strings.Contains(out, v) {
				t.Errorf("the %s shows %s's value:\n%s", name, k, out)
			}
		}
	}
	// The errors did reach them, masked: the run is not merely silent about them.
	for _, want := range []string{"GET http://" + refused + "/[secret PATH_KEY]/weather?appid=…&q=…: dial tcp", "TOKEN=[secret TOKEN]"} {
		for _, name := range []string{"trace", "--json result"} {
			if !strings.Contains(strings.ReplaceAll(outputs[name], `\u0026`, "&"), want) {
				t.Errorf("the %s lacks %q:\n%s", name, want, outputs[name])
			}
		}
	}
}
