package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// loadedSpec is one agent spec as load returns it, so that a parent using it as a
// sub-agent can report its first error where that error arose.
type loadedSpec struct {
	spec  *Spec
	diags Diagnostics
	// causes maps the position of each agents entry whose spec has errors to the
	// first of them, in the deepest file it came from.
	causes map[Pos]Diagnostic
}

// agentKey identifies a spec file for cycle detection: its real path, or its
// absolute path when it has none (a file that does not exist, such as a test's).
func agentKey(file string) string {
	if p, err := realPath(file); err == nil {
		return p
	}
	if p, err := filepath.Abs(file); err == nil {
		return p
	}
	return file
}

// loadAgents loads the spec of every agents entry with this Loader, relative to the
// spec's directory, and sets Loaded for those without errors. Only the entry in
// this file is reported: a sub-spec's errors become one error at its spec value
// (its warnings are its own), a cycle or a chain deeper than MaxAgentDepth an error
// at the entry that closes or deepens it. The stack of real paths goes down the
// recursion instead of state on the Loader, which loads files concurrently. seen
// keeps each sub-spec loaded under one stack, so that entries naming the same file
// load it once, not once per path through the agents.
func (l *Loader) loadAgents(d *document, s *Spec, stack []string, seen map[string]loadedSpec) map[Pos]Diagnostic {
	causes := map[Pos]Diagnostic{}
	for i := range s.Agents {
		a := &s.Agents[i]
		idx := strconv.Itoa(i)
		entry := d.at("agents", idx)
		a.Source = Source{Pos: entry.pos, Path: entry.path}
		at := d.at("agents", idx, "spec")
		if a.Spec == "" || at.node == nil || d.failed[entry.path] || d.failed[at.path] {
			continue
		}
		file := a.Spec
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(d.file), file)
		}
		key, err := realPath(file)
		if err != nil {
			d.errorf(at, "spec is the agent's spec file, relative to this file's directory, such as ./agents/refunds.yaml", "%s", agentReadMessage(a.Spec, file, err))
			continue
		}
		if j := slices.Index(stack, key); j >= 0 {
			d.errorf(at, "an agent cannot use itself, directly or through other agents: remove one of these entries",
				"%s: the agents form a cycle", chainOf(stack[j:], key))
			continue
		}
		if len(stack) > MaxAgentDepth {
			d.errorf(at, fmt.Sprintf("an agent's sub-agent is 1 deep, its sub-agent 2, and so on; give %s to an agent higher up, or merge two of the levels", a.Spec),
				"%s: sub-agents nest at most %d deep", chainOf(stack, key), MaxAgentDepth)
			continue
		}
		subStack := append(slices.Clip(stack), key)
		memo := strings.Join(subStack, "\x00")
		sub, ok := seen[memo]
		if !ok {
			src, err := ReadFile(file, MaxFileSize)
			if err != nil {
				d.errorf(at, "spec is the agent's spec file, relative to this file's directory, such as ./agents/refunds.yaml", "%s", agentReadMessage(a.Spec, file, err))
				continue
			}
			sub = l.load(file, src, subStack, seen)
			seen[memo] = sub
		}
		if sub.spec != nil && a.Description == "" {
			a.Description = sub.spec.Description // the model chooses agents by it
		}
		errs := sub.diags.Errors()
		if len(errs) == 0 {
			a.Loaded = sub.spec
			continue
		}
		first := errs[0]
		if cause, ok := sub.causes[first.Pos]; ok {
			first = cause
		}
		const hint = "a sub-agent's spec must be valid on its own: agentrun validate %s lists its problems"
		if len(errs) == 1 {
			d.errorf(at, fmt.Sprintf(hint, file), "%s has 1 error: %s: %s", a.Spec, first.Pos, first.Summary())
		} else {
			d.errorf(at, fmt.Sprintf(hint, file), "%s has %d errors; the first: %s: %s", a.Spec, len(errs), first.Pos, first.Summary())
		}
		causes[at.pos] = first
	}
	return causes
}

// chainOf names the files of a chain of sub-agents: "a.yaml → b.yaml → c.yaml".
func chainOf(stack []string, last string) string {
	names := make([]string, 0, len(stack)+1)
	for _, p := range append(slices.Clip(stack), last) {
		names = append(names, filepath.Base(p))
	}
	return strings.Join(names, " → ")
}

// agentReadMessage says why an agents entry's spec file cannot be read.
func agentReadMessage(spec, file string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("agent spec %q not found: no %s", spec, file)
	}
	return fmt.Sprintf("agent spec %q: %s", spec, ioMessage(err))
}

// isFalse reports whether n is the boolean false, which turns a `plan` off.
func isFalse(n *yaml.Node) bool {
	var b bool
	n = resolveAlias(n)
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" && n.Decode(&b) == nil && !b
}
