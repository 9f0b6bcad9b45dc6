package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/model/offline"
	"github.com/agentrun/agentrun/runtime/tool/mcp"
	"github.com/agentrun/agentrun/serve"
	"github.com/agentrun/agentrun/spec"
	"github.com/spf13/cobra"
	"golang.org/x/text/width"
)

func newValidateCommand() *cobra.Command {
	var format string
	var strict, live bool
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check agent specs without running them",
		Long: "Check agent spec files, or every *.yaml and *.yml spec under directories, and report\n" +
			"every problem as file:line:col. No network, no model. Exit status: 0 clean, 1 errors\n" +
			"(or warnings with --strict), 2 usage or I/O errors.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := diagnosticWriters[format]
			if !ok {
				return fmt.Errorf("unknown --format %q: use text, json or github", format)
			}
			found, walked, err := spec.YAMLFiles(args)
			if err != nil {
				return err
			}
			loader, err := agentrun.NewLoader()
			if err != nil {
				return err
			}
			files, others := splitAgentSpecs(found)
			results := loader.LoadFiles(files)
			registry := agentrun.Registry()
			// What the directory walk skipped or could not read comes first; an
			// unreadable directory counts as an unreadable file.
			all := append(walked, checkOtherFiles(loader, others)...)
			readFailed := walked.HasErrors()
			for _, r := range results {
				all = append(all, r.Diagnostics...)
				readFailed = readFailed || r.ReadErr != nil
				if r.Spec != nil && !r.Diagnostics.HasErrors() {
					// Compiling without a model checks what only the runtime knows,
					// such as builtin tools' configurations, and runs nothing.
					_, diags := runtime.Compile(r.Spec, runtime.Options{Tools: registry})
					all = append(all, diags...)
					all = append(all, checkKnowledgeSources(r.Spec, map[string]bool{})...)
					if live && len(r.Spec.MCPServers) > 0 {
						all = append(all, checkLive(cmd.Context(), r.Spec, r.File)...)
					}
				}
			}
			all = spec.FillEnds(dropRepeats(all))
			if err := write(cmd.OutOrStdout(), len(found), all); err != nil {
				return err
			}
			errs, warns := all.Count()
			switch {
			case readFailed:
				return exitError{2}
			case errs > 0 || (strict && warns > 0):
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, json or github (GitHub Actions annotations)")
	cmd.Flags().BoolVar(&strict, "strict", false, "fail on warnings too")
	cmd.Flags().BoolVar(&live, "live", false, "also connect to the MCP servers: allow-listed tools must exist, bind and accept must name their parameters")
	return cmd
}

// splitAgentSpecs parts the files validate checks into the agent specs and the rest.
func splitAgentSpecs(found []spec.File) (agents []string, others []spec.File) {
	for _, f := range found {
		if f.Kind == spec.KindAgent {
			agents = append(agents, f.Path)
		} else {
			others = append(others, f)
		}
	}
	return agents, others
}

// checkOtherFiles checks the files beside the agent specs as what they are, with
// the code that reads them for real: a scenario test as agentrun test loads it (an
// eval file, with its datasets, as agentrun eval will), a
// model script as --model script: does, an FAQ file as the index does and serve.yaml
// as serve does.
func checkOtherFiles(loader *spec.Loader, files []spec.File) spec.Diagnostics {
	var diags spec.Diagnostics
	for _, f := range files {
		var err error
		switch f.Kind {
		case spec.KindUnknown:
			diags = append(diags, f.UnknownKind())
		case spec.KindTest:
			_, ds := loader.LoadTestFile(f.Path)
			diags = append(diags, ds...)
		case spec.KindEvalFile:
			_, ds := loader.LoadEvalFile(f.Path)
			diags = append(diags, ds...)
		case spec.KindFAQ:
			diags = append(diags, knowledge.CheckSources(filepath.Dir(f.Path), []string{filepath.Base(f.Path)})...)
		case spec.KindScript:
			_, ds := offline.LoadScriptWith(loader, f.Path)
			diags = append(diags, ds...)
		case spec.KindServe:
			diags = append(diags, checkServeConfig(f.Path)...)
		case spec.KindEval:
			var ds spec.Diagnostics
			if _, err = agentrun.LoadKnowledgeSet(f.Path); errors.As(err, &ds) {
				diags, err = append(diags, ds...), nil
			}
		}
		if err != nil {
			diags = append(diags, spec.Diagnostic{Severity: spec.Error, Pos: spec.Pos{File: f.Path}, Message: err.Error()})
		}
	}
	return diags
}

// dropRepeats keeps the first of equal diagnostics: an FAQ file in the directory
// validated is checked on its own and as an agent's knowledge source.
func dropRepeats(ds spec.Diagnostics) spec.Diagnostics {
	seen := map[string]bool{}
	var out spec.Diagnostics
	for _, d := range ds {
		key := d.String() + "\x00" + d.Hint
		if !seen[key] {
			seen[key] = true
			out = append(out, d)
		}
	}
	return out
}

// checkServeConfig checks serve.yaml as serve --config does.
func checkServeConfig(path string) spec.Diagnostics {
	src, err := spec.ReadFile(path, spec.MaxFileSize)
	if err != nil {
		return spec.Diagnostics{{Severity: spec.Error, Pos: spec.Pos{File: path}, Message: err.Error()}}
	}
	return serve.CheckConfig(path, src, &serve.Config{})
}

// checkKnowledgeSources reads the knowledge sources of a spec and of its
// sub-agents the way the index does, so an FAQ file that exec, index or serve would
// refuse is an error here, at its line. checked holds the spec files already read.
func checkKnowledgeSources(s *spec.Spec, checked map[string]bool) spec.Diagnostics {
	if checked[s.Pos.File] {
		return nil
	}
	checked[s.Pos.File] = true
	var diags spec.Diagnostics
	for _, c := range s.Knowledge.Collections {
		diags = append(diags, knowledge.CheckSources(filepath.Dir(s.Pos.File), c.Sources)...)
	}
	for _, a := range s.Agents {
		if a.Loaded != nil {
			diags = append(diags, checkKnowledgeSources(a.Loaded, checked)...)
		}
	}
	return diags
}

var diagnosticWriters = map[string]func(io.Writer, int, spec.Diagnostics) error{
	"text":   writeText,
	"json":   writeJSON,
	"github": writeGitHub,
}

func summary(files int, ds spec.Diagnostics) string {
	errs, warns := ds.Count()
	if errs == 0 && warns == 0 {
		return fmt.Sprintf("%s checked: no problems", plural(files, "file"))
	}
	return fmt.Sprintf("%s checked: %s, %s", plural(files, "file"), plural(errs, "error"), plural(warns, "warning"))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func writeText(w io.Writer, files int, ds spec.Diagnostics) error {
	var b strings.Builder
	b.WriteString(formatDiagnostics(ds))
	b.WriteString(summary(files, ds))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// formatDiagnostics is one line a diagnostic, then the source line it points at
// with a caret under its column, then its hint, indented.
func formatDiagnostics(ds spec.Diagnostics) string {
	var b strings.Builder
	sources := map[string][]string{} // file → its lines, read once
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
		writeSourceLine(&b, sources, d.Pos, d.End)
		if d.Hint != "" {
			fmt.Fprintf(&b, "    hint: %s\n", d.Hint)
		}
		for _, n := range d.Notes {
			fmt.Fprintf(&b, "    note: %s: %s\n", n.Pos, n.Message)
		}
	}
	return b.String()
}

// writeSourceLine shows the line at pos, as the file has it (before any ${VAR} is
// expanded), with carets under the range from pos to end (to the end of the line
// when end is on a later one; one caret when end is unknown); nothing when the file
// cannot be read.
func writeSourceLine(b *strings.Builder, sources map[string][]string, pos, end spec.Pos) {
	if pos.Line <= 0 || pos.File == "" {
		return
	}
	lines, ok := sources[pos.File]
	if !ok {
		if data, err := os.ReadFile(pos.File); err == nil && utf8.Valid(data) {
			lines = strings.Split(string(data), "\n")
		}
		sources[pos.File] = lines
	}
	if pos.Line > len(lines) {
		return
	}
	line := strings.TrimRight(lines[pos.Line-1], "\r")
	number := strconv.Itoa(pos.Line)
	fmt.Fprintf(b, "    %s | %s\n", number, line)
	fmt.Fprintf(b, "    %s | %s\n", strings.Repeat(" ", len(number)), underline(line, pos, end))
}

// underline is the line under a source line that marks the columns [pos, end) with
// carets. It keeps the line's tabs, so it stands under the columns in any editor,
// and gives a wide (East Asian) character two columns, as terminals do.
func underline(line string, pos, end spec.Pos) string {
	runes := []rune(line)
	from := pos.Col - 1
	to := from + 1
	switch {
	case end.Line == pos.Line && end.Col > pos.Col:
		to = end.Col - 1
	case end.Line > pos.Line:
		to = len(runes)
	}
	var u strings.Builder
	for i, r := range runes {
		if i >= to {
			break
		}
		switch {
		case r == '\t':
			u.WriteRune('\t')
		case i < from:
			u.WriteString(strings.Repeat(" ", runeWidth(r)))
		default:
			u.WriteString(strings.Repeat("^", runeWidth(r)))
		}
	}
	if !strings.Contains(u.String(), "^") { // past the line's end, or only tabs
		for i := len(runes); i < from; i++ {
			u.WriteByte(' ')
		}
		u.WriteByte('^')
	}
	return u.String()
}

// runeWidth is the columns a terminal gives r: two for wide and full-width
// characters, none for combining marks, one for the rest.
func runeWidth(r rune) int {
	if unicode.Is(unicode.Mn, r) {
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

func writeJSON(w io.Writer, files int, ds spec.Diagnostics) error {
	errs, warns := ds.Count()
	out := struct {
		Files       int                   `json:"files"`
		Errors      int                   `json:"errors"`
		Warnings    int                   `json:"warnings"`
		Diagnostics []spec.FlatDiagnostic `json:"diagnostics"`
	}{Files: files, Errors: errs, Warnings: warns, Diagnostics: []spec.FlatDiagnostic{}}
	for _, d := range ds {
		out.Diagnostics = append(out.Diagnostics, d.Flat())
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeGitHub prints GitHub Actions workflow commands, which show each problem as an
// annotation on the file's line in the pull request.
func writeGitHub(w io.Writer, files int, ds spec.Diagnostics) error {
	var b strings.Builder
	for _, d := range ds {
		msg := d.Summary()
		if d.Hint != "" {
			msg += "\nhint: " + d.Hint
		}
		for _, n := range d.Notes {
			msg += fmt.Sprintf("\nnote: %s: %s", n.Pos, n.Message)
		}
		fmt.Fprintf(&b, "::%s file=%s,line=%d,col=%d%s,title=agentrun validate::%s\n",
			d.Severity, ghProperty(d.Pos.File), d.Pos.Line, d.Pos.Col, ghEnd(d), ghData(msg))
	}
	b.WriteString(summary(files, ds))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// ghEnd is the end of an annotation: its line and last column. The runner refuses
// columns on an annotation over several lines, so a range that goes on past its
// first line ends there, as the text format underlines it.
func ghEnd(d spec.Diagnostic) string {
	if d.End.Line != d.Pos.Line || d.End.Col <= d.Pos.Col {
		return ""
	}
	return fmt.Sprintf(",endLine=%d,endColumn=%d", d.End.Line, d.End.Col-1)
}

// ghData and ghProperty escape values the way the Actions runner unescapes them.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

var argsRefRe = regexp.MustCompile(`\bargs\.([A-Za-z_][A-Za-z0-9_]*)`)

// checkLive connects to a spec's MCP servers and checks what only they know: the
// allow-listed tools exist (Start fails otherwise), every allowed tool can be offered
// under a name chat APIs accept (a mapped name is a warning that shows it), the names
// in idempotent are the servers' tools, and the parameters that bind and accept name
// are the tools' real parameters.
func checkLive(ctx context.Context, s *spec.Spec, file string) spec.Diagnostics {
	mgr, err := mcp.Start(ctx, s.MCPServers, mcp.Options{Dir: filepath.Dir(file)})
	if err != nil {
		at := s.MCPServers[0].Source
		if serverErr, ok := errors.AsType[*mcp.ServerError](err); ok {
			for _, srv := range s.MCPServers {
				if srv.Name == serverErr.Server {
					at = srv.Source
				}
			}
		}
		hint := "validate --live connects to every server; check its command or URL"
		if _, clash := errors.AsType[*mcp.NameClash](err); clash {
			hint = "" // the message says what to do
		}
		return spec.Diagnostics{{Severity: spec.Error, Pos: at.Pos, Path: at.Path, Message: err.Error(), Hint: hint}}
	}
	defer mgr.Close()
	var diags spec.Diagnostics
	offered := mgr.Offered()
	for _, srv := range s.MCPServers {
		var tools []string
		for _, o := range offered {
			if o.Server != srv.Name {
				continue
			}
			tools = append(tools, o.Tool)
			if o.Name != srv.Prefix+o.Tool {
				diags = append(diags, spec.Diagnostic{Severity: spec.Warning, Pos: srv.Pos, Path: srv.Path,
					Message: fmt.Sprintf("MCP server %s's tool %q is offered to the model as %q: chat APIs accept only letters, digits, _ and - (at most 64) in tool names", srv.Name, o.Tool, o.Name),
					Hint:    fmt.Sprintf("intents, domains, filters and fact rules name it %q; to choose the name, declare a tool with mcp: {server: %s, tool: %q}", o.Name, srv.Name, o.Tool)})
			}
		}
		for _, name := range srv.Idempotent {
			if slices.Contains(tools, name) {
				continue
			}
			hint := "idempotent names tools by their names on the server"
			if c := spec.Closest(name, tools); c != "" {
				hint = fmt.Sprintf("did you mean %q?", c)
			}
			diags = append(diags, spec.Diagnostic{Severity: spec.Warning, Pos: srv.Pos, Path: srv.Path + ".idempotent",
				Message: fmt.Sprintf("idempotent names %q, which MCP server %s does not offer", name, srv.Name), Hint: hint})
		}
	}
	for _, t := range s.Tools {
		if t.MCP == nil {
			continue
		}
		remote := t.MCP.Tool
		if remote == "" {
			remote = t.Name
		}
		params, ok := mgr.InputSchema(t.MCP.Server, remote)
		if !ok {
			diags = append(diags, spec.Diagnostic{Severity: spec.Error, Pos: t.Pos, Path: t.Path, Message: fmt.Sprintf("MCP server %s has no tool %q", t.MCP.Server, remote)})
			continue
		}
		props, _ := params["properties"].(map[string]any)
		var names []string
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		check := func(param, where string) {
			if _, ok := props[param]; !ok {
				diags = append(diags, spec.Diagnostic{Severity: spec.Error, Pos: t.Pos, Path: t.Path + "." + where,
					Message: fmt.Sprintf("%s names %q, which %s's tool %s does not take", where, param, t.MCP.Server, remote),
					Hint:    "its parameters: " + strings.Join(names, ", ")})
			}
		}
		for param := range t.Bind {
			check(param, "bind")
		}
		if t.Accept != nil {
			for _, m := range argsRefRe.FindAllStringSubmatch(t.Accept.Source, -1) {
				check(m[1], "accept")
			}
		}
	}
	return diags
}
