package spec

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestValidFixtures loads specs that must be clean and compares the decoded spec,
// as JSON, with a golden file, so decoding regressions show up as a diff.
func TestValidFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	examples := agentFiles("../examples/agents/*.yaml")
	files = append(files, examples...)
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	l := newTestLoader(t)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, diags := l.Load(file, src)
			if len(diags) > 0 {
				t.Fatalf("diagnostics for a valid spec:\n%v", diags)
			}
			got, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./spec -update)", err)
			}
			if !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(got)) {
				t.Errorf("decoded spec differs from %s (go test ./spec -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// Compiled expressions, templates and regexes are kept for the runtime, so it never
// compiles them again.
func TestCompiledOnce(t *testing.T) {
	l := newTestLoader(t)
	r := l.LoadFile("testdata/valid/everything.yaml")
	if len(r.Diagnostics) > 0 {
		t.Fatal(r.Diagnostics)
	}
	s := r.Spec
	lookup := s.Tools[1]
	if lookup.Accept.Program == nil {
		t.Error("accept not compiled")
	}
	if got := len(s.Tools[2].HTTP.BodyTemplates); got != 2 {
		t.Errorf("body templates = %d, want 2 (query and filters[0].owner; none for the boolean)", got)
	}
	if p := s.Tools[2].HTTP.BodyTemplates[`filters[0].owner`]; p == nil || len(p.Parts) != 1 || p.Parts[0].Program == nil {
		t.Errorf("filters[0].owner template = %+v", p)
	}
	if s.Intents[0].Patterns[0].Re == nil || !s.Intents[0].Patterns[0].Re.MatchString("see Record 42") {
		t.Error("intent pattern not compiled")
	}
	// The notes skill's instructions follow the agent's, under its heading, with its
	// option's default substituted; its filter defaults to its own tool.
	if parts := s.Instructions.Parts; len(parts) != 11 || parts[9].Text != "\n\n## Skill: notes\n" || !strings.HasSuffix(parts[10].Text, "notes go to notes.") {
		t.Errorf("instructions have %d parts: %+v", len(parts), parts)
	}
	note := s.Tools[len(s.Tools)-1]
	if note.Name != "save_note" || note.Skill != "notes" || note.Command.Env["NOTES_DIR"].Source != "notes" || !strings.HasSuffix(note.Pos.File, "skills/notes/skill.yaml") {
		t.Errorf("skill tool %+v", note)
	}
	if f := s.Filters[len(s.Filters)-1]; len(f.Tools) != 1 || f.Tools[0] != "save_note" || f.EffectiveAction() != ActionRedact {
		t.Errorf("skill filter %+v", f)
	}
	if s.Filters[3].EffectiveAction() != ActionRedact {
		t.Errorf("a filter with only redact: action = %q, want redact", s.Filters[3].EffectiveAction())
	}
	if s.Tools[0].Name != "current_time" {
		t.Errorf("builtin without a name is named %q", s.Tools[0].Name)
	}
}

// A tool declared by the agent and by a skill is one diagnostic that shows both places.
func TestSkillCollisionShowsBothPlaces(t *testing.T) {
	l := newTestLoader(t)
	r := l.LoadFile("testdata/invalid/skill_collision.yaml")
	var d *Diagnostic
	for i := range r.Diagnostics {
		if strings.Contains(r.Diagnostics[i].Message, "also declared") {
			d = &r.Diagnostics[i]
		}
	}
	if d == nil {
		t.Fatalf("no collision diagnostic: %v", r.Diagnostics)
	}
	want := []Note{
		{Pos: Pos{File: "testdata/invalid/skill_collision.yaml", Line: 6, Col: 5}, Message: "the other lookup"},
		{Pos: Pos{File: "testdata/invalid/skill_collision.yaml", Line: 4, Col: 5}, Message: "the skill as this agent uses it"},
	}
	if d.Pos != (Pos{File: "testdata/invalid/skills/dup_tool/skill.yaml", Line: 3, Col: 5}) || len(d.Notes) != 2 || d.Notes[0] != want[0] || d.Notes[1] != want[1] {
		t.Errorf("diagnostic %+v", d)
	}
}

// agentFiles globs agent specs, leaving out what SpecFiles leaves out (tests, scripts).
func agentFiles(pattern string) []string {
	files, _ := filepath.Glob(pattern)
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if kind, _ := KindOf(src); err == nil && kind == KindAgent {
			out = append(out, f)
		}
	}
	return out
}
