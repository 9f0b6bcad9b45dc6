package agentrun_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/internal/pgtest"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index/postgres"
	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// postgresIndexURL is DATABASE_URL with a fresh schema (see pgtest).
func postgresIndexURL(t *testing.T) string {
	u, _ := pgtest.Schema(t)
	return u
}

func TestIndexPathURL(t *testing.T) {
	s := &spec.Spec{Source: spec.Source{Pos: spec.Pos{File: filepath.Join("agents", "a.yaml")}}}
	const u = "postgres://kb@db.example/agentrun?schema=help"
	s.Knowledge.Index = u
	if got := agentrun.IndexPath(s, env(nil)); got != u {
		t.Errorf("knowledge.index URL = %q, want it as it is", got)
	}
	s.Knowledge.Index = ""
	if got := agentrun.IndexPath(s, env(map[string]string{"AGENTRUN_INDEX": "postgresql://x/y"})); got != "postgresql://x/y" {
		t.Errorf("AGENTRUN_INDEX URL = %q", got)
	}
}

// agentrun index and agentrun exec against an index on PostgreSQL: IndexSpec,
// then Build (which opens it through OpenKnowledge) and a run, with the URL from
// knowledge.index and from AGENTRUN_INDEX.
func TestKnowledgeOnPostgres(t *testing.T) {
	ctx := context.Background()
	u := postgresIndexURL(t)
	s := knowledgeSpec(t, "")
	s.Knowledge.Index = u
	lookup := env(nil)
	r, err := agentrun.IndexSpec(ctx, s, agentrun.IndexOptions{LookupEnv: lookup})
	if err != nil || r.Index != u || len(r.Collections) != 1 || r.Collections[0].Embedded != 3 {
		t.Fatalf("IndexSpec: %v %+v", err, r)
	}
	r, err = agentrun.IndexSpec(ctx, s, agentrun.IndexOptions{LookupEnv: lookup})
	if err != nil || r.Collections[0].Kept != 3 || r.Collections[0].Embedded != 0 {
		t.Fatalf("second IndexSpec: %v %+v", err, r)
	}

	k, closeK, err := agentrun.OpenKnowledge(ctx, s, agentrun.KnowledgeOptions{LookupEnv: lookup,
		OnIndex: func(r agentrun.CollectionReport) { t.Errorf("an indexed collection was indexed again: %+v", r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeK()
	h, err := k.CacheLookup(ctx, knowledge.CacheQuery{Collection: "docs", Agent: s.Name, Intent: "faq", Version: "v", Question: "how long does a refund take"})
	if err != nil || h == nil || h.Kind != knowledge.CacheEntryFAQ || h.Answer != "3-5 working days." {
		t.Errorf("CacheLookup: %+v, %v", h, err)
	}
	ps, err := k.Retrieve(ctx, "docs", "can food be returned", 2, 0.1)
	if err != nil || len(ps) == 0 {
		t.Errorf("Retrieve: %+v, %v", ps, err)
	}

	s.Knowledge.Index = ""
	a, err := agentrun.Build(ctx, s, agentrun.Options{LookupEnv: env(map[string]string{"AGENTRUN_INDEX": u})})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Run(ctx, runtime.Request{Input: "Can I return food?", User: tool.User{ID: "u"}}); err != nil {
		t.Fatal(err)
	}

	// The index is really there.
	x, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, e, ok, err := x.Manifest(ctx, "kb/docs"); !ok || err != nil || e == "" {
		t.Errorf("Manifest: %q %v %v", e, ok, err)
	}
}
