package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
	"go.yaml.in/yaml/v3"
)

// Script plays scripted model turns, one per model call, in order:
//
//	turns:
//	  - tool_calls:
//	      - {name: read_file, arguments: {path: main.go}}
//	      - {name: calculator, arguments: '{"expression": '}   # a string is sent as is
//	  - text: The file has 42 lines.
//
// A call beyond the last turn is an error, so a run that loops fails clearly instead
// of hanging. The judge's requests are answered from a list of their own, `judge:`
// (verdicts such as {passed: false, missing: …}); past its end, or without one, the
// judge passes. A Script is used by one run at a time. A workflow's model steps
// take the turns in declaration order, for_each items and parallel branches too
// (see Ordered).
type Script struct {
	name      string
	turns     []ScriptTurn
	verdicts  []map[string]any
	intents   []map[string]any
	mu        sync.Mutex
	next      int
	nextJudge int
	nextClass int
}

// ErrScriptExhausted is what a model call past a script's last turn fails with
// (wrapped, so errors.Is finds it); Script.Exhausted says the same afterwards.
var ErrScriptExhausted = errors.New("the script has no turn left")

// exhaustedError keeps the message that names the script and counts its calls,
// while errors.Is matches ErrScriptExhausted.
type exhaustedError struct {
	name         string
	calls, turns int
}

func (e *exhaustedError) Error() string {
	return fmt.Sprintf("script %s: the model was called %d times, but the script has only %d turns", e.name, e.calls, e.turns)
}

func (e *exhaustedError) Unwrap() error { return ErrScriptExhausted }

// ScriptTurn is one scripted model response (the format scenario tests use too).
type ScriptTurn = spec.ScriptTurn

// ScriptToolCall is a scripted tool call: Arguments is a mapping (sent as JSON) or a
// string (sent verbatim, e.g. to test malformed JSON).
type ScriptToolCall = spec.ScriptToolCall

var _ model.OrderedModel = (*Script)(nil)

// Ordered: a script's turns answer calls in the order they come, so a workflow
// makes the calls of concurrent steps one at a time, in declaration order.
func (*Script) Ordered() bool { return true }

// MaxScriptSize is the most LoadScript reads: more than specs get, because
// `exec --record` writes scripts and a long run's model output adds up.
const MaxScriptSize = 16 << 20

// LoadScript reads a script file: a regular file of at most MaxScriptSize.
func LoadScript(path string) (*Script, error) {
	src, err := spec.ReadFile(path, MaxScriptSize)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Turns      []ScriptTurn     `yaml:"turns"`
		Judge      []map[string]any `yaml:"judge"`
		Classifier []map[string]any `yaml:"classifier"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("script %s: %v", path, err)
	}
	if len(doc.Turns) == 0 {
		return nil, fmt.Errorf("script %s: no turns", path)
	}
	s := NewScript(path, doc.Turns)
	s.verdicts, s.intents = doc.Judge, doc.Classifier
	return s, nil
}

// Unused counts the scripted turns no model call has taken yet.
func (s *Script) Unused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, len(s.turns)-s.next)
}

// Exhausted reports whether a model call found no scripted turn left: the run went
// on longer than the script foresaw.
func (s *Script) Exhausted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next > len(s.turns)
}

// WithClassifier sets the classifier's scripted answers.
func (s *Script) WithClassifier(v ...map[string]any) *Script {
	s.intents = v
	return s
}

// WithVerdicts sets the judge's scripted verdicts.
func (s *Script) WithVerdicts(v ...map[string]any) *Script {
	s.verdicts = v
	return s
}

// NewScript makes a script from turns; name appears in its errors.
func NewScript(name string, turns []ScriptTurn) *Script {
	return &Script{name: name, turns: turns}
}

func (s *Script) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The agent's own structured answer comes with its tools: a whole turn plays it.
	if req.JSONSchema != nil && req.JSONSchema.Name != model.SchemaAnswer {
		return s.structured(req)
	}
	s.mu.Lock()
	i := s.next
	s.next++
	s.mu.Unlock()
	if i >= len(s.turns) {
		return nil, &exhaustedError{name: s.name, calls: i + 1, turns: len(s.turns)}
	}
	turn := s.turns[i]
	msg := model.Message{Role: model.RoleAssistant, Content: turn.Text}
	for j, tc := range turn.ToolCalls {
		args, err := scriptArguments(tc.Arguments)
		if err != nil {
			return nil, fmt.Errorf("script %s: turn %d, call %d: %v", s.name, i+1, j+1, err)
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", i+1, j+1)
		}
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: id, Name: tc.Name, Arguments: args})
	}
	if req.OnDelta != nil && msg.Content != "" {
		req.OnDelta(msg.Content)
	}
	resp := respond(msg, req)
	if turn.FinishReason != "" {
		resp.FinishReason = model.FinishReason(turn.FinishReason)
	}
	return resp, nil
}

func scriptArguments(v any) (string, error) {
	switch a := v.(type) {
	case nil:
		return "{}", nil
	case string:
		return a, nil
	default:
		b, err := json.Marshal(a)
		return string(b), err
	}
}

// structured answers a request for JSON: the next scripted verdict for the judge or
// intent for the classifier (past their lists the judge passes and the classifier
// answers like the test model), facts generated from their schema, and any other
// request (a workflow's model step) from the next scripted turn.
func (s *Script) structured(req *model.Request) (*model.Response, error) {
	v := offlineStructured(req.JSONSchema)
	s.mu.Lock()
	switch req.JSONSchema.Name {
	case model.SchemaVerdict:
		if s.nextJudge < len(s.verdicts) {
			v = s.verdicts[s.nextJudge]
		}
		s.nextJudge++
	case model.SchemaIntent:
		if s.nextClass < len(s.intents) {
			v = s.intents[s.nextClass]
		}
		s.nextClass++
	case model.SchemaFacts:
	default:
		// Any other schema is the agent's own call (a workflow's model step): the
		// next turn answers it, its text being the JSON, as a real model's would be.
		i := s.next
		s.next++
		s.mu.Unlock()
		if i >= len(s.turns) {
			return nil, &exhaustedError{name: s.name, calls: i + 1, turns: len(s.turns)}
		}
		return respond(model.Message{Role: model.RoleAssistant, Content: s.turns[i].Text}, req), nil
	}
	s.mu.Unlock()
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("script %s: %v", s.name, err)
	}
	return respond(model.Message{Role: model.RoleAssistant, Content: string(b)}, req), nil
}
