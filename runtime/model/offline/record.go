package offline

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
	"go.yaml.in/yaml/v3"
)

// Recorder keeps the answers of real models as a script: the agent's turns (with
// their reasoning, native blocks included, finish reasons, usage and structured
// answers), the judge's verdicts and the classifier's choices, so a run can be replayed offline
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
	case req.JSONSchema == nil || !isRuntimeSchema(req.JSONSchema.Name):
		// The agent's own call, or a structured answer it asked for (an output
		// schema, a workflow step's): a turn, as Script plays it.
		w.r.turns = append(w.r.turns, recordTurn(req, resp))
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
	}
	return resp, nil
}

// recordTurn keeps what a replay needs to give the same response: the text (as
// output when JSON was asked for and the value reads back to the same text), the
// tool calls' exact arguments, the reasoning with its native blocks, the finish
// reason when it is not the one a replay would derive, and the usage.
func recordTurn(req *model.Request, resp *model.Response) ScriptTurn {
	msg := resp.Message
	turn := ScriptTurn{Text: msg.Content}
	if req.JSONSchema != nil || req.JSONObject {
		if v, ok := spec.JSONAsValue(msg.Content); ok {
			turn.Text, turn.Output = "", v
		}
	}
	for _, tc := range msg.ToolCalls {
		// The arguments stay the model's exact text, so a replay sends the
		// very same bytes: the same signatures, the same trajectory.
		turn.ToolCalls = append(turn.ToolCalls, ScriptToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	if r := msg.Reasoning; r != nil {
		sr := &spec.ScriptReasoning{Text: r.Text, Field: r.Field, Provider: r.Provider}
		for _, b := range r.Blocks {
			sr.Blocks = append(sr.Blocks, spec.NewScriptBlock(b))
		}
		turn.Reasoning = sr
	}
	derived := model.FinishStop
	if len(msg.ToolCalls) > 0 {
		derived = model.FinishToolCalls
	}
	// A server's own word that scripts do not know is left out: a replay then
	// reports what the runtime took it for.
	if f := resp.FinishReason; f != derived {
		if _, known := spec.ScriptFinishReasons[string(f)]; known {
			turn.FinishReason = string(f)
		}
	}
	if u := resp.Usage; u.PromptTokens != 0 || u.CompletionTokens != 0 {
		turn.Usage = &spec.ScriptUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
			CachedPromptTokens: u.CachedPromptTokens, CacheWriteTokens: u.CacheWriteTokens}
	}
	return turn
}

// Save writes the script file that LoadScript reads.
func (r *Recorder) Save(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := yaml.Marshal(spec.ScriptFile{Turns: r.turns, Judge: r.judge, Classifier: r.classifier})
	if err != nil {
		return err
	}
	header := "# Recorded by agentrun exec --record: replay with --model script:" + path + "\n"
	return os.WriteFile(path, append([]byte(header), b...), 0o644)
}
