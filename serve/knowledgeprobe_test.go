package serve_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/openaitest"
)

// probeResult is the answer of POST /v1/agents/{name}/knowledge/probe.
type probeResult struct {
	Intent   string `json:"intent"`
	RoutedBy string `json:"routed_by"`
	Routing  string `json:"routing"`
	Cache    *struct {
		Intent    string  `json:"intent"`
		Threshold float64 `json:"threshold"`
		Answers   bool    `json:"answers"`
		Refused   string  `json:"refused"`
		Closest   *struct {
			Kind     string  `json:"kind"`
			Entry    string  `json:"entry"`
			Question string  `json:"question"`
			Score    float64 `json:"score"`
			PerUser  bool    `json:"per_user"`
			Verdict  *struct {
				Passed bool   `json:"passed"`
				Gate   string `json:"gate"`
			} `json:"verdict"`
		} `json:"closest"`
	} `json:"cache"`
	Retrieval *struct {
		Collection string  `json:"collection"`
		TopK       int     `json:"top_k"`
		MinScore   float64 `json:"min_score"`
		Passages   []struct {
			ID           string  `json:"id"`
			Source       string  `json:"source"`
			Heading      string  `json:"heading"`
			StartLine    int     `json:"start_line"`
			EndLine      int     `json:"end_line"`
			Score        float64 `json:"score"`
			Text         string  `json:"text"`
			Instructions bool    `json:"instructions"`
		} `json:"passages"`
	} `json:"retrieval"`
}

const learnedAnswer = "yes, the courier comes on public holidays too."

// knowledgeEnv serves testdata/knowledge.yaml: an FAQ cache whose learned
// answers are each user's own, and retrieval, over a real SQLite store and index
// and the offline embedder. Its model always answers learnedAnswer.
func knowledgeEnv(t *testing.T) *env {
	return newEnv(t, envOptions{
		spec:  "knowledge.yaml",
		files: []string{"help-center/faq.yaml", "help-center/returns.md", "help-center/shipping.md", "help-center/partner.md"},
		store: "sqlite:" + filepath.Join(t.TempDir(), "memory.db"),
		reply: func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: learnedAnswer} },
	})
}

func (e *env) probe(t *testing.T, token string, body any) (response, probeResult) {
	t.Helper()
	r := e.do("POST", "/v1/agents/help-desk/knowledge/probe", token, body)
	var res probeResult
	if r.Status == http.StatusOK {
		if err := json.Unmarshal(r.Body, &res); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
	}
	t.Logf("%s", r.Body)
	return r, res
}

func TestKnowledgeProbe(t *testing.T) {
	e := knowledgeEnv(t)
	t.Run("a hit, routed by a rule", func(t *testing.T) {
		r, res := e.probe(t, aliceToken, map[string]any{"question": "How long does a refund take?"})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if res.Intent != "faq" || res.RoutedBy != "rules" || res.Retrieval != nil {
			t.Errorf("intent %q routed by %q, retrieval %v", res.Intent, res.RoutedBy, res.Retrieval)
		}
		c := res.Cache
		if c == nil || !c.Answers || c.Refused != "" || c.Closest == nil || c.Closest.Kind != "faq" || c.Closest.Question != "How long does a refund take?" ||
			c.Closest.Score < c.Threshold || !strings.HasPrefix(c.Closest.Entry, "help-center/faq.yaml:") {
			t.Errorf("cache: %s", r.Body)
		}
	})
	t.Run("a miss, refused by a gate", func(t *testing.T) {
		r, res := e.probe(t, aliceToken, map[string]any{"question": "How long does a refund take for gift cards?", "intent": "faq"})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		c := res.Cache
		if res.RoutedBy != "pre" || c == nil || c.Answers || c.Closest == nil || c.Closest.Verdict == nil || c.Closest.Verdict.Passed || c.Closest.Verdict.Gate == "" ||
			!strings.HasPrefix(c.Refused, "refused: ") {
			t.Errorf("cache: %s", r.Body)
		}
	})
	t.Run("retrieval", func(t *testing.T) {
		r, res := e.probe(t, aliceToken, map[string]any{"question": "How long does delivery take to remote areas?"})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		g := res.Retrieval
		if res.Intent != "policy" || res.Cache != nil || g == nil || g.Collection != "help" || g.TopK != 3 || len(g.Passages) == 0 {
			t.Fatalf("retrieval: %s", r.Body)
		}
		p := g.Passages[0]
		if p.ID != "S1" || p.Source != "help-center/shipping.md" || !strings.Contains(p.Text, "remote areas") || p.StartLine == 0 || p.Score <= 0 || p.Instructions {
			t.Errorf("first passage: %+v", p)
		}
	})
	t.Run("a passage that reads like instructions", func(t *testing.T) {
		r, res := e.probe(t, aliceToken, map[string]any{"question": "What are the partner terms?"})
		if r.Status != http.StatusOK || res.Retrieval == nil || len(res.Retrieval.Passages) == 0 {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if p := res.Retrieval.Passages[0]; p.Source != "help-center/partner.md" || !p.Instructions {
			t.Errorf("first passage: %+v", p)
		}
	})
	t.Run("routed to an intent without knowledge", func(t *testing.T) {
		r, res := e.probe(t, aliceToken, map[string]any{"question": "hello there"})
		if r.Status != http.StatusOK || res.Intent != "other" || res.RoutedBy != "fallback" || res.Cache != nil || res.Retrieval != nil {
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	})
	for _, tt := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"empty question", map[string]any{"question": "  "}, http.StatusBadRequest, "invalid_request"},
		{"question too long", map[string]any{"question": strings.Repeat("refund ", 1000)}, http.StatusBadRequest, "invalid_request"},
		{"unknown intent", map[string]any{"question": "refund?", "intent": "billing"}, http.StatusBadRequest, "unknown_intent"},
		{"not JSON", "{", http.StatusBadRequest, "invalid_json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := e.probe(t, aliceToken, tt.body)
			if r.Status != tt.status || r.errorCode(t) != tt.code {
				t.Errorf("status %d, want %d %s: %s", r.Status, tt.status, tt.code, r.Body)
			}
		})
	}
	t.Run("unknown agent", func(t *testing.T) {
		r := e.do("POST", "/v1/agents/nobody/knowledge/probe", aliceToken, map[string]any{"question": "refund?"})
		if r.Status != http.StatusNotFound || r.errorCode(t) != "unknown_agent" {
			t.Errorf("status %d: %s", r.Status, r.Body)
		}
	})
}

// A learned answer of bob's (scope: user) is bob's alone: alice's probe of the
// same question does not see it, bob's does and would answer with it.
func TestKnowledgeProbeUserIsolation(t *testing.T) {
	e := knowledgeEnv(t)
	const question = "Do you deliver on public holidays?"
	r := e.do("POST", "/v1/agents/help-desk/runs", bobToken, map[string]any{"input": question, "intent": "faq"})
	var run struct {
		Result struct {
			Answer  string
			Cache   string
			Learned *struct {
				PerUser bool `json:"per_user"`
			}
		}
	}
	if err := json.Unmarshal(r.Body, &run); err != nil || r.Status != http.StatusOK {
		t.Fatalf("bob's run: status %d: %s", r.Status, r.Body)
	}
	if run.Result.Answer != learnedAnswer || run.Result.Learned == nil || !run.Result.Learned.PerUser {
		t.Fatalf("bob's run did not learn its answer for bob: %s", r.Body)
	}
	body := map[string]any{"question": question, "intent": "faq"}
	_, bob := e.probe(t, bobToken, body)
	if c := bob.Cache; c == nil || !c.Answers || c.Closest == nil || c.Closest.Kind != "learned" || !c.Closest.PerUser || c.Closest.Score < 0.99 {
		t.Errorf("bob's probe does not find his learned answer: %+v", bob.Cache)
	}
	_, alice := e.probe(t, aliceToken, body)
	if c := alice.Cache; c == nil || c.Answers || c.Closest != nil && (c.Closest.Kind == "learned" || c.Closest.Entry == bob.Cache.Closest.Entry) {
		t.Errorf("alice's probe sees bob's learned answer: %+v", alice.Cache)
	}
}

// A probe never calls a model: where routing would need the classifier it takes
// the one intent with knowledge and says so; an agent without knowledge is a 409.
func TestKnowledgeProbeWithoutModel(t *testing.T) {
	url := exampleServer(t, "../examples/agents/shop-support.yaml", "../examples/agents/code-assistant.yaml")
	probe := func(agent, question string) response {
		req, _ := http.NewRequest("POST", url+"/v1/agents/"+agent+"/knowledge/probe", strings.NewReader(`{"question":`+jsonString(question)+`}`))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body []byte
		body, _ = readAll(res)
		return response{Status: res.StatusCode, Header: res.Header, Body: body}
	}
	r := probe("shop-support", "what time do you open during the spring festival?")
	var res probeResult
	if err := json.Unmarshal(r.Body, &res); err != nil || r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if res.Intent != "faq" || res.RoutedBy != "knowledge" || !strings.Contains(res.Routing, "classifier") || res.Cache == nil {
		t.Errorf("probe: %s", r.Body)
	}
	if r := probe("code-assistant", "what is 2+2?"); r.Status != http.StatusConflict || r.errorCode(t) != "no_knowledge" {
		t.Errorf("an agent without knowledge: status %d: %s", r.Status, r.Body)
	}
}

func jsonString(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

func readAll(res *http.Response) ([]byte, error) {
	var b strings.Builder
	_, err := io.Copy(&b, res.Body)
	return []byte(b.String()), err
}
