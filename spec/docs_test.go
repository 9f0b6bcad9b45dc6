package spec

import (
	"os"
	"strings"
	"testing"
)

// The reference docs are written by hand, but their defaults, the actions each
// filter stage allows and the variables of each expression place come from the
// tables the checker and the runtime read; these tests keep the two equal.

func readSpecDoc(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// docSection returns the lines under a heading, up to the next heading of the same
// or a higher level.
func docSection(t *testing.T, lines []string, heading string) []string {
	t.Helper()
	level := strings.Index(heading, " ")
	for i, l := range lines {
		if l != heading {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if h := strings.Index(lines[j], " "); h > 0 && h <= level && strings.Trim(lines[j][:h], "#") == "" {
				end = j
				break
			}
		}
		return lines[i+1 : end]
	}
	t.Fatalf("docs/spec.md has no heading %q", heading)
	return nil
}

// tableRow returns the cells of the row whose first cell is first.
func tableRow(lines []string, first string) []string {
	for _, l := range lines {
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		if len(cells) > 1 && strings.TrimSpace(cells[0]) == first {
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			return cells
		}
	}
	return nil
}

func TestDocsDefaults(t *testing.T) {
	lines := readSpecDoc(t)
	headings := map[string]string{"model": "## model", "guards": "## guards", "judge": "## judge", "routing": "## routing",
		"intents": "## intents", "memory": "## memory", "memory.facts": "### facts", "intents.cache": "### cache", "intents.rag": "### rag",
		"embeddings": "## embeddings", "knowledge": "## knowledge", "knowledge.collections": "### collections",
		"approval": "## approval", "plan": "## plan"}
	for _, d := range Defaults {
		i := strings.LastIndex(d.Key, ".")
		section, key := d.Key[:i], d.Key[i+1:]
		row := tableRow(docSection(t, lines, headings[section]), "`"+key+"`")
		switch {
		case len(row) < 3:
			t.Errorf("%s: no row for `%s` under %q", d.Key, key, headings[section])
		case row[2] != d.Value:
			t.Errorf("%s: the docs say the default is %s, the code %s", d.Key, row[2], d.Value)
		}
	}
}

func TestDocsFilterStages(t *testing.T) {
	section := docSection(t, readSpecDoc(t), "## filters")
	for _, fs := range FilterStages {
		var want []string
		for _, a := range fs.Actions {
			want = append(want, "`"+string(a)+"`")
		}
		row := tableRow(section, "`"+string(fs.Stage)+"`")
		if len(row) < 2 || row[1] != strings.Join(want, ", ") {
			t.Errorf("stage %s: the docs list %v, the code %s", fs.Stage, row, strings.Join(want, ", "))
		}
	}
	for _, k := range FilterKeys {
		row := tableRow(section, "`"+k.Key+"`")
		var names []string
		for _, a := range k.Actions {
			names = append(names, "`"+string(a)+"`")
		}
		only := "Only with action " + strings.Join(names, "")
		if len(names) > 1 {
			only = "Only with actions " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
		}
		if len(row) < 4 || !strings.Contains(row[3], only) {
			t.Errorf("key %s: the docs say %v; want %q", k.Key, row, only)
		}
	}
}

func TestDocsExpressionEnvironments(t *testing.T) {
	section := docSection(t, readSpecDoc(t), "## Expression environments")
	places := []struct {
		place string
		env   Env
	}{
		{"`instructions`", EnvInstructions},
		{"`tools[].http.url`, `.headers.*`, `.query.*`, string leaves of `.body`", EnvToolTemplate},
		{"`tools[].command.env.*`", EnvToolTemplate},
		{"`tools[].accept`", EnvAccept},
		{"`tools[].collect.*`", EnvCollect},
		{"`tools[].approval.when`", EnvApproval},
		{"`tools[].approval.message`", EnvApproval},
		{"`mcp_servers[].headers.*`", EnvMCPHeaders},
		{"`memory.facts.from_tools[].when`", EnvFactRule},
		{"`memory.facts.from_tools[].set.*`, `.append.*`", EnvFactRule},
		{"`filters[].when` with `on: input`", FilterEnv(StageInput)},
		{"`filters[].when` with `on: tool_result`", FilterEnv(StageToolResult)},
		{"`filters[].when` with `on: answer`", FilterEnv(StageAnswer)},
		{"`workflow.steps[].when`, `.for_each`, `.args.*`, `.model.prompt`, `.task`, `.loop.until`, `workflow.answer`", EnvWorkflow},
		{"the same in a `for_each` step (but `for_each` itself)", EnvWorkflowItem},
	}
	for _, p := range places {
		var want []string
		for _, v := range p.env {
			want = append(want, "`"+string(v)+"`")
		}
		row := tableRow(section, p.place)
		if len(row) < 4 || row[3] != strings.Join(want, ", ") {
			t.Errorf("%s: the docs list %v, the code %s", p.place, row, strings.Join(want, ", "))
		}
	}
}

// Types and Values of every environment name the same variables, so what an
// expression was checked against is what it runs with — the hidden in_seen, which
// the rewritten membership tests call, included.
func TestEnvTypesMatchValues(t *testing.T) {
	envs := []Env{EnvInstructions, EnvToolTemplate, EnvAccept, EnvCollect, EnvApproval, EnvMCPHeaders, EnvFactRule, EnvWorkflow, EnvWorkflowItem}
	for _, fs := range FilterStages {
		envs = append(envs, FilterEnv(fs.Stage))
	}
	for _, e := range envs {
		visible := e.Types(VarTypes{User: userType(nil)})
		types := withInSeen(visible)
		values := e.Values(&Values{})
		if len(visible) != len(e) || len(values) != len(types) {
			t.Errorf("%v: %d types (%d visible), %d values", e, len(types), len(visible), len(values))
		}
		for name := range types {
			if _, ok := values[name]; !ok {
				t.Errorf("%v: %s has a type but no value", e, name)
			}
		}
	}
}
