package graph_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/graph"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func build(t *testing.T, path string) *graph.Graph {
	t.Helper()
	a, err := agentrun.Open(t.Context(), path, agentrun.Options{Inspect: true, NoModel: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return graph.Build(a.Agent, a.Spec)
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./runtime/graph -update writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// The graph of an example as data and as Mermaid. The Mermaid of shop-support is
// also cmd/agentrun's golden graph-shop.mmd: what `agentrun graph` printed before
// the graph was data.
func TestBuild(t *testing.T) {
	for _, tt := range []struct{ name, spec string }{
		{"shop-support", "../../examples/agents/shop-support.yaml"},
		{"order-digest", "../../examples/agents/order-digest.yaml"},
		{"code-assistant", "../../examples/agents/code-assistant.yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, tt.spec)
			data, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.name+".json", append(data, '\n'))
			var mmd bytes.Buffer
			if err := graph.WriteMermaid(&mmd, g); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.name+".mmd", mmd.Bytes())
			checkConsistent(t, g)
		})
	}
}

// checkConsistent: every edge joins two of the graph's nodes, every node is in
// exactly one group, ids are as events name them, and every transition is one the
// runtime's state machine has.
func checkConsistent(t *testing.T, g *graph.Graph) {
	t.Helper()
	ids := map[string]string{}
	for _, n := range g.Nodes {
		if _, dup := ids[n.ID]; dup {
			t.Errorf("node %s twice", n.ID)
		}
		ids[n.ID] = n.Kind
	}
	grouped := map[string]int{}
	for _, gr := range g.Groups {
		for _, id := range gr.Nodes {
			grouped[id]++
		}
	}
	idPattern := regexp.MustCompile(`^(intent|domain|tool|agent|step):.+$|^state:(THINKING|TOOL_EXECUTING|VALIDATING|FINISHED|STOPPED)$|^run:start$|^workflow:`)
	for id, kind := range ids {
		if grouped[id] != 1 {
			t.Errorf("node %s is in %d groups", id, grouped[id])
		}
		if !idPattern.MatchString(id) {
			t.Errorf("node id %s", id)
		}
		if prefix, _, _ := strings.Cut(id, ":"); slices.Contains([]string{"intent", "domain", "tool", "agent"}, prefix) && prefix != kind {
			t.Errorf("node %s has kind %s", id, kind)
		}
	}
	edges := runtime.Edges()
	transitions := 0
	for _, e := range g.Edges {
		if ids[e.From] == "" || ids[e.To] == "" {
			t.Errorf("edge %s → %s leads outside the graph", e.From, e.To)
		}
		if e.Kind != graph.EdgeTransition {
			continue
		}
		transitions++
		from, to := runtime.State(strings.TrimPrefix(e.From, "state:")), runtime.State(strings.TrimPrefix(e.To, "state:"))
		if !slices.ContainsFunc(edges, func(m runtime.Edge) bool {
			return m.From == from && m.To == to && slices.Contains(m.Triggers, runtime.Trigger(e.Label))
		}) {
			t.Errorf("transition %s → %s on %q is not the runtime's", from, to, e.Label)
		}
		if e.Detail == "" {
			t.Errorf("transition %s → %s on %s has no detail", from, to, e.Label)
		}
	}
	if transitions == 0 {
		t.Error("no transitions")
	}
}

// A run's path, as its state events tell it, is a path of the graph: the
// moves of a run that called a tool and answered, and of one the cache answered.
func TestRunPathIsInTheGraph(t *testing.T) {
	g := build(t, "../../examples/agents/shop-support.yaml")
	has := func(from, to runtime.State, why runtime.Trigger) bool {
		return slices.ContainsFunc(g.Edges, func(e graph.Edge) bool {
			return e.Kind == graph.EdgeTransition && e.From == graph.StateID(from) && e.To == graph.StateID(to) && e.Label == string(why)
		})
	}
	for _, tt := range []struct {
		from, to runtime.State
		why      runtime.Trigger
		want     bool
	}{
		{runtime.StateThinking, runtime.StateToolExecuting, runtime.TriggerToolCalls, true},
		{runtime.StateToolExecuting, runtime.StateThinking, runtime.TriggerResults, true},
		{runtime.StateThinking, runtime.StateValidating, runtime.TriggerDraft, true},
		{runtime.StateValidating, runtime.StateFinished, runtime.TriggerAccepted, true},
		{runtime.StateThinking, runtime.StateFinished, runtime.TriggerCacheHit, true},
		{runtime.StateThinking, runtime.StateStopped, runtime.Trigger(runtime.StopJudgeRejected), true}, // through the handoff
		{runtime.StateToolExecuting, runtime.StateStopped, runtime.Trigger(runtime.StopAwaitingApproval), true},
		// shop-support is no workflow and has no plan mode or output schema.
		{runtime.StateThinking, runtime.StateFinished, runtime.TriggerWorkflowDone, false},
		{runtime.StateValidating, runtime.StateThinking, runtime.TriggerPlanOpen, false},
		{runtime.StateValidating, runtime.StateThinking, runtime.TriggerOutputFeedback, false},
	} {
		if got := has(tt.from, tt.to, tt.why); got != tt.want {
			t.Errorf("%s → %s on %s: %v, want %v", tt.from, tt.to, tt.why, got, tt.want)
		}
	}
	for _, id := range []string{"intent:faq", "tool:cancel_order", "agent:refund_specialist", "domain:order", "state:THINKING"} {
		if !slices.ContainsFunc(g.Nodes, func(n graph.Node) bool { return n.ID == id }) {
			t.Errorf("no node %s", id)
		}
	}
}
