package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ScriptFile is a model script: the file `exec --record` writes and
// `--model script:FILE` plays.
type ScriptFile struct {
	Turns      []ScriptTurn     `yaml:"turns"`
	Judge      []map[string]any `yaml:"judge,omitempty"`
	Classifier []map[string]any `yaml:"classifier,omitempty"`
}

// ScriptReasoning is a scripted turn's reasoning: readable text, and a provider's
// native blocks, which a real provider would need back on the next request. In
// YAML it is a string (the text) or a mapping.
type ScriptReasoning struct {
	Text string `yaml:"text,omitempty" json:"text,omitempty"`
	// Field is the wire field an OpenAI-compatible server sent it in
	// (reasoning_content, the default, or reasoning), or a native block's type.
	Field    string        `yaml:"field,omitempty" json:"field,omitempty"`
	Provider string        `yaml:"provider,omitempty" json:"provider,omitempty"`
	Blocks   []ScriptBlock `yaml:"blocks,omitempty" json:"blocks,omitempty"`
}

// DefaultReasoningField is the field of scripted reasoning that names none and no
// provider: DeepSeek's reasoning_content, which the openai provider reads first.
const DefaultReasoningField = "reasoning_content"

type scriptReasoning ScriptReasoning // without the methods, to decode the mapping

func (r *ScriptReasoning) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = ScriptReasoning{Text: n.Value}
		return nil
	}
	return n.Decode((*scriptReasoning)(r))
}

// MarshalYAML writes reasoning that is only text as a string.
func (r ScriptReasoning) MarshalYAML() (any, error) {
	if (r.Field == "" || r.Field == DefaultReasoningField) && r.Provider == "" && len(r.Blocks) == 0 {
		return r.Text, nil
	}
	return scriptReasoning(r), nil
}

// ScriptUsage is the token usage a scripted turn reports instead of the offline
// estimate, to test costs and cache accounting.
type ScriptUsage struct {
	PromptTokens       int64 `yaml:"prompt_tokens" json:"prompt_tokens"`
	CompletionTokens   int64 `yaml:"completion_tokens" json:"completion_tokens"`
	CachedPromptTokens int64 `yaml:"cached_prompt_tokens,omitempty" json:"cached_prompt_tokens,omitempty"`
	CacheWriteTokens   int64 `yaml:"cache_write_tokens,omitempty" json:"cache_write_tokens,omitempty"`
}

// ScriptFinishReasons maps every finish reason a script turn may give to the
// runtime's own (model.FinishReason's stop, tool_calls, length, content_filter):
// those, and the providers' own words mapped as the providers map them —
// Anthropic's stop_reason, Gemini's finishReason, the Responses API's incomplete
// reason and OpenAI's legacy function_call — so a script can say what the
// provider said. Anthropic's pause_turn is not among them: the provider
// continues such a turn itself, so no run sees it.
var ScriptFinishReasons = map[string]string{
	"stop": "stop", "tool_calls": "tool_calls", "length": "length", "content_filter": "content_filter",
	// Anthropic
	"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
	"max_tokens": "length", "model_context_window_exceeded": "length", "refusal": "content_filter",
	// Gemini
	"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
	"BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
	"IMAGE_SAFETY": "content_filter",
	// the Responses API; OpenAI's chat completions before tool_calls
	"max_output_tokens": "length", "function_call": "tool_calls",
}

// ScriptFinishReasonNames lists ScriptFinishReasons' keys, sorted (the schema's enum).
func ScriptFinishReasonNames() []string {
	out := make([]string, 0, len(ScriptFinishReasons))
	for k := range ScriptFinishReasons {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ReasoningProviders are the APIs whose native reasoning blocks a script may give
// (model.ProviderAnthropic, model.ProviderGemini, model.ProviderResponses).
var ReasoningProviders = []string{"anthropic", "gemini", "openai-responses"}

var scriptFile = fileKind{noun: "a model script", short: "model script", start: "start with `turns:`",
	mapping: "a model script is a mapping with turns (and judge, classifier)", one: "put one run's turns in one file"}

// LoadScriptFile checks a model script — YAML, the schema, then what the schema
// cannot say (finish reasons that contradict the turn, reasoning blocks without
// their provider or of the wrong shape) — with every problem at its line, and
// decodes it. ${VAR} is not expanded: a script is model output, which may contain
// such text. The file is nil when nothing could be decoded.
func (l *Loader) LoadScriptFile(file string, src []byte) (*ScriptFile, Diagnostics) {
	d := newDocument(file, src, scriptFile)
	root, ok := d.parse()
	if !ok {
		return nil, d.diags
	}
	d.root = root
	inst, _ := d.toJSON(root, "")
	if d.budget < 0 {
		return nil, d.diags
	}
	if err := l.schemas.script.Validate(inst); err != nil {
		d.schemaErrors(err, l.schemas, nil)
	}
	sf := &ScriptFile{}
	if err := root.Decode(sf); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) {
			d.errorf(d.at(), "", "%v", strings.TrimPrefix(err.Error(), "yaml: "))
			return nil, d.diags
		}
		if !d.diags.HasErrors() {
			d.typeErrors(typeErr)
		}
	}
	d.checkScriptTurns(sf.Turns, "turns")
	d.diags.Sort()
	return sf, d.diags
}

// checkScriptTurns checks the turns of a script or a test case's model list at
// tokens, where the schema found nothing wrong.
func (d *document) checkScriptTurns(turns []ScriptTurn, tokens ...string) {
	for i := range turns {
		t := &turns[i]
		at := func(keys ...string) location {
			return d.at(append(append(slices.Clone(tokens), strconv.Itoa(i)), keys...)...)
		}
		if d.failed[at().path] {
			continue
		}
		if len(t.Output) > 0 && t.Text != "" {
			d.errorf(at("output").keyPos(d.file), "a structured answer is its output; drop text", "a turn answers with text or output, not both")
		}
		if f := ScriptFinishReasons[t.FinishReason]; f == "tool_calls" && len(t.ToolCalls) == 0 && !d.failed[at("finish_reason").path] {
			d.errorf(at("finish_reason"), "add the turn's tool_calls, or leave finish_reason out", "finish_reason %s says the model called tools, but the turn has no tool_calls", t.FinishReason)
		}
		if u := t.Usage; u != nil && u.CachedPromptTokens+u.CacheWriteTokens > u.PromptTokens && !d.failed[at("usage").path] {
			d.errorf(at("usage"), "cached and cache-write tokens are part of prompt_tokens", "cached_prompt_tokens + cache_write_tokens (%d) exceed prompt_tokens (%d)", u.CachedPromptTokens+u.CacheWriteTokens, u.PromptTokens)
		}
		if t.Reasoning != nil && !d.failed[at("reasoning").path] {
			d.checkScriptReasoning(t.Reasoning, func(keys ...string) location { return at(append([]string{"reasoning"}, keys...)...) })
		}
	}
}

func (d *document) checkScriptReasoning(r *ScriptReasoning, at func(keys ...string) location) {
	switch {
	case len(r.Blocks) > 0 && r.Provider == "":
		d.errorf(at("blocks").keyPos(d.file), "set reasoning.provider to the API they come from: "+strings.Join(ReasoningProviders, ", "),
			"reasoning blocks without a provider: only the provider they came from can read them")
		return
	case r.Provider != "" && len(r.Blocks) == 0:
		d.warnf(at("provider").keyPos(d.file), "give the provider's blocks, or drop provider", "reasoning.provider without blocks does nothing")
		return
	}
	for j, b := range r.Blocks {
		bat := at("blocks", strconv.Itoa(j))
		if d.failed[bat.path] {
			continue
		}
		var block map[string]any
		if json.Unmarshal(b.JSON, &block) != nil || block == nil {
			d.errorf(bat, "write the block as a mapping, or as its JSON text", "a reasoning block must be a JSON object")
			continue
		}
		if msg, hint := checkReasoningBlock(r.Provider, block); msg != "" {
			d.errorf(bat, hint, "%s", msg)
		}
	}
}

// finishReasonError words an unknown finish reason better than the schema's enum,
// whose list of every provider's words is too long to read.
func (d *document) finishReasonError(at location, got any) {
	name, _ := got.(string)
	// Names in the case written come first, so a tie goes to them: max_token is
	// Anthropic's max_tokens, not Gemini's MAX_TOKENS.
	names := ScriptFinishReasonNames()
	upper := name != "" && name == strings.ToUpper(name)
	slices.SortStableFunc(names, func(a, b string) int {
		return cmpBool(a == strings.ToUpper(a) != upper, b == strings.ToUpper(b) != upper)
	})
	hint := suggest(name, names)
	if hint == "" {
		hint = "use stop, tool_calls, length or content_filter, or a provider's word for one (docs/testing.md lists them)"
	}
	d.errorf(at, hint, "unknown finish reason %s", quoteValue(got))
}

// reasoningBlockKeys are the string fields each native block type needs, by
// provider: what its API refuses a block without.
var reasoningBlockKeys = map[string]map[string][]string{
	"anthropic":        {"thinking": {"thinking", "signature"}, "redacted_thinking": {"data"}},
	"openai-responses": {"reasoning": {}},
}

// checkReasoningBlock says what is wrong with a block of provider's, if anything.
// Gemini's thought parts are parts, with no type: any object will do.
func checkReasoningBlock(provider string, block map[string]any) (msg, hint string) {
	types, ok := reasoningBlockKeys[provider]
	if !ok {
		return "", ""
	}
	names := make([]string, 0, len(types))
	for k := range types {
		names = append(names, k)
	}
	sort.Strings(names)
	typ, _ := block["type"].(string)
	need, ok := types[typ]
	if !ok {
		hint = suggest(typ, names)
		if hint == "" {
			hint = fmt.Sprintf("%s reasoning blocks are of type %s", provider, strings.Join(names, " or "))
		}
		if typ == "" {
			return fmt.Sprintf("%s reasoning blocks need a type", provider), hint
		}
		return fmt.Sprintf("%s has no reasoning block of type %q", provider, typ), hint
	}
	for _, k := range need {
		if s, _ := block[k].(string); s == "" {
			return fmt.Sprintf("a %s block needs %s", typ, k), "keep the block as the API sent it: " + provider + " refuses one that was altered"
		}
	}
	return "", ""
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
