package spec

import (
	"slices"
	"testing"
)

// KindOf tells files apart by their top-level keys, whatever their names.
func TestKindOf(t *testing.T) {
	tests := []struct {
		name, src string
		want      FileKind
	}{
		{"a spec", "version: 1\nname: x\n", KindAgent},
		{"a spec without version, for its loader to report", "name: x\ninstructions: Help.\n", KindAgent},
		{"broken YAML, for the spec loader to report", "version: [1\n", KindAgent},
		{"not a mapping", "- a\n- b\n", KindAgent},
		{"serve.yaml", "auth: {tokens: []}\nlimits: {burst: 2}\n", KindServe},
		{"serve.yaml with only addr", "addr: 127.0.0.1:9000\n", KindServe},
		{"a recording", "turns:\n  - text: hi\njudge:\n  - {passed: true}\n", KindScript},
		{"a scenario test", "agent: a.yaml\ncases: []\n", KindTest},
		{"an FAQ file", "faq:\n  - {question: q, answer: a}\n", KindFAQ},
		{"an FAQ file with a stray key", "title: Help\nfaq: []\n", KindFAQ},
		{"an eval file", "kind: eval\nversion: 1\ncases: []\n", KindEvalFile},
		{"an eval file of another kind, for its loader to report", "version: 1\nkind: evals\n", KindEvalFile},
		{"a knowledge evaluation set", "cache:\n  - {q: hi, faq: null}\n", KindEval},
		{"none of them", "title: Notes\n", KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := KindOf([]byte(tt.src)); got != tt.want {
				t.Errorf("KindOf = %q, want %q", got, tt.want)
			}
		})
	}
	if _, keys := KindOf([]byte("title: Notes\nbody: x\n")); !slices.Equal(keys, []string{"title", "body"}) {
		t.Errorf("keys %v", keys)
	}
}
