package gemini

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

var hello = []model.Message{{Role: model.RoleUser, Content: "Hello"}}

// candidate is a generateContent body with one candidate.
func candidate(parts, finish string) string {
	return `{"candidates":[{"content":{"parts":[` + parts + `],"role":"model"},"finishReason":"` + finish + `","index":0}],` +
		`"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3,"totalTokenCount":8},"modelVersion":"gemini-2.5-flash"}`
}

func TestFinishReasons(t *testing.T) {
	call := `{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}`
	cases := []struct {
		wire  string
		parts string
		want  model.FinishReason
	}{
		{"STOP", `{"text":"ok"}`, model.FinishStop},
		{"STOP", call, model.FinishToolCalls},
		{"MAX_TOKENS", `{"text":"cut"}`, model.FinishLength},
		{"SAFETY", ``, model.FinishContentFilter},
		{"RECITATION", `{"text":"partial"}`, model.FinishContentFilter},
		{"BLOCKLIST", ``, model.FinishContentFilter},
		{"PROHIBITED_CONTENT", ``, model.FinishContentFilter},
		{"SPII", ``, model.FinishContentFilter},
		{"IMAGE_SAFETY", ``, model.FinishContentFilter},
		{"MALFORMED_FUNCTION_CALL", ``, "malformed_function_call"},
		{"LANGUAGE", ``, "language"},
		{"OTHER", ``, "other"},
	}
	for _, c := range cases {
		t.Run(c.wire+" "+c.parts, func(t *testing.T) {
			f := newFake(t, reply{body: candidate(c.parts, c.wire)})
			m, _ := testModel(t, f, spec.Model{})
			resp, err := m.Complete(context.Background(), &model.Request{Messages: hello})
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != c.want {
				t.Errorf("%s → %q, want %q", c.wire, resp.FinishReason, c.want)
			}
		})
	}
}

// Tool calls made as max_tokens hit are refused, with the usage they cost.
func TestMaxTokensWithCallsRefused(t *testing.T) {
	f := newFake(t, reply{body: candidate(`{"functionCall":{"name":"get_weather","args":{"city":"Pa"}}}`, "MAX_TOKENS")})
	m, _ := testModel(t, f, spec.Model{})
	_, err := m.Complete(context.Background(), &model.Request{Messages: hello})
	var me *model.Error
	if !errors.As(err, &me) || !me.Refused || me.Usage.TotalTokens != 8 || !strings.Contains(err.Error(), "max_tokens") {
		t.Fatalf("err %v (%+v), want a refusal with the usage", err, me)
	}
}

// A prompt the filter blocked has no candidates: a content_filter stop with no
// text, not an error.
func TestBlockedPrompt(t *testing.T) {
	f := newFake(t, reply{body: `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"x1"}`})
	m, _ := testModel(t, f, spec.Model{})
	resp, err := m.Complete(context.Background(), &model.Request{Messages: hello})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishContentFilter || resp.Message.Content != "" || resp.Usage.PromptTokens != 9 {
		t.Errorf("blocked prompt → %+v", resp)
	}
}

func TestUsage(t *testing.T) {
	f := newFake(t, reply{body: `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":1200,"candidatesTokenCount":50,"totalTokenCount":1630,"cachedContentTokenCount":1024,"toolUsePromptTokenCount":180,"thoughtsTokenCount":200},"modelVersion":"gemini-2.5-pro"}`})
	m, _ := testModel(t, f, spec.Model{})
	resp, err := m.Complete(context.Background(), &model.Request{Messages: hello})
	if err != nil {
		t.Fatal(err)
	}
	want := model.Usage{PromptTokens: 1380, CompletionTokens: 250, TotalTokens: 1630, CachedPromptTokens: 1024}
	if resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
}

func TestRetries(t *testing.T) {
	t.Run("429 then success, after the RetryInfo delay", func(t *testing.T) {
		f := newFake(t, reply{status: 429, file: "error_resource_exhausted.json"}, reply{file: "generate_text.json"})
		m, waits := testModel(t, f, spec.Model{})
		resp, err := m.Complete(context.Background(), &model.Request{Messages: hello})
		if err != nil || resp.Message.Content != "The capital of France is Paris." {
			t.Fatalf("%v %+v", err, resp)
		}
		if got := fmt.Sprint(*waits); got != "[7s]" || len(f.requests()) != 2 {
			t.Errorf("waits %s over %d requests, want [7s] (the RetryInfo) over 2", got, len(f.requests()))
		}
		a, b := f.requests()[0].body, f.requests()[1].body
		if string(a) != string(b) || len(a) == 0 {
			t.Errorf("the retry sent another body: %q vs %q", a, b)
		}
	})
	t.Run("Retry-After header, streamed", func(t *testing.T) {
		f := newFake(t, reply{status: 503, header: map[string]string{"Retry-After": "3"}, file: "error_unavailable.json"}, reply{file: "stream_answer.sse"})
		m, waits := testModel(t, f, spec.Model{})
		if _, err := m.Complete(context.Background(), &model.Request{Messages: hello, OnDelta: func(string) {}}); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(*waits); got != "[3s]" {
			t.Errorf("waits %s, want [3s]", got)
		}
	})
	t.Run("503 on every try", func(t *testing.T) {
		f := newFake(t, reply{status: 503, file: "error_unavailable.json"}, reply{status: 503, file: "error_unavailable.json"})
		retries := 1
		m, waits := testModel(t, f, spec.Model{Retries: &retries})
		_, err := m.Complete(context.Background(), &model.Request{Messages: hello})
		var me *model.Error
		if !errors.As(err, &me) || me.Status != 503 || !me.Retryable() || !strings.Contains(err.Error(), "UNAVAILABLE: The model is overloaded") {
			t.Fatalf("err %v", err)
		}
		if len(f.requests()) != 2 || len(*waits) != 1 {
			t.Errorf("%d requests, waits %v; want 2 and one backoff", len(f.requests()), *waits)
		}
	})
	t.Run("a wait longer than a minute is not waited out", func(t *testing.T) {
		f := newFake(t, reply{status: 429, header: map[string]string{"Retry-After": "3600"}, file: "error_resource_exhausted.json"})
		m, waits := testModel(t, f, spec.Model{})
		_, err := m.Complete(context.Background(), &model.Request{Messages: hello})
		var me *model.Error
		if !errors.As(err, &me) || me.Status != 429 || !me.Retryable() || !strings.Contains(err.Error(), "RESOURCE_EXHAUSTED") {
			t.Fatalf("err %v, want the 429 for a fallback to take", err)
		}
		if len(*waits) != 0 || len(f.requests()) != 1 {
			t.Errorf("waited %v over %d requests", *waits, len(f.requests()))
		}
	})
}

func TestConfigurationErrors(t *testing.T) {
	cases := []struct {
		name   string
		reply  reply
		status int
		want   string
	}{
		{"400 API_KEY_INVALID", reply{status: 400, file: "error_api_key_invalid.json"}, 401, "refused the API key (HTTP 400, API_KEY_INVALID)"},
		{"403", reply{status: 403, file: "error_permission_denied.json"}, 403, "PERMISSION_DENIED"},
		{"401 quoting the key", reply{status: 401, body: `{"error":{"code":401,"message":"Request had invalid authentication credentials: ` + testKey + `","status":"UNAUTHENTICATED"}}`}, 401, "UNAUTHENTICATED"},
		{"404", reply{status: 404, file: "error_not_found.json"}, 404, `model "gemini-3-pro-preview" does not exist`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, c.reply)
			m, waits := testModel(t, f, spec.Model{})
			_, err := m.Complete(context.Background(), &model.Request{Messages: hello})
			var me *model.Error
			if !errors.As(err, &me) || me.Status != c.status || !me.Misconfigured() || me.Retryable() {
				t.Fatalf("err %v, want a configuration error with status %d", err, c.status)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %q, want it to say %q", err, c.want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the key leaked: %v", err)
			}
			if len(*waits) != 0 {
				t.Errorf("a refused key was retried")
			}
		})
	}
	// The fake server answers a wrong key itself: the request carried ours.
	t.Run("wrong key", func(t *testing.T) {
		f := newFake(t)
		m, err := build(spec.Model{Provider: spec.ProviderGemini, Name: "gemini-2.5-flash", BaseURL: f.srv.URL, APIKeyEnv: "MY_KEY"},
			func(k string) (string, bool) {
				return map[string]string{"MY_KEY": "AIza-wrong", "GEMINI_API_KEY": testKey}[k], true
			}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Complete(context.Background(), &model.Request{Messages: hello})
		var me *model.Error
		if !errors.As(err, &me) || !me.Misconfigured() || strings.Contains(err.Error(), "AIza-wrong") {
			t.Fatalf("err %v", err)
		}
	})
}

// model.timeout bounds a stream as a whole: a server that sends a chunk and then
// nothing is cut off, and the error says so.
func TestStreamTimeout(t *testing.T) {
	f := newFake(t)
	block := make(chan struct{})
	defer close(block)
	f.srv.Config.Handler = stall(block)
	retries := 0
	m, _ := testModel(t, f, spec.Model{Timeout: spec.Duration{Duration: 300 * time.Millisecond}, Retries: &retries})
	var got []string
	_, err := m.Complete(context.Background(), &model.Request{Messages: hello, OnDelta: func(s string) { got = append(got, s) }})
	var me *model.Error
	if !errors.As(err, &me) || me.Status != 0 || !me.Retryable() || !strings.Contains(err.Error(), "model.timeout") {
		t.Fatalf("err %v, want a retryable timeout naming model.timeout", err)
	}
	if len(got) != 1 {
		t.Errorf("deltas %q before the stall", got)
	}
}

// No response body is read past MaxResponseBytes, whatever the server sends.
func TestResponseTooLarge(t *testing.T) {
	f := newFake(t, reply{body: candidate(`{"text":"`+strings.Repeat("a", MaxResponseBytes)+`"}`, "STOP")})
	m, _ := testModel(t, f, spec.Model{})
	_, err := m.Complete(context.Background(), &model.Request{Messages: hello})
	var me *model.Error
	if !errors.As(err, &me) || !me.Refused || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Fatalf("err %v", err)
	}
}
