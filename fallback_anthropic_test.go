package agentrun_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/runtime"
)

// anthropicFirstSpec is a chain whose first model is the native Anthropic
// provider and whose fallback is an OpenAI-compatible server.
const anthropicFirstSpec = `version: 1
name: chain
model:
  provider: anthropic
  name: claude-sonnet-4-5
  base_url: FIRST_URL
  api_key_env: ANTHROPIC_KEY
  retries: 0
  fallback:
    - provider: openai
      name: cheap-mini
      base_url: SECOND_URL
      api_key_env: OPENAI_KEY
tools: [{builtin: calculator}]
memory: {store: memory}
`

func TestARunFallsBackFromAnAnthropicModel(t *testing.T) {
	for _, tt := range []struct {
		name    string
		status  int
		errType string
		falls   bool
	}{
		{"overloaded (529) falls back", 529, "overloaded_error", true},
		{"rate limited (429) falls back", 429, "rate_limit_error", true},
		{"a bad request (400) does not", 400, "invalid_request_error", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hits atomic.Int32
			first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				if !strings.Contains(r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"), "sk-ant-first") {
					t.Errorf("the Anthropic key was not sent to %s", r.URL.Path)
				}
				w.Header().Set("content-type", "application/json")
				w.Header().Set("retry-after", "0")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(`{"type":"error","error":{"type":"` + tt.errType + `","message":"Refused by the fake"}}`))
			}))
			defer first.Close()
			second := openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
				if len(req.Messages) < 3 {
					return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "calculator", Arguments: `{"expression":"6*7"}`}}}
				}
				return openaitest.Reply{Content: "6*7 is 42."}
			})
			body := strings.NewReplacer("FIRST_URL", first.URL, "SECOND_URL", second.URL).Replace(anthropicFirstSpec)
			env := func(k string) (string, bool) {
				switch k {
				case "ANTHROPIC_KEY":
					return "sk-ant-first", true
				case "OPENAI_KEY":
					return "sk-second", true
				}
				return "", false
			}
			a, err := agentrun.Open(context.Background(), writeSpec(t, body), agentrun.Options{LookupEnv: env})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			var events []runtime.Event
			res, err := a.Run(context.Background(), runtime.Request{Input: "what is 6*7?",
				Observer: runtime.ObserverFunc(func(e runtime.Event) { events = append(events, e) })})
			if err != nil {
				t.Fatal(err)
			}
			if hits.Load() == 0 {
				t.Fatal("the Anthropic server was never called")
			}
			if !tt.falls {
				if res.Stop != runtime.StopModelError || len(second.Requests()) != 0 || hits.Load() != 1 {
					t.Fatalf("stop %s, Anthropic got %d requests, the second model %d", res.Stop, hits.Load(), len(second.Requests()))
				}
				return
			}
			if res.Stop != runtime.StopCompleted || res.Answer != "6*7 is 42." {
				t.Fatalf("stop %s (%s), answer %q", res.Stop, res.Detail, res.Answer)
			}
			if !slices.Equal(res.Models, []string{"cheap-mini", "cheap-mini"}) {
				t.Errorf("models %q", res.Models)
			}
			if len(res.Steps) != 1 || res.Steps[0].Model != "cheap-mini" {
				t.Errorf("steps %+v", res.Steps)
			}
			var responses int
			for _, e := range events {
				if e.Kind == runtime.EventModelResponse {
					responses++
					if e.Model != "cheap-mini" || !slices.Equal(e.FallbackFrom, []string{"claude-sonnet-4-5"}) {
						t.Errorf("model_response event: model %q, fallback_from %q", e.Model, e.FallbackFrom)
					}
				}
			}
			if responses != 2 {
				t.Errorf("%d model_response events", responses)
			}
		})
	}
}
