package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a 1-based position in a spec file.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Severity says whether a diagnostic fails validation.
type Severity int

const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// MarshalText makes severities read as words in JSON output.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one problem found in a spec.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Pos      Pos      `json:"pos"`
	// End is just past the text the diagnostic is about, on the line of Pos or a
	// later one; the zero Pos when only Pos is known, a point.
	End     Pos    `json:"end,omitzero"`
	Path    string `json:"path,omitempty"` // YAML path, e.g. tools[2].accept
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// Notes point at other places that explain the problem: the first declaration
	// of a duplicate name, the agent that pulled in a skill.
	Notes []Note `json:"notes,omitempty"`
}

// FlatDiagnostic is a Diagnostic as `agentrun validate --format json` and serve's
// status show it: its positions spelt out as fields.
type FlatDiagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
	EndLine  int    `json:"end_line,omitempty"`
	EndCol   int    `json:"end_col,omitempty"`
	Severity string `json:"severity"`
	Path     string `json:"path,omitempty"`
	Message  string `json:"message"`
	Hint     string `json:"hint,omitempty"`
	Notes    []Note `json:"notes,omitempty"`
}

// Flat is d as a FlatDiagnostic.
func (d Diagnostic) Flat() FlatDiagnostic {
	return FlatDiagnostic{d.Pos.File, d.Pos.Line, d.Pos.Col, d.End.Line, d.End.Col, d.Severity.String(), d.Path, d.Message, d.Hint, d.Notes}
}

// Note is a position with a word about it.
type Note struct {
	Pos     Pos    `json:"pos"`
	Message string `json:"message"`
}

// Summary is the one-line form without the position: "path: message".
func (d Diagnostic) Summary() string {
	if d.Path == "" {
		return d.Message
	}
	return d.Path + ": " + d.Message
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s", d.Pos, d.Severity, d.Summary())
}

// Diagnostics is a list of problems; as an error it means at least one is an Error.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Errors returns only the errors, without the warnings.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == Error {
			out = append(out, d)
		}
	}
	return out
}

// HasErrors reports whether any diagnostic is an Error.
func (ds Diagnostics) HasErrors() bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Severity == Error })
}

// Count returns the number of errors and warnings.
func (ds Diagnostics) Count() (errors, warnings int) {
	for _, d := range ds {
		if d.Severity == Error {
			errors++
		} else {
			warnings++
		}
	}
	return errors, warnings
}

// Sort orders diagnostics by file, line and column, keeping the order of equal ones.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int { return comparePos(a.Pos, b.Pos) })
}

func comparePos(a, b Pos) int {
	return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
}
