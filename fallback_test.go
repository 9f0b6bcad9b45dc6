package agentrun_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/runtime"
)

// fallbackSpec is an agent whose model fails and falls back to another server's
// model, with prices that differ, so the cost says which model was charged.
const fallbackSpec = `version: 1
name: chain
model:
  name: gpt-4o
  base_url: FIRST_URL
  api_key_env: FIRST_KEY
  retries: 0
  pricing: {input: 100, output: 100}
  fallback:
    - name: cheap-mini
      base_url: SECOND_URL
      pricing: {input: 1, output: 2}
tools: [{builtin: calculator}]
memory: {store: memory}
`

func TestARunFallsBackAndRecordsTheModelThatAnswered(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		falls  bool
	}{
		{"overloaded (529) falls back", 529, true},
		{"unavailable (503) falls back", 503, true},
		{"a bad request (400) does not", 400, false},
		{"a refused key (401) does not", 401, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first := openaitest.New(t, func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Status: tt.status} })
			second := openaitest.New(t, func(req openaitest.Request) openaitest.Reply {
				if len(req.Messages) < 3 {
					return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "calculator", Arguments: `{"expression":"6*7"}`}}}
				}
				return openaitest.Reply{Content: "6*7 is 42."}
			})
			body := strings.NewReplacer("FIRST_URL", first.URL, "SECOND_URL", second.URL).Replace(fallbackSpec)
			env := func(k string) (string, bool) { return "sk-first", k == "FIRST_KEY" }
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
			if !tt.falls {
				if res.Stop != runtime.StopModelError || len(second.Requests()) != 0 {
					t.Fatalf("stop %s, the second model got %d requests", res.Stop, len(second.Requests()))
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
			// Two calls of 20 prompt and 5 completion tokens at the fallback's price.
			if want := 2 * (20*1 + 5*2) / 1e6; res.Cost == nil || math.Abs(*res.Cost-want) > 1e-12 {
				t.Errorf("cost %s, want %g (the fallback's price)", costText(res.Cost), want)
			}
			var responses int
			for _, e := range events {
				if e.Kind == runtime.EventModelResponse {
					responses++
					if e.Model != "cheap-mini" || !slices.Equal(e.FallbackFrom, []string{"gpt-4o"}) {
						t.Errorf("model_response event: model %q, fallback_from %q", e.Model, e.FallbackFrom)
					}
				}
			}
			if responses != 2 {
				t.Errorf("%d model_response events", responses)
			}
			out, err := json.Marshal(res) // what exec --json prints
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"models":["cheap-mini","cheap-mini"]`, `"finish_reason":"tool_calls","model":"cheap-mini"`} {
				if !strings.Contains(string(out), want) {
					t.Errorf("--json lacks %s:\n%s", want, out)
				}
			}
		})
	}
}

func costText(c *float64) string {
	if c == nil {
		return "unknown"
	}
	return strconv.FormatFloat(*c, 'g', -1, 64)
}
