package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
)

// A response's id names its run and, when stored, its conversation; parsing
// gives them back, and refuses anything else.
func TestResponseIDs(t *testing.T) {
	rec := newRunRecord(newID("run_"), "support", "alice", "conv_0123", func() {})
	for _, stored := range []bool{true, false} {
		run, conv, ok := parseResponseID(responseID(rec, stored))
		if want := map[bool]string{true: "conv_0123"}[stored]; !ok || run != rec.ID || conv != want {
			t.Errorf("stored %v: %q %q %v, want %q %q", stored, run, conv, ok, rec.ID, want)
		}
	}
	for _, id := range []string{"", "resp_", "run_0123456789abcdef01234567", "resp_0123456789abcdef0123456",
		"resp_0123456789ABCDEF01234567", "resp_0123456789abcdef01234567x", "resp_0123456789abcdef01234567_",
		"resp_0123456789abcdef01234567_a/b"} {
		if _, _, ok := parseResponseID(id); ok {
			t.Errorf("%q parsed", id)
		}
	}
}

// An answer cut off at the model's token limit or filtered by the provider is
// an incomplete response saying why, as OpenAI's; a guard's fallback message is
// a completed one; a fault is a failed one, with only what was streamed.
func TestResponseStatuses(t *testing.T) {
	for _, c := range []struct {
		stop           runtime.StopReason
		status, reason string
	}{
		{runtime.StopTruncated, "incomplete", "max_output_tokens"},
		{runtime.StopContentFilter, "incomplete", "content_filter"},
		{runtime.StopJudgeRejected, "completed", ""},
		{runtime.StopCompleted, "completed", ""},
		{runtime.StopModelError, "failed", ""},
	} {
		rec := newRunRecord(newID("run_"), "support", "alice", "c", func() {})
		rec.finish(&runtime.Result{Stop: c.stop, Answer: "the answer"}, nil)
		v := rec.snapshot()
		out := responseObject(rec, responsesRequest{}, v, responseText(rec, v))
		if out["status"] != c.status {
			t.Errorf("%s: status %v, want %s", c.stop, out["status"], c.status)
		}
		details, _ := out["incomplete_details"].(map[string]any)
		if c.reason != "" && (details == nil || details["reason"] != c.reason) || c.reason == "" && details != nil {
			t.Errorf("%s: incomplete_details %v, want the reason %q", c.stop, out["incomplete_details"], c.reason)
		}
		output, _ := out["output"].([]any)
		switch {
		case c.status == "failed":
			if len(output) != 0 || out["error"] == nil {
				t.Errorf("%s: output %v error %v, want no output and an error", c.stop, output, out["error"])
			}
		case len(output) != 1:
			t.Errorf("%s: output %v", c.stop, output)
		default:
			item := output[0].(map[string]any)
			want := map[bool]string{true: "completed", false: "incomplete"}[c.status == "completed"]
			if item["status"] != want || item["content"].([]any)[0].(map[string]any)["text"] != "the answer" {
				t.Errorf("%s: message %v, want status %s", c.stop, item, want)
			}
		}
	}
}

// A kept request holds the id of its conversation, not whatever else the
// client's {"id": …} carried: kept requests stay small however large a body is.
func TestKeptResponseHoldsOnlyTheConversationID(t *testing.T) {
	var b responseBodies
	body := responsesRequest{Model: "support", Input: json.RawMessage(`"hi"`),
		Conversation: json.RawMessage(`{"id": "c-1", "pad": "` + strings.Repeat("x", 1<<20) + `"}`)}
	b.keep(newRunRegistry(), "run_1", body)
	kept, ok := b.get("run_1")
	if !ok || string(kept.Conversation) != `"c-1"` || kept.Input != nil {
		t.Errorf("kept conversation %.80s, input %s", kept.Conversation, kept.Input)
	}
}
