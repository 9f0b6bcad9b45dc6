package spec

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrun/agentrun/internal/jsonpath"
	"go.yaml.in/yaml/v3"
)

// EvalFile is an eval file (`kind: eval`): cases that measure an agent against a
// real model, each run Repeat times, graded, and passing at MinPassRate. Cases
// holds the file's own cases, then those its datasets' rows made.
type EvalFile struct {
	Source
	Kind    string `yaml:"kind"`
	Version int    `yaml:"version"`
	// Spec is the agent spec evaluated, as written; SpecPath resolves it.
	Spec string `yaml:"spec"`
	// Repeat and MinPassRate are the file's defaults, filled when absent (1 and 1).
	Repeat      int      `yaml:"repeat"`
	MinPassRate *float64 `yaml:"min_pass_rate"`
	// Concurrency is how many runs go at once; 0 leaves it to the runner.
	Concurrency int `yaml:"concurrency"`
	// Grader is the llm graders' model; nil means the spec's own.
	Grader   *Model        `yaml:"grader"`
	Datasets []EvalDataset `yaml:"datasets"`
	Cases    []EvalCase    `yaml:"cases"`

	doc *document
}

// EvalCase is one case: a single run (Input) or a conversation (Turns) whose last
// run is graded by Expect and Graders. After loading, Repeat and MinPassRate are
// always set, the file's when the case gives none.
type EvalCase struct {
	Source
	Name        string            `yaml:"name"`
	Input       string            `yaml:"input"`
	Turns       []string          `yaml:"turns"`
	User        string            `yaml:"user"`
	Context     map[string]string `yaml:"context"`
	Repeat      int               `yaml:"repeat"`
	MinPassRate *float64          `yaml:"min_pass_rate"`
	Expect      Expect            `yaml:"expect"`
	Graders     []EvalGrader      `yaml:"graders"`
	// Dataset is the file of the dataset whose row made the case, as written; its
	// Source is then that row (the file's path and line).
	Dataset string `yaml:"-"`
}

// Messages are the user's messages of the case's runs, in order: the last is graded.
func (c *EvalCase) Messages() []string {
	if len(c.Turns) > 0 {
		return c.Turns
	}
	return []string{c.Input}
}

// EvalGrader grades a run's answer by exactly one of its kinds, which Kind names
// after loading.
type EvalGrader struct {
	Source
	Name        string          `yaml:"name"`
	Contains    []string        `yaml:"contains"`
	NotContains []string        `yaml:"not_contains"`
	Regex       *Regex          `yaml:"regex"`
	Equals      *string         `yaml:"equals"`
	JSONPath    *JSONPathGrader `yaml:"json_path"`
	LLM         *LLMGrader      `yaml:"llm"`

	Kind GraderKind `yaml:"-"`
}

// Label names the grader in results: its name, or its kind.
func (g *EvalGrader) Label() string {
	if g.Name != "" {
		return g.Name
	}
	return string(g.Kind)
}

// GraderKind is what an eval grader checks.
type GraderKind string

const (
	GraderContains    GraderKind = "contains"     // the answer contains every string
	GraderNotContains GraderKind = "not_contains" // the answer contains none of them
	GraderRegex       GraderKind = "regex"        // the answer matches
	GraderEquals      GraderKind = "equals"       // the trimmed answer is exactly this
	GraderJSONPath    GraderKind = "json_path"    // a value in the JSON answer
	GraderLLM         GraderKind = "llm"          // a grader model scores a rubric
)

// GraderKinds lists every grader kind, in the order the docs give them.
var GraderKinds = []GraderKind{GraderContains, GraderNotContains, GraderRegex, GraderEquals, GraderJSONPath, GraderLLM}

// JSONPathGrader checks the value at Path of the answer parsed as JSON: equal to
// Equals (when HasEquals: null is a value to compare with) or, as text, containing
// Contains.
type JSONPathGrader struct {
	Path     string  `yaml:"path"`
	Equals   any     `yaml:"equals"`
	Contains *string `yaml:"contains"`

	HasEquals bool          `yaml:"-"`
	Compiled  jsonpath.Path `yaml:"-"`
}

// LLMGrader has the grader model score the run against Rubric (scenario/grade's
// LLM grader); its score passes at PassScore, filled when absent (DefaultPassScore).
type LLMGrader struct {
	Rubric    string   `yaml:"rubric"`
	PassScore *float64 `yaml:"pass_score"`
}

// DefaultPassScore is the least score an llm grader passes by when it sets none.
const DefaultPassScore = 0.5

// EvalDataset makes a case of each row of File, graded by Expect and Graders.
type EvalDataset struct {
	Source
	File    string       `yaml:"file"`
	Map     DatasetMap   `yaml:"map"`
	Expect  Expect       `yaml:"expect"`
	Graders []EvalGrader `yaml:"graders"`
}

// DatasetMap names the columns that hold a case's parts. Input defaults to
// "input"; Name and User, when not given, are the "name" and "user" columns of a
// row that has them. Context maps attribute names to columns.
type DatasetMap struct {
	Name    string            `yaml:"name"`
	Input   string            `yaml:"input"`
	User    string            `yaml:"user"`
	Context map[string]string `yaml:"context"`
}

var evalFileKind = fileKind{noun: "an eval file", short: "eval file", start: "start with `kind: eval` and `version: 1`",
	mapping: "an eval file is a mapping with kind, version and cases", one: "put the cases in one file, or several files"}

// SpecPath is the spec evaluated, resolved against the eval file's directory; ""
// when the file names none.
func (f *EvalFile) SpecPath() string {
	if f.Spec == "" || filepath.IsAbs(f.Spec) {
		return f.Spec
	}
	return filepath.Join(filepath.Dir(f.Pos.File), f.Spec)
}

// At returns the position and YAML path of a place in the eval file (the deepest
// existing node along tokens), so the runner's findings point at the YAML too.
func (f *EvalFile) At(tokens ...string) Source {
	at := f.doc.at(tokens...)
	return Source{Pos: at.pos, Path: at.path}
}

// LoadEvalFile reads and checks an eval file — its schema, case names, graders
// (regexes compiled, JSON paths parsed) and datasets (read and turned into cases) —
// reporting every problem at once. The file is returned whenever it decoded.
func (l *Loader) LoadEvalFile(file string) (*EvalFile, Diagnostics) {
	src, err := ReadFile(file, MaxFileSize)
	if err != nil {
		return nil, Diagnostics{{Severity: Error, Pos: Pos{File: file}, Message: ioMessage(err)}}
	}
	d := newDocument(file, src, evalFileKind)
	root, ok := l.prepare(d, l.schemas.eval, nil)
	if !ok {
		d.diags.Sort()
		return nil, d.diags
	}
	ef := &EvalFile{doc: d}
	if err := root.Decode(ef); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) || !d.diags.HasErrors() {
			d.errorf(d.at(), "", "%v", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if !errors.As(err, &typeErr) {
			d.diags.Sort()
			return nil, d.diags
		}
	}
	ef.Source = Source{Pos: d.posOf(root)}
	ef.fillDefaults()
	d.checkEvalSpec(ef)
	names := map[string]string{}
	for i := range ef.Cases {
		d.checkEvalCase(ef, i, names)
	}
	for i := range ef.Datasets {
		ds := &ef.Datasets[i]
		at := d.at("datasets", strconv.Itoa(i))
		ds.Source = Source{Pos: at.pos, Path: at.path}
		d.checkGraders(ds.Graders, "datasets", strconv.Itoa(i), "graders")
		d.compileAnswer(ds.Expect.Answer, "datasets", strconv.Itoa(i), "expect", "answer", "matches")
		rows := d.loadDataset(ef, i)
		for _, c := range rows {
			d.addRowCase(ef, c, names)
		}
	}
	if len(ef.Cases) == 0 && !d.diags.HasErrors() {
		d.errorf(d.at(), "add cases, or datasets whose rows are cases", "the eval file has no cases")
	}
	d.diags.Sort()
	return ef, d.diags
}

func (f *EvalFile) fillDefaults() {
	if f.Repeat == 0 {
		f.Repeat = 1
	}
	if f.MinPassRate == nil {
		one := 1.0
		f.MinPassRate = &one
	}
}

// checkEvalSpec reports a spec that is not there: the eval would fail at its start.
func (d *document) checkEvalSpec(f *EvalFile) {
	if f.Spec == "" || d.failed[d.at("spec").path] {
		return
	}
	info, err := os.Stat(f.SpecPath())
	switch {
	case err != nil:
		d.errorf(d.at("spec"), "the path is relative to the eval file", "spec %s: %s", f.Spec, ioMessage(err))
	case !info.Mode().IsRegular():
		d.errorf(d.at("spec"), "name the agent spec's YAML file", "spec %s is not a regular file", f.Spec)
	}
}

func (d *document) checkEvalCase(f *EvalFile, i int, names map[string]string) {
	c := &f.Cases[i]
	ci := strconv.Itoa(i)
	at := d.at("cases", ci)
	c.Source = Source{Pos: at.pos, Path: at.path}
	if first, dup := names[c.Name]; dup && c.Name != "" {
		d.errorf(d.at("cases", ci, "name"), "case names identify results and failures", "duplicate case name %q (first at %s)", c.Name, first)
	} else if c.Name != "" {
		names[c.Name] = at.path
	}
	switch {
	case c.Input != "" && len(c.Turns) > 0:
		d.errorf(d.at("cases", ci, "turns").keyPos(d.file), "input is one run; turns are a conversation whose last message is graded", "give input or turns, not both")
	case c.Input == "" && len(c.Turns) == 0 && !d.failed[at.path] && !d.failed[d.at("cases", ci, "input").path] && !d.failed[d.at("cases", ci, "turns").path]:
		d.errorf(at, "give input (one run) or turns (a conversation)", "case %q has no input", c.Name)
	}
	fillRates(&c.Repeat, &c.MinPassRate, f)
	d.checkGraders(c.Graders, "cases", ci, "graders")
	d.compileAnswer(c.Expect.Answer, "cases", ci, "expect", "answer", "matches")
}

func fillRates(repeat *int, rate **float64, f *EvalFile) {
	if *repeat == 0 {
		*repeat = f.Repeat
	}
	if *rate == nil {
		*rate = f.MinPassRate
	}
}

// addRowCase adds a dataset row's case, unless its name is taken.
func (d *document) addRowCase(f *EvalFile, c EvalCase, names map[string]string) {
	if first, dup := names[c.Name]; dup {
		d.diags = append(d.diags, Diagnostic{Severity: Error, Pos: c.Pos, Path: c.Path,
			Message: "duplicate case name " + strconv.Quote(c.Name) + " (first at " + first + ")", Hint: "case names identify results and failures"})
		return
	}
	names[c.Name] = c.Pos.String()
	fillRates(&c.Repeat, &c.MinPassRate, f)
	f.Cases = append(f.Cases, c)
}

// checkGraders names each grader's kind and compiles what it needs: exactly one
// kind per grader, a regex that compiles, a JSON path that parses.
func (d *document) checkGraders(gs []EvalGrader, tokens ...string) {
	for i := range gs {
		g := &gs[i]
		gt := append(append([]string{}, tokens...), strconv.Itoa(i))
		at := d.at(gt...)
		g.Source = Source{Pos: at.pos, Path: at.path}
		var kinds []string
		for _, k := range GraderKinds {
			if d.at(append(gt, string(k))...).node != nil {
				kinds = append(kinds, string(k))
			}
		}
		switch {
		case len(kinds) > 1:
			d.errorf(d.at(append(gt, kinds[1])...).keyPos(d.file), "write each check as a grader of its own", "a grader has one kind: %s", strings.Join(kinds, " and "))
		case len(kinds) == 0 && !d.failed[at.path]:
			d.errorf(at, "give one of "+strings.Join(kindNames(), ", "), "a grader without a kind")
		}
		if len(kinds) > 0 {
			g.Kind = GraderKind(kinds[0])
		}
		if g.Regex != nil {
			c := checker{document: d}
			c.compileRegex(g.Regex, d.at(append(gt, "regex")...))
		}
		if g.JSONPath != nil {
			d.checkJSONPath(g.JSONPath, gt)
		}
		if g.LLM != nil && g.LLM.PassScore == nil {
			s := DefaultPassScore
			g.LLM.PassScore = &s
		}
	}
}

func (d *document) checkJSONPath(j *JSONPathGrader, gt []string) {
	jt := append(gt, "json_path")
	j.HasEquals = d.at(append(jt, "equals")...).node != nil
	if j.HasEquals == (j.Contains != nil) && !d.failed[d.at(jt...).path] {
		d.errorf(d.at(jt...), "equals compares the value; contains looks for text in it", "json_path needs one of equals and contains")
	}
	at := d.at(append(jt, "path")...)
	if j.Path == "" || d.failed[at.path] {
		return
	}
	p, err := jsonpath.Parse(j.Path)
	if err != nil {
		d.errorf(at, `write $ then .key, ["key"], [index] or [*] steps, e.g. $.items[0].sku`, "invalid JSON path: %v", err)
		return
	}
	j.Compiled = p
}

func kindNames() []string {
	out := make([]string, len(GraderKinds))
	for i, k := range GraderKinds {
		out[i] = string(k)
	}
	return out
}
