package agentrun_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime/knowledge"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/knowledge/index/sqlite"
	"github.com/agentrun/agentrun/spec"
)

// knowledgeSpec writes an agent with one collection of two sources into a fresh
// directory and loads it.
func knowledgeSpec(t *testing.T, extra string) *spec.Spec {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"docs/returns.md": "# Returns\n\nReturn any item within 7 days.\n\n## Exceptions\n\nFood cannot be returned.\n",
		"docs/faq.yaml":   "faq:\n  - question: How long does a refund take?\n    answer: 3-5 working days.\n",
		"agent.yaml": "version: 1\nname: kb\nmodel: {provider: test}\n" + extra +
			"knowledge:\n  collections:\n    docs: {sources: ['docs/*.md', docs/faq.yaml]}\n" +
			"intents:\n  faq: {kind: knowledge, cache: true}\n  ask: {kind: knowledge, rag: true}\nrouting: {recognizer: off, fallback: ask}\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := agentrun.Load(filepath.Join(dir, "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestIndexPath(t *testing.T) {
	dir := t.TempDir()
	s := &spec.Spec{Source: spec.Source{Pos: spec.Pos{File: filepath.Join(dir, "a.yaml")}}}
	none := env(nil)
	if got, want := agentrun.IndexPath(s, none), filepath.Join(dir, ".agentrun", "knowledge.db"); got != want {
		t.Errorf("default = %q, want %q (beside the spec)", got, want)
	}
	s.Knowledge.Index = "kb/index.db"
	if got, want := agentrun.IndexPath(s, none), filepath.Join(dir, "kb", "index.db"); got != want {
		t.Errorf("knowledge.index = %q, want %q (relative to the spec)", got, want)
	}
	if got := agentrun.IndexPath(s, env(map[string]string{"AGENTRUN_INDEX": "/x/k.db"})); got != "/x/k.db" {
		t.Errorf("AGENTRUN_INDEX = %q", got)
	}
}

func TestNewEmbedder(t *testing.T) {
	vars := env(map[string]string{"LLM_BASE_URL": "http://emb.example:8080/v1", "LLM_API_KEY": "k"})
	tests := []struct {
		name    string
		e       spec.Embeddings
		offline bool
		lookup  func(string) (string, bool)
		want    string
	}{
		{"default", spec.Embeddings{}, false, vars, "local:v1:dim=256"},
		{"local dimensions", spec.Embeddings{Provider: spec.EmbeddingsLocal, Dimensions: 512}, false, vars, "local:v1:dim=512"},
		{"openai default model", spec.Embeddings{Provider: spec.EmbeddingsOpenAI}, false, vars, "openai:emb.example:8080:" + spec.DefaultEmbeddingsModel + ":dim=native"},
		{"openai env model", spec.Embeddings{Provider: spec.EmbeddingsOpenAI, Dimensions: 64}, false,
			env(map[string]string{"OPENAI_BASE_URL": "http://o.example/v1", "OPENAI_API_KEY": "k", "LLM_EMBEDDING_MODEL": "bge-m3"}), "openai:o.example:bge-m3:dim=64"},
		{"openai spec model", spec.Embeddings{Provider: spec.EmbeddingsOpenAI, Model: "m3", BaseURL: "http://h.example/v1"}, false, vars, "openai:h.example:m3:dim=native"},
		{"offline", spec.Embeddings{Provider: spec.EmbeddingsOpenAI, Model: "m3", Dimensions: 64}, true, vars, "local:v1:dim=256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emb, err := agentrun.NewEmbedder(&spec.Spec{Embeddings: tt.e}, tt.offline, tt.lookup)
			if err != nil {
				t.Fatal(err)
			}
			if emb.ID() != tt.want {
				t.Errorf("ID = %q, want %q", emb.ID(), tt.want)
			}
		})
	}
}

func TestCollectionKey(t *testing.T) {
	s := &spec.Spec{Name: "kb"}
	if got := agentrun.CollectionKey(s, "docs", true); got != "kb/docs" {
		t.Errorf("local, offline: %q", got)
	}
	s.Embeddings.Provider = spec.EmbeddingsOpenAI
	if got := agentrun.CollectionKey(s, "docs", false); got != "kb/docs" {
		t.Errorf("openai: %q", got)
	}
	if got := agentrun.CollectionKey(s, "docs", true); got != "kb/docs#local" {
		t.Errorf("openai, offline: %q", got)
	}
}

// The manifest changes when a source is edited, added or touched, and when the
// patterns or chunk options change; not otherwise.
func TestManifest(t *testing.T) {
	s := knowledgeSpec(t, "")
	dir := filepath.Dir(s.Pos.File)
	c := &s.Knowledge.Collections[0]
	files, m1 := agentrun.Manifest(dir, c)
	if files != 2 {
		t.Errorf("files = %d, want 2", files)
	}
	if _, again := agentrun.Manifest(dir, c); again != m1 {
		t.Error("the manifest of unchanged sources changed")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "docs", "returns.md"), later, later); err != nil {
		t.Fatal(err)
	}
	_, m2 := agentrun.Manifest(dir, c)
	if err := os.WriteFile(filepath.Join(dir, "docs", "new.md"), []byte("# New\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, m3 := agentrun.Manifest(dir, c)
	c.ChunkSize = 300
	_, m4 := agentrun.Manifest(dir, c)
	if m2 == m1 || m3 == m2 || m4 == m3 || files != 3 {
		t.Errorf("manifests %s %s %s %s (%d files): each change must change it", m1, m2, m3, m4, files)
	}
}

func TestSpecVersion(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("notes/skill.yaml", "name: notes\ndescription: Notes.\ninstructions_file: notes.md\n")
	write("notes/notes.md", "Be brief.\n")
	write("agent.yaml", "version: 1\nname: v\nmodel: {provider: test}\nskills: [./notes, calculator]\n")
	version := func() string {
		t.Helper()
		s, err := agentrun.Load(filepath.Join(dir, "agent.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return agentrun.SpecVersion(s)
	}
	v1 := version()
	if len(v1) != 12 || version() != v1 {
		t.Fatalf("version %q is not a stable short hash", v1)
	}
	write("notes/notes.md", "Be very brief.\n")
	v2 := version()
	write("notes/skill.yaml", "name: notes\ndescription: Short notes.\ninstructions_file: notes.md\n")
	v3 := version()
	write("agent.yaml", "version: 1\nname: v\nmodel: {provider: test}\nskills: [./notes, calculator]\n"+
		"knowledge: {collections: {help: {sources: [help/*.md]}}}\nintents: {faq: {description: x, rag: true}}\nrouting: {fallback: faq}\n")
	write("help/a.md", "# A\n\nReturns take 7 days.\n")
	v4 := version()
	write("help/a.md", "# A\n\nReturns take 14 days.\n")
	v5 := version()
	if v2 == v1 || v3 == v2 || v4 == v3 || v5 == v4 {
		t.Errorf("versions %s %s %s %s %s: every edit must change it", v1, v2, v3, v4, v5)
	}
}

// Build indexes a collection never indexed or whose sources changed, and refuses
// one indexed by another embedder.
func TestBuildKnowledge(t *testing.T) {
	ctx := context.Background()
	s := knowledgeSpec(t, "")
	index := filepath.Join(t.TempDir(), "k.db")
	var reports []agentrun.CollectionReport
	opts := agentrun.Options{Index: index, OnIndex: func(r agentrun.CollectionReport) { reports = append(reports, r) }}
	build := func(s *spec.Spec) error {
		t.Helper()
		a, err := agentrun.Build(ctx, s, opts)
		if err == nil {
			a.Close()
		}
		return err
	}
	if err := build(s); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Key != "kb/docs" || reports[0].Embedded != 3 || reports[0].Files != 2 {
		t.Fatalf("first Build indexed %+v", reports)
	}
	if err := build(s); err != nil || len(reports) != 1 {
		t.Fatalf("second Build: %v, reports %+v", err, reports)
	}

	s2 := *s
	s2.Embeddings.Dimensions = 512
	err := build(&s2)
	var reindex *agentrun.ReindexError
	var mismatch *kindex.EmbedderMismatchError
	if !errors.As(err, &reindex) || !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "run agentrun index "+s.Pos.File) {
		t.Fatalf("Build with another embedder: %v", err)
	}

	// A source that disappears after loading: IndexSpec names it and writes nothing.
	x, err := sqlite.Open(index)
	if err != nil {
		t.Fatal(err)
	}
	before, _, _, _ := x.Manifest(ctx, "kb/docs")
	x.Close()
	if err := os.Remove(filepath.Join(filepath.Dir(s.Pos.File), "docs", "faq.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := agentrun.IndexSpec(ctx, s, agentrun.IndexOptions{Index: index}); err == nil || !strings.Contains(err.Error(), "docs/faq.yaml") {
		t.Errorf("IndexSpec with a missing source: %v", err)
	}
	x, err = sqlite.Open(index)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if after, _, _, _ := x.Manifest(ctx, "kb/docs"); after != before {
		t.Error("a failed IndexSpec changed the index")
	}
}

// IndexSpec rebuilds a collection indexed by another embedder and says so.
func TestIndexSpecRebuild(t *testing.T) {
	ctx := context.Background()
	s := knowledgeSpec(t, "")
	index := filepath.Join(t.TempDir(), "k.db")
	r, err := agentrun.IndexSpec(ctx, s, agentrun.IndexOptions{Index: index})
	if err != nil || len(r.Collections) != 1 || r.Collections[0].Embedded != 3 {
		t.Fatalf("IndexSpec: %v %+v", err, r)
	}
	s2 := *s
	s2.Embeddings.Dimensions = 512
	r, err = agentrun.IndexSpec(ctx, &s2, agentrun.IndexOptions{Index: index})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Collections[0]
	if !c.Rebuilt || c.PreviousEmbedder != "local:v1:dim=256" || c.Embedded != 3 ||
		!strings.HasSuffix(c.Summary(), "; embedder changed from local:v1:dim=256 to local:v1:dim=512") {
		t.Errorf("rebuild report %+v: %s", c, c.Summary())
	}
}

// Forgetting a user deletes the answers learned for them alone; the shared ones
// and other users' stay.
func TestForgetLearned(t *testing.T) {
	ctx := context.Background()
	index := filepath.Join(t.TempDir(), "k.db")
	a, err := agentrun.Build(ctx, knowledgeSpec(t, ""), agentrun.Options{Index: index})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	idx, err := sqlite.Open(index)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	emb, err := knowledge.NewLocal(spec.DefaultLocalDimensions)
	if err != nil {
		t.Fatal(err)
	}
	key := kindex.LearnedKey{Agent: "kb", Intent: "faq", Version: "v"}
	for i, who := range []string{"alice", "", "bob", "alice"} {
		if _, err := idx.Learn(ctx, key, emb, who, fmt.Sprintf("Can I return food, question %d?", i), "No.", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := a.ForgetLearned(ctx, "alice"); n != 2 || err != nil {
		t.Fatalf("forgot %d: %v", n, err)
	}
	left, err := idx.ListLearned(ctx, kindex.LearnedFilter{AllUsers: true})
	if err != nil || len(left) != 2 || left[0].User == "alice" || left[1].User == "alice" {
		t.Fatalf("left %+v %v", left, err)
	}
}
