package spec

import (
	"reflect"
	"testing"
	"time"
)

func TestFallbackModel(t *testing.T) {
	temp, retries, one := 0.3, 4, 1
	stream := true
	base := Model{Provider: ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: "https://proxy.example/anthropic", APIKeyEnv: "ANTHROPIC_KEY",
		Temperature: &temp, MaxTokens: 2048, Timeout: Duration{Duration: 90 * time.Second}, Retries: &retries, Stream: &stream,
		Pricing: &Pricing{Input: 3, Output: 15}, Fallback: []Model{{Name: "x"}}}
	tests := []struct {
		name  string
		entry Model
		want  Model
	}{
		{"the same provider inherits what it leaves out", Model{Name: "claude-haiku-4-5"},
			Model{Provider: ProviderAnthropic, Name: "claude-haiku-4-5", BaseURL: base.BaseURL, APIKeyEnv: "ANTHROPIC_KEY",
				Temperature: &temp, MaxTokens: 2048, Timeout: base.Timeout, Retries: &retries, Stream: &stream}},
		{"the same name keeps the price", Model{Provider: ProviderAnthropic, BaseURL: "https://other.example"},
			Model{Provider: ProviderAnthropic, Name: "claude-sonnet-4-5", BaseURL: "https://other.example", APIKeyEnv: "ANTHROPIC_KEY",
				Temperature: &temp, MaxTokens: 2048, Timeout: base.Timeout, Retries: &retries, Stream: &stream, Pricing: base.Pricing}},
		{"another provider takes only the generic settings", Model{Provider: ProviderOpenAI, Name: "gpt-4o-mini", Retries: &one},
			Model{Provider: ProviderOpenAI, Name: "gpt-4o-mini", Temperature: &temp, MaxTokens: 2048, Timeout: base.Timeout, Retries: &one, Stream: &stream}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FallbackModel(base, tt.entry); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// An entry without a provider is of the base's, openai when the base names none.
	if got := FallbackModel(Model{Name: "gpt-4o", BaseURL: "http://a", APIKeyEnv: "K"}, Model{Name: "gpt-4o-mini"}); got.BaseURL != "http://a" || got.APIKeyEnv != "K" {
		t.Errorf("openai entry of an openai base: %+v", got)
	}
	if got := FallbackModel(Model{Name: "gpt-4o", BaseURL: "http://a"}, Model{Provider: ProviderOpenAI, Name: "m"}); got.BaseURL != "http://a" {
		t.Errorf("provider openai is the base's unnamed provider: %+v", got)
	}
}

func TestOverrideFallback(t *testing.T) {
	agentChain := []Model{{Name: "gpt-4o-mini"}}
	ownChain := []Model{{Name: "gpt-4.1-nano"}}
	base := Model{Name: "gpt-4o", Fallback: agentChain}
	temp := 0.0
	tests := []struct {
		name string
		over *Model
		want []Model
	}{
		{"no override is the agent's model", nil, agentChain},
		{"an override of the same model keeps the chain", &Model{Temperature: &temp}, agentChain},
		{"naming the same model keeps it", &Model{Name: "gpt-4o"}, agentChain},
		{"another model has none of its own", &Model{Name: "gpt-4o-mini"}, nil},
		{"another provider has none", &Model{Provider: ProviderAnthropic}, nil},
		{"an own chain replaces the agent's", &Model{Name: "gpt-4o-mini", Fallback: ownChain}, ownChain},
		{"also for the same model", &Model{Fallback: ownChain}, ownChain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OverrideFallback(base, tt.over); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFallbackPrices(t *testing.T) {
	s := &Spec{
		Model: Model{Name: "gpt-4o", Fallback: []Model{{Name: "gpt-4o-mini"}, {Name: "local-llama"}, {Provider: ProviderAnthropic, Name: "claude-haiku-4-5"}}},
		Judge: &Judge{Model: &Model{Name: "judge-model", Fallback: []Model{{Name: "cheap", Pricing: &Pricing{Input: 1, Output: 2}}}}},
	}
	got := FallbackPrices(s)
	want := map[string]*Pricing{
		"gpt-4o-mini":      {Input: 0.15, CachedInput: 0.075, Output: 0.60},
		"claude-haiku-4-5": {Input: 1.00, CachedInput: 0.10, CacheWrite: 1.25, Output: 5.00},
		"cheap":            {Input: 1, Output: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if FallbackPrices(&Spec{Model: Model{Name: "gpt-4o"}}) != nil {
		t.Error("prices for a spec without fallbacks")
	}
}
