package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// structured is a JSON schema an answer must match, compiled once at load: an
// agent's or intent's output, or a workflow model step's schema. The agent loop
// and workflow steps check drafts and word corrections through it alone, so the
// two cannot drift.
type structured struct {
	name    string         // the name the model request gives the schema
	decl    map[string]any // the schema as written (JSON values), sent to the model
	schema  *jsonschema.Schema
	retries int // invalid drafts sent back before giving up
}

// compileStructured compiles decl under url with the agent's schema compiler.
func compileStructured(compiler *jsonschema.Compiler, url, name string, decl map[string]any, retries int) (*structured, error) {
	norm, err := normalizeJSON(decl)
	if err != nil {
		return nil, err
	}
	if err := compiler.AddResource(url, norm); err != nil {
		return nil, err
	}
	schema, err := compiler.Compile(url)
	if err != nil {
		return nil, err
	}
	return &structured{name: name, decl: norm, schema: schema, retries: retries}, nil
}

// format is what a model request carries to ask for the schema natively.
func (s *structured) format() *model.JSONSchemaFormat {
	return &model.JSONSchemaFormat{Name: s.name, Schema: s.decl}
}

// checked is a draft read against a schema: the value and its compact JSON when
// it validates, otherwise the problems, one per line, each at its JSON pointer.
type checked struct {
	value    any
	json     string
	problems []string
}

func (c checked) valid() bool { return c.problems == nil }

// check reads a model's draft — JSON, in a ```json fence or not — and validates it.
func (s *structured) check(text string) checked {
	content := strings.TrimSpace(text)
	content = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(content, "```json"), "```"), "```"))
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return checked{problems: []string{"at /: the answer is not one JSON value: " + preview(text)}}
	}
	if err := s.schema.Validate(v); err != nil {
		return checked{problems: schemaProblemList(err)}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return checked{problems: []string{"at /: " + err.Error()}}
	}
	return checked{value: v, json: strings.TrimSpace(b.String())}
}

// correction is the user message that sends an invalid draft back: what is wrong,
// where, and what to do.
func (s *structured) correction(c checked) string {
	return OutputFeedbackPrefix + " Your answer was not accepted and the user has not seen it: it must be one JSON value valid against the schema " +
		s.name + ". These are the problems:\n- " + strings.Join(c.problems, "\n- ") +
		"\nAnswer again with the corrected JSON value only."
}

// OutputFeedbackPrefix starts the message that sends a draft failing the output
// schema back to the model; like the judge's feedback it is never stored.
const OutputFeedbackPrefix = "[output]"

// schemaProblemList lists a validation error's leaves as "at /pointer: problem".
func schemaProblemList(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"at /: " + err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, fmt.Sprintf("at %s: %s", pointer(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// pointer is an RFC 6901 JSON pointer to a location.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// compileOutputs compiles the agent's output and each intent's: an intent's
// output, when it has one, is what its runs answer with instead of the agent's.
func (c *compilation) compileOutputs() {
	s := c.s
	compile := func(o *spec.Output, url string) *structured {
		if o == nil || o.Schema == nil {
			return nil
		}
		retries := spec.DefaultOutputRetries
		if o.Retries != nil {
			retries = *o.Retries
		}
		st, err := compileStructured(c.schemas, url, model.SchemaAnswer, o.Schema, retries)
		if err != nil {
			c.report(o.Source, "schema: %v", err)
		}
		return st
	}
	if s.Workflow == nil {
		c.a.output = compile(s.Output, "mem://output/agent.json")
	}
	for _, in := range s.Intents {
		if st := compile(in.Output, "mem://output/intent/"+in.Name+".json"); st != nil {
			if c.a.intentOutputs == nil {
				c.a.intentOutputs = map[string]*structured{}
			}
			c.a.intentOutputs[in.Name] = st
		}
	}
}

// output is the structured answer the run must give: its intent's, else the
// agent's; nil for a free-text answer.
func (r *run) output() *structured {
	if r.intent != nil {
		if st := r.agent.intentOutputs[r.intent.name]; st != nil {
			return st
		}
	}
	return r.agent.output
}

// checkOutput validates a draft against the run's output schema. A valid draft
// becomes its compact JSON (what the judge, the filters and the user see); an
// invalid one goes back to the model, with itself as the assistant's message and
// the problems as the user's, neither ever stored, until the retries are spent and
// the run stops with output_invalid. It reports whether the draft goes on.
func (r *run) checkOutput(draft *model.Message) bool {
	st := r.output()
	if st == nil {
		return true
	}
	c := st.check(draft.Content)
	if c.valid() {
		draft.Content = c.json
		return true
	}
	r.emit(Event{Kind: EventGuard, Guard: GuardOutputInvalid, Message: strings.Join(c.problems, "; ")})
	r.outputState.rejections++
	if r.outputState.rejections > st.retries {
		r.stop(StopOutputInvalid, fmt.Sprintf("no answer matched the output schema (%d sent back with their problems): %s", st.retries, strings.Join(c.problems, "; ")))
		return false
	}
	r.feedback = append(r.feedback, len(r.messages), len(r.messages)+1)
	r.messages = append(r.messages, *draft, model.Message{Role: model.RoleUser, Content: st.correction(c)})
	r.transition(StateThinking, TriggerOutputFeedback)
	return false
}

// outputState is what the output check keeps of a run: the drafts refused so far.
type outputState struct {
	rejections int
}

// acceptOutput puts the accepted answer's value into the result: the answer after
// the answer filters, which must still match (a redaction may break it).
func (r *run) acceptOutput(draft *model.Message) bool {
	st := r.output()
	if st == nil {
		return true
	}
	c := st.check(draft.Content)
	if !c.valid() {
		r.stop(StopOutputInvalid, "the answer filters left an answer that does not match the output schema: "+strings.Join(c.problems, "; "))
		return false
	}
	draft.Content = c.json
	r.result.Output = json.RawMessage(c.json)
	return true
}
