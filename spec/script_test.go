package spec

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/internal/fixture"
	"github.com/agentrun/agentrun/schema"
)

// The model turns of a test file are checked as a script file's are, at their
// lines in the test file.
func TestTestFileModelTurns(t *testing.T) {
	const file = "testdata/testfiles/model_turns.test.yaml"
	tf, diags := newTestLoader(t).LoadTestFile(file)
	if tf == nil {
		t.Fatal(diags)
	}
	var got []fixture.Diagnostic
	for _, d := range diags {
		got = append(got, fixture.Diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Summary: d.Summary(), Hint: d.Hint})
	}
	src, _ := ReadFile(file, MaxFileSize)
	fixture.Compare(t, fixture.Expected(string(src)), got)
	last := tf.Cases[1].Turns[0].Model[1]
	if last.FinishReason != "refusal" || last.Reasoning == nil || len(last.Reasoning.Blocks) != 1 ||
		string(last.Reasoning.Blocks[0].JSON) != `{"type":"redacted_thinking","data":"abc"}` {
		t.Errorf("decoded turn %+v", last)
	}
}

// The schema's finish reasons are the ones the code maps, and the reasoning
// providers the ones it knows: editors and validate allow what the runtime plays.
func TestScriptSchemaVocabulary(t *testing.T) {
	var doc struct {
		Definitions struct {
			Script struct {
				Items struct {
					Properties struct {
						FinishReason struct {
							Enum []string `json:"enum"`
						} `json:"finish_reason"`
						Reasoning struct {
							OneOf []struct {
								Properties struct {
									Provider struct {
										Enum []string `json:"enum"`
									} `json:"provider"`
								} `json:"properties"`
							} `json:"oneOf"`
						} `json:"reasoning"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"script"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(schema.TestJSON, &doc); err != nil {
		t.Fatal(err)
	}
	props := doc.Definitions.Script.Items.Properties
	if got := slices.Sorted(slices.Values(props.FinishReason.Enum)); !slices.Equal(got, ScriptFinishReasonNames()) {
		t.Errorf("schema finish reasons %v, code %v", got, ScriptFinishReasonNames())
	}
	if len(props.Reasoning.OneOf) != 2 || !slices.Equal(props.Reasoning.OneOf[1].Properties.Provider.Enum, ReasoningProviders) {
		t.Errorf("schema reasoning providers %+v, code %v", props.Reasoning.OneOf, ReasoningProviders)
	}
	for name, ours := range ScriptFinishReasons {
		if ScriptFinishReasons[ours] != ours {
			t.Errorf("%s maps to %s, which is not one of the runtime's own", name, ours)
		}
	}
}
