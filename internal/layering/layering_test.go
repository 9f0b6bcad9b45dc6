package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A group is a set of our packages, by module-relative import path ("" is the root
// package); a pattern ending in "/..." takes that package and all below it, one
// ending in "/**" only those below it.
type group struct {
	name     string // as a list of allowed imports names it
	long     string // as the subject of a rule names it; name when empty
	patterns []string
}

func (g group) has(rel string) bool {
	for _, p := range g.patterns {
		if base, below := strings.CutSuffix(p, "/**"); below && strings.HasPrefix(rel, base+"/") {
			return true
		}
		if base, tree := strings.CutSuffix(p, "/..."); tree && (rel == base || strings.HasPrefix(rel, base+"/")) {
			return true
		}
		if rel == p {
			return true
		}
	}
	return false
}

func (g group) subject() string {
	if g.long != "" {
		return g.long
	}
	return g.name
}

var (
	schemaPkg = group{name: "schema", patterns: []string{"schema"}}
	// The examples package only embeds examples/agents for `agentrun init --from`.
	examplesPkg = group{name: "examples", patterns: []string{"examples"}}
	specPkg     = group{name: "spec", patterns: []string{"spec"}}
	runtimePkgs = group{name: "runtime/...", patterns: []string{"runtime/..."}}
	// Inside runtime: the engine, the interface package of each family, the
	// implementations beneath them, and the two packages that wrap the engine.
	enginePkg     = group{name: "runtime", long: "the engine (runtime)", patterns: []string{"runtime"}}
	interfacePkgs = group{
		name:     "the interface packages",
		long:     "an interface package (runtime/model, runtime/tool, runtime/store, runtime/knowledge)",
		patterns: families,
	}
	wrapperPkgs = group{name: "runtime/telemetry and runtime/temporal", patterns: []string{"runtime/telemetry", "runtime/temporal"}}
	skillsPkg   = group{name: "skills", patterns: []string{"skills"}}
	builtinPkg  = group{name: "builtin", patterns: []string{"builtin"}}
	scenarioPkg = group{name: "scenario", patterns: []string{"scenario"}}
	// The graders of an eval's answers: the eval runner beside scenario calls them.
	gradePkg = group{name: "scenario/grade", patterns: []string{"scenario/grade"}}
	middle   = group{
		name:     "the middle layer",
		long:     "the middle layer (runtime/..., skills, builtin, scenario/...)",
		patterns: []string{"runtime/...", "skills", "builtin", "scenario/..."},
	}
	// The assembly is the root package.
	assembly = group{name: "the root package", long: "the root package (assembly)", patterns: []string{""}}
	cmdPkgs  = group{name: "cmd/...", patterns: []string{"cmd/..."}}
	// The HTTP server sits between cmd and the assembly: it serves assembled agents.
	servePkg = group{name: "serve", patterns: []string{"serve"}}
	// The web console's pages, which serve serves: a leaf that imports nothing of
	// the module (it talks to the server over HTTP, from the browser).
	consolePkg = group{name: "console", patterns: []string{"console"}}
	// Benchmarks drive the program from the top, like cmd.
	benchPkgs    = group{name: "bench/...", patterns: []string{"bench/..."}}
	internalPkgs = group{name: "internal/...", patterns: []string{"internal/..."}}
	// Example programs (the shop examples' demo backend) stand beside the module's
	// layers, like bench: they may use agentrun from the top, and nothing imports
	// them but tests. (The examples package itself, the bundled example files that
	// init copies, is also examplesPkg, which imports nothing.)
	examplePkgs = group{name: "examples/...", patterns: []string{"examples/..."}}
)

// families are the interface packages; each one's implementations live beneath it.
var families = []string{"runtime/model", "runtime/tool", "runtime/store", "runtime/knowledge"}

// implementations is the group of one family's implementations.
func implementations(family string) group {
	return group{name: family + "/...", long: "an implementation of " + family, patterns: []string{family + "/**"}}
}

// familyRules: an implementation imports the interface packages, its own family,
// spec, schema and internal helpers — never the engine, never another family's
// implementation (a store is not built on a model, an index not on a store).
func familyRules() []rule {
	var out []rule
	for _, f := range families {
		out = append(out, rule{pkgs: implementations(f), only: []group{interfacePkgs, implementations(f), specPkg, schemaPkg, internalPkgs}})
	}
	return out
}

// layers are the groups every package of the module must belong to, so a new
// top-level package fails the test until someone decides where it stands.
var layers = []group{schemaPkg, examplesPkg, consolePkg, specPkg, middle, assembly, servePkg, cmdPkgs, benchPkgs, internalPkgs, examplePkgs}

// A rule limits what the packages of one group import: to the groups in only (when
// set), and never the groups in not.
type rule struct {
	pkgs group
	only []group
	not  []group
}

// rules is DESIGN.md's layering: cmd → serve → assembly → middle → spec → schema, a layer may
// skip the ones below it, nothing imports upward; internal/... helpers serve every
// layer but lean only on schema, spec and each other (pgtest on pgdb). Inside the middle layer runtime stays
// ignorant of what plugs into it (builtin tools, skill packs, scenario tests), skills
// only turns packs into spec fragments, and builtin and scenario stay apart.
var rules = append([]rule{
	{pkgs: schemaPkg, only: []group{internalPkgs}},
	{pkgs: examplesPkg, only: []group{}},
	{pkgs: consolePkg, only: []group{}},
	{pkgs: specPkg, only: []group{schemaPkg, internalPkgs}},
	{pkgs: middle, only: []group{middle, specPkg, schemaPkg, internalPkgs}},
	{pkgs: runtimePkgs, not: []group{builtinPkg, skillsPkg, scenarioPkg}},
	{pkgs: enginePkg, only: []group{interfacePkgs, specPkg, schemaPkg, internalPkgs}},
	{pkgs: interfacePkgs, only: []group{interfacePkgs, specPkg, schemaPkg, internalPkgs}},
	{pkgs: wrapperPkgs, only: []group{enginePkg, interfacePkgs, specPkg, schemaPkg, internalPkgs}},
	// builtin tools implement runtime/tool's interface, like the tool kinds beneath it.
	{pkgs: builtinPkg, only: []group{interfacePkgs, implementations("runtime/tool"), specPkg, schemaPkg, internalPkgs}},
	{pkgs: skillsPkg, not: []group{runtimePkgs, builtinPkg, scenarioPkg}},
	{pkgs: builtinPkg, not: []group{scenarioPkg, skillsPkg}},
	{pkgs: scenarioPkg, not: []group{builtinPkg, skillsPkg}},
	// The graders judge an answer's text, asking a grader model through its
	// interface: they need neither the engine nor an implementation, so the eval
	// runner, its tests and anything else can use them with any model.
	{pkgs: gradePkg, only: []group{interfacePkgs, specPkg, internalPkgs}},
	{pkgs: assembly, only: []group{middle, specPkg, schemaPkg, internalPkgs}},
	{pkgs: servePkg, only: []group{assembly, middle, specPkg, schemaPkg, consolePkg, internalPkgs}},
	{pkgs: cmdPkgs, only: []group{cmdPkgs, servePkg, assembly, middle, specPkg, schemaPkg, examplesPkg, internalPkgs}},
	{pkgs: benchPkgs, only: []group{servePkg, assembly, middle, specPkg, schemaPkg, internalPkgs}},
	{pkgs: examplePkgs, only: []group{examplePkgs, servePkg, assembly, middle, specPkg, schemaPkg}},
	{pkgs: internalPkgs, only: []group{internalPkgs, schemaPkg, specPkg}},
}, familyRules()...)

// violations checks an import graph of our packages — module-relative path ("" for
// the root package) → the packages of ours it imports — against the rules and says,
// for each import that breaks one, which rule it breaks: ordered by importer, then
// import; nil when all is legal.
func violations(pkgs map[string][]string) []string {
	var out []string
	for _, from := range slices.Sorted(maps.Keys(pkgs)) {
		if !slices.ContainsFunc(layers, func(g group) bool { return g.has(from) }) {
			out = append(out, fmt.Sprintf("%s is in no layer: give it a place in the rules of internal/layering", show(from)))
		}
		imports := slices.Clone(pkgs[from])
		slices.Sort(imports)
		for _, to := range slices.Compact(imports) {
			for _, r := range rules {
				if !r.pkgs.has(from) {
					continue
				}
				inAny := func(gs []group) bool { return slices.ContainsFunc(gs, func(g group) bool { return g.has(to) }) }
				if r.only != nil && !inAny(r.only) {
					out = append(out, fmt.Sprintf("%s imports %s: %s may import only %s", show(from), show(to), r.pkgs.subject(), names(r.only, "and")))
				}
				if inAny(r.not) {
					out = append(out, fmt.Sprintf("%s imports %s: %s must not import %s", show(from), show(to), r.pkgs.subject(), names(r.not, "or")))
				}
			}
		}
	}
	return out
}

func show(rel string) string {
	if rel == "" {
		return "the root package"
	}
	return rel
}

// names lists groups as prose: "a", "a and b", "a, b and c".
func names(gs []group, conj string) string {
	var s []string
	for _, g := range gs {
		s = append(s, g.name)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " " + conj + " " + s[len(s)-1]
}

// TestLayering checks the real import graph. Only Imports counts: tests may reach
// across layers (cmd's tests drive everything, spec's tests share internal helpers).
func TestLayering(t *testing.T) {
	graph := importGraph(t)
	// A misread module path would classify nothing and so pass: make sure the
	// graph holds the packages every layer rests on.
	for _, must := range []string{"schema", "spec", "runtime", "cmd/agentrun"} {
		if _, ok := graph[must]; !ok {
			t.Fatalf("go list found no package %s; read %d packages", must, len(graph))
		}
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// importGraph lists the module's packages with `go list` from the module root, keeping
// only imports of the module's own packages, by module-relative path.
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	// -e: a package that does not build (someone's work in progress) still lists
	// its imports; compiling is not this test's business.
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Module,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", root, err, stderr.Bytes())
	}
	type pkg struct {
		ImportPath string
		Imports    []string
		Module     *struct{ Path string }
		Error      *struct{ Err string }
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Logf("%s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Module == nil {
			t.Fatalf("go list: %s belongs to no module", p.ImportPath)
		}
		from, ok := relative(p.Module.Path, p.ImportPath)
		if !ok {
			continue
		}
		graph[from] = []string{}
		for _, imp := range p.Imports {
			if to, ok := relative(p.Module.Path, imp); ok {
				graph[from] = append(graph[from], to)
			}
		}
	}
	return graph
}

// relative returns path relative to module ("" for the module's root package) and
// whether path is in the module at all.
func relative(module, path string) (string, bool) {
	if path == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// today is the module's import graph as of this writing, plus a helper leaning on
// spec: all of it legal.
var today = map[string][]string{
	"":                                  {"builtin", "runtime", "runtime/knowledge", "runtime/knowledge/index", "runtime/knowledge/index/postgres", "runtime/knowledge/index/sqlite", "runtime/model", "runtime/model/offline", "runtime/model/openai", "runtime/store", "runtime/store/memory", "runtime/store/postgres", "runtime/store/redis", "runtime/store/sqlite", "runtime/telemetry", "runtime/tool", "runtime/tool/kinds", "runtime/tool/mcp", "skills", "spec"},
	"builtin":                           {"runtime/tool", "runtime/tool/kinds", "spec"},
	"cmd/agentrun":                      {"", "builtin", "runtime", "runtime/knowledge/index", "runtime/model/offline", "runtime/store", "scenario", "schema", "skills", "spec", "internal/fixture"},
	"internal/fixture":                  nil,
	"internal/helper":                   {"spec", "schema"},
	"internal/sqlitedb":                 nil,
	"internal/tracecontext":             nil,
	"internal/layering":                 nil,
	"runtime":                           {"internal/words", "runtime/knowledge", "runtime/model", "runtime/store", "runtime/tool", "spec"},
	"runtime/knowledge":                 {"internal/words", "spec"},
	"runtime/knowledge/index":           {"runtime/knowledge"},
	"runtime/knowledge/index/indextest": {"runtime/knowledge"},
	"runtime/knowledge/index/postgres":  {"internal/pgdb", "runtime/knowledge", "runtime/knowledge/index"},
	"runtime/knowledge/index/sqlite":    {"internal/sqlitedb", "runtime/knowledge", "runtime/knowledge/index"},
	"runtime/model":                     nil,
	"runtime/model/offline":             {"runtime/model", "spec"},
	"runtime/model/openai":              {"runtime/knowledge", "runtime/model", "spec"},
	"runtime/store":                     {"runtime/model"},
	"runtime/store/memory":              {"runtime/model", "runtime/store"},
	"runtime/store/postgres":            {"internal/pgdb", "runtime/model", "runtime/store"},
	"runtime/store/redis":               {"runtime/model", "runtime/store"},
	"runtime/store/sqlite":              {"internal/sqlitedb", "runtime/model", "runtime/store"},
	"runtime/store/storetest":           {"runtime/model", "runtime/store"},
	"runtime/telemetry":                 {"runtime", "runtime/knowledge", "runtime/model", "runtime/tool", "spec"},
	"runtime/temporal":                  {"runtime", "runtime/knowledge", "runtime/model", "runtime/store", "runtime/tool", "spec"},
	"runtime/tool":                      {"runtime/model", "spec"},
	"runtime/tool/kinds":                {"internal/tracecontext", "runtime/tool", "spec"},
	"runtime/tool/mcp":                  {"internal/tracecontext", "runtime/model", "runtime/tool", "spec"},
	"scenario":                          {"runtime", "runtime/knowledge", "runtime/model/offline", "runtime/store", "runtime/store/memory", "runtime/tool", "spec"},
	"scenario/grade":                    {"runtime/model", "spec"},
	"schema":                            nil,
	"skills":                            {"spec", "schema"},
	"spec":                              {"schema", "internal/fixture"},
}

// with returns today's graph plus the edges of extra.
func with(extra map[string][]string) map[string][]string {
	g := map[string][]string{}
	for k, v := range today {
		g[k] = slices.Clone(v)
	}
	for k, v := range extra {
		g[k] = append(g[k], v...)
	}
	return g
}

func TestViolations(t *testing.T) {
	const middleOnly = "the middle layer (runtime/..., skills, builtin, scenario/...) may import only the middle layer, spec, schema and internal/..."
	const engineOnly = "the engine (runtime) may import only the interface packages, spec, schema and internal/..."
	const interfaceOnly = "an interface package (runtime/model, runtime/tool, runtime/store, runtime/knowledge) may import only the interface packages, spec, schema and internal/..."
	const builtinOnly = "builtin may import only the interface packages, runtime/tool/..., spec, schema and internal/..."
	implOnly := func(family string) string {
		return "the interface packages, " + family + "/..., spec, schema and internal/..."
	}
	withoutRoot := with(nil)
	delete(withoutRoot, "")
	withoutRoot["cmd/agentrun"] = slices.DeleteFunc(withoutRoot["cmd/agentrun"], func(s string) bool { return s == "" })
	tests := []struct {
		name  string
		graph map[string][]string
		want  []string
	}{
		{name: "today with a root package", graph: with(nil)},
		{name: "today without a root package", graph: withoutRoot},
		{name: "an import listed twice is one violation", graph: with(map[string][]string{"spec": {"runtime", "runtime"}}),
			want: []string{"spec imports runtime: spec may import only schema and internal/..."}},
		{name: "spec imports runtime", graph: with(map[string][]string{"spec": {"runtime"}}),
			want: []string{"spec imports runtime: spec may import only schema and internal/..."}},
		{name: "schema imports spec", graph: with(map[string][]string{"schema": {"spec"}}),
			want: []string{"schema imports spec: schema may import only internal/..."}},
		{name: "runtime imports builtin", graph: with(map[string][]string{"runtime": {"builtin"}}),
			want: []string{"runtime imports builtin: runtime/... must not import builtin, skills or scenario", "runtime imports builtin: " + engineOnly}},
		{name: "a runtime sub-package imports scenario", graph: with(map[string][]string{"runtime/tool/kinds": {"scenario"}}),
			want: []string{
				"runtime/tool/kinds imports scenario: runtime/... must not import builtin, skills or scenario",
				"runtime/tool/kinds imports scenario: an implementation of runtime/tool may import only " + implOnly("runtime/tool"),
			}},
		{name: "runtime/model/openai imports the root package", graph: with(map[string][]string{"runtime/model/openai": {""}}),
			want: []string{
				"runtime/model/openai imports the root package: " + middleOnly,
				"runtime/model/openai imports the root package: an implementation of runtime/model may import only " + implOnly("runtime/model"),
			}},
		{name: "runtime imports cmd", graph: with(map[string][]string{"runtime": {"cmd/agentrun"}}),
			want: []string{"runtime imports cmd/agentrun: " + middleOnly, "runtime imports cmd/agentrun: " + engineOnly}},
		{name: "skills imports runtime", graph: with(map[string][]string{"skills": {"runtime/model/offline"}}),
			want: []string{"skills imports runtime/model/offline: skills must not import runtime/..., builtin or scenario"}},
		{name: "the engine imports an implementation", graph: with(map[string][]string{"runtime": {"runtime/model/openai", "runtime/store/sqlite", "runtime/tool/mcp", "runtime/knowledge/index/sqlite"}}),
			want: []string{
				"runtime imports runtime/knowledge/index/sqlite: " + engineOnly,
				"runtime imports runtime/model/openai: " + engineOnly,
				"runtime imports runtime/store/sqlite: " + engineOnly,
				"runtime imports runtime/tool/mcp: " + engineOnly,
			}},
		{name: "the engine imports a wrapper", graph: with(map[string][]string{"runtime": {"runtime/telemetry"}}),
			want: []string{"runtime imports runtime/telemetry: " + engineOnly}},
		{name: "an interface package imports the engine", graph: with(map[string][]string{"runtime/tool": {"runtime"}}),
			want: []string{"runtime/tool imports runtime: " + interfaceOnly}},
		{name: "an interface package imports an implementation", graph: with(map[string][]string{"runtime/store": {"runtime/store/sqlite"}}),
			want: []string{"runtime/store imports runtime/store/sqlite: " + interfaceOnly}},
		{name: "an implementation imports the engine", graph: with(map[string][]string{"runtime/store/redis": {"runtime"}}),
			want: []string{"runtime/store/redis imports runtime: an implementation of runtime/store may import only " + implOnly("runtime/store")}},
		{name: "an implementation imports another family's implementation", graph: with(map[string][]string{"runtime/knowledge/index/sqlite": {"runtime/store/sqlite"}}),
			want: []string{"runtime/knowledge/index/sqlite imports runtime/store/sqlite: an implementation of runtime/knowledge may import only " + implOnly("runtime/knowledge")}},
		{name: "an implementation imports a wrapper", graph: with(map[string][]string{"runtime/tool/kinds": {"runtime/telemetry"}}),
			want: []string{"runtime/tool/kinds imports runtime/telemetry: an implementation of runtime/tool may import only " + implOnly("runtime/tool")}},
		{name: "a wrapper imports an implementation", graph: with(map[string][]string{"runtime/temporal": {"runtime/store/sqlite"}}),
			want: []string{"runtime/temporal imports runtime/store/sqlite: runtime/telemetry and runtime/temporal may import only runtime, the interface packages, spec, schema and internal/..."}},
		{name: "builtin imports the engine", graph: with(map[string][]string{"builtin": {"runtime"}}),
			want: []string{"builtin imports runtime: " + builtinOnly}},
		{name: "builtin imports skills and scenario", graph: with(map[string][]string{"builtin": {"skills", "scenario"}}),
			want: []string{
				"builtin imports scenario: " + builtinOnly,
				"builtin imports scenario: builtin must not import scenario or skills",
				"builtin imports skills: " + builtinOnly,
				"builtin imports skills: builtin must not import scenario or skills",
			}},
		{name: "scenario imports builtin", graph: with(map[string][]string{"scenario": {"builtin"}}),
			want: []string{"scenario imports builtin: scenario must not import builtin or skills"}},
		{name: "the graders import the engine and a model implementation", graph: with(map[string][]string{"scenario/grade": {"runtime", "runtime/model/openai"}}),
			want: []string{
				"scenario/grade imports runtime: scenario/grade may import only the interface packages, spec and internal/...",
				"scenario/grade imports runtime/model/openai: scenario/grade may import only the interface packages, spec and internal/...",
			}},
		{name: "the root package imports cmd", graph: with(map[string][]string{"": {"cmd/agentrun"}}),
			want: []string{"the root package imports cmd/agentrun: the root package (assembly) may import only the middle layer, spec, schema and internal/..."}},
		{name: "a helper imports runtime", graph: with(map[string][]string{"internal/helper": {"runtime"}}),
			want: []string{"internal/helper imports runtime: internal/... may import only internal/..., schema and spec"}},
		{name: "a package in no layer", graph: with(map[string][]string{"tools/gen": {"spec"}}),
			want: []string{"tools/gen is in no layer: give it a place in the rules of internal/layering"}},
		{name: "a sub-package of spec is in no layer yet", graph: with(map[string][]string{"spec/vocab": nil, "spec": {"spec/vocab"}}),
			want: []string{
				"spec imports spec/vocab: spec may import only schema and internal/...",
				"spec/vocab is in no layer: give it a place in the rules of internal/layering",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := violations(tt.graph)
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}
