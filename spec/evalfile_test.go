package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/fixture"
	"github.com/agentrun/agentrun/schema"
)

// TestValidEvalFiles loads eval files that must be clean (the fixtures and the
// examples') and compares the decoded file, datasets' rows included, as JSON with a
// golden file.
func TestValidEvalFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/evalfiles/*.evals.yaml")
	examples, _ := filepath.Glob("../examples/agents/*.evals.yaml")
	files = append(files, examples...)
	if len(files) < 2 {
		t.Fatalf("found only %v", files)
	}
	l := newTestLoader(t)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".evals.yaml")
		t.Run(name, func(t *testing.T) {
			f, diags := l.LoadEvalFile(file)
			if len(diags) > 0 {
				t.Fatalf("diagnostics for a valid eval file:\n%v", diags)
			}
			got, err := json.MarshalIndent(f, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", "eval-"+name+".json")
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
				t.Errorf("decoded eval file differs from %s (go test ./spec -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

// What loading fills in and compiles, so the runner never does it again.
func TestEvalFileLoaded(t *testing.T) {
	f, diags := newTestLoader(t).LoadEvalFile("testdata/evalfiles/everything.evals.yaml")
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if f.SpecPath() != filepath.Join("testdata", "agents", "refunds.yaml") {
		t.Errorf("spec path %s", f.SpecPath())
	}
	if got := f.At("cases", "1", "turns"); got.Path != "cases[1].turns" || got.Pos.Line != 33 {
		t.Errorf("At = %+v", got)
	}
	one, conv := f.Cases[0], f.Cases[1]
	if one.Repeat != 5 || *one.MinPassRate != 0.8 || conv.Repeat != 2 || *conv.MinPassRate != 0.5 {
		t.Errorf("rates: %d %v, %d %v", one.Repeat, *one.MinPassRate, conv.Repeat, *conv.MinPassRate)
	}
	if !slices.Equal(conv.Messages(), []string{"I want to change my address", "To 1 Main St"}) || !slices.Equal(one.Messages(), []string{"Where is my order?"}) {
		t.Errorf("messages %q %q", one.Messages(), conv.Messages())
	}
	var kinds []GraderKind
	for _, g := range one.Graders {
		kinds = append(kinds, g.Kind)
	}
	want := []GraderKind{GraderContains, GraderNotContains, GraderRegex, GraderEquals, GraderJSONPath, GraderJSONPath, GraderJSONPath, GraderLLM, GraderLLM}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds %v", kinds)
	}
	if one.Graders[1].Label() != "polite" || one.Graders[0].Label() != "contains" {
		t.Errorf("labels %q %q", one.Graders[1].Label(), one.Graders[0].Label())
	}
	if re := one.Graders[2].Regex.Re; re == nil || !re.MatchString("3 Minutes") {
		t.Error("regex not compiled")
	}
	if one.Expect.Answer.Re == nil {
		t.Error("expect.answer.matches not compiled")
	}
	jp := one.Graders[4].JSONPath
	if v, why := jp.Compiled.Select(map[string]any{"items": []any{map[string]any{"unit price": 12.5}}}); len(v) != 1 || v[0] != 12.5 || !jp.HasEquals {
		t.Errorf("json_path select %v %s", v, why)
	}
	if null := one.Graders[6].JSONPath; !null.HasEquals || null.Equals != nil || one.Graders[5].JSONPath.HasEquals {
		t.Error("equals: null is not told from no equals")
	}
	if *one.Graders[7].LLM.PassScore != DefaultPassScore || *one.Graders[8].LLM.PassScore != 0.9 {
		t.Error("pass scores")
	}
	// The datasets' rows follow the file's own cases, named by a column or FILE:LINE.
	var rows []string
	for _, c := range f.Cases[2:] {
		rows = append(rows, fmt.Sprintf("%s|%s|%s|%v|%s:%d|%d", c.Name, c.Input, c.User, c.Context, filepath.Base(c.Pos.File), c.Pos.Line, c.Repeat))
	}
	wantRows := []string{
		"first|How much is delivery?|u-2|map[tier:gold]|rows.jsonl:1|2",
		`2|Open on Sunday?||map[tier:{"a":true}]|rows.jsonl:3|2`,
		"rows.csv:2|Hello there|u-3|map[]|rows.csv:2|2",
		`greeting|Say "hi", please||map[]|rows.csv:3|2`,
	}
	if !slices.Equal(rows, wantRows) {
		t.Errorf("rows:\n%s", strings.Join(rows, "\n"))
	}
	if f.Cases[2].Dataset != "rows.jsonl" || len(f.Cases[2].Graders) != 1 || f.Cases[2].Expect.Stop != "completed" {
		t.Errorf("a row's case: %+v", f.Cases[2])
	}
}

// TestInvalidEvalFiles requires exactly the diagnostics each fixture declares.
func TestInvalidEvalFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/evalfiles/invalid/*.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d fixtures", len(files))
	}
	l := newTestLoader(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".evals.yaml"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := l.LoadEvalFile(file)
			var got []fixture.Diagnostic
			for _, d := range diags {
				if d.Pos.File != file {
					t.Errorf("diagnostic in an unexpected file: %v", d)
				}
				got = append(got, fixture.Diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Severity: d.Severity.String(), Summary: d.Summary(), Hint: d.Hint})
			}
			fixture.Compare(t, fixture.Expected(string(src)), got)
		})
	}
}

// A dataset's bad rows are diagnostics at their own file's lines.
func TestEvalDatasetRows(t *testing.T) {
	tests := []struct {
		name, file, data, dsMap string
		want                    []string // file:line:col: message => hint
	}{
		{"jsonl rows", "d.jsonl", "{\"input\":\"x\"}\n[1]\n{\"input\": \"\"}\n{\"inpt\": \"q\"}\n{\"input\": \"ok\"\n{\"input\":\"y\"} 3\n{\"input\": 1, \"name\": \"n\"}\n", "", []string{
			"d.jsonl:2:1: a row is a JSON object, got an array => each line of a .jsonl file is one JSON object, such as {\"input\": \"…\"}",
			"d.jsonl:3:1: the row's \"input\" is empty => every row is a run: it needs the user's message",
			"d.jsonl:4:1: the row has no \"input\" (the input column) => did you mean \"inpt\"?",
			"d.jsonl:5:15: the JSON value is not closed on its line => each line of a .jsonl file is one JSON object, such as {\"input\": \"…\"}",
			"d.jsonl:6:15: invalid JSON: invalid character '3' after top-level value => each line of a .jsonl file is one JSON object, such as {\"input\": \"…\"}",
		}},
		{"jsonl invalid JSON", "d.jsonl", "{\"input\": tru}\n", "", []string{
			"d.jsonl:1:14: invalid JSON: invalid character '}' in literal true (expecting 'e') => each line of a .jsonl file is one JSON object, such as {\"input\": \"…\"}",
		}},
		{"mapped columns a row lacks", "d.jsonl", "{\"q\": \"x\", \"id\": \"a\"}\n{\"q\": \"y\"}\n", "{input: q, name: id, user: who, context: {tier: t}}", []string{
			"d.jsonl:1:1: the row has no \"who\" (the user column) => the row has q, id",
			"d.jsonl:1:1: the row has no \"t\" (the context.tier column) => did you mean \"q\"?",
			"d.jsonl:2:1: the row has no \"id\" (the name column) => the row has q",
			"d.jsonl:2:1: the row has no \"who\" (the user column) => the row has q",
			"d.jsonl:2:1: the row has no \"t\" (the context.tier column) => did you mean \"q\"?",
		}},
		{"duplicate names", "d.jsonl", "{\"input\": \"x\", \"name\": \"case\"}\n{\"input\": \"y\", \"name\": \"case\"}\n", "", []string{
			"d.jsonl:1:1: duplicate case name \"case\" (first at cases[0]) => case names identify results and failures",
			"d.jsonl:2:1: duplicate case name \"case\" (first at cases[0]) => case names identify results and failures",
		}},
		{"csv field count and quoting", "d.csv", "input,name\na,b\nc\nd,e,f\n\"g\"h,i\nj,k\n", "", []string{
			"d.csv:3:1: wrong number of fields => every row has as many fields as the header",
			"d.csv:4:1: wrong number of fields => every row has as many fields as the header",
			"d.csv:5:3: extraneous or missing \" in quoted-field => quote a field holding , or \" as \"…\", doubling a \" inside",
		}},
		{"csv header", "d.csv", "input,,input\nx,y,z\n", "", []string{
			"d.csv:1:7: column 2 of the header has no name => every column needs a name",
			"d.csv:1:8: column \"input\" is in the header twice => every column needs a name of its own",
		}},
		{"csv without a header", "d.csv", "", "", []string{
			"d.csv:1:1: the CSV file has no header row => the first row names the columns: input,name,…",
		}},
		{"csv empty input", "d.csv", "input\n\"\"\n", "", []string{
			"d.csv:2:1: the row's \"input\" is empty => every row is a run: it needs the user's message",
		}},
	}
	l := newTestLoader(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, tt.file)
			writeFile(t, data, tt.data)
			ev := "kind: eval\nversion: 1\ncases: [{name: case, input: hi}]\ndatasets:\n  - file: " + tt.file + "\n"
			if tt.dsMap != "" {
				ev += "    map: " + tt.dsMap + "\n"
			}
			writeFile(t, filepath.Join(dir, "x.evals.yaml"), ev)
			_, diags := l.LoadEvalFile(filepath.Join(dir, "x.evals.yaml"))
			var got []string
			for _, d := range diags {
				if d.Pos.File != data || d.Path != "datasets[0]" {
					t.Errorf("not at the dataset's row: %v (%s)", d, d.Path)
				}
				got = append(got, fmt.Sprintf("%s:%d:%d: %s => %s", filepath.Base(d.Pos.File), d.Pos.Line, d.Pos.Col, d.Message, d.Hint))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A dataset is bounded by rows and by size, and a mapping that is wrong for every
// row reports only the first maxRowErrors.
func TestEvalDatasetBounds(t *testing.T) {
	dir := t.TempDir()
	var many strings.Builder
	for i := range MaxDatasetRows + 5 {
		fmt.Fprintf(&many, "{\"input\": \"q%d\"}\n", i)
	}
	writeFile(t, filepath.Join(dir, "many.jsonl"), many.String())
	writeFile(t, filepath.Join(dir, "wrong.jsonl"), strings.Repeat("{\"q\": \"x\"}\n", 50))
	big := make([]byte, MaxDatasetSize+1)
	writeFile(t, filepath.Join(dir, "big.csv"), string(big))
	writeFile(t, filepath.Join(dir, "x.evals.yaml"), "kind: eval\nversion: 1\ndatasets:\n  - file: many.jsonl\n  - file: wrong.jsonl\n  - file: big.csv\n")
	f, diags := newTestLoader(t).LoadEvalFile(filepath.Join(dir, "x.evals.yaml"))
	var msgs []string
	for _, d := range diags {
		msgs = append(msgs, fmt.Sprintf("%s:%d: %s", filepath.Base(d.Pos.File), d.Pos.Line, d.Message))
	}
	if len(f.Cases) != MaxDatasetRows {
		t.Errorf("%d cases, want %d", len(f.Cases), MaxDatasetRows)
	}
	want := []string{
		"x.evals.yaml:6: dataset big.csv: big.csv is larger than 16 MiB, the most agentrun reads",
		"many.jsonl:10001: more than 10000 rows",
	}
	for _, w := range want {
		if !slices.Contains(msgs, w) {
			t.Errorf("missing %q in\n%s", w, strings.Join(msgs, "\n"))
		}
	}
	var wrong []string
	for _, m := range msgs {
		if strings.HasPrefix(m, "wrong.jsonl:") {
			wrong = append(wrong, m)
		}
	}
	if len(wrong) != maxRowErrors || !strings.HasSuffix(wrong[len(wrong)-1], "(and further rows are not reported)") {
		t.Errorf("%d row errors for wrong.jsonl, want %d, the last saying so:\n%s", len(wrong), maxRowErrors, strings.Join(msgs, "\n"))
	}
}

// The eval schema and the Go types are compared as the agent schema's are; expect
// and the grader model are the test and agent schemas' own, compared there.
func TestEvalSchemaMatchesTypes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(schema.EvalJSON, &doc); err != nil {
		t.Fatal(err)
	}
	w := schemaWalker{t: t, defs: doc["definitions"].(map[string]any), visited: map[string]bool{}, external: map[string]reflect.Type{
		"test.schema.json#/definitions/expect": reflect.TypeFor[Expect](),
		"agent.schema.json#/definitions/model": reflect.TypeFor[Model](),
	}}
	w.walk("", doc, reflect.TypeFor[EvalFile]())
	if w.checked < 30 {
		t.Errorf("only %d properties compared", w.checked)
	}
	// A grader's kinds are its schema properties besides name.
	props := w.defs["grader"].(map[string]any)["properties"].(map[string]any)
	var kinds []string
	for k := range props {
		if k != "name" {
			kinds = append(kinds, k)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(kinds)), slices.Sorted(slices.Values(kindNames()))) {
		t.Errorf("schema grader kinds %v, GraderKinds %v", kinds, GraderKinds)
	}
}

// docs/testing.md names every key of the eval schema in its eval file section.
func TestEvalFileDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## agentrun eval: the eval file\n")
	if !ok {
		t.Fatal("docs/testing.md has no section on the eval file")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var doc map[string]any
	if err := json.Unmarshal(schema.EvalJSON, &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc["definitions"].(map[string]any)
	objects := []map[string]any{doc}
	for _, name := range []string{"case", "grader", "json_path", "llm", "dataset", "dataset_map"} {
		objects = append(objects, defs[name].(map[string]any))
	}
	for _, o := range objects {
		for key := range o["properties"].(map[string]any) {
			if !strings.Contains(section, "`"+key+"`") {
				t.Errorf("docs/testing.md's eval file section does not name `%s`", key)
			}
		}
	}
}
