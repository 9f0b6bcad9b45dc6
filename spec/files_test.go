package spec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSpecFiles loads specs laid out in a temporary directory and requires Files to
// list exactly what each is made of, relative to that directory.
func TestSpecFiles(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // path → content; the spec is main.yaml
		want  []string
	}{
		{
			name:  "a spec alone",
			files: map[string]string{"main.yaml": "version: 1\nname: main\ndescription: d\n"},
			want:  []string{"main.yaml"},
		},
		{
			name: "a skill directory with its instructions file; a bundled skill is not on disk",
			files: map[string]string{
				"main.yaml":               "version: 1\nname: main\ndescription: d\nskills: [./skills/greet, calculator]\n",
				"skills/greet/skill.yaml": "name: greet\ndescription: Greets.\ninstructions_file: greet.md\n",
				"skills/greet/greet.md":   "Say hello.\n",
				"skills/greet/other.md":   "not used\n",
			},
			want: []string{"main.yaml", "skills/greet/greet.md", "skills/greet/skill.yaml"},
		},
		{
			name: "knowledge sources: a file, an FAQ file, and a glob's files and the directory it searches",
			files: map[string]string{
				"main.yaml": "version: 1\nname: main\ndescription: d\nembeddings: {dimensions: 64}\n" +
					"knowledge:\n  collections:\n    shop:\n      sources: [guide.md, kb/faq.yaml, \"docs/**/*.md\"]\n",
				"guide.md":       "# Guide\n",
				"kb/faq.yaml":    "faq:\n  - q: Hours?\n    a: Nine to five.\n",
				"docs/a.md":      "# A\n",
				"docs/deep/b.md": "# B\n",
				"docs/notes.txt": "not matched\n",
				"unrelated.md":   "# no\n",
			},
			want: []string{"docs", "docs/a.md", "docs/deep/b.md", "guide.md", "kb/faq.yaml", "main.yaml"},
		},
		{
			name: "sub-agents, recursively, each once",
			files: map[string]string{
				"main.yaml": "version: 1\nname: main\ndescription: d\ninstructions: i\nagents:\n" +
					"  - {name: b, spec: ./agents/b.yaml}\n  - {name: c, spec: ./agents/c.yaml}\n",
				"agents/b.yaml":              "version: 1\nname: b\ndescription: d\ninstructions: i\nagents:\n  - {name: c, spec: c.yaml}\nskills: [./skills/s]\n",
				"agents/c.yaml":              "version: 1\nname: c\ndescription: d\ninstructions: i\n",
				"agents/skills/s/skill.yaml": "name: s\ndescription: A skill.\ninstructions: Be nice.\n",
			},
			want: []string{"agents/b.yaml", "agents/c.yaml", "agents/skills/s/skill.yaml", "main.yaml"},
		},
		{
			name: "a sub-agent whose spec has errors still lists its file",
			files: map[string]string{
				"main.yaml": "version: 1\nname: main\ndescription: d\ninstructions: i\nagents:\n  - {name: b, spec: b.yaml}\n",
				"b.yaml":    "version: 1\nname: b\nbogus: true\n",
			},
			want: []string{"b.yaml", "main.yaml"},
		},
		{
			name: "model scripts: the agent's and the judge's",
			files: map[string]string{
				"main.yaml": "version: 1\nname: main\ndescription: d\nmodel: {provider: script, script: turns.yaml}\n" +
					"judge:\n  criteria: [polite]\n  model: {provider: script, script: judge.script.yaml}\n",
				"turns.yaml":        "turns: []\n",
				"judge.script.yaml": "turns: []\n",
			},
			want: []string{"judge.script.yaml", "main.yaml", "turns.yaml"},
		},
	}
	l := newTestLoader(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res := l.LoadFile(filepath.Join(dir, "main.yaml"))
			if res.Spec == nil {
				t.Fatalf("not loaded: %v", res.Diagnostics)
			}
			got := Files(res.Spec)
			if !slices.IsSorted(got) {
				t.Errorf("not sorted: %q", got)
			}
			var rel []string
			for _, p := range got {
				if !filepath.IsAbs(p) || filepath.Clean(p) != p {
					t.Errorf("%q is not absolute and clean", p)
				}
				r, err := filepath.Rel(dir, p)
				if err != nil || strings.HasPrefix(r, "..") {
					t.Errorf("%q is outside the spec's directory", p)
				}
				rel = append(rel, filepath.ToSlash(r))
			}
			if !slices.Equal(rel, tc.want) {
				t.Errorf("Files:\n got %q\nwant %q", rel, tc.want)
			}
		})
	}
}

// TestSpecFilesRelativePath: a spec loaded by a relative path is listed absolute.
func TestSpecFilesRelativePath(t *testing.T) {
	l := newTestLoader(t)
	res := l.LoadFile("testdata/valid/knowledge_short.yaml")
	if res.Spec == nil {
		t.Fatalf("not loaded: %v", res.Diagnostics)
	}
	got := Files(res.Spec)
	want, _ := filepath.Abs("testdata/valid/knowledge_short.yaml")
	if !slices.Contains(got, want) {
		t.Errorf("Files = %q, want it to hold %q", got, want)
	}
	for _, p := range got {
		if !filepath.IsAbs(p) {
			t.Errorf("%q is not absolute", p)
		}
	}
}
