package spec

import (
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TestFile is a *.test.yaml file: scenarios for one agent, run offline.
type TestFile struct {
	Source
	Agent string     `yaml:"agent"`
	Cases []TestCase `yaml:"cases"`

	doc *document
}

// TestCase is one scenario. Without Turns it is a single run described by Input,
// Model, Expect and the rest; with Turns each turn is a run in the case's conversation.
type TestCase struct {
	Source
	Name         string              `yaml:"name"`
	User         *TestUser           `yaml:"user"`
	Conversation string              `yaml:"conversation"`
	Facts        map[string]string   `yaml:"facts"`
	Seen         map[string][]string `yaml:"seen"`
	Mocks        []Mock              `yaml:"mocks"`
	Input        string              `yaml:"input"`
	Intent       string              `yaml:"intent"`
	Model        []ScriptTurn        `yaml:"model"`
	Classifier   []map[string]any    `yaml:"classifier"`
	Judge        []map[string]any    `yaml:"judge"`
	Expect       Expect              `yaml:"expect"`
	Approvals    []TestApproval      `yaml:"approvals"`
	Turns        []TestTurn          `yaml:"turns"`
}

// TestTurn is one run of a multi-turn case.
type TestTurn struct {
	Source
	Input      string           `yaml:"input"`
	Intent     string           `yaml:"intent"`
	Model      []ScriptTurn     `yaml:"model"`
	Classifier []map[string]any `yaml:"classifier"`
	Judge      []map[string]any `yaml:"judge"`
	// User runs this turn as another user, in a conversation of that user's own.
	User   *TestUser `yaml:"user"`
	Expect Expect    `yaml:"expect"`
	// Approvals decide, in order, the calls the run waits on when it pauses for
	// approval.
	Approvals []TestApproval `yaml:"approvals"`
}

// TestApproval is one decision on a call a paused run waits on: the first
// decision goes to the first call waiting, and so on.
type TestApproval struct {
	Decision ApprovalDecision `yaml:"decision"`
	// Tool and Call, when set, must be the waiting call's tool and id.
	Tool   string `yaml:"tool"`
	Call   string `yaml:"call"`
	Reason string `yaml:"reason"`
	// By decides as this approver instead of the case's user.
	By string `yaml:"by"`
}

// ApprovalDecision is what a test does with a call that waits for approval.
type ApprovalDecision string

const (
	DecisionApprove ApprovalDecision = "approve" // the call runs
	DecisionReject  ApprovalDecision = "reject"  // the call is rejected, with the reason
	// DecisionExpire: nobody decides; the case's clock moves past the run's expiry
	// and the run resumes, so the agent's approval.on_timeout applies.
	DecisionExpire ApprovalDecision = "expire"
)

// ApprovalDecisions lists every decision a test can make.
var ApprovalDecisions = []ApprovalDecision{DecisionApprove, DecisionReject, DecisionExpire}

// TestUser is who a case runs as.
type TestUser struct {
	ID         string            `yaml:"id"`
	Attributes map[string]string `yaml:"attributes"`
}

// ScriptTurn is one scripted model response: text or tool calls, with what a
// provider may send besides (see script.go).
type ScriptTurn struct {
	Text      string           `yaml:"text,omitempty" json:"text,omitempty"`
	ToolCalls []ScriptToolCall `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	// Output is a structured answer, sent as its JSON text; it stands for Text.
	Output JSONValue `yaml:"output,omitempty" json:"output,omitempty"`
	// Reasoning is the reasoning the response carries.
	Reasoning *ScriptReasoning `yaml:"reasoning,omitempty" json:"reasoning,omitempty"`
	// FinishReason overrides the turn's finish reason (stop, or tool_calls): one of
	// ScriptFinishReasons, a provider's word mapped to the runtime's.
	FinishReason string `yaml:"finish_reason,omitempty" json:"finish_reason,omitempty"`
	// Usage replaces the offline estimate of the turn's tokens.
	Usage *ScriptUsage `yaml:"usage,omitempty" json:"usage,omitempty"`
}

// ScriptToolCall is a scripted call; Arguments is a mapping or a verbatim string.
type ScriptToolCall struct {
	ID        string `yaml:"id,omitempty" json:"id,omitempty"`
	Name      string `yaml:"name" json:"name"`
	Arguments any    `yaml:"arguments" json:"arguments,omitempty"`
}

// Mock replaces a tool's result, for calls whose arguments contain Args.
type Mock struct {
	Tool   string         `yaml:"tool"`
	Args   map[string]any `yaml:"args"`
	Result any            `yaml:"result"`
	Error  string         `yaml:"error"`
}

// Expect is what a run must have done.
type Expect struct {
	Intent       string             `yaml:"intent"`
	IntentHow    string             `yaml:"intent_how"`
	Calls        []ExpectCall       `yaml:"calls"`
	Order        CallOrder          `yaml:"order"`
	NotCalled    []string           `yaml:"not_called"`
	Refused      []string           `yaml:"refused"`
	Guards       []string           `yaml:"guards"`
	Verdicts     []bool             `yaml:"verdicts"`
	Stop         string             `yaml:"stop"`
	Answer       *AnswerMatch       `yaml:"answer"`
	Facts        map[string]*string `yaml:"facts"`
	HistoryTurns *int               `yaml:"history_turns"`
	Cache        string             `yaml:"cache"`     // hit or miss
	Learned      string             `yaml:"learned"`   // shared, user or none
	Retrieved    []string           `yaml:"retrieved"` // sources that must have been retrieved
	// Approvals are the tools whose calls asked for approval, in order.
	Approvals []string `yaml:"approvals"`
	// Plan is the model's plan at the end of the run (plan mode), step by step.
	Plan []ExpectPlanStep `yaml:"plan"`
	// Output is the structured answer's value, matched like a subset: every key
	// of an object given must match, objects inside by the same rule; arrays and
	// other values must be equal.
	Output any `yaml:"output"`
}

// ExpectPlanStep is a step of the expected plan: its text and status.
type ExpectPlanStep struct {
	Step   string `yaml:"step"`
	Status string `yaml:"status"`
}

// ExpectCall is an expected tool call: its tool, a subset of its arguments, its outcome.
type ExpectCall struct {
	Tool    string         `yaml:"tool"`
	Args    map[string]any `yaml:"args"`
	Outcome string         `yaml:"outcome"`
}

// AnswerMatch checks the answer.
type AnswerMatch struct {
	Equals   string `yaml:"equals"`
	Contains string `yaml:"contains"`
	Matches  string `yaml:"matches"`

	Re *regexp.Regexp `yaml:"-"`
}

// Runs are a case's runs: its turns, or the case itself as one turn.
func (c *TestCase) Runs() []TestTurn {
	if len(c.Turns) > 0 {
		return c.Turns
	}
	return []TestTurn{{Source: c.Source, Input: c.Input, Intent: c.Intent, Model: c.Model, Classifier: c.Classifier, Judge: c.Judge, Expect: c.Expect, Approvals: c.Approvals}}
}

// AgentPath is the agent file, resolved against the test file's directory.
func (f *TestFile) AgentPath() string {
	if filepath.IsAbs(f.Agent) {
		return f.Agent
	}
	return filepath.Join(filepath.Dir(f.Pos.File), f.Agent)
}

// At returns the position and YAML path of a place in the test file (the deepest
// existing node along tokens).
func (f *TestFile) At(tokens ...string) Source {
	at := f.doc.at(tokens...)
	return Source{Pos: at.pos, Path: at.path}
}

// LoadTestFile reads and checks a *.test.yaml file: a regular file of at most
// MaxFileSize.
func (l *Loader) LoadTestFile(file string) (*TestFile, Diagnostics) {
	src, err := ReadFile(file, MaxFileSize)
	if err != nil {
		return nil, Diagnostics{{Severity: Error, Pos: Pos{File: file}, Message: ioMessage(err)}}
	}
	d := newDocument(file, src, testFile)
	root, ok := l.prepare(d, l.schemas.test, nil)
	if !ok {
		return nil, d.diags
	}
	tf := &TestFile{doc: d}
	if err := root.Decode(tf); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) || !d.diags.HasErrors() {
			d.errorf(d.at(), "", "%v", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if !errors.As(err, &typeErr) {
			return nil, d.diags
		}
	}
	tf.Source = Source{Pos: d.posOf(root)}
	names := map[string]int{}
	for i := range tf.Cases {
		c := &tf.Cases[i]
		ci := strconv.Itoa(i)
		at := d.at("cases", ci)
		c.Source = Source{Pos: at.pos, Path: at.path}
		if first, dup := names[c.Name]; dup && c.Name != "" {
			d.errorf(d.at("cases", ci, "name"), "case names identify failures and --run", "duplicate case name %q (first at cases[%d])", c.Name, first)
		}
		names[c.Name] = i
		if len(c.Turns) > 0 {
			for _, key := range []string{"input", "intent", "model", "classifier", "judge", "expect", "approvals"} {
				if k := d.at("cases", ci, key); k.node != nil {
					d.errorf(k.keyPos(file), "put it in each turn", "%s belongs to the turns of a multi-turn case", key)
				}
			}
		} else if c.Input == "" && !d.failed[at.path] {
			d.errorf(at, "give input (one run) or turns (several)", "case %q has no input", c.Name)
		}
		for j := range c.Turns {
			tat := d.at("cases", ci, "turns", strconv.Itoa(j))
			c.Turns[j].Source = Source{Pos: tat.pos, Path: tat.path}
			d.compileAnswer(c.Turns[j].Expect.Answer, "cases", ci, "turns", strconv.Itoa(j), "expect", "answer", "matches")
			d.checkTestApprovals(c.Turns[j].Approvals, "cases", ci, "turns", strconv.Itoa(j), "approvals")
			d.checkScriptTurns(c.Turns[j].Model, "cases", ci, "turns", strconv.Itoa(j), "model")
		}
		d.checkScriptTurns(c.Model, "cases", ci, "model")
		d.compileAnswer(c.Expect.Answer, "cases", ci, "expect", "answer", "matches")
		d.checkTestApprovals(c.Approvals, "cases", ci, "approvals")
	}
	d.diags.Sort()
	return tf, d.diags
}

// checkTestApprovals reports what an expire decision cannot have: nobody decides,
// so there is no reason and no approver.
func (d *document) checkTestApprovals(approvals []TestApproval, tokens ...string) {
	for i, a := range approvals {
		if a.Decision != DecisionExpire {
			continue
		}
		for _, key := range []string{"reason", "by"} {
			if k := d.at(append(tokens, strconv.Itoa(i), key)...); k.node != nil {
				d.errorf(k.keyPos(d.file), "expire means nobody decides: the agent's approval.on_timeout does", "%s does not go with decision expire", key)
			}
		}
	}
}

func (d *document) compileAnswer(a *AnswerMatch, tokens ...string) {
	if a == nil || a.Matches == "" {
		return
	}
	r := &Regex{Source: a.Matches}
	c := checker{document: d}
	c.compileRegex(r, d.at(tokens...))
	a.Re = r.Re
}

// CallOrder is how a test's expected calls are compared with the calls made.
type CallOrder string

const (
	OrderExact    CallOrder = "exact"     // the same calls in the same order, no others
	OrderInOrder  CallOrder = "in_order"  // these calls in this order, others between allowed
	OrderAnyOrder CallOrder = "any_order" // each of them, in any order
)

// CallOrders lists every call order.
var CallOrders = []CallOrder{OrderExact, OrderInOrder, OrderAnyOrder}
