package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// newModel is a model on f, with the key in ANTHROPIC_API_KEY of env only.
func newModel(t *testing.T, f *fakeAPI, edit func(*spec.Model)) *Model {
	t.Helper()
	s := spec.Model{Provider: spec.ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: f.URL}
	if edit != nil {
		edit(&s)
	}
	m, err := New(s, func(k string) (string, bool) {
		if k == "ANTHROPIC_API_KEY" {
			return testKey, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func withThinking(s *spec.Model) {
	s.MaxTokens = 4096
	s.Reasoning = &spec.ModelReasoning{BudgetTokens: 2048}
}

var weatherTools = []model.ToolDef{
	{Name: "get_weather", Description: "The weather at a place.", Parameters: map[string]any{"type": "object",
		"properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []any{"location"}}},
	{Name: "get_time", Description: "The time in a time zone.", Parameters: map[string]any{"type": "object",
		"properties": map[string]any{"timezone": map[string]any{"type": "string"}}}},
}

func question() []model.Message {
	return []model.Message{
		{Role: model.RoleSystem, Content: "You are a travel assistant."},
		{Role: model.RoleUser, Content: "Weather and time in Paris?"},
	}
}

// answered is the conversation after resp with a result for each of its calls.
func answered(msgs []model.Message, resp *model.Response) []model.Message {
	out := append(append([]model.Message(nil), msgs...), resp.Message)
	for _, tc := range resp.Message.ToolCalls {
		out = append(out, model.Message{Role: model.RoleTool, ToolCallID: tc.ID, Content: "result of " + tc.Name})
	}
	return out
}

func TestStreamedToolRoundWithThinking(t *testing.T) {
	f := newFake(t, sse("stream_tool_round.sse"), sse("stream_answer.sse"))
	m := newModel(t, f, withThinking)
	var deltas []string
	req := &model.Request{Messages: question(), Tools: weatherTools, OnDelta: func(s string) { deltas = append(deltas, s) }}
	resp, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, "|"); got != "I'll check the weather |and the time." {
		t.Errorf("deltas = %q: want the text deltas only, no thinking", got)
	}
	want := []model.ToolCall{
		{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: `{"location": "Paris, France"}`},
		{ID: "toolu_01VHbdr4kUdgfzSJq1TeVXvb", Name: "get_time", Arguments: `{"timezone": "Europe/Paris"}`},
	}
	if !reflect.DeepEqual(resp.Message.ToolCalls, want) {
		t.Errorf("tool calls = %+v, want %+v", resp.Message.ToolCalls, want)
	}
	if resp.Message.Content != "I'll check the weather and the time." || resp.FinishReason != model.FinishToolCalls {
		t.Errorf("content %q finish %q", resp.Message.Content, resp.FinishReason)
	}
	wantUsage := model.Usage{PromptTokens: 472 + 1200, CompletionTokens: 147, TotalTokens: 472 + 1200 + 147, CacheWriteTokens: 1200}
	if resp.Usage != wantUsage || resp.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("usage %+v model %q, want %+v", resp.Usage, resp.Model, wantUsage)
	}
	r := resp.Message.Reasoning
	thinking := "The user wants the weather in Paris and the time there.\n\nBoth tools are independent, so I can call them in parallel <fast>."
	if r == nil || r.Field != "thinking" || r.Provider != model.ProviderAnthropic || r.Text != thinking || len(r.Blocks) != 1 {
		t.Fatalf("reasoning = %+v", r)
	}
	var block wireBlock
	if err := json.Unmarshal(r.Blocks[0], &block); err != nil || block.Type != "thinking" || block.Thinking != thinking ||
		!strings.HasPrefix(block.Signature, "EqQBCgIYAhIM") || !strings.HasSuffix(block.Signature, "pXU9aHkb==") {
		t.Errorf("block %s: %+v %v", r.Blocks[0], block, err)
	}

	// The follow-up: the fake refuses it unless the thinking block comes back as
	// it was sent, first, and both results are in the next user message.
	req.Messages = answered(question(), resp)
	deltas = nil
	final, err := m.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("follow-up refused: %v", err)
	}
	if final.Message.Content != "It is 18 °C in Paris, and 14:05 there." || final.FinishReason != model.FinishStop {
		t.Errorf("final %q %q", final.Message.Content, final.FinishReason)
	}
	if final.Usage.CachedPromptTokens != 1200 || final.Usage.PromptTokens != 1260 {
		t.Errorf("final usage %+v", final.Usage)
	}
	body := f.body(t, 1)
	msgs := body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages = %v, want user, assistant, one user of results", msgs)
	}
	types := func(m any) (out []string) {
		for _, b := range m.(map[string]any)["content"].([]any) {
			out = append(out, b.(map[string]any)["type"].(string))
		}
		return out
	}
	if got := types(msgs[1]); !reflect.DeepEqual(got, []string{"thinking", "text", "tool_use", "tool_use"}) {
		t.Errorf("assistant blocks = %v", got)
	}
	if got := types(msgs[2]); !reflect.DeepEqual(got, []string{"tool_result", "tool_result"}) {
		t.Errorf("results message blocks = %v", got)
	}
	if body["stream"] != true || body["thinking"].(map[string]any)["budget_tokens"] != 2048.0 || body["max_tokens"] != 4096.0 {
		t.Errorf("stream %v thinking %v max_tokens %v", body["stream"], body["thinking"], body["max_tokens"])
	}
	h := f.request(t, 0).header
	if h.Get("anthropic-version") == "" || !strings.Contains(h.Get("Authorization")+h.Get("X-Api-Key"), testKey) {
		t.Errorf("headers: anthropic-version %q, key sent: %v", h.Get("anthropic-version"), strings.Contains(h.Get("Authorization"), testKey))
	}
}

func TestThinkingSentBackIsChecked(t *testing.T) {
	f := newFake(t, sse("stream_tool_round.sse"), sse("stream_answer.sse"))
	m := newModel(t, f, withThinking)
	resp, err := m.Complete(context.Background(), &model.Request{Messages: question(), Tools: weatherTools, OnDelta: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(*model.Message){
		"a changed signature": func(a *model.Message) {
			a.Reasoning = &model.Reasoning{Field: "thinking", Provider: model.ProviderAnthropic,
				Blocks: []json.RawMessage{bytes.Replace(a.Reasoning.Blocks[0], []byte("EqQB"), []byte("XqQB"), 1)}}
		},
		"a changed text": func(a *model.Message) {
			a.Reasoning = &model.Reasoning{Field: "thinking", Provider: model.ProviderAnthropic,
				Blocks: []json.RawMessage{bytes.Replace(a.Reasoning.Blocks[0], []byte("Paris"), []byte("Lyon"), 1)}}
		},
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			msgs := answered(question(), resp)
			a := msgs[2]
			edit(&a)
			msgs[2] = a
			_, err := m.Complete(context.Background(), &model.Request{Messages: msgs, Tools: weatherTools})
			var me *model.Error
			if !errors.As(err, &me) || me.Status != 400 || me.Retryable() || !strings.Contains(err.Error(), "invalid_request_error") {
				t.Errorf("err = %v, want the API's 400", err)
			}
		})
	}
}

// A tool round another provider answered (a fallback model) has no thinking
// block: that request goes without thinking, which the API then accepts.
func TestThinkingOffAfterForeignToolRound(t *testing.T) {
	f := newFake(t, msg("message_answer.json"))
	m := newModel(t, f, withThinking)
	foreign := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_1", Name: "get_time", Arguments: ""}},
		Reasoning: &model.Reasoning{Field: "thought", Provider: model.ProviderGemini, Blocks: []json.RawMessage{json.RawMessage(`{"thought":true}`)}}}
	msgs := append(question(), foreign, model.Message{Role: model.RoleTool, ToolCallID: "call_1", Content: "14:05"})
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs, Tools: weatherTools}); err != nil {
		t.Fatalf("refused: %v", err)
	}
	body := f.body(t, 0)
	if _, on := body["thinking"]; on {
		t.Errorf("thinking = %v, want none for this request", body["thinking"])
	}
	a := body["messages"].([]any)[1].(map[string]any)["content"].([]any)
	if len(a) != 1 || a[0].(map[string]any)["type"] != "tool_use" || !reflect.DeepEqual(a[0].(map[string]any)["input"], map[string]any{}) {
		t.Errorf("assistant content = %v, want only the tool_use with input {} (the Gemini block left out)", a)
	}
	// A plain question after that round has thinking on again.
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: "14:05."}, model.Message{Role: model.RoleUser, Content: "Thanks"})
	if _, err := m.Complete(context.Background(), &model.Request{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	if _, on := f.body(t, 1)["thinking"]; !on {
		t.Error("thinking is off for a request whose last assistant message made no tool call")
	}
}

func TestUnstreamedToolRound(t *testing.T) {
	f := newFake(t, msg("message_tool_round.json"), msg("message_answer.json"))
	m := newModel(t, f, withThinking)
	resp, err := m.Complete(context.Background(), &model.Request{Messages: question(), Tools: weatherTools})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.ToolCall{
		{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location":"Paris, France"}`},
		{ID: "toolu_01B7Zk2Mq3V5xN8pL4rT6yWc", Name: "get_time", Arguments: `{}`},
	}
	if !reflect.DeepEqual(resp.Message.ToolCalls, want) || resp.FinishReason != model.FinishToolCalls || resp.Message.Content != "Checking both." {
		t.Errorf("resp = %+v", resp)
	}
	if resp.Usage != (model.Usage{PromptTokens: 1672, CompletionTokens: 120, TotalTokens: 1792, CachedPromptTokens: 1200}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	file, _ := os.ReadFile(filepath.Join("testdata", "message_tool_round.json"))
	r := resp.Message.Reasoning
	if r == nil || len(r.Blocks) != 2 || r.Text != "Two independent look-ups: weather and time." {
		t.Fatalf("reasoning = %+v", r)
	}
	for i, b := range r.Blocks {
		if !bytes.Contains(file, b) {
			t.Errorf("block %d %s is not the bytes received", i, b)
		}
	}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: answered(question(), resp), Tools: weatherTools}); err != nil {
		t.Fatalf("follow-up refused: %v", err)
	}
	sent := f.request(t, 1).body
	for i, b := range r.Blocks {
		if !bytes.Contains(sent, b) {
			t.Errorf("block %d did not go back byte for byte", i)
		}
	}
	if bytes.Index(sent, r.Blocks[1]) > bytes.Index(sent, []byte(`"Checking both."`)) {
		t.Error("the thinking blocks do not come before the text")
	}
}

func TestPromptCaching(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name  string
		cache *bool
	}{{"default", nil}, {"off", &off}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, msg("message_answer.json"))
			m := newModel(t, f, func(s *spec.Model) { s.Cache = tc.cache })
			msgs := append([]model.Message{{Role: model.RoleSystem, Content: "Rules."}}, question()...)
			resp, err := m.Complete(context.Background(), &model.Request{Messages: msgs, Tools: weatherTools})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != (model.Usage{PromptTokens: 1280, CompletionTokens: 16, TotalTokens: 1296, CachedPromptTokens: 1200}) {
				t.Errorf("usage = %+v", resp.Usage)
			}
			body := f.body(t, 0)
			var marks []string
			for i, b := range body["system"].([]any) {
				if cc, ok := b.(map[string]any)["cache_control"]; ok {
					marks = append(marks, "system"+string(rune('0'+i))+":"+cc.(map[string]any)["type"].(string))
				}
			}
			for _, b := range body["tools"].([]any) {
				if cc, ok := b.(map[string]any)["cache_control"]; ok {
					marks = append(marks, b.(map[string]any)["name"].(string)+":"+cc.(map[string]any)["type"].(string))
				}
			}
			if got := strings.Count(string(f.request(t, 0).body), "cache_control"); got != len(marks) {
				t.Errorf("%d cache_control in the body, %d where expected", got, len(marks))
			}
			want := []string{"system1:ephemeral", "get_time:ephemeral"}
			if tc.cache != nil {
				want = nil
			}
			if !reflect.DeepEqual(marks, want) {
				t.Errorf("cache marks = %v, want %v", marks, want)
			}
		})
	}
}

func TestStopReasons(t *testing.T) {
	for stop, want := range map[string]model.FinishReason{
		"end_turn":                      model.FinishStop,
		"stop_sequence":                 model.FinishStop,
		"tool_use":                      model.FinishToolCalls,
		"max_tokens":                    model.FinishLength,
		"model_context_window_exceeded": model.FinishLength,
		"refusal":                       model.FinishContentFilter,
		"a_new_reason":                  "a_new_reason",
	} {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"` +
			stop + `","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}`
		f := newFake(t, reply{status: 200, body: body})
		resp, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question()})
		if err != nil || resp.FinishReason != want {
			t.Errorf("%s: %v %v, want %q", stop, resp, err, want)
		}
	}
}

func TestCutOffToolInputIsRefused(t *testing.T) {
	f := newFake(t, sse("stream_cut_tool.sse"))
	_, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question(), OnDelta: func(string) {}})
	var me *model.Error
	if !errors.As(err, &me) || !me.Refused || me.Usage.CompletionTokens != 64 || !strings.Contains(err.Error(), "cut off at max_tokens") {
		t.Errorf("err = %v (%+v), want a refusal that keeps the usage", err, me)
	}
}

func TestOverloadedRetriedAfterRetryAfter(t *testing.T) {
	f := newFake(t, apiError(529, "overloaded_error", "Overloaded", map[string]string{"retry-after": "1"}), msg("message_answer.json"))
	resp, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question()})
	if err != nil || resp.FinishReason != model.FinishStop {
		t.Fatalf("%v %v", resp, err)
	}
	if f.count() != 2 {
		t.Fatalf("%d requests, want the 529 and its retry", f.count())
	}
	// The SDK's own first backoff is at most 0.5 s: a wait of a second is the
	// server's retry-after.
	if gap := f.request(t, 1).at.Sub(f.request(t, 0).at); gap < 950*time.Millisecond {
		t.Errorf("retried after %s, want retry-after's 1s", gap)
	}

	none := 0
	f = newFake(t, apiError(529, "overloaded_error", "Overloaded", nil))
	_, err = newModel(t, f, func(s *spec.Model) { s.Retries = &none }).Complete(context.Background(), &model.Request{Messages: question()})
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 529 || !me.Retryable() || f.count() != 1 {
		t.Errorf("err = %v after %d requests, want a retryable 529 and no retry", err, f.count())
	}
}

// Another API's reply — an OpenAI-compatible server where base_url points — is an
// error, not an empty answer.
func TestForeignReplyIsRefused(t *testing.T) {
	chat := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"A cat."},"finish_reason":"stop"}]}`
	f := newFake(t, reply{status: 200, body: chat})
	resp, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question()})
	var me *model.Error
	if !errors.As(err, &me) || !me.Refused || me.Retryable() || !strings.Contains(err.Error(), "is model.base_url an Anthropic API?") {
		t.Errorf("%v, %v: want a refusal naming base_url", resp, err)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	f := newFake(t, sse("stream_overloaded.sse"))
	_, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question(), OnDelta: func(string) {}})
	var me *model.Error
	if !errors.As(err, &me) || me.Status != StatusOverloaded || !me.Retryable() || !strings.Contains(err.Error(), "(overloaded_error): Overloaded") {
		t.Errorf("err = %v, want a 529 from the error event", err)
	}
}

func TestUnauthorizedIsMisconfiguredAndRedacted(t *testing.T) {
	f := newFake(t, apiError(401, "authentication_error", "invalid x-api-key: "+testKey, nil))
	_, err := newModel(t, f, nil).Complete(context.Background(), &model.Request{Messages: question()})
	var me *model.Error
	if !errors.As(err, &me) || !me.Misconfigured() || me.Status != 401 {
		t.Fatalf("err = %v, want a misconfiguration", err)
	}
	if strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "refused the API key") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("err = %q", err)
	}
	if f.count() != 1 {
		t.Errorf("a 401 was retried: %d requests", f.count())
	}
}

// env is the only source of environment, and a key variable the spec names has
// no fallback.
func TestEnvironmentOnlyFromEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-process-key")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1/")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")
	f := newFake(t, msg("message_answer.json"))
	env := map[string]string{"ANTHROPIC_API_KEY": testKey, "ANTHROPIC_BASE_URL": f.URL}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	m, err := New(spec.Model{Provider: spec.ProviderAnthropic, Name: "claude-haiku-4-5", APIKeyEnv: "TEAM_CLAUDE_KEY"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if m.BaseURL() != f.URL {
		t.Errorf("base URL %q, want env's ANTHROPIC_BASE_URL", m.BaseURL())
	}
	if _, err := m.Complete(context.Background(), &model.Request{Messages: question()}); err != nil {
		t.Fatal(err)
	}
	h := f.request(t, 0).header
	for k, vs := range h {
		if v := strings.Join(vs, " "); strings.Contains(v, testKey) || strings.Contains(v, "sk-process-key") || k == "X-Leak" {
			t.Errorf("header %s: %s — no key may be sent when TEAM_CLAUDE_KEY is unset", k, v)
		}
	}
}

func TestNewRefusesBadThinking(t *testing.T) {
	for name, s := range map[string]spec.Model{
		"below 1024":         {Reasoning: &spec.ModelReasoning{BudgetTokens: 500}},
		"not below max":      {MaxTokens: 2000, Reasoning: &spec.ModelReasoning{BudgetTokens: 2000}},
		"with a temperature": {Temperature: ptr(0.2), Reasoning: &spec.ModelReasoning{BudgetTokens: 2000}},
		"no name":            {Name: "-"},
	} {
		s.Provider = spec.ProviderAnthropic
		if s.Name == "" {
			s.Name = "claude-sonnet-4-5"
		} else {
			s.Name = ""
		}
		if _, err := New(s, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
func ptr[T any](v T) *T { return &v }
