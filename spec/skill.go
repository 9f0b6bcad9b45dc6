package spec

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// BundledPrefix marks the file names of bundled skills in diagnostics.
const BundledPrefix = "bundled:"

// loadedSkill is a skill pack together with the document it was read from.
type loadedSkill struct {
	ref  int
	pack *SkillPack
	doc  *document
}

// loadSkills reads every skill the agent names, applies the agent's options, checks
// each pack in its own file and appends its tools and filters to the spec. Problems
// inside a pack point into the pack's file, with a note on the agent's skills entry.
func (l *Loader) loadSkills(d *document, s *Spec, lookup func(string) (string, bool)) []loadedSkill {
	var loaded []loadedSkill
	seen := map[string]int{}
	for i := range s.Skills {
		ref := &s.Skills[i]
		at := d.at("skills", strconv.Itoa(i))
		ref.Source = Source{Pos: at.pos, Path: at.path}
		if ref.Use == "" || d.failed[at.path] {
			continue
		}
		pd, err := l.openSkill(ref.Use, filepath.Dir(d.file))
		if err != nil {
			hint := "a skill is a bundled name or a directory holding skill.yaml, such as ./skills/orders"
			if names := l.BundledSkills(); !isSkillPath(ref.Use) && len(names) > 0 {
				hint = cmp.Or(suggest(ref.Use, names), "bundled skills: "+strings.Join(names, ", "))
			}
			d.errorf(at, hint, "%v", err)
			continue
		}
		pack := l.parseSkill(d, pd, ref, i)
		if pack == nil {
			d.diags = append(d.diags, withNote(pd.diags, at.pos, "the skill as this agent uses it")...)
			continue
		}
		if first, dup := seen[pack.Name]; dup {
			d.errorf(at, fmt.Sprintf("skills[%d] is the same skill", first), "skill %q is used twice", pack.Name)
			continue
		}
		seen[pack.Name] = i
		ref.Pack = pack
		loaded = append(loaded, loadedSkill{ref: i, pack: pack, doc: pd})
	}
	// Skills may refer to the agent's tools and to each other's; collect the names
	// and collected kinds once, then check each pack in its own file.
	names := map[string]bool{}
	var kinds []string
	for _, t := range s.Tools {
		names[cmp.Or(t.Name, t.Builtin)] = true
		kinds = append(kinds, slices.Sorted(maps.Keys(t.Collect))...)
	}
	for _, ls := range loaded {
		for _, t := range ls.pack.Tools {
			names[cmp.Or(t.Name, t.Builtin)] = true
			kinds = append(kinds, slices.Sorted(maps.Keys(t.Collect))...)
		}
	}
	for _, ls := range loaded {
		pack, pd := ls.pack, ls.doc
		pd.recordSecrets(pack.Tools, nil)
		sc := checker{document: pd, loader: l, extraTools: names, extraKinds: kinds, disabled: map[string]bool{},
			spec:     &Spec{Context: s.Context, MCPServers: s.MCPServers, Tools: pack.Tools, Filters: pack.Filters},
			ownTools: len(pack.Tools), ownFilters: len(pack.Filters)}
		sc.checkSkill(pack)
		pack.Tools, pack.Filters = sc.spec.Tools, sc.spec.Filters
		d.diags = append(d.diags, withNote(pd.diags, s.Skills[ls.ref].Pos, "the skill as this agent uses it")...)
		// The agent's with: may hand the pack a value from its environment, which
		// ${options.NAME} can put anywhere in the pack's tools.
		given := d.secretsUnder(d.at("skills", strconv.Itoa(ls.ref), "with").node)
		for i := range pack.Tools {
			pack.Tools[i].Skill = pack.Name
			for _, sec := range given {
				if !slices.Contains(pack.Tools[i].Secrets, sec) {
					pack.Tools[i].Secrets = append(pack.Tools[i].Secrets, sec)
				}
			}
			if !strings.HasPrefix(pack.Dir, BundledPrefix) {
				pack.Tools[i].SkillDir = pack.Dir
			}
		}
		for _, m := range pack.Missing(lookup) {
			at := location{pos: pack.Pos, path: "requires"}
			if r := pd.at("requires"); r.node != nil {
				at = r.keyPos(pd.file)
			}
			d.diags = append(d.diags, pd.withEnd(Diagnostic{Severity: Warning, Pos: at.pos, Path: at.path,
				Message: fmt.Sprintf("skill %s needs %s, which this machine lacks", pack.Name, m),
				Hint:    "runs fail until it is there", Notes: []Note{{Pos: s.Skills[ls.ref].Pos, Message: "the skill as this agent uses it"}}}))
		}
		s.Tools = append(s.Tools, pack.Tools...)
		s.Filters = append(s.Filters, pack.Filters...)
	}
	return loaded
}

func withNote(ds Diagnostics, pos Pos, msg string) Diagnostics {
	for i := range ds {
		ds[i].Notes = append(ds[i].Notes, Note{Pos: pos, Message: msg})
	}
	return ds
}

// openSkill finds a skill's skill.yaml: a directory relative to the agent's file, or
// a bundled skill by name.
func (l *Loader) openSkill(use, agentDir string) (*document, error) {
	if isSkillPath(use) {
		dir := use
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(agentDir, dir)
		}
		file := filepath.Join(dir, "skill.yaml")
		src, err := ReadFile(file, MaxFileSize)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("skill %q not found: no %s", use, file)
		} else if err != nil {
			return nil, fmt.Errorf("skill %q: %s", use, ioMessage(err))
		}
		return newDocument(file, src, skillFile), nil
	}
	if l.Bundled == nil {
		return nil, fmt.Errorf("unknown skill %q", use)
	}
	src, err := fs.ReadFile(l.Bundled, path.Join(use, "skill.yaml"))
	if err != nil {
		return nil, fmt.Errorf("unknown skill %q", use)
	}
	return newDocument(BundledPrefix+use+"/skill.yaml", src, skillFile), nil
}

// BundledSkills lists the names of the bundled skills.
func (l *Loader) BundledSkills() []string {
	if l.Bundled == nil {
		return nil
	}
	entries, _ := fs.ReadDir(l.Bundled, ".")
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

func isSkillPath(s string) bool {
	return strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, ".")
}

// parseSkill reads a skill.yaml: its options (declared in the file, set by the
// agent), then ${options.NAME} and ${VAR} substitution, the skill schema and typed
// decoding. It returns nil when the file cannot be decoded.
func (l *Loader) parseSkill(d, pd *document, ref *SkillRef, i int) *SkillPack {
	var values map[string]any
	var decl SkillOptions
	root, ok := l.prepare(pd, l.schemas.skill, func(root *yaml.Node) {
		if opts := pd.at("options"); opts.node != nil && opts.node.Kind == yaml.MappingNode {
			_ = opts.node.Decode(&decl) // the schema reports a malformed options section
		}
		values = optionValues(d, pd, decl, ref, i)
		pd.substituteOptions(root, "", values, decl)
	})
	if !ok {
		return nil
	}
	pack := &SkillPack{}
	if err := root.Decode(pack); err != nil {
		var typeErr *yaml.TypeError
		if !errors.As(err, &typeErr) {
			pd.errorf(pd.at(), "", "%v", strings.TrimPrefix(err.Error(), "yaml: "))
			return nil
		}
	}
	pack.Source = Source{Pos: pd.posOf(root)}
	pack.Values = values
	pack.Dir = filepath.Dir(pd.file)
	if strings.HasPrefix(pd.file, BundledPrefix) {
		pack.Dir = BundledPrefix + ref.Use
	}
	if pack.InstructionsFile != "" {
		at := pd.at("instructions_file")
		switch {
		case pack.Instructions.Source != "":
			pd.errorf(at.keyPos(pd.file), "keep one of them", "instructions and instructions_file are both set")
		default:
			text, err := l.readSkillFile(pack.Dir, pack.InstructionsFile)
			if err != nil {
				pd.errorf(at, "the file sits beside skill.yaml", "%v", err)
				break
			}
			// The file's text gets what inline instructions get: options, then ${VAR}.
			n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.LiteralStyle, Value: text, Line: at.pos.Line, Column: at.pos.Col}
			pd.substituteOptions(n, "instructions_file", values, decl)
			pd.interpolateTree(n, "instructions_file", l.lookupEnv())
			pack.Instructions = Template{Source: n.Value}
		}
	}
	return pack
}

func (l *Loader) readSkillFile(dir, name string) (string, error) {
	if bundled, ok := strings.CutPrefix(dir, BundledPrefix); ok {
		b, err := fs.ReadFile(l.Bundled, path.Join(bundled, name))
		return string(b), err
	}
	if filepath.IsAbs(name) || strings.Contains(filepath.ToSlash(filepath.Clean(name)), "..") {
		return "", fmt.Errorf("%s: instructions_file must name a file inside the skill's directory", name)
	}
	b, err := ReadFile(filepath.Join(dir, name), MaxFileSize)
	if err != nil {
		return "", errors.New(ioMessage(err))
	}
	return string(b), nil
}

// optionValues are the options in force: the declared defaults with the agent's
// with: over them. Problems with what the agent wrote point into the agent's file.
func optionValues(d, pd *document, decl SkillOptions, ref *SkillRef, i int) map[string]any {
	values := map[string]any{}
	names := make([]string, len(decl))
	for j, o := range decl {
		names[j] = o.Name
		if o.Default != nil {
			values[o.Name] = jsonValue(o.Default)
			if msg := optionTypeProblem(o.Type, values[o.Name]); msg != "" {
				pd.errorf(pd.at("options", o.Name, "default"), "", "default %s", msg)
			}
		}
	}
	idx := strconv.Itoa(i)
	for _, key := range slices.Sorted(maps.Keys(ref.With)) {
		at := d.at("skills", idx, "with", key)
		j := slices.Index(names, key)
		if j < 0 {
			hint := suggest(key, names)
			if hint == "" {
				hint = "the skill's options: " + cmp.Or(strings.Join(names, ", "), "none")
			}
			d.errorf(at.keyPos(d.file), hint, "skill %s has no option %q", ref.Use, key)
			continue
		}
		v := jsonValue(ref.With[key])
		if msg := optionTypeProblem(decl[j].Type, v); msg != "" {
			d.errorf(at, decl[j].Description, "option %s %s", key, msg)
			continue
		}
		values[key] = v
	}
	for _, o := range decl {
		if _, set := values[o.Name]; !set && o.Required {
			d.errorf(d.at("skills", idx), o.Description, "skill %s needs option %q (under with:)", ref.Use, o.Name)
		}
	}
	return values
}

// jsonValue turns YAML-decoded values (int, map[string]interface{}) into JSON ones.
func jsonValue(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}

func optionTypeProblem(typ string, v any) string {
	ok := true
	switch typ {
	case "string":
		_, ok = v.(string)
	case "number":
		_, ok = v.(float64)
	case "integer":
		f, isNum := v.(float64)
		ok = isNum && f == float64(int64(f))
	case "boolean":
		_, ok = v.(bool)
	case "array":
		_, ok = v.([]any)
	case "object":
		_, ok = v.(map[string]any)
	}
	if ok {
		return ""
	}
	article := "a"
	if strings.ContainsAny(typ[:1], "aeiou") {
		article = "an"
	}
	return fmt.Sprintf("must be %s %s, not %s", article, typ, describeValue(v))
}

func describeValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case nil:
		return "nothing"
	}
	return fmt.Sprint(v)
}

var optionRefRe = regexp.MustCompile(`\$\{options\.([A-Za-z0-9_-]*)\}`)

// substituteOptions replaces ${options.NAME} in scalar values. A scalar that is
// exactly one reference takes the option's value with its type (a list stays a
// list); inside a longer string the value is written as text.
func (d *document) substituteOptions(n *yaml.Node, path string, values map[string]any, decl SkillOptions) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			d.substituteOptions(c, p, values, decl)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if path == "" && key == "options" {
				continue // the declarations themselves
			}
			d.substituteOptions(n.Content[i+1], joinKey(path, key), values, decl)
		}
	case yaml.ScalarNode:
		matches := optionRefRe.FindAllStringSubmatchIndex(n.Value, -1)
		if len(matches) == 0 {
			return
		}
		for _, m := range matches {
			name := n.Value[m[2]:m[3]]
			if _, ok := values[name]; ok {
				continue
			}
			if !slices.ContainsFunc(decl, func(o SkillOption) bool { return o.Name == name }) {
				var names []string
				for _, o := range decl {
					names = append(names, o.Name)
				}
				at := location{path: path}
				at.pos, at.end = d.spanInScalar(n, m[0], m[1])
				d.errorf(at, suggest(name, names), "no option %q is declared", name)
			}
			if len(matches) == 1 && m[0] == 0 && m[1] == len(n.Value) {
				n.Value, n.Tag = "", "!!null" // an option that is not set is no value at all
				return
			}
		}
		if len(matches) == 1 && matches[0][0] == 0 && matches[0][1] == len(n.Value) {
			var repl yaml.Node
			if err := repl.Encode(values[n.Value[matches[0][2]:matches[0][3]]]); err == nil {
				setPositions(&repl, n.Line, n.Column)
				escapeDollars(&repl)
				*n = repl
			}
			return
		}
		n.Value = optionRefRe.ReplaceAllStringFunc(n.Value, func(ref string) string {
			v, ok := values[optionRefRe.FindStringSubmatch(ref)[1]]
			if !ok {
				return "" // declared, not set: nothing to write
			}
			// An option's value is the agent's, already expanded in the agent's
			// file: it must not be expanded again here.
			return strings.ReplaceAll(optionText(v), "$", "$$")
		})
		if n.Style == 0 {
			n.Tag = ""
		}
	}
}

// escapeDollars doubles every $ in a substituted value's scalars, so the skill
// file's own ${VAR} expansion leaves the agent's text as it was.
func escapeDollars(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		n.Value = strings.ReplaceAll(n.Value, "$", "$$")
	}
	for _, c := range n.Content {
		escapeDollars(c)
	}
}

func setPositions(n *yaml.Node, line, col int) {
	n.Line, n.Column = line, col
	for _, c := range n.Content {
		setPositions(c, line, col)
	}
}

func optionText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// checkSkill runs the checks of a pack's own file: its tools and filters against the
// agent's context, and its instructions. A tool_result filter that names no tools
// applies to the pack's own tools.
func (c *checker) checkSkill(pack *SkillPack) {
	c.user = userType(c.spec.Context.User)
	c.setSources()
	c.mcpTools = mcpToolNames(c.spec.MCPServers)
	c.checkTools()
	c.checkFilters()
	c.checkDurations()
	c.compileTemplate(&pack.Instructions, EnvInstructions.Types(VarTypes{User: c.user}), c.at("instructions"))
	var own []string
	for _, t := range c.spec.Tools {
		own = append(own, t.Name)
	}
	for i := range c.spec.Filters {
		if f := &c.spec.Filters[i]; f.On == StageToolResult && len(f.Tools) == 0 {
			f.Tools = own
		}
	}
}

// mcpToolNames maps the tools MCP servers allow to their server, without checking
// the servers (the agent's checker does that).
func mcpToolNames(servers []MCPServer) map[string]string {
	names, owners := allowedMCPTools(servers)
	out := map[string]string{}
	for i, name := range ModelToolNames(names) { // as the model sees them, like the agent's checks
		out[name] = owners[i]
	}
	return out
}

// mcpRenamed maps each allowed MCP tool whose name chat APIs refuse (prefix
// included) to the name the model sees instead.
func mcpRenamed(servers []MCPServer) map[string]string {
	names, _ := allowedMCPTools(servers)
	out := map[string]string{}
	for i, seen := range ModelToolNames(names) {
		if seen != names[i] {
			out[names[i]] = seen
		}
	}
	return out
}

// allowedMCPTools lists the tools MCP servers allow, with their prefix, and each
// one's server.
func allowedMCPTools(servers []MCPServer) (names, owners []string) {
	for _, s := range servers {
		for _, t := range s.Tools {
			names, owners = append(names, s.Prefix+t), append(owners, s.Name)
		}
	}
	return names, owners
}

// mergeInstructions appends each skill's instructions to the agent's, under the
// skill's heading, in the order the agent lists its skills.
func mergeInstructions(s *Spec, packs []loadedSkill) {
	for _, ls := range packs {
		p := ls.pack
		if strings.TrimSpace(p.Instructions.Source) == "" {
			continue
		}
		heading := "\n\n## Skill: " + p.Name + "\n"
		if s.Instructions.Source == "" {
			heading = "## Skill: " + p.Name + "\n"
		}
		parts := p.Instructions.Parts
		if parts == nil {
			parts = []TemplatePart{{Text: p.Instructions.Source}}
		}
		if s.Instructions.Parts == nil && s.Instructions.Source != "" {
			s.Instructions.Parts = []TemplatePart{{Text: s.Instructions.Source}}
		}
		s.Instructions.Source = strings.TrimRight(s.Instructions.Source, "\n") + heading + strings.TrimRight(p.Instructions.Source, "\n")
		s.Instructions.Parts = append(append(trimParts(s.Instructions.Parts), TemplatePart{Text: heading}), parts...)
	}
}

// trimParts drops trailing line breaks of a template's last literal part.
func trimParts(parts []TemplatePart) []TemplatePart {
	if n := len(parts); n > 0 && parts[n-1].Program == nil {
		parts = slices.Clone(parts)
		parts[n-1].Text = strings.TrimRight(parts[n-1].Text, "\n")
	}
	return parts
}

// dropDisabled removes the tools whose enabled is false, once every check is done.
func dropDisabled(s *Spec) {
	s.Tools = slices.DeleteFunc(s.Tools, func(t Tool) bool { return t.Enabled != nil && !*t.Enabled })
}
