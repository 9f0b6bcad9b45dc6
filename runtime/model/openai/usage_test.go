package openai

import (
	"context"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
)

// The prompt tokens a provider served from its prompt cache are priced lower, so
// they are read wherever the server reports them: in a plain response's usage and in
// the last chunk of a stream (stream_options.include_usage).
func TestCachedPromptTokens(t *testing.T) {
	const answer = `{"role":"assistant","content":"Hi."}`
	plain := func(usage string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test-0613",` +
			`"choices":[{"index":0,"finish_reason":"stop","message":` + answer + `}],"usage":` + usage + `}`
	}
	stream := func(usage string) []string {
		return []string{
			chunk(`{"role":"assistant","content":"Hi."}`, ""),
			chunk(`{}`, "stop"),
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test-0613","choices":[],"usage":` + usage + `}`,
			"[DONE]",
		}
	}
	tests := []struct {
		name  string
		usage string
		want  model.Usage
	}{
		{
			name:  "prompt_tokens_details.cached_tokens",
			usage: `{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`,
			want:  model.Usage{PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306, CachedPromptTokens: 1920},
		},
		{
			name:  "nothing cached",
			usage: `{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25,"prompt_tokens_details":{"cached_tokens":0}}`,
			want:  model.Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25},
		},
		{
			name:  "no details",
			usage: `{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}`,
			want:  model.Usage{PromptTokens: 20, CompletionTokens: 5, TotalTokens: 25},
		},
		{
			name:  "DeepSeek's prompt_cache_hit_tokens",
			usage: `{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_cache_hit_tokens":640,"prompt_cache_miss_tokens":360}`,
			want:  model.Usage{PromptTokens: 1000, CompletionTokens: 50, TotalTokens: 1050, CachedPromptTokens: 640},
		},
		{
			name:  "cached_tokens wins over prompt_cache_hit_tokens",
			usage: `{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_cache_hit_tokens":640,"prompt_tokens_details":{"cached_tokens":512}}`,
			want:  model.Usage{PromptTokens: 1000, CompletionTokens: 50, TotalTokens: 1050, CachedPromptTokens: 512},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/plain", func(t *testing.T) {
			m := newModel(t, newServer(t, reply(200, plain(tt.usage))))
			resp, err := m.Complete(context.Background(), userAsks("q"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tt.want {
				t.Errorf("usage %+v, want %+v", resp.Usage, tt.want)
			}
		})
		t.Run(tt.name+"/stream", func(t *testing.T) {
			s := newServer(t, sse(stream(tt.usage)...))
			m := newModel(t, s)
			req := userAsks("q")
			req.OnDelta = func(string) {}
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tt.want {
				t.Errorf("usage %+v, want %+v", resp.Usage, tt.want)
			}
			jsonEqual(t, "stream_options", s.body(t, 0)["stream_options"], `{"include_usage":true}`)
		})
	}
}
