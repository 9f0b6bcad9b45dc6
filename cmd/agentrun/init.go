package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/examples"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/schema"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
)

func newInitCommand() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Start an agent: a spec, a scenario test that passes, the JSON schemas for editors",
		Long: "Write a new agent into DIR (default .): agent.yaml, its scenario test agent.test.yaml,\n" +
			"the JSON schemas under schema/ that the files' modelines point editors at, and a\n" +
			".gitignore entry for .agentrun/ (where runs keep their state). With --from NAME it\n" +
			"copies a bundled example instead — the spec, its tests and the skill packs, sub-agents\n" +
			"and knowledge files it uses — and validates it. Nothing is overwritten: when a file\n" +
			"exists with other content, init names it, writes nothing and exits 2.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) > 0 {
				dir = args[0]
			}
			return runInit(cmd.OutOrStdout(), dir, from)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "copy this bundled example ("+strings.Join(examples.Portable(), ", ")+")")
	return cmd
}

// initFile is one file init writes: its slash path below DIR and its content.
type initFile struct {
	path string
	data []byte
}

func runInit(out io.Writer, dir, from string) error {
	var files []initFile
	var main string // the spec the printed commands run
	var err error
	if from == "" {
		main = "agent.yaml"
		files = newAgentFiles(specName(dir))
	} else if main, files, err = exampleFiles(from); err != nil {
		return err
	}
	files = append(files, schemaFiles()...)
	written, err := writeInitFiles(dir, files)
	if err != nil {
		return err
	}
	gitignore, err := ignoreState(dir)
	if err != nil {
		return err
	}
	if err := checkWritten(out, filepath.Join(dir, filepath.FromSlash(main))); err != nil {
		return err
	}
	question := "What is 6*7?"
	if from != "" {
		question = "Hello, what can you do?"
	}
	return printNext(out, dir, main, question, append(written, gitignore...))
}

// schemaFiles are the schemas the modelines point at; skill.schema.json refers to
// agent.schema.json by a relative URL, so they sit side by side.
func schemaFiles() []initFile {
	return []initFile{
		{"schema/agent.schema.json", schema.JSON},
		{"schema/skill.schema.json", schema.SkillJSON},
		{"schema/test.schema.json", schema.TestJSON},
	}
}

var notInName = regexp.MustCompile(`[^a-z0-9_-]+`)

// specName turns the directory's name into an agent name the schema accepts.
func specName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "my-agent"
	}
	name := strings.Trim(notInName.ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-_")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return "my-agent"
	}
	return name[:min(len(name), 64)]
}

func newAgentFiles(name string) []initFile {
	agent := `# yaml-language-server: $schema=schema/agent.schema.json
#
# The format: https://github.com/agentrun/agentrun/blob/main/docs/spec.md
version: 1
name: ` + name + `
description: Answers questions, computing with the calculator where numbers are involved.

model:
  name: ${LLM_MODEL_NAME:-gpt-4o-mini}
  base_url: ${LLM_BASE_URL:-}   # any OpenAI-compatible endpoint
  api_key_env: LLM_API_KEY      # the name of the variable, never the key

instructions: |
  You are a helpful assistant. Use the calculator for every computation instead of
  doing arithmetic yourself, and answer every question in the user's message.

tools:
  - builtin: calculator

guards:
  max_turns: 8
  duplicate_calls: hint

judge:
  criteria: ["Every question in the user's message is answered."]
`
	test := `# yaml-language-server: $schema=schema/test.schema.json
#
# Scenario tests: ` + "`agentrun test`" + `. The model and the judge are scripted; the
# calculator is the real builtin.
agent: agent.yaml

cases:
  - name: computes with the calculator, then answers
    input: What is 6*7?
    model:
      - tool_calls: [{name: calculator, arguments: {expression: 6*7}}]
      - text: 6 * 7 = 42, computed with the calculator.
    expect:
      calls: [{tool: calculator, outcome: ok}]
      verdicts: [true]
      stop: completed
      answer: {contains: "42"}
`
	return []initFile{{"agent.yaml", []byte(agent)}, {"agent.test.yaml", []byte(test)}}
}

// exampleFiles are the files example name needs. Which ones is read from the loaded
// spec, not listed by hand, so a new skill pack or knowledge file of an example comes
// along: the examples are extracted to a temporary directory, the spec is loaded
// there, and what it refers to is collected.
func exampleFiles(name string) (main string, files []initFile, err error) {
	main = name + ".yaml"
	if !slices.Contains(examples.Portable(), name) {
		return "", nil, fmt.Errorf("no bundled example %q: use one of %s", name, strings.Join(examples.Portable(), ", "))
	}
	tmp, err := os.MkdirTemp("", "agentrun-init-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, examples.Agents()); err != nil {
		return "", nil, err
	}
	loader, err := agentrun.NewLoader()
	if err != nil {
		return "", nil, err
	}
	needed := map[string]bool{}
	if err := collectNeeded(loader, tmp, main, needed); err != nil {
		return "", nil, err
	}
	for _, p := range slices.Sorted(maps.Keys(needed)) {
		data, err := fs.ReadFile(examples.Agents(), p)
		if err != nil {
			return "", nil, err
		}
		files = append(files, initFile{p, pointModeline(p, data)})
	}
	return main, files, nil
}

// collectNeeded adds to needed (slash paths below root) the spec at rel, its
// scenario tests and scripts, its skill packs on disk, its knowledge sources, and the
// same for each of its sub-agents.
func collectNeeded(loader *spec.Loader, root, rel string, needed map[string]bool) error {
	if needed[rel] {
		return nil // a sub-agent used twice, or an agent calling itself
	}
	needed[rel] = true
	r := loader.LoadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if r.Spec == nil || r.Diagnostics.HasErrors() {
		return fmt.Errorf("the bundled example %s does not load: %s", rel, strings.TrimSpace(formatDiagnostics(r.Diagnostics)))
	}
	dir := path.Dir(rel)
	stem := strings.TrimSuffix(rel, ".yaml")
	for _, companion := range []string{stem + ".test.yaml", stem + ".script.yaml"} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(companion))); err == nil {
			needed[companion] = true
		}
	}
	for _, sk := range r.Spec.Skills {
		if sk.Pack == nil || strings.HasPrefix(sk.Pack.Dir, "bundled:") {
			continue
		}
		packDir, err := filepath.Rel(root, sk.Pack.Dir)
		if err != nil {
			return err
		}
		if err := addTree(root, filepath.ToSlash(packDir), needed); err != nil {
			return err
		}
	}
	for _, col := range r.Spec.Knowledge.Collections {
		for _, src := range col.Sources {
			found, _, err := spec.ExpandSources(filepath.Join(root, filepath.FromSlash(dir)), src)
			if err != nil {
				return err
			}
			for _, f := range found {
				needed[path.Join(dir, f)] = true
			}
		}
	}
	for _, a := range r.Spec.Agents {
		if err := collectNeeded(loader, root, path.Join(dir, filepath.ToSlash(a.Spec)), needed); err != nil {
			return err
		}
	}
	return nil
}

// addTree adds every file below the slash path dir.
func addTree(root, dir string, needed map[string]bool) error {
	return fs.WalkDir(os.DirFS(root), dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			needed[p] = true
		}
		return err
	})
}

var modeline = regexp.MustCompile(`(?m)^(# yaml-language-server: \$schema=)\S*/(\w+\.schema\.json)$`)

// pointModeline makes a copied file's schema modeline point at the schema/ that
// init writes beside the spec, as the examples' point at this repository's.
func pointModeline(p string, data []byte) []byte {
	up := strings.Repeat("../", strings.Count(p, "/"))
	return modeline.ReplaceAll(data, []byte("${1}"+up+"schema/${2}"))
}

// writeInitFiles writes files below dir, creating it, and returns the paths it wrote.
// It first checks them all: a file that exists with the same content is left alone,
// one with other content stops init before anything is written.
func writeInitFiles(dir string, files []initFile) ([]string, error) {
	var todo []initFile
	var clashes []string
	for _, f := range files {
		existing, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			todo = append(todo, f)
		case err != nil:
			return nil, err
		case !bytes.Equal(existing, f.data):
			clashes = append(clashes, filepath.Join(dir, filepath.FromSlash(f.path)))
		}
	}
	if len(clashes) > 0 {
		return nil, fmt.Errorf("init overwrites nothing, and these files exist: %s", strings.Join(clashes, ", "))
	}
	var written []string
	for _, f := range todo {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return written, err
		}
		written = append(written, f.path)
	}
	return written, nil
}

// ignoreState adds .agentrun/ to dir's .gitignore unless a line there names it
// already; it returns the file's name when it changed it.
func ignoreState(dir string) ([]string, error) {
	p := filepath.Join(dir, ".gitignore")
	existing, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, line := range strings.Split(string(existing), "\n") {
		if l := strings.TrimSpace(line); l == ".agentrun/" || l == ".agentrun" || l == "/.agentrun/" {
			return nil, nil
		}
	}
	add := "# agentrun's state: memory, paused runs, the knowledge index\n.agentrun/\n"
	if len(existing) > 0 && !bytes.HasSuffix(existing, []byte("\n")) {
		add = "\n" + add
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(add); err != nil {
		f.Close()
		return nil, err
	}
	return []string{".gitignore"}, f.Close()
}

// checkWritten validates the spec init wrote, as `agentrun validate` would, so a
// copied example that does not hold up outside this repository says so at once.
func checkWritten(out io.Writer, file string) error {
	loader, err := agentrun.NewLoader()
	if err != nil {
		return err
	}
	r := loader.LoadFile(file)
	diags := r.Diagnostics
	if r.Spec != nil && !diags.HasErrors() {
		_, compiled := runtime.Compile(r.Spec, runtime.Options{Tools: agentrun.Registry()})
		diags = append(diags, compiled...)
	}
	if len(diags) == 0 {
		return nil
	}
	if _, err := io.WriteString(out, formatDiagnostics(diags)); err != nil {
		return err
	}
	if diags.HasErrors() {
		return fmt.Errorf("%s does not validate", file)
	}
	return nil
}

func printNext(out io.Writer, dir, main, question string, written []string) error {
	var b strings.Builder
	if len(written) == 0 {
		b.WriteString("nothing to write: every file is there already\n")
	} else {
		fmt.Fprintf(&b, "wrote %s\n", strings.Join(written, ", "))
	}
	b.WriteString("\nnext:\n")
	if dir != "." {
		fmt.Fprintf(&b, "  cd %s\n", dir)
	}
	fmt.Fprintf(&b, "  agentrun validate --strict %s\n", main)
	b.WriteString("  agentrun test\n")
	fmt.Fprintf(&b, "  agentrun exec --model test %s %q\n", main, question)
	b.WriteString("then set LLM_API_KEY (and LLM_BASE_URL, LLM_MODEL_NAME for another endpoint) and drop --model test.\n")
	_, err := io.WriteString(out, b.String())
	return err
}
