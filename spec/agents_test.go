package spec

import (
	"reflect"
	"testing"
)

// A cycle of sub-agents is an error in every file of the cycle when each is
// validated on its own, each at its own agents entry; so is a chain deeper than
// MaxAgentDepth below the file validated.
func TestAgentCyclesAndDepth(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []Diagnostic // errors only; nil: the file is clean
	}{
		{
			name: "cycle from a",
			file: "testdata/agents/cycle_a.yaml",
			want: []Diagnostic{{Pos: Pos{File: "testdata/agents/cycle_a.yaml", Line: 6, Col: 11}, End: Pos{File: "testdata/agents/cycle_a.yaml", Line: 6, Col: 23}, Path: "agents[0].spec",
				Message: "cycle_b.yaml has 1 error: testdata/agents/cycle_b.yaml:6:11: agents[0].spec: cycle_a.yaml → cycle_b.yaml → cycle_a.yaml: the agents form a cycle"}},
		},
		{
			name: "cycle from b",
			file: "testdata/agents/cycle_b.yaml",
			want: []Diagnostic{{Pos: Pos{File: "testdata/agents/cycle_b.yaml", Line: 6, Col: 11}, End: Pos{File: "testdata/agents/cycle_b.yaml", Line: 6, Col: 23}, Path: "agents[0].spec",
				Message: "cycle_a.yaml has 1 error: testdata/agents/cycle_a.yaml:6:11: agents[0].spec: cycle_b.yaml → cycle_a.yaml → cycle_b.yaml: the agents form a cycle"}},
		},
		{
			name: "itself",
			file: "testdata/agents/self.yaml",
			want: []Diagnostic{{Pos: Pos{File: "testdata/agents/self.yaml", Line: 6, Col: 11}, End: Pos{File: "testdata/agents/self.yaml", Line: 6, Col: 22}, Path: "agents[0].spec",
				Message: "self.yaml → self.yaml: the agents form a cycle"}},
		},
		{
			name: "four deep",
			file: "testdata/agents/deep/level1.yaml",
			want: []Diagnostic{{Pos: Pos{File: "testdata/agents/deep/level1.yaml", Line: 6, Col: 11}, End: Pos{File: "testdata/agents/deep/level1.yaml", Line: 6, Col: 22}, Path: "agents[0].spec",
				Message: "level2.yaml has 1 error: testdata/agents/deep/level4.yaml:6:11: agents[0].spec: level1.yaml → level2.yaml → level3.yaml → level4.yaml → level5.yaml: sub-agents nest at most 3 deep"}},
		},
		{name: "three deep", file: "testdata/agents/deep/level2.yaml"},
		{name: "two deep", file: "testdata/agents/deep/level3.yaml"},
	}
	l := newTestLoader(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := l.LoadFile(tt.file)
			var got []Diagnostic
			for _, d := range r.Diagnostics.Errors() {
				if d.Hint == "" {
					t.Errorf("no hint: %v", d)
				}
				d.Hint = ""
				got = append(got, d)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %v\nwant %v", Diagnostics(got), Diagnostics(tt.want))
			}
			if r.Spec == nil || len(r.Spec.Agents) != 1 {
				t.Fatalf("spec %+v", r.Spec)
			}
			if loaded := r.Spec.Agents[0].Loaded; (loaded == nil) != (tt.want != nil) {
				t.Errorf("Loaded = %v with errors %v: a sub-agent with errors must not be loaded, a clean one must", loaded != nil, tt.want)
			}
		})
	}
}

// A clean spec's sub-agents are loaded, their own sub-agents too, and an entry
// without a description takes its spec's.
func TestAgentsLoaded(t *testing.T) {
	l := newTestLoader(t)
	r := l.LoadFile("testdata/valid/agents.yaml")
	if len(r.Diagnostics) > 0 {
		t.Fatal(r.Diagnostics)
	}
	s := r.Spec
	refunds, billing := s.SubAgent("refunds"), s.SubAgent("billing")
	if refunds == nil || billing == nil || refunds.Loaded == nil || billing.Loaded == nil {
		t.Fatalf("agents %+v", s.Agents)
	}
	if refunds.Loaded.Name != "refunds" || refunds.Description != "Refunds paid orders of the current user." {
		t.Errorf("refunds: name %q, description %q (want the spec's)", refunds.Loaded.Name, refunds.Description)
	}
	if billing.Description != "Answers questions about invoices." {
		t.Errorf("billing: description %q, want the entry's own", billing.Description)
	}
	lookup := refunds.Loaded.SubAgent("lookup")
	if lookup == nil || lookup.Loaded == nil || lookup.Loaded.Tools[0].Name != "find_order" {
		t.Errorf("the sub-agent's own sub-agent: %+v", lookup)
	}
	if refunds.Pos != (Pos{File: "testdata/valid/agents.yaml", Line: 16, Col: 5}) || refunds.Path != "agents[0]" {
		t.Errorf("refunds source %v %s", refunds.Pos, refunds.Path)
	}
	st := Resolve(s)
	wantPlan := map[string]*PlanSettings{
		"orders": {Required: true, MaxSteps: DefaultPlanMaxSteps, MaxRejections: DefaultPlanMaxRejections},
		"quick":  nil,
		"other":  {MaxSteps: DefaultPlanMaxSteps, MaxRejections: DefaultPlanMaxRejections},
	}
	for _, in := range st.Intents {
		if want, ok := wantPlan[in.Name]; ok && !reflect.DeepEqual(in.Plan, want) {
			t.Errorf("intent %s: plan %+v, want %+v", in.Name, in.Plan, want)
		}
	}
	if st.Intents[0].Agent != "refunds" {
		t.Errorf("intent refund: agent %q", st.Intents[0].Agent)
	}
	if s.Plan == nil || s.Plan.Pos.Line != 5 || s.Intents[1].Plan.Path != "intents.orders.plan" {
		t.Errorf("plan sources: %+v, %+v", s.Plan, s.Intents[1].Plan)
	}
}

// plan: false at the top is plan mode off, like leaving it out; true is every default.
func TestPlanShortForms(t *testing.T) {
	tests := []struct {
		name string
		plan string
		want *PlanSettings
	}{
		{"false", "false", nil},
		{"true", "true", &PlanSettings{MaxSteps: DefaultPlanMaxSteps, MaxRejections: DefaultPlanMaxRejections}},
		{"mapping", "{required: true, max_rejections: 0}", &PlanSettings{Required: true, MaxSteps: DefaultPlanMaxSteps, MaxRejections: 0}},
	}
	l := newTestLoader(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, diags := l.Load("plan.yaml", []byte("version: 1\nname: plan\nplan: "+tt.plan+"\n"))
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			if got := Resolve(s).Plan; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan %+v, want %+v", got, tt.want)
			}
		})
	}
}

// LoadFiles loads specs in parallel with one Loader: files that reach each other
// give the same diagnostics as when loaded one by one.
func TestAgentsLoadConcurrently(t *testing.T) {
	files := []string{"testdata/agents/cycle_a.yaml", "testdata/agents/cycle_b.yaml", "testdata/agents/self.yaml",
		"testdata/agents/deep/level1.yaml", "testdata/agents/deep/level2.yaml", "testdata/valid/agents.yaml"}
	var many []string
	for range 8 {
		many = append(many, files...)
	}
	l := newTestLoader(t)
	results := l.LoadFiles(many)
	for i, r := range results {
		want := l.LoadFile(many[i])
		if !reflect.DeepEqual(r.Diagnostics, want.Diagnostics) {
			t.Errorf("%s: concurrently %v, alone %v", many[i], r.Diagnostics, want.Diagnostics)
		}
	}
}

// Entries naming the same spec load it once: a spec whose agents all name one file
// (or a file that does the same) costs one load of it, not one per path.
func TestAgentsLoadedOnce(t *testing.T) {
	l := newTestLoader(t)
	src := "version: 1\nname: twice\nagents:\n" +
		"  - {name: a, spec: refunds.yaml}\n  - {name: b, spec: ./refunds.yaml}\n  - {name: c, spec: ../agents/refunds.yaml}\n"
	s, diags := l.Load("testdata/agents/twice.yaml", []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if s.Agents[0].Loaded == nil || s.Agents[1].Loaded != s.Agents[0].Loaded || s.Agents[2].Loaded != s.Agents[0].Loaded {
		t.Errorf("loaded %p %p %p, want one spec", s.Agents[0].Loaded, s.Agents[1].Loaded, s.Agents[2].Loaded)
	}
}
