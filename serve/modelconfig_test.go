package serve_test

import (
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/agentrun/agentrun/internal/openaitest"
)

// A provider that refuses the key (401, 403) or has no such model (404) is a
// configuration error: the chat completion fails with 502 model_error, never
// answers with the fallback message as if it were the answer.
func TestOpenAIChatCompletionModelConfigurationError(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			e := newEnv(t, envOptions{reply: func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Status: status} }})
			resp, err := e.openAIClient(aliceToken).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
				Model:    "support",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ordersInput)},
			})
			var apiErr *openai.Error
			if !asError(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "model_error" {
				t.Fatalf("got %v, %v; want 502 model_error", resp, err)
			}
		})
	}
}
