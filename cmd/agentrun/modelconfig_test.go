package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// openAIErrors answers chat completions as OpenAI does when the request has no
// Authorization header or the key sk-wrong (401), else as for a model it does not
// have (404); it counts the requests it saw.
func openAIErrors(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).","type":"invalid_request_error","param":null,"code":null}}`))
			return
		}
		if key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); key == "sk-wrong" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + key + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// A missing API key or a model the server does not have is a configuration error:
// exit 1 with the setting to change, never exit 3 with the fallback message on
// stdout as if it were the answer.
func TestExecModelConfigurationErrors(t *testing.T) {
	srv, requests := openAIErrors(t)
	file := writeFile(t, "agent.yaml", `
version: 1
name: helper
model: {name: "${LLM_MODEL_NAME:-gpt-4o-mini}", base_url: "${LLM_BASE_URL:-}", api_key_env: LLM_API_KEY}
instructions: Help.
guards: {fallback: FALLBACK-MESSAGE}
`)
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		want     []string
		requests int64
	}{
		{
			name:     "no key for the OpenAI API: refused before any call",
			env:      map[string]string{"LLM_API_KEY": "", "OPENAI_API_KEY": "sk-other", "LLM_BASE_URL": "", "OPENAI_BASE_URL": ""},
			want:     []string{"no API key for https://api.openai.com/v1/", "set LLM_API_KEY", "OPENAI_API_KEY is set, but this spec reads only LLM_API_KEY"},
			requests: 0,
		},
		{
			name:     "no key for another server: warned, then its 401",
			env:      map[string]string{"LLM_API_KEY": "", "OPENAI_API_KEY": "", "LLM_BASE_URL": srv.URL},
			want:     []string{"warning: no API key for " + srv.URL, "refused the API key", "You didn't provide an API key", "to fix it: set LLM_API_KEY"},
			requests: 1,
		},
		{
			name:     "a wrong key",
			env:      map[string]string{"LLM_API_KEY": "sk-wrong", "LLM_BASE_URL": srv.URL},
			want:     []string{"refused the API key", "Incorrect API key provided: [redacted]", "to fix it: check the key in LLM_API_KEY"},
			requests: 1,
		},
		{
			name:     "a model the server does not have",
			env:      map[string]string{"LLM_API_KEY": "sk-test", "LLM_BASE_URL": srv.URL, "LLM_MODEL_NAME": "gpt-9"},
			args:     []string{"--json"},
			want:     []string{`model "gpt-9" does not exist at ` + srv.URL, "change model.name"},
			requests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			before := requests.Load()
			code, stdout, stderr := runCLI(t, append(append([]string{"exec"}, tt.args...), file, "hello")...)
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want exit 1 and nothing on stdout\n%s", code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "sk-") {
				t.Errorf("a key's value is in the output:\n%s", stderr)
			}
			if got := requests.Load() - before; got != tt.requests {
				t.Errorf("the server saw %d requests, want %d", got, tt.requests)
			}
		})
	}
}
