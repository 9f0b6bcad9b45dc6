package serve_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentrun/agentrun/internal/openaitest"
	"github.com/agentrun/agentrun/serve"
)

// The OpenAI-compatible endpoint, through the official Go client.

func (e *env) openAIClient(token string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(e.URL + "/v1"), option.WithAPIKey(token), option.WithMaxRetries(0),
		option.WithHTTPClient(e.client),
	}, opts...)...)
	return &c
}

func TestOpenAIModels(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openAIClient(aliceToken)
	page, err := client.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "support" {
		t.Errorf("models = %+v, want the agent support", page.Data)
	}
	wrong := e.openAIClient("not-a-token")
	_, err = wrong.Models.List(t.Context())
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("a wrong key: %v, want a 401 *openai.Error", err)
	}
}

// The agent's tool calls stay in the server: the client gets the final answer only.
func TestOpenAIChatCompletion(t *testing.T) {
	e := newEnv(t, envOptions{})
	resp, err := e.openAIClient(aliceToken).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "support",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ordersInput)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices = %+v", resp.Choices)
	}
	c := resp.Choices[0]
	if c.Message.Content != finalAnswer || c.FinishReason != "stop" || len(c.Message.ToolCalls) != 0 {
		t.Errorf("choice = %+v, want the final answer and no tool calls", c)
	}
	if strings.Contains(resp.RawJSON(), "tool_calls") || strings.Contains(resp.RawJSON(), "list_orders") {
		t.Errorf("the response mentions the agent's tool calls: %s", resp.RawJSON())
	}
	if resp.Model != "support" || resp.Usage.TotalTokens != 50 {
		t.Errorf("model %q usage %+v, want support and both model calls' 50 tokens", resp.Model, resp.Usage)
	}
	checkToolRan(t, e)
}

// checkToolRan checks the model made a tool call, for alice, and got its result.
func checkToolRan(t *testing.T, e *env) {
	t.Helper()
	reqs := e.model.Requests()
	if len(reqs) != 2 || reqs[1].Messages[len(reqs[1].Messages)-1]["role"] != "tool" {
		t.Errorf("model requests %v, want a tool call then its result", reqs)
	}
	if got := e.backend.Users(); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("the backend saw %q, want [alice]", got)
	}
}

func TestOpenAIChatCompletionStreaming(t *testing.T) {
	e := newEnv(t, envOptions{})
	stream := e.openAIClient(aliceToken).Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         "support",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ordersInput)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var content strings.Builder
	usageChunks := 0
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if strings.Contains(chunk.RawJSON(), "tool_calls") {
			t.Errorf("a chunk carries tool calls: %s", chunk.RawJSON())
		}
		for _, c := range chunk.Choices {
			if len(c.Delta.ToolCalls) != 0 {
				t.Errorf("a chunk's delta has tool calls: %+v", c.Delta)
			}
			content.WriteString(c.Delta.Content)
		}
		if len(chunk.Choices) == 0 && chunk.Usage.TotalTokens > 0 {
			usageChunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != finalAnswer {
		t.Errorf("the streamed content is %q, want %q", content.String(), finalAnswer)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != finalAnswer || len(acc.Choices[0].Message.ToolCalls) != 0 || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("accumulated = %+v", acc.Choices)
	}
	if usageChunks != 1 || acc.Usage.TotalTokens != 50 {
		t.Errorf("%d usage chunks, usage %+v; want one, of 50 tokens", usageChunks, acc.Usage)
	}
	checkToolRan(t, e)
}

// A long answer that is sent once the judge accepted it streams in several
// chunks that add up to it, in order; without include_usage no chunk carries
// usage.
func TestOpenAIStreamingLongAnswer(t *testing.T) {
	long := strings.Repeat("多字节 text, ", 40)
	e := newEnv(t, envOptions{editSpec: withJudge, reply: func(req openaitest.Request) openaitest.Reply {
		if req.Judge {
			return openaitest.Reply{Content: `{"passed": true, "missing": ""}`}
		}
		return openaitest.Reply{Content: long}
	}})
	stream := e.openAIClient(aliceToken).Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "support", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var content strings.Builder
	chunks := 0
	for stream.Next() {
		if stream.Current().JSON.Usage.Valid() {
			t.Errorf("a usage chunk without stream_options.include_usage: %s", stream.Current().RawJSON())
		}
		for _, c := range stream.Current().Choices {
			if c.Delta.Content != "" {
				chunks++
			}
			content.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != long || chunks < 2 {
		t.Errorf("%d chunks of %q, want %q in several", chunks, content.String(), long)
	}
}

// With the conversation header the server keeps the history; without it the
// client's earlier messages are the history and nothing is stored.
func TestOpenAIConversations(t *testing.T) {
	e := newEnv(t, envOptions{})
	ask := func(client *openai.Client, msgs ...openai.ChatCompletionMessageParamUnion) string {
		t.Helper()
		resp, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "support", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message.Content
	}
	lastRequestText := func() string {
		reqs := e.model.Requests()
		var b strings.Builder
		for _, m := range reqs[len(reqs)-1].Messages {
			b.WriteString(messageText(m) + "\n")
		}
		return b.String()
	}

	t.Run("with the header", func(t *testing.T) {
		client := e.openAIClient(aliceToken, option.WithHeader(serve.ConversationHeader, "chat-1"))
		if got := ask(client, openai.UserMessage(ordersInput)); got != finalAnswer {
			t.Fatalf("first turn: %q", got)
		}
		// The client's own earlier messages are not the history here: the server's are.
		got := ask(client, openai.UserMessage("CLIENT-SIDE-HISTORY"), openai.AssistantMessage("ok"), openai.UserMessage("thanks"))
		if got != greeting {
			t.Fatalf("second turn: %q", got)
		}
		text := lastRequestText()
		if !strings.Contains(text, ordersInput) || !strings.Contains(text, finalAnswer) {
			t.Errorf("the second turn's model request lacks the first turn:\n%s", text)
		}
		if strings.Contains(text, "CLIENT-SIDE-HISTORY") {
			t.Errorf("the client's messages reached the model beside the stored history:\n%s", text)
		}
		if got := e.conversations(aliceToken); !slices.Equal(got, []string{"chat-1"}) {
			t.Errorf("conversations = %q, want [chat-1]", got)
		}
		if r := e.do("GET", "/v1/conversations/chat-1", aliceToken, nil); r.json(t)["turns"] != 2.0 {
			t.Errorf("chat-1 = %s, want 2 turns", r.Body)
		}
		if _, facts := e.facts(aliceToken); len(facts) != 1 {
			t.Errorf("facts = %+v, want the tool's fact", facts)
		}
		// Conversation ids are each user's own: carol's "chat-1" is another
		// conversation, which sees nothing of alice's.
		if _, err := ask2(e.openAIClient(carolToken, option.WithHeader(serve.ConversationHeader, "chat-1")), t, openai.UserMessage("hi")); err != nil {
			t.Fatalf("carol's chat-1: %v", err)
		}
		if text := lastRequestText(); strings.Contains(text, ordersInput) || strings.Contains(text, finalAnswer) {
			t.Errorf("carol's chat-1 saw alice's chat-1:\n%s", text)
		}
		if got := e.conversations(aliceToken); !slices.Equal(got, []string{"chat-1"}) {
			t.Errorf("alice's conversations after carol's run = %q", got)
		}
	})

	t.Run("without the header", func(t *testing.T) {
		client := e.openAIClient(bobToken)
		got := ask(client, openai.SystemMessage("CLIENT-SYSTEM"), openai.UserMessage("My name is Zed."), openai.AssistantMessage("Hi Zed!"), openai.UserMessage(ordersInput))
		if got != finalAnswer {
			t.Fatalf("answer %q", got)
		}
		text := lastRequestText()
		zed, hi, input := strings.Index(text, "My name is Zed."), strings.Index(text, "Hi Zed!"), strings.Index(text, ordersInput)
		if zed < 0 || hi < zed || input < hi {
			t.Errorf("the model request does not hold the client's history in order before the input:\n%s", text)
		}
		if strings.Contains(text, "CLIENT-SYSTEM") {
			t.Errorf("the client's system message reached the model:\n%s", text)
		}
		if got := e.conversations(bobToken); len(got) != 0 {
			t.Errorf("a run without the header stored conversations %q", got)
		}
		if _, facts := e.facts(bobToken); len(facts) != 0 {
			t.Errorf("a run without the header stored facts %+v", facts)
		}
		if got := e.backend.Users(); got[len(got)-1] != "bob" {
			t.Errorf("the backend saw %q", got)
		}
	})
}

func ask2(client *openai.Client, t *testing.T, msgs ...openai.ChatCompletionMessageParamUnion) (*openai.ChatCompletion, error) {
	return client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "support", Messages: msgs})
}

// A request the endpoint refuses reaches the client as its typed error.
func TestOpenAIClientErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, err := e.openAIClient(aliceToken).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "no-such-agent", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || !strings.Contains(apiErr.Message, "support") {
		t.Errorf("an unknown model: %v", err)
	}
	_, err = e.openAIClient(aliceToken).Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "support", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi"), openai.AssistantMessage("hello")},
	})
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" {
		t.Errorf("messages ending with the assistant: %v", err)
	}
}

func asError(err error, target **openai.Error) bool { return errors.As(err, target) }

// A chat client that leaves mid-stream cancels the run: the model request is
// aborted and nothing is stored, though the conversation header asked for it.
func TestOpenAIClientLeavesCancels(t *testing.T) {
	e := newEnv(t, envOptions{latency: 400 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	body := chatBody(msg("user", ordersInput))
	body["stream"] = true
	resp, err := e.request(ctx, "POST", "/v1/chat/completions", aliceToken, body, serve.ConversationHeader, "chat-left")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	eventually(t, "the second model request is sent", func() bool { return len(e.model.Requests()) == 2 })
	cancel()
	eventually(t, "the fake model sees the request canceled", func() bool { return e.model.Canceled() > 0 })
	checkCanceledRun(t, e, "", "chat-left")
}

// Without the conversation header, the client's history is held to the bounds of a
// stored one: the agent's memory.window turns (2 here), a turn beginning at a user
// message, and the newest turns that fit, with the input, within (window+1) ×
// max_input_chars characters (300 here). What reaches the model is counted.
func TestOpenAIClientHistoryBounds(t *testing.T) {
	const window, maxInput = 2, 100
	e := newEnv(t, envOptions{limits: serve.Limits{MaxInputChars: maxInput},
		editSpec: func(s string) string {
			return strings.Replace(s, "memory:\n", fmt.Sprintf("memory:\n  window: %d\n", window), 1)
		}})
	u, a := openai.UserMessage[string], openai.AssistantMessage[string]
	type wire struct{ role, content string }
	pairs := func(n, size int) []openai.ChatCompletionMessageParamUnion {
		var out []openai.ChatCompletionMessageParamUnion
		for i := range n {
			q, r := fmt.Sprintf("q%d ", i), fmt.Sprintf("r%d ", i)
			out = append(out, u(q+strings.Repeat("x", max(0, size-len(q)))), a(r+strings.Repeat("y", max(0, size-len(r)))))
		}
		return out
	}
	for _, c := range []struct {
		name    string
		history []openai.ChatCompletionMessageParamUnion
		want    []wire
	}{
		{"400 pairs: the last window turns", pairs(400, 20), []wire{
			{"user", "q398 " + strings.Repeat("x", 15)}, {"assistant", "r398 " + strings.Repeat("y", 15)},
			{"user", "q399 " + strings.Repeat("x", 15)}, {"assistant", "r399 " + strings.Repeat("y", 15)}}},
		{"400 pairs of 1000 characters: no turn fits", pairs(400, 1000), nil},
		{"an older turn that fits", []openai.ChatCompletionMessageParamUnion{
			u(strings.Repeat("o", 130)), a(strings.Repeat("p", 130)), u("newer question"), a("newer answer")},
			[]wire{{"user", strings.Repeat("o", 130)}, {"assistant", strings.Repeat("p", 130)}, {"user", "newer question"}, {"assistant", "newer answer"}}},
		{"the newest turns that fit", []openai.ChatCompletionMessageParamUnion{
			u(strings.Repeat("o", 140)), a(strings.Repeat("p", 140)), u("newer question"), a("newer answer")},
			[]wire{{"user", "newer question"}, {"assistant", "newer answer"}}},
		{"no turn before the first user message; one role's messages joined", []openai.ChatCompletionMessageParamUnion{
			a("Hello! How can I help?"), a(strings.Repeat("g", 200)), u("first"), openai.DeveloperMessage("be brief"), u("again"),
			a(""), a("one"), openai.ToolMessage("ignored", "call_1"), a("two")},
			[]wire{{"user", "first\n\nagain"}, {"assistant", "one\n\ntwo"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.model.Requests())
			msgs := append(slices.Clone(c.history), u("hi"))
			if _, err := ask2(e.openAIClient(aliceToken), t, msgs...); err != nil {
				t.Fatal(err)
			}
			reqs := e.model.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("%d model requests, want 1", len(reqs)-before)
			}
			sent := reqs[before].Messages
			if len(sent) < 2 || sent[0]["role"] != "system" || sent[len(sent)-1]["role"] != "user" || messageText(sent[len(sent)-1]) != "hi" {
				t.Fatalf("the model got %v, want the system prompt, the history, then the input", sent)
			}
			var got []wire
			chars := 0
			for _, m := range sent[1:] {
				got = append(got, wire{m["role"].(string), messageText(m)})
				chars += utf8.RuneCountInString(messageText(m))
			}
			got = got[:len(got)-1]
			if !slices.Equal(got, c.want) {
				if len(got) > 8 {
					t.Errorf("the model got %d messages of history, want %d", len(got), len(c.want))
				} else {
					t.Errorf("the model got the history %q, want %q", got, c.want)
				}
			}
			if chars > (window+1)*maxInput {
				t.Errorf("the model got %d characters of history and input, more than %d", chars, (window+1)*maxInput)
			}
		})
	}
}
