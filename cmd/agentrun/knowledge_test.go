package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// knowledge check says whether the FAQ cache would answer a question and, when
// not, which gate refused the closest entry.
func TestKnowledgeCheck(t *testing.T) {
	code, stdout, stderr := runCLI(t, "knowledge", "check", "--offline", shopSupport, "How do I cancel an order?")
	if code != 0 || !strings.HasPrefix(stdout, `intent faq: answered from the cache by faq entry help-center/faq.yaml:`) || !strings.Contains(stdout, "gates: passed") {
		t.Errorf("an FAQ question: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "knowledge", "check", "--offline", "--json", shopSupport, "when will I get my refund for order 20241108")
	var res struct {
		Answers bool   `json:"answers"`
		Refused string `json:"refused"`
		Closest struct {
			Question string `json:"question"`
			Verdict  struct {
				Gate  string   `json:"gate"`
				Words []string `json:"words"`
			} `json:"verdict"`
		} `json:"closest"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s%s", code, err, stdout, stderr)
	}
	if res.Answers || res.Closest.Verdict.Gate != "specifics" || len(res.Closest.Verdict.Words) != 1 || res.Closest.Verdict.Words[0] != "20241108" {
		t.Errorf("an order number the entry lacks: %+v", res)
	}
	if code, _, stderr := runCLI(t, "knowledge", "check", "--offline", "--intent", "other", shopSupport, "hi"); code != 1 || !strings.Contains(stderr, "intent other has no cache") {
		t.Errorf("an intent without a cache: exit %d, %s", code, stderr)
	}
}

// knowledge eval scores the shop's labelled set: the cache at its threshold, by
// language and along the curve, and retrieval beside BM25.
func TestKnowledgeEval(t *testing.T) {
	code, stdout, stderr := runCLI(t, "knowledge", "eval", "--offline", shopSupport, "../../examples/agents/help-center.eval.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"cache (intent faq, threshold 0.76): 236 questions, 125 answerable by an entry", "threshold curve", "  0.76  ",
		"retrieval: 78 questions", "  all    hybrid", "  all    bm25", "  zh     hybrid"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in\n%s", want, stdout)
		}
	}
}
