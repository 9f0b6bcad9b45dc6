package serve_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/agentrun/agentrun/internal/openaitest"
)

// withJudge gives testdata/support.yaml a judge.
func withJudge(spec string) string { return spec + "\njudge: {criteria: [The answer is right.]}\n" }

// judgedShopReply is shopReply with a judge that passes every draft.
func judgedShopReply(req openaitest.Request) openaitest.Reply {
	if req.Judge {
		return openaitest.Reply{Content: `{"passed": true, "missing": ""}`}
	}
	return shopReply(req)
}

// A streamed run's text reaches its stream as the model streams it, as text
// events before the run stops, and adds up to the answer. With a judge, which
// may still reject a draft, no text event is sent: the answer is in the result.
func TestRunStreamsText(t *testing.T) {
	for _, judged := range []bool{false, true} {
		o := envOptions{}
		if judged {
			o = envOptions{editSpec: withJudge, reply: judgedShopReply}
		}
		e := newEnv(t, o)
		resp := e.startStream(context.Background(), aliceToken, map[string]any{"input": ordersInput, "stream": true})
		events := newSSEReader(resp.Body).all(t)
		resp.Body.Close()
		var text strings.Builder
		stopped := false
		for _, ev := range events {
			switch ev.Event {
			case "text":
				if stopped {
					t.Errorf("text after the run stopped: %s", ev.Data)
				}
				var e struct{ Text string }
				jsonUnmarshal(t, ev.Data, &e)
				text.WriteString(e.Text)
			case "stop":
				stopped = true
			}
		}
		res := checkRunStream(t, events, 1)
		want := finalAnswer
		if judged {
			want = ""
		}
		if text.String() != want || res.Result.Answer != finalAnswer {
			t.Errorf("judged %v: streamed %q, answer %q", judged, text.String(), res.Result.Answer)
		}
	}
}

// A streamed chat completion carries the model's text as it streams; what the
// model said before calling a tool is a paragraph of its own.
func TestOpenAIStreamsTextWithParagraphs(t *testing.T) {
	e := newEnv(t, envOptions{reply: func(req openaitest.Request) openaitest.Reply {
		r := shopReply(req)
		if len(r.ToolCalls) > 0 {
			r.Content = "Let me look."
		}
		return r
	}})
	stream := e.openAIClient(aliceToken).Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "support", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ordersInput)},
	})
	var content strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "Let me look.\n\n" + finalAnswer; content.String() != want {
		t.Errorf("streamed %q, want %q", content.String(), want)
	}
}

func jsonUnmarshal(t *testing.T, data string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(data), v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}
