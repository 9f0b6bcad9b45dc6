package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The FAQ cache and retrieval against the OpenAI wire format: a hit sends no chat
// completion at all, a miss goes on to the model as usual, and retrieved passages
// reach it quoted and labelled in the one system message.
func TestKnowledgeOverTheWire(t *testing.T) {
	dir, _ := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help.yaml")
	f := newFakeOpenAI(t,
		reply{message: map[string]any{"content": "Gift cards bought elsewhere are refunded by that shop."}},
		reply{message: map[string]any{"content": "Returns are free within 7 days [S1]."}},
	)
	exec := func(question string) string {
		t.Helper()
		stdout, _ := mustRun(t, "exec", "-q", "--model", "openai:gpt-test", specPath, question)
		return strings.TrimSpace(stdout)
	}

	if got := exec("我想退货"); got != `在订单页点击"申请退货"，7 天内寄回即可。` || len(f.requests) != 0 || len(f.judgeRequests) != 0 {
		t.Fatalf("a hit answered %q with %d chat requests", got, len(f.requests)+len(f.judgeRequests))
	}

	// A miss asks the model; the intent learns the answer (shared, no judge), so
	// the same question next time is a hit again.
	if got := exec("can I get a refund for a gift card bought in another shop"); got != "Gift cards bought elsewhere are refunded by that shop." || len(f.requests) != 1 {
		t.Fatalf("a miss answered %q after %d requests", got, len(f.requests))
	}
	if got := exec("can I get a refund for a gift card bought in another shop"); got != "Gift cards bought elsewhere are refunded by that shop." || len(f.requests) != 1 {
		t.Fatalf("the learned answer: %q after %d requests", got, len(f.requests))
	}

	if got := exec("what is your return shipping policy"); got != "Returns are free within 7 days [S1]." || len(f.requests) != 2 {
		t.Fatalf("retrieval: %q after %d requests", got, len(f.requests))
	}
	msgs := f.messages(1)
	sys, _ := msgs[0]["content"].(string)
	if msgs[0]["role"] != "system" || !strings.Contains(sys, "## Reference material") || !strings.Contains(sys, "[S1] help-center/") {
		t.Fatalf("system message:\n%s", sys)
	}
	passages := sys[strings.Index(sys, "\n\n[S1]"):]
	for line := range strings.SplitSeq(strings.TrimSpace(passages), "\n") {
		if line != "" && !strings.HasPrefix(line, "> ") && !strings.HasPrefix(line, "[S") {
			t.Errorf("a passage line is neither quoted nor a label: %q", line)
		}
	}
	if n := strings.Count(sys, "\n[S"); n < 1 || n > 3 {
		t.Errorf("%d passages, top_k is 3", n)
	}
}
