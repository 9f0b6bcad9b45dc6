package offline

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/runtime/model"
	"go.yaml.in/yaml/v3"
)

// Recorder keeps the answers of real models as a script: the agent's turns, the
// judge's verdicts and the classifier's choices, so a run can be replayed offline
// (`agentrun exec --record FILE`, then `--model script:FILE` or a test case). Only
// model output is kept — never a request, so no key or bound value can end up in it.
type Recorder struct {
	mu         sync.Mutex
	turns      []ScriptTurn
	judge      []map[string]any
	classifier []map[string]any
}

// Wrap returns m recording into r. The agent's model and the judge's and
// classifier's may all be wrapped by one recorder.
func (r *Recorder) Wrap(m model.Model) model.Model { return &recording{m: m, r: r} }

type recording struct {
	m model.Model
	r *Recorder
}

var _ model.OrderedModel = (*recording)(nil)

// Ordered: a recording keeps turns in the order the calls come, which a replay
// must repeat, so a workflow makes the calls of concurrent steps one at a time,
// in declaration order.
func (*recording) Ordered() bool { return true }

func (w *recording) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	resp, err := w.m.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	switch {
	case req.JSONSchema == nil:
		turn := ScriptTurn{Text: resp.Message.Content}
		for _, tc := range resp.Message.ToolCalls {
			// The arguments stay the model's exact text, so a replay sends the
			// very same bytes: the same signatures, the same trajectory.
			turn.ToolCalls = append(turn.ToolCalls, ScriptToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		if f := resp.FinishReason; f == model.FinishLength || f == model.FinishContentFilter {
			turn.FinishReason = string(f) // a replay stops the same way
		}
		w.r.turns = append(w.r.turns, turn)
	case req.JSONSchema.Name == model.SchemaVerdict || req.JSONSchema.Name == model.SchemaIntent:
		var v map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(resp.Message.Content)), &v) != nil {
			v = map[string]any{"unparsed": resp.Message.Content}
		}
		if req.JSONSchema.Name == model.SchemaVerdict {
			w.r.judge = append(w.r.judge, v)
		} else {
			w.r.classifier = append(w.r.classifier, v)
		}
	case req.JSONSchema.Name != model.SchemaFacts: // a workflow's model step: a turn, as Script plays it
		w.r.turns = append(w.r.turns, ScriptTurn{Text: resp.Message.Content})
	}
	return resp, nil
}

// Save writes the script file that LoadScript reads.
func (r *Recorder) Save(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	doc := struct {
		Turns      []ScriptTurn     `yaml:"turns"`
		Judge      []map[string]any `yaml:"judge,omitempty"`
		Classifier []map[string]any `yaml:"classifier,omitempty"`
	}{r.turns, r.judge, r.classifier}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	header := "# Recorded by agentrun exec --record: replay with --model script:" + path + "\n"
	return os.WriteFile(path, append([]byte(header), b...), 0o644)
}
