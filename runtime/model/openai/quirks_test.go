package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/heaptest"
	"github.com/agentrun/agentrun/runtime/model"

	"github.com/agentrun/agentrun/spec"
)

// What real OpenAI-compatible servers send beyond the protocol: calls without id or
// index, reasoning fields, provider fields on tool calls, odd finish reasons, and
// bodies that never end.

var madeUpID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// checkCalls compares tool calls with want, where an empty wanted id stands for a
// made-up one; every id of the response must be distinct.
func checkCalls(t *testing.T, got, want []model.ToolCall) {
	t.Helper()
	seen := map[string]bool{}
	for i, c := range got {
		if seen[c.ID] {
			t.Errorf("call %d repeats the id %q", i, c.ID)
		}
		seen[c.ID] = true
		if i < len(want) && want[i].ID == "" {
			if !madeUpID.MatchString(c.ID) {
				t.Errorf("call %d: made-up id %q", i, c.ID)
			}
			want[i].ID = c.ID
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tool calls:\n got %+v\nwant %+v", got, want)
	}
}

func TestStreamedCallAssembly(t *testing.T) {
	weather := func(city string) string { return `{"city":"` + city + `"}` }
	tests := []struct {
		name   string
		deltas []string // tool_calls deltas, one chunk each
		want   []model.ToolCall
	}{
		{
			name: "neither id nor index, different names, arguments split",
			deltas: []string{
				`[{"type":"function","function":{"name":"get_weather","arguments":""}}]`,
				`[{"function":{"arguments":"{\"city\":"}}]`,
				`[{"function":{"arguments":"\"Oslo\"}"}}]`,
				`[{"function":{"name":"get_time","arguments":""}}]`,
				`[{"function":{"arguments":"{\"zone\":\"CET\"}"}}]`,
			},
			want: []model.ToolCall{
				{Name: "get_weather", Arguments: weather("Oslo")},
				{Name: "get_time", Arguments: `{"zone":"CET"}`},
			},
		},
		{
			name: "neither id nor index, the name repeated in every chunk of one call",
			deltas: []string{
				`[{"function":{"name":"get_weather","arguments":"{\"city\":"}}]`,
				`[{"function":{"name":"get_weather","arguments":"\"Oslo\"}"}}]`,
				`[{"function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]`,
			},
			want: []model.ToolCall{
				{Name: "get_weather", Arguments: weather("Oslo")},
				{Name: "get_weather", Arguments: weather("Rome")},
			},
		},
		{
			name: "neither id nor index, the same name twice",
			deltas: []string{
				`[{"function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]`,
				`[{"function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]`,
			},
			want: []model.ToolCall{
				{Name: "get_weather", Arguments: weather("Oslo")},
				{Name: "get_weather", Arguments: weather("Rome")},
			},
		},
		{
			name: "neither id nor index, two calls in one delta",
			deltas: []string{
				`[{"function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},{"function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]`,
			},
			want: []model.ToolCall{
				{Name: "get_weather", Arguments: weather("Oslo")},
				{Name: "get_weather", Arguments: weather("Rome")},
			},
		},
		{
			name: "index only, interleaved",
			deltas: []string{
				`[{"index":0,"function":{"name":"get_weather","arguments":"{\"city\":"}}]`,
				`[{"index":1,"function":{"name":"get_weather","arguments":"{\"city\":"}}]`,
				`[{"index":1,"function":{"arguments":"\"Rome\"}"}}]`,
				`[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]`,
			},
			want: []model.ToolCall{
				{Name: "get_weather", Arguments: weather("Oslo")},
				{Name: "get_weather", Arguments: weather("Rome")},
			},
		},
		{
			name: "ids only, interleaved",
			deltas: []string{
				`[{"id":"a","function":{"name":"get_weather","arguments":"{\"city\":"}}]`,
				`[{"id":"b","function":{"name":"get_weather","arguments":"{\"city\":"}}]`,
				`[{"id":"a","function":{"arguments":"\"Oslo\"}"}}]`,
				`[{"id":"b","function":{"arguments":"\"Rome\"}"}}]`,
			},
			want: []model.ToolCall{
				{ID: "a", Name: "get_weather", Arguments: weather("Oslo")},
				{ID: "b", Name: "get_weather", Arguments: weather("Rome")},
			},
		},
		{
			name: "whole calls all at index 0, each with its id",
			deltas: []string{
				`[{"index":0,"id":"a","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]`,
				`[{"index":0,"id":"b","function":{"name":"get_time","arguments":"{}"}}]`,
			},
			want: []model.ToolCall{
				{ID: "a", Name: "get_weather", Arguments: weather("Oslo")},
				{ID: "b", Name: "get_time", Arguments: `{}`},
			},
		},
		{
			name: "an id first, then neither: the arguments continue that call",
			deltas: []string{
				`[{"id":"a","type":"function","function":{"name":"get_weather"}}]`,
				`[{"function":{"arguments":"{\"city\":"}}]`,
				`[{"function":{"arguments":"\"Oslo\"}"}}]`,
			},
			want: []model.ToolCall{{ID: "a", Name: "get_weather", Arguments: weather("Oslo")}},
		},
		{
			name: "index null is no index",
			deltas: []string{
				`[{"index":null,"function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]`,
				`[{"index":null,"function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]`,
			},
			want: []model.ToolCall{
				{Name: "get_weather", Arguments: weather("Oslo")},
				{Name: "get_weather", Arguments: weather("Rome")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := []string{chunk(`{"role":"assistant","content":null}`, "")}
			for _, d := range tt.deltas {
				events = append(events, chunk(`{"tool_calls":`+d+`}`, ""))
			}
			s := newServer(t, sse(append(events, chunk(`{}`, "tool_calls"), usageChunk, "[DONE]")...))
			req := userAsks("q")
			req.OnDelta = func(string) {}
			resp, err := newModel(t, s).Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			checkCalls(t, resp.Message.ToolCalls, tt.want)
		})
	}
}

// Ids made up for calls without one never repeat, whichever round asks.
func TestMadeUpIDsAreUnique(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			h := completion("tool_calls", `{"role":"assistant","tool_calls":[
				{"function":{"name":"now","arguments":"{}"}},{"function":{"name":"now","arguments":"{}"}}]}`)
			if stream {
				h = sse(chunk(`{"tool_calls":[{"function":{"name":"now","arguments":"{}"}}]}`, ""),
					chunk(`{"tool_calls":[{"function":{"name":"now","arguments":"{}"}}]}`, "tool_calls"), "[DONE]")
			}
			m := newModel(t, newServer(t, h))
			seen := map[string]bool{}
			for round := range 20 {
				req := userAsks("q")
				if stream {
					req.OnDelta = func(string) {}
				}
				resp, err := m.Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Message.ToolCalls) != 2 {
					t.Fatalf("round %d: %+v", round, resp.Message.ToolCalls)
				}
				for _, c := range resp.Message.ToolCalls {
					if !madeUpID.MatchString(c.ID) || seen[c.ID] {
						t.Fatalf("round %d: id %q (seen before: %v)", round, c.ID, seen[c.ID])
					}
					seen[c.ID] = true
				}
			}
		})
	}
}

func TestReasoning(t *testing.T) {
	tests := []struct {
		name    string
		message string   // non-streamed
		deltas  []string // streamed, one chunk each
		want    model.Message
	}{
		{
			name:    "reasoning_content (DeepSeek)",
			message: `{"role":"assistant","content":"42.","reasoning_content":"6 times 7 is 42."}`,
			deltas:  []string{`{"role":"assistant","content":null,"reasoning_content":"6 times "}`, `{"reasoning_content":"7 is 42."}`, `{"content":"42.","reasoning_content":null}`},
			want:    model.Message{Role: model.RoleAssistant, Content: "42.", Reasoning: &model.Reasoning{Field: "reasoning_content", Text: "6 times 7 is 42."}},
		},
		{
			name:    "reasoning (vLLM, OpenRouter)",
			message: `{"role":"assistant","content":"42.","reasoning":"6 times 7 is 42."}`,
			deltas:  []string{`{"role":"assistant","reasoning":"6 times "}`, `{"reasoning":"7 is 42."}`, `{"content":"42."}`},
			want:    model.Message{Role: model.RoleAssistant, Content: "42.", Reasoning: &model.Reasoning{Field: "reasoning", Text: "6 times 7 is 42."}},
		},
		{
			name:    "both: reasoning_content is kept",
			message: `{"role":"assistant","content":"42.","reasoning":"r","reasoning_content":"rc"}`,
			deltas:  []string{`{"reasoning":"r","reasoning_content":"rc"}`, `{"content":"42."}`},
			want:    model.Message{Role: model.RoleAssistant, Content: "42.", Reasoning: &model.Reasoning{Field: "reasoning_content", Text: "rc"}},
		},
		{
			name: "unknown, null and non-text fields are tolerated",
			message: `{"role":"assistant","content":"ok","reasoning":null,"reasoning_content":"",
				"reasoning_details":[{"type":"reasoning.text","text":"x"}],"provider_specific_fields":{"a":[1,2]},
				"annotations":[],"audio":null,"function_call":null,"tool_calls":[]}`,
			deltas: []string{`{"role":"assistant","content":"o","reasoning":{"effort":"low"},"reasoning_details":[],"x_extra":1}`,
				`{"content":"k","reasoning_content":null}`},
			want: model.Message{Role: model.RoleAssistant, Content: "ok"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Run("non-streamed", func(t *testing.T) {
				s := newServer(t, completion("stop", tt.message))
				resp, err := newModel(t, s).Complete(context.Background(), userAsks("q"))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(resp.Message, tt.want) {
					t.Errorf("message:\n got %+v\nwant %+v", resp.Message, tt.want)
				}
			})
			t.Run("streamed", func(t *testing.T) {
				var events []string
				for _, d := range tt.deltas {
					events = append(events, chunk(d, ""))
				}
				s := newServer(t, sse(append(events, chunk(`{}`, "stop"), "[DONE]")...))
				req := userAsks("q")
				var text strings.Builder
				req.OnDelta = func(d string) { text.WriteString(d) }
				resp, err := newModel(t, s).Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(resp.Message, tt.want) {
					t.Errorf("message:\n got %+v\nwant %+v", resp.Message, tt.want)
				}
				if text.String() != tt.want.Content {
					t.Errorf("streamed text %q: reasoning is never answer text", text.String())
				}
			})
		})
	}
}

// The reasoning of a message that made tool calls and each call's provider fields
// go back in the next request as the server sent them, streamed or not.
func TestProviderFieldsGoBack(t *testing.T) {
	const signature = `{"google":{"thought_signature":"CiQBVKhc7k+/Zx0=="}}`
	const reasoning = "The user wants Oslo's weather; \"get_weather\" gives it."
	reasoningJSON, _ := json.Marshal(reasoning)
	nonStreamed := completion("tool_calls", `{"role":"assistant","content":null,"reasoning_content":`+string(reasoningJSON)+`,
		"tool_calls":[{"id":"call_g1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},"extra_content":`+signature+`},
		{"id":"call_g2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}`)
	streamed := sse(
		chunk(`{"role":"assistant","reasoning_content":`+string(reasoningJSON[:10])+`"}`, ""),
		chunk(`{"reasoning_content":"`+string(reasoningJSON[10:])+`}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_g1","type":"function","function":{"name":"get_weather","arguments":""},"extra_content":`+signature+`}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Oslo\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_g2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"), "[DONE]")
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		answer  http.HandlerFunc
	}{
		{"non-streamed", nonStreamed, completion("stop", `{"role":"assistant","content":"Sunny."}`)},
		{"streamed", streamed, sse(chunk(`{"content":"Sunny."}`, "stop"), "[DONE]")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.handler, tt.answer)
			m := newModel(t, s)
			req := userAsks("Weather in Oslo and Rome?")
			if tt.name == "streamed" {
				req.OnDelta = func(string) {}
			}
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			msg := resp.Message
			if msg.Reasoning == nil || !reflect.DeepEqual(*msg.Reasoning, model.Reasoning{Field: "reasoning_content", Text: reasoning}) || msg.Content != "" {
				t.Fatalf("reasoning %+v, content %q", msg.Reasoning, msg.Content)
			}
			checkCalls(t, msg.ToolCalls, []model.ToolCall{
				{ID: "call_g1", Name: "get_weather", Arguments: `{"city":"Oslo"}`, Extra: map[string]json.RawMessage{"extra_content": json.RawMessage(signature)}},
				{ID: "call_g2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			})

			req.Messages = append(req.Messages, msg,
				model.Message{Role: model.RoleTool, ToolCallID: "call_g1", Content: "sunny"},
				model.Message{Role: model.RoleTool, ToolCallID: "call_g2", Content: "rain"})
			if _, err := m.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			raw := s.request(t, 1).body
			// Byte for byte: what the server sent is in the body as it was.
			for _, want := range []string{`"extra_content":` + signature, `"reasoning_content":` + string(reasoningJSON)} {
				if !bytes.Contains(raw, []byte(want)) {
					t.Errorf("the request body lacks %s:\n%s", want, raw)
				}
			}
			jsonEqual(t, "assistant message", s.body(t, 1)["messages"].([]any)[2], `{"role":"assistant",
				"reasoning_content":`+string(reasoningJSON)+`,
				"tool_calls":[
				{"id":"call_g1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},"extra_content":`+signature+`},
				{"id":"call_g2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}`)
		})
	}
}

// What goes back is what a provider sent: a stored message cannot smuggle a
// standard field in through Reasoning or Extra.
func TestAssistantMessageFields(t *testing.T) {
	s := newServer(t, completion("stop", `{"role":"assistant","content":"ok"}`))
	req := userAsks("q")
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Content: "Hi.", Reasoning: &model.Reasoning{Field: "reasoning", Text: "greet"}},
		model.Message{Role: model.RoleAssistant, Reasoning: &model.Reasoning{Field: "content", Text: "not content"},
			ToolCalls: []model.ToolCall{{ID: "call_1", Name: "now", Arguments: "{}", Extra: map[string]json.RawMessage{
				"id": json.RawMessage(`"call_forged"`), "function": json.RawMessage(`{}`), "bad": json.RawMessage(`{`), "vendor": json.RawMessage(`[1]`)}}}},
		model.Message{Role: model.RoleTool, ToolCallID: "call_1", Content: "noon"})
	if _, err := newModel(t, s).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	msgs := s.body(t, 0)["messages"].([]any)
	jsonEqual(t, "answer with reasoning", msgs[2], `{"role":"assistant","content":"Hi.","reasoning":"greet"}`)
	jsonEqual(t, "tool calls", msgs[3], `{"role":"assistant","tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"},"vendor":[1]}]}`)
}

func TestFinishReasons(t *testing.T) {
	for _, tt := range []struct {
		finish  string
		content string
	}{
		{"length", "The first half of a long ans"},
		{"content_filter", ""},
		{"content_filter", "Partly written"},
		{"eos", "A server's own reason."},
	} {
		t.Run(tt.finish+"/"+tt.content, func(t *testing.T) {
			content, _ := json.Marshal(tt.content)
			t.Run("non-streamed", func(t *testing.T) {
				s := newServer(t, completion(tt.finish, `{"role":"assistant","content":`+string(content)+`}`))
				resp, err := newModel(t, s).Complete(context.Background(), userAsks("q"))
				if err != nil {
					t.Fatal(err)
				}
				if string(resp.FinishReason) != tt.finish || resp.Message.Content != tt.content {
					t.Errorf("finish %q, content %q", resp.FinishReason, resp.Message.Content)
				}
			})
			t.Run("streamed", func(t *testing.T) {
				s := newServer(t, sse(chunk(`{"content":`+string(content)+`}`, ""), chunk(`{}`, tt.finish), "[DONE]"))
				req := userAsks("q")
				req.OnDelta = func(string) {}
				resp, err := newModel(t, s).Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if string(resp.FinishReason) != tt.finish || resp.Message.Content != tt.content {
					t.Errorf("finish %q, content %q", resp.FinishReason, resp.Message.Content)
				}
			})
		})
	}
}

// offer serves prefix, then block after block until size bytes are out or the
// client goes away, then suffix: a huge body the test never holds in memory.
func offer(contentType, prefix string, block []byte, size int64, suffix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if _, err := io.WriteString(w, prefix); err != nil {
			return
		}
		for sent := int64(0); sent < size; sent += int64(len(block)) {
			if _, err := w.Write(block); err != nil || r.Context().Err() != nil {
				return
			}
		}
		io.WriteString(w, suffix)
	}
}

// A server offering a gigabyte is cut off at MaxResponseBytes with a clear error,
// and the call's memory stays bounded.
func TestResponseCap(t *testing.T) {
	const gigabyte = 1 << 30
	content := bytes.Repeat([]byte("a"), 64<<10)
	event := []byte("data: " + chunk(`{"content":"`+string(content)+`"}`, "") + "\n\n")
	tests := []struct {
		name    string
		handler http.HandlerFunc
		stream  bool
	}{
		{"streamed, endless chunks", offer("text/event-stream", "", event, gigabyte, ""), true},
		{"streamed, one endless line", offer("text/event-stream", `data: {"choices":[{"index":0,"delta":{"content":"`, content, gigabyte, `"}}]}`+"\n\n"), true},
		{"non-streamed, an endless answer", offer("application/json",
			`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`,
			content, gigabyte, `"}}]}`), false},
		{"an endless error body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			offer("application/json", `{"error":{"message":"`, content, gigabyte, `"}}`)(w, r)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.handler)
			m := newModel(t, s)
			req := userAsks("q")
			if tt.stream {
				req.OnDelta = func(string) {}
			}
			var err error
			start := time.Now()
			peak := heaptest.PeakHeap(func() { _, err = m.Complete(context.Background(), req) })
			if err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
				t.Fatalf("error %v", err)
			}
			modelError(t, err)
			if peak > 200<<20 {
				t.Errorf("heap grew to %d MiB", peak>>20)
			}
			t.Logf("peak heap %d MiB, %s", peak>>20, time.Since(start).Round(time.Millisecond))
		})
	}
}

// A thousand calls in one response are well within the cap, streamed or not.
func TestThousandCalls(t *testing.T) {
	const n = 1000
	var whole, indexed, bare []string
	for i := range n {
		args := fmt.Sprintf(`{\"city\":\"c%d\"}`, i)
		whole = append(whole, fmt.Sprintf(`{"id":"call_%d","type":"function","function":{"name":"get_weather","arguments":"%s"}}`, i, args))
		indexed = append(indexed, chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"get_weather","arguments":""}}]}`, i, i), ""),
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":"%s"}}]}`, i, args), ""))
		bare = append(bare, chunk(fmt.Sprintf(`{"tool_calls":[{"function":{"name":"get_weather","arguments":"%s"}}]}`, args), ""))
	}
	end := []string{chunk(`{}`, "tool_calls"), "[DONE]"}
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		stream  bool
	}{
		{"non-streamed", completion("tool_calls", `{"role":"assistant","tool_calls":[`+strings.Join(whole, ",")+`]}`), false},
		{"streamed with index and id", sse(append(indexed, end...)...), true},
		{"streamed with neither", sse(append(bare, end...)...), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := userAsks("q")
			if tt.stream {
				req.OnDelta = func(string) {}
			}
			resp, err := newModel(t, newServer(t, tt.handler)).Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			calls := resp.Message.ToolCalls
			if len(calls) != n {
				t.Fatalf("%d calls", len(calls))
			}
			ids := map[string]bool{}
			for i, c := range calls {
				if want := fmt.Sprintf(`{"city":"c%d"}`, i); c.Arguments != want || c.Name != "get_weather" {
					t.Fatalf("call %d: %+v", i, c)
				}
				ids[c.ID] = true
			}
			if len(ids) != n {
				t.Errorf("%d distinct ids", len(ids))
			}
		})
	}
}

// A stream that never ends, fast or slow, ends at model.timeout.
func TestEndlessStreams(t *testing.T) {
	endless := func(gap time.Duration) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for {
				if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk(`{"content":"more "}`, "")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(gap):
				}
			}
		}
	}
	for _, tt := range []struct {
		name string
		gap  time.Duration
	}{{"a chunk every 20ms", 20 * time.Millisecond}, {"chunks without a pause", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, endless(tt.gap))
			m := newModel(t, s, func(sm *spec.Model) { sm.Timeout = spec.Duration{Duration: 300 * time.Millisecond} })
			req := userAsks("q")
			req.OnDelta = func(string) {}
			start := time.Now()
			_, err := m.Complete(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") && !strings.Contains(err.Error(), "larger than 16 MiB") {
				t.Fatalf("error %v", err)
			}
			modelError(t, err)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
			if s.count() != 1 {
				t.Errorf("%d requests: a stream that ran out of time is not retried", s.count())
			}
		})
	}
}
