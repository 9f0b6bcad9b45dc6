package spec

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"go.yaml.in/yaml/v3"
)

// Spec is one agent, decoded from one file. The JSON schema in package schema is the
// contract; a test keeps these types and the schema in step.
type Spec struct {
	Source       `yaml:"-"`
	Version      int         `yaml:"version"`
	Name         string      `yaml:"name"`
	Description  string      `yaml:"description"`
	Model        Model       `yaml:"model"`
	Instructions Template    `yaml:"instructions"`
	Context      Context     `yaml:"context"`
	Skills       []SkillRef  `yaml:"skills"`
	Tools        []Tool      `yaml:"tools"`
	MCPServers   []MCPServer `yaml:"mcp_servers"`
	Domains      Domains     `yaml:"domains"`
	Intents      Intents     `yaml:"intents"`
	Routing      Routing     `yaml:"routing"`
	Memory       Memory      `yaml:"memory"`
	Guards       Guards      `yaml:"guards"`
	Judge        *Judge      `yaml:"judge"`
	Filters      []Filter    `yaml:"filters"`
	Embeddings   Embeddings  `yaml:"embeddings"`
	Knowledge    Knowledge   `yaml:"knowledge"`
	Approval     Approval    `yaml:"approval"`
	Plan         *Plan       `yaml:"plan"`
	Agents       []SubAgent  `yaml:"agents"`
	Workflow     *Workflow   `yaml:"workflow"`
	// Output asks for a structured answer: a JSON value valid against a schema.
	Output *Output `yaml:"output"`

	// Unset lists the ${VAR} references that had no value and no default. They are
	// not errors at load (a missing API key must not fail validate); whoever needs
	// such a value reports it.
	Unset []UnsetVar `yaml:"-"`
}

// Source is where a spec element was declared, for diagnostics found after loading.
type Source struct {
	Pos  Pos    `yaml:"-"`
	Path string `yaml:"-"`
}

// UnsetVar is an environment variable a spec named but the environment lacked.
type UnsetVar struct {
	Name string
	Pos  Pos
	Path string
}

// Model selects and configures the language model.
type Model struct {
	Provider    Provider `yaml:"provider"`
	Name        string   `yaml:"name"`
	BaseURL     string   `yaml:"base_url"`
	APIKeyEnv   string   `yaml:"api_key_env"`
	Temperature *float64 `yaml:"temperature"`
	MaxTokens   int      `yaml:"max_tokens"`
	Timeout     Duration `yaml:"timeout"`
	Retries     *int     `yaml:"retries"`
	Stream      *bool    `yaml:"stream"`
	Script      string   `yaml:"script"`
	// Pricing is what the model costs; nil means the bundled price table's entry
	// for Name, if any (see PriceOf).
	Pricing *Pricing `yaml:"pricing"`

	// API is the OpenAI provider's wire protocol: chat completions (the default)
	// or the Responses API.
	API ModelAPI `yaml:"api"`
	// Reasoning sets how much a reasoning model thinks before it answers.
	Reasoning *ModelReasoning `yaml:"reasoning"`
	// Cache turns the provider's prompt caching of the stable prefix (system
	// prompt, tools) on or off where the request must ask for it (Anthropic); nil
	// means on.
	Cache *bool `yaml:"cache"`
	// Fallback are the models tried, in order, when this one fails with a
	// retryable fault after its own retries.
	Fallback []Model `yaml:"fallback"`
}

// ModelReasoning is a reasoning model's thinking settings: an effort level
// (OpenAI, Gemini), or a budget of thinking tokens (Anthropic's extended thinking,
// Gemini's thinking budget).
type ModelReasoning struct {
	Effort       ReasoningEffort `yaml:"effort"`
	BudgetTokens int             `yaml:"budget_tokens"`
}

// Output asks for a final answer that is a JSON value valid against Schema.
type Output struct {
	Source
	Schema map[string]any `yaml:"schema"`
	// Retries is how many times a draft that does not validate goes back to the
	// model with the errors before the run stops; nil means DefaultOutputRetries.
	Retries *int `yaml:"retries"`
}

// DefaultOutputRetries is how many invalid structured drafts a run sends back
// before it stops.
const DefaultOutputRetries = 2

// Pricing is a model's price in US dollars per million tokens.
type Pricing struct {
	Input       float64 `yaml:"input" json:"input"`
	CachedInput float64 `yaml:"cached_input" json:"cached_input"` // prompt tokens the provider served from its cache; 0 means Input
	// CacheWrite is the price of prompt tokens the provider wrote to its cache
	// (Anthropic charges 1.25 times Input for them); 0 means Input.
	CacheWrite float64 `yaml:"cache_write" json:"cache_write,omitempty"`
	Output     float64 `yaml:"output" json:"output"`
}

// Cost is what usage of the given token counts costs at p, in US dollars. input
// counts every prompt token, those read from the cache (cachedInput) and those
// written to it (cacheWrite) included.
func (p Pricing) Cost(input, cachedInput, cacheWrite, output int64) float64 {
	cached := cmp.Or(p.CachedInput, p.Input)
	write := cmp.Or(p.CacheWrite, p.Input)
	return (float64(input-cachedInput-cacheWrite)*p.Input + float64(cachedInput)*cached + float64(cacheWrite)*write + float64(output)*p.Output) / 1e6
}

// Context declares what a run carries besides the user's id and the conversation id.
type Context struct {
	User []string `yaml:"user"` // user attributes, bound as user.<name>
}

// SkillRef names a skill: a bundled name or a directory, with options.
type SkillRef struct {
	Source
	Use  string         `yaml:"use"`
	With map[string]any `yaml:"with"`

	// Pack is the loaded skill, once the loader resolved it.
	Pack *SkillPack `yaml:"-"`
}

// UnmarshalYAML accepts the short form `- calculator` as well as `- use: …`.
func (s *SkillRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		s.Use = n.Value
		return nil
	}
	type plain SkillRef
	return n.Decode((*plain)(s))
}

// Tool is one tool offered to the model. Exactly one of Builtin, Command, HTTP and
// MCP says what runs.
type Tool struct {
	Source
	Name          string            `yaml:"name"`
	Description   string            `yaml:"description"`
	Parameters    map[string]any    `yaml:"parameters"`
	Builtin       string            `yaml:"builtin"`
	With          map[string]any    `yaml:"with"`
	Command       *CommandTool      `yaml:"command"`
	HTTP          *HTTPTool         `yaml:"http"`
	MCP           *MCPTool          `yaml:"mcp"`
	Bind          map[string]string `yaml:"bind"`
	Accept        *Expr             `yaml:"accept"`
	AcceptMessage string            `yaml:"accept_message"`
	Collect       map[string]*Expr  `yaml:"collect"`
	Timeout       Duration          `yaml:"timeout"`
	MaxOutput     int               `yaml:"max_output"`
	Enabled       *bool             `yaml:"enabled"`
	// Approval, when set, makes a person decide before a call of the tool runs.
	Approval *ToolApproval `yaml:"approval"`
	// Idempotent false marks a tool whose call must not be repeated once it may have
	// started: a durable engine runs it at most once. Absent or true, a call is safe
	// to retry (at least once). See Retryable.
	Idempotent *bool `yaml:"idempotent"`

	// Skill names the skill pack that brought the tool in; "" for the agent's own.
	Skill string `yaml:"-"`
	// SkillDir is that pack's directory when it is one on disk: a command tool's
	// program and working directory are the pack's own files.
	SkillDir string `yaml:"-"`
	// Secrets are the values ${VAR} put into the tool's configuration, the agent's
	// with: for its skill included; its kind masks them in the tool's errors.
	Secrets Secrets `yaml:"-" json:"-"`
}

// Retryable reports whether a call of the tool may be sent again after it may have
// started (a retried activity on a durable engine): true unless idempotent is false.
func (t *Tool) Retryable() bool {
	return t.Idempotent == nil || *t.Idempotent
}

// CommandTool runs a program without a shell; the arguments arrive as JSON on stdin.
type CommandTool struct {
	Run []string             `yaml:"run"`
	Dir string               `yaml:"dir"`
	Env map[string]*Template `yaml:"env"`
}

// HTTPTool calls an HTTP endpoint; URL, headers, query values and body strings are
// templates.
type HTTPTool struct {
	Method  string               `yaml:"method"`
	URL     Template             `yaml:"url"`
	Headers map[string]*Template `yaml:"headers"`
	Query   map[string]*Template `yaml:"query"`
	Body    any                  `yaml:"body"`
	// Redirects says which redirects the tool follows; nil is DefaultRedirects.
	Redirects *Redirects `yaml:"redirects"`

	// BodyTemplates holds the compiled templates of Body's string leaves, by their
	// path below body (e.g. "items[0].ref").
	BodyTemplates map[string]*Template `yaml:"-"`
	// bodyPaths are those leaves' paths as YAML keys, for Templates.
	bodyPaths map[string][]string
}

// MCPTool is one tool of an MCP server, declared with overrides.
type MCPTool struct {
	Server string `yaml:"server"`
	Tool   string `yaml:"tool"`
}

// MCPServer is a Model Context Protocol server the agent takes tools from.
type MCPServer struct {
	Source
	Name           string               `yaml:"name"`
	Command        []string             `yaml:"command"`
	Env            map[string]string    `yaml:"env"`
	Dir            string               `yaml:"dir"`
	URL            string               `yaml:"url"`
	Headers        map[string]*Template `yaml:"headers"`
	ConnectTimeout Duration             `yaml:"connect_timeout"`
	Tools          []string             `yaml:"tools"`
	Prefix         string               `yaml:"prefix"`
	Idempotent     []string             `yaml:"idempotent"`
	// ForwardAuth sends each call with the bearer token that authenticated the
	// user's request, over a session of that user's own (a url server only).
	ForwardAuth bool `yaml:"forward_auth"`

	// Secrets are the values ${VAR} put into the server's configuration (its env,
	// headers, URL, command), to mask in what its failures say.
	Secrets Secrets `yaml:"-" json:"-"`
}

// Domain is a named group of base tools shared by intents.
type Domain struct {
	Source
	Name        string   `yaml:"-"`
	Description string   `yaml:"description"`
	Tools       []string `yaml:"tools"`
}

// Intent is what a user may want; it decides the tools and the memory a run gets.
type Intent struct {
	Source
	Name        string       `yaml:"-"`
	Description string       `yaml:"description"`
	Examples    []string     `yaml:"examples"`
	Keywords    []string     `yaml:"keywords"`
	Patterns    []*Regex     `yaml:"patterns"`
	Domain      string       `yaml:"domain"`
	Tools       []string     `yaml:"tools"`
	Kind        IntentKind   `yaml:"kind"`
	Memory      MemoryLevel  `yaml:"memory"`
	RAG         *IntentRAG   `yaml:"rag"`
	Cache       *IntentCache `yaml:"cache"`
	// Plan overrides the agent's plan mode for the intent; PlanOff is `plan: false`.
	Plan    *Plan `yaml:"plan"`
	PlanOff bool  `yaml:"-"`
	// Agent names an agents entry the intent hands its runs to.
	Agent string `yaml:"agent"`
	// Output is the structured answer the intent's runs give, instead of the
	// agent's.
	Output *Output `yaml:"output"`
}

// IntentCache is an intent's FAQ semantic cache: nil when off. `cache: true` is the
// cache with every default.
type IntentCache struct {
	Source
	Collection string   `yaml:"collection"` // the FAQ source; "" means the only collection
	Threshold  *float64 `yaml:"threshold"`  // the vector score a hit needs
	// LearnedThreshold is the score a learned entry needs: higher, since an
	// answer written for one user's question is riskier to serve than the FAQ's.
	LearnedThreshold *float64    `yaml:"learned_threshold"`
	Scope            CacheScope  `yaml:"scope"`
	TTL              Duration    `yaml:"ttl"`   // how long a learned entry lives
	Learn            bool        `yaml:"learn"` // store accepted answers of this intent
	Verify           CacheVerify `yaml:"verify"`
	VerifyBelow      *float64    `yaml:"verify_below"` // verify: judge asks about hits scoring below this
}

// UnmarshalYAML accepts `cache: true` (every default) and `cache: false` (off).
func (c *IntentCache) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return nil // true: the defaults; false makes the field nil (see Intent.UnmarshalYAML)
	}
	type plain IntentCache
	return n.Decode((*plain)(c))
}

// IntentRAG is an intent's retrieval: nil when off. `rag: true` is retrieval with
// every default.
type IntentRAG struct {
	Source
	Collection string   `yaml:"collection"` // "" means the only collection
	TopK       int      `yaml:"top_k"`
	MinScore   *float64 `yaml:"min_score"`
	MaxTokens  int      `yaml:"max_tokens"`
}

// UnmarshalYAML accepts `rag: true` (every default) and `rag: false` (off).
func (r *IntentRAG) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return nil
	}
	type plain IntentRAG
	return n.Decode((*plain)(r))
}

// UnmarshalYAML decodes an intent; `cache: false` and `rag: false` leave Cache and
// RAG nil, as if the keys were absent.
func (in *Intent) UnmarshalYAML(n *yaml.Node) error {
	type plain Intent
	if err := n.Decode((*plain)(in)); err != nil {
		return err
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" && v.Value != "true" {
			switch n.Content[i].Value {
			case "cache":
				in.Cache = nil
			case "rag":
				in.RAG = nil
			case "plan":
				in.Plan, in.PlanOff = nil, true
			}
		}
	}
	return nil
}

// Embeddings configures the embedder that turns questions and knowledge into
// vectors: the built-in local one, or an OpenAI-compatible embeddings API.
type Embeddings struct {
	Source
	Provider   EmbeddingsProvider `yaml:"provider"`
	Model      string             `yaml:"model"`
	BaseURL    string             `yaml:"base_url"`
	APIKeyEnv  string             `yaml:"api_key_env"`
	Dimensions int                `yaml:"dimensions"`
	Timeout    Duration           `yaml:"timeout"`
	Retries    *int               `yaml:"retries"`
}

// Knowledge declares the agent's collections and where their index lives.
type Knowledge struct {
	Source
	// Index is the index file, relative to the spec's directory; "" means
	// DefaultIndexPath in the spec's project directory, like the memory store.
	Index       string      `yaml:"index"`
	Collections Collections `yaml:"collections"`
}

// Collection is a named set of documents, chunked and indexed together.
type Collection struct {
	Source
	Name         string   `yaml:"-"`
	Description  string   `yaml:"description"`
	Sources      []string `yaml:"sources"` // files and globs relative to the spec's directory
	ChunkSize    int      `yaml:"chunk_size"`
	ChunkOverlap *int     `yaml:"chunk_overlap"`
}

// Collections decodes from a mapping of name → collection.
type Collections []Collection

func (cs *Collections) UnmarshalYAML(n *yaml.Node) (err error) {
	*cs, err = namedMapping(n, func(c *Collection, name string) { c.Name = name })
	return err
}

// UsesKnowledge reports whether runs of the spec use the knowledge index: it
// declares collections, or an intent has the FAQ cache or retrieval.
func (s *Spec) UsesKnowledge() bool {
	return len(s.Knowledge.Collections) > 0 || slices.ContainsFunc(s.Intents, func(in Intent) bool { return in.Cache != nil || in.RAG != nil })
}

// NeedsApproval reports whether some tool of the spec (its own or a skill's) may
// wait for a person's approval.
func (s *Spec) NeedsApproval() bool {
	return slices.ContainsFunc(s.Tools, func(t Tool) bool { return t.Approval != nil })
}

// Collection returns the named collection, or nil.
func (k *Knowledge) Collection(name string) *Collection {
	for i := range k.Collections {
		if k.Collections[i].Name == name {
			return &k.Collections[i]
		}
	}
	return nil
}

// Routing says how a run's intent is chosen.
type Routing struct {
	Recognizer    Recognizer `yaml:"recognizer"`
	Fallback      string     `yaml:"fallback"`
	MinConfidence *float64   `yaml:"min_confidence"`
	History       *int       `yaml:"history"`
	Model         *Model     `yaml:"model"`
}

// Memory configures conversation history and long-term facts.
type Memory struct {
	Store   StoreKind `yaml:"store"`
	URL     string    `yaml:"url"`
	Window  *int      `yaml:"window"`
	TTL     Duration  `yaml:"ttl"`
	MaxSeen int       `yaml:"max_seen"`
	Facts   Facts     `yaml:"facts"`
}

// Facts configures long-term facts about a user.
type Facts struct {
	MaxChars  int          `yaml:"max_chars"`
	FromTools []FactRule   `yaml:"from_tools"`
	Extract   Extraction   `yaml:"extract"`
	Summary   *FactSummary `yaml:"summary"`
}

// FactRule writes facts from a successful tool call, without a model.
type FactRule struct {
	Source
	On     string           `yaml:"on"`
	When   *Expr            `yaml:"when"`
	Set    map[string]*Expr `yaml:"set"`
	Append map[string]*Expr `yaml:"append"`
	Delete []string         `yaml:"delete"`
}

// FactSummary says what the `summary` memory level injects.
type FactSummary struct {
	Fact string   `yaml:"fact"`
	Keys []string `yaml:"keys"`
}

// Guards are the limits that end a run with a typed stop reason.
type Guards struct {
	MaxTurns         int             `yaml:"max_turns"`
	MaxToolRounds    int             `yaml:"max_tool_rounds"`
	DuplicateCalls   DuplicatePolicy `yaml:"duplicate_calls"`
	Fallback         string          `yaml:"fallback"`
	MaxParallelTools int             `yaml:"max_parallel_tools"`
	ToolTimeout      Duration        `yaml:"tool_timeout"`
	MaxToolOutput    int             `yaml:"max_tool_output"`
	MaxRunTime       Duration        `yaml:"max_run_time"`
	// MaxCallsPerResponse bounds the tool calls of one response that run.
	MaxCallsPerResponse int `yaml:"max_calls_per_response"`
	// MaxTokens and MaxCost are the run's budget: the tokens (input and output, of
	// every model call) and the US dollars it may spend; 0 means no limit.
	MaxTokens int64   `yaml:"max_tokens"`
	MaxCost   float64 `yaml:"max_cost"`
}

// ToolApproval says which calls of a tool wait for a person's decision: every call
// (`approval: always`, or a mapping without when) or those for which When is true.
type ToolApproval struct {
	Source
	When *Expr `yaml:"when"` // nil: every call
	// Message is shown to whoever decides, beside the tool and its arguments.
	Message *Template `yaml:"message"`
}

// UnmarshalYAML accepts `approval: always` as well as the mapping; any other scalar
// is left for the checks to report with its position.
func (a *ToolApproval) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return nil
	}
	type plain ToolApproval
	return n.Decode((*plain)(a))
}

// Approval is how long a paused run waits for decisions, and what an undecided call
// becomes when nobody decides in time.
type Approval struct {
	Source
	Timeout   Duration          `yaml:"timeout"`
	OnTimeout ApprovalOnTimeout `yaml:"on_timeout"`
}

// Judge gates the final answer.
type Judge struct {
	Source
	Criteria    []string         `yaml:"criteria"`
	MaxRetries  *int             `yaml:"max_retries"`
	MinChars    int              `yaml:"min_chars"`
	OnError     JudgeOnError     `yaml:"on_error"`
	OnExhausted JudgeOnExhausted `yaml:"on_exhausted"`
	Model       *Model           `yaml:"model"`
}

// Filter is a post-filter rule on the input, a tool result or the answer.
type Filter struct {
	Source
	Name        string       `yaml:"name"`
	On          FilterStage  `yaml:"on"`
	Tools       []string     `yaml:"tools"`
	When        *Expr        `yaml:"when"`
	Action      FilterAction `yaml:"action"`
	Redact      *Regex       `yaml:"redact"`
	Replacement string       `yaml:"replacement"`
	Message     string       `yaml:"message"`
	MaxChars    int          `yaml:"max_chars"`
}

// EffectiveAction is the filter's action: redact when it names none but has a
// redact pattern.
func (f *Filter) EffectiveAction() FilterAction {
	if f.Action == "" && f.Redact != nil {
		return ActionRedact
	}
	return f.Action
}

// Expr is an expr-lang expression, compiled when the spec loads.
type Expr struct {
	Source  string
	Program *vm.Program
}

// MarshalText shows the expression's source, e.g. in JSON dumps of a spec.
func (e Expr) MarshalText() ([]byte, error) { return []byte(e.Source), nil }

func (e *Expr) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		e.Source = n.Value
	}
	return nil
}

// Template is a string with {{ expr }} parts, compiled when the spec loads.
type Template struct {
	Source string
	Parts  []TemplatePart
}

// TemplatePart is literal text or, when Program is set, an expression to render.
type TemplatePart struct {
	Text    string
	Program *vm.Program
}

func (t Template) MarshalText() ([]byte, error) { return []byte(t.Source), nil }

func (t *Template) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		t.Source = n.Value
	}
	return nil
}

// Regex is a regular expression, compiled when the spec loads.
type Regex struct {
	Source string
	Re     *regexp.Regexp
}

func (r Regex) MarshalText() ([]byte, error) { return []byte(r.Source), nil }

func (r *Regex) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Source = n.Value
	}
	return nil
}

// Duration is a Go duration such as 30s or 1m30s; zero means "not set".
type Duration struct{ time.Duration }

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		d.Duration, _ = time.ParseDuration(n.Value) // the schema reports a bad one
	}
	return nil
}

// Domains decodes from a mapping of name → domain.
type Domains []Domain

func (ds *Domains) UnmarshalYAML(n *yaml.Node) (err error) {
	*ds, err = namedMapping(n, func(d *Domain, name string) { d.Name = name })
	return err
}

// Intents decodes from a mapping of name → intent.
type Intents []Intent

func (is *Intents) UnmarshalYAML(n *yaml.Node) (err error) {
	*is, err = namedMapping(n, func(i *Intent, name string) { i.Name = name })
	return err
}

// namedMapping decodes a YAML mapping of name → T into a slice that keeps the file's
// order, so diagnostics and prompts come out in the order the author wrote.
func namedMapping[T any](n *yaml.Node, setName func(*T, string)) ([]T, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	out := make([]T, 0, len(n.Content)/2)
	var firstErr error
	for i := 0; i+1 < len(n.Content); i += 2 {
		var v T
		if err := n.Content[i+1].Decode(&v); err != nil && firstErr == nil {
			firstErr = err // keep going: the schema reports the details
		}
		setName(&v, n.Content[i].Value)
		out = append(out, v)
	}
	return out, firstErr
}

// Render evaluates the template's expressions in env and joins the parts. A nil
// result renders as nothing.
func (t *Template) Render(env map[string]any) (string, error) {
	return t.RenderEscaped(env, nil)
}

// RenderEscaped is Render with every expression's value passed through escape, which
// also sees the text rendered before it (an http tool escapes values that land in a
// URL's path, but not a base URL at its start).
func (t *Template) RenderEscaped(env map[string]any, escape func(before, value string) string) (string, error) {
	if len(t.Parts) == 1 && t.Parts[0].Program == nil {
		return t.Parts[0].Text, nil
	}
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Program == nil {
			b.WriteString(p.Text)
			continue
		}
		v, err := expr.Run(p.Program, env)
		if err != nil {
			return "", fmt.Errorf("template %q: %w", t.Source, err)
		}
		s := ""
		if v != nil {
			s = fmt.Sprint(v)
		}
		if escape != nil {
			s = escape(b.String(), s)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// RenderBody returns Body with every string leaf rendered as the template compiled
// for it at load.
func (h *HTTPTool) RenderBody(env map[string]any) (any, error) {
	return renderLeaves(h.Body, "", func(path, s string) (any, error) {
		if t := h.BodyTemplates[path]; t != nil {
			return t.Render(env)
		}
		return s, nil
	})
}

// renderLeaves rebuilds a YAML value with each string leaf replaced by what leaf
// makes of it, given its path below the root (e.g. "items[0].ref").
func renderLeaves(v any, path string, leaf func(path, s string) (any, error)) (any, error) {
	switch x := v.(type) {
	case string:
		return leaf(path, x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := renderLeaves(e, joinKey(path, k), leaf)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderLeaves(e, path+"["+strconv.Itoa(i)+"]", leaf)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// SkillPack is a skill: a prompt fragment, tools and the filters that belong to them,
// read from a skill.yaml with the agent's options applied.
type SkillPack struct {
	Source
	Name             string       `yaml:"name"`
	Version          string       `yaml:"version"`
	Description      string       `yaml:"description"`
	Instructions     Template     `yaml:"instructions"`
	InstructionsFile string       `yaml:"instructions_file"`
	Options          SkillOptions `yaml:"options"`
	Requires         Requires     `yaml:"requires"`
	Tools            []Tool       `yaml:"tools"`
	Filters          []Filter     `yaml:"filters"`

	// Dir is the pack's directory, or bundled:NAME for a bundled skill.
	Dir string `yaml:"-"`
	// Values are the options in force: the agent's with: over the defaults.
	Values map[string]any `yaml:"-"`
}

// SkillOption declares an option an agent may set under with:.
type SkillOption struct {
	Name        string `yaml:"-"`
	Type        string `yaml:"type"`
	Default     any    `yaml:"default"`
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
}

// SkillOptions decodes from a mapping of name → option, in file order.
type SkillOptions []SkillOption

func (o *SkillOptions) UnmarshalYAML(n *yaml.Node) (err error) {
	*o, err = namedMapping(n, func(opt *SkillOption, name string) { opt.Name = name })
	return err
}

// Requires is what a skill needs from the machine it runs on.
type Requires struct {
	Env      []string `yaml:"env"`
	Commands []string `yaml:"commands"`
}

// Missing lists the requirements this machine lacks: unset environment variables
// and programs not found (a path with a / is relative to the pack's directory).
func (p *SkillPack) Missing(lookupEnv func(string) (string, bool)) []string {
	var out []string
	for _, v := range p.Requires.Env {
		if val, ok := lookupEnv(v); !ok || val == "" {
			out = append(out, "environment variable "+v)
		}
	}
	for _, c := range p.Requires.Commands {
		if strings.ContainsRune(c, '/') {
			path := c
			if !filepath.IsAbs(path) && !strings.HasPrefix(p.Dir, BundledPrefix) {
				path = filepath.Join(p.Dir, c)
			}
			if _, err := os.Stat(path); err != nil {
				out = append(out, "program "+c)
			}
		} else if _, err := exec.LookPath(c); err != nil {
			out = append(out, "program "+c)
		}
	}
	return out
}
