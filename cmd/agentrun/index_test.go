package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index/sqlite"
)

const knowledgeDir = "testdata/knowledge"

// embedServer is an OpenAI-compatible embeddings endpoint that counts the texts it
// embeds. Its vectors are the local embedder's, at the dimension asked for (or
// dims), so retrieval over them means something; mode makes it fail.
type embedServer struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex
	inputs int    // texts embedded so far
	mode   string // "" ok, "500", "dimension" (vectors one too short), "garbage"
}

func newEmbedServer(t *testing.T) *embedServer {
	e := &embedServer{t: t}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	t.Setenv("AGENTRUN_TEST_EMBED_URL", e.srv.URL)
	t.Setenv("AGENTRUN_TEST_EMBED_KEY", "sk-embed-SECRET")
	return e
}

func (e *embedServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/embeddings" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req struct {
		Input      []string `json:"input"`
		Model      string   `json:"model"`
		Dimensions int      `json:"dimensions"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	mode := e.mode
	if mode == "" {
		e.inputs += len(req.Input)
	}
	e.mu.Unlock()
	switch mode {
	case "500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"the embeddings backend is down","type":"server_error"}}`)
		return
	case "garbage":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `<html>not json`)
		return
	}
	dims := req.Dimensions
	if dims == 0 {
		dims = 64
	}
	local, err := knowledge.NewLocal(dims)
	if err != nil {
		e.t.Errorf("embed server: %v", err)
	}
	vecs, _ := local.Embed(r.Context(), req.Input)
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	resp := struct {
		Object string         `json:"object"`
		Data   []datum        `json:"data"`
		Model  string         `json:"model"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)}}
	for i, v := range vecs {
		if mode == "dimension" {
			v = v[:len(v)-1]
		}
		resp.Data = append(resp.Data, datum{Object: "embedding", Index: i, Embedding: v})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func (e *embedServer) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.inputs
	e.inputs = 0
	return n
}

func (e *embedServer) fail(mode string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mode = mode
}

// knowledgeCopy copies testdata/knowledge into a temporary directory, so a test
// may edit the sources, and points AGENTRUN_INDEX at a fresh index there.
func knowledgeCopy(t *testing.T) (dir, index string) {
	t.Helper()
	dir = t.TempDir()
	err := filepath.WalkDir(knowledgeDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(knowledgeDir, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	index = filepath.Join(t.TempDir(), "knowledge.db")
	t.Setenv("AGENTRUN_INDEX", index)
	return dir, index
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// manifestOf reads what the index holds of a collection.
func manifestOf(t *testing.T, index, key string) (manifest, embedder string) {
	t.Helper()
	x, err := sqlite.Open(index)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	manifest, embedder, _, err = x.Manifest(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return manifest, embedder
}

func mustRun(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("agentrun %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
}

// Indexing twice embeds nothing the second time; editing one file re-embeds only
// its changed chunks.
func TestIndexIncremental(t *testing.T) {
	server := newEmbedServer(t)
	dir, _ := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help-openai.yaml")

	out, errOut := mustRun(t, "index", specPath)
	if n := server.count(); n != 10 { // 6 article chunks + 2 FAQ entries with 4 questions
		t.Errorf("first index embedded %d texts, want 10", n)
	}
	if want := "help: 3 files, 7 chunks — 7 embedded, 0 kept, 0 deleted (10 vectors) in "; !strings.HasPrefix(out, want) {
		t.Errorf("first index printed %q, want it to start with %q", out, want)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("progress on a non-terminal redraws: %q", errOut)
	}
	if want := "help: embedding 10 texts…\n"; errOut != want {
		t.Errorf("progress = %q, want %q", errOut, want)
	}

	out, errOut = mustRun(t, "index", specPath)
	if n := server.count(); n != 0 {
		t.Errorf("index of unchanged sources embedded %d texts", n)
	}
	if !strings.Contains(out, "— 0 embedded, 7 kept, 0 deleted (0 vectors)") || errOut != "" {
		t.Errorf("second index printed\n%s%s", out, errOut)
	}

	appendFile(t, filepath.Join(dir, "help-center", "shipping.md"), "\nParcels to the islands may take two more days.\n")
	out, _ = mustRun(t, "index", specPath)
	if n := server.count(); n != 1 {
		t.Errorf("index after editing one paragraph embedded %d texts, want 1", n)
	}
	if !strings.Contains(out, "— 1 embedded, 6 kept, 1 deleted (1 vector)") {
		t.Errorf("index after an edit printed %s", out)
	}
}

// An embeddings server that fails leaves the index as it was, with a clear error.
func TestIndexEmbedderFailure(t *testing.T) {
	server := newEmbedServer(t)
	dir, index := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help-openai.yaml")
	mustRun(t, "index", specPath)
	server.count()
	before, _ := manifestOf(t, index, "help-desk/help")
	appendFile(t, filepath.Join(dir, "help-center", "returns.md"), "\nReturns are free for members.\n")

	for _, tt := range []struct{ mode, want string }{
		{"500", "500"},
		{"dimension", "dimension"},
		{"garbage", "error parsing response json"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			server.fail(tt.mode)
			code, out, errOut := runCLI(t, "index", specPath)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !strings.Contains(errOut, "\nagentrun: "+specPath+": knowledge index: collection help-desk/help: ") || !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr = %q, want the collection and %q", errOut, tt.want)
			}
			if strings.Contains(errOut, "SECRET") {
				t.Errorf("the API key leaked: %s", errOut)
			}
			if after, _ := manifestOf(t, index, "help-desk/help"); after != before {
				t.Errorf("a failed index changed the manifest")
			}
		})
	}
	server.fail("")
	out, _ := mustRun(t, "index", specPath)
	if n := server.count(); n != 1 || !strings.Contains(out, "1 embedded, 6 kept, 1 deleted") {
		t.Errorf("after the failures, index embedded %d texts and printed %s", n, out)
	}
}

// --offline and runs with --model test use the local embedder under other
// collection keys: the API's index is left alone.
func TestIndexOffline(t *testing.T) {
	server := newEmbedServer(t)
	dir, index := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help-openai.yaml")
	out, _ := mustRun(t, "index", "--offline", specPath)
	if n := server.count(); n != 0 {
		t.Errorf("--offline called the server for %d texts", n)
	}
	if _, emb := manifestOf(t, index, "help-desk/help#local"); emb != "local:v1:dim=256" {
		t.Errorf("--offline indexed help-desk/help#local with %q (printed %s)", emb, out)
	}
	if m, _ := manifestOf(t, index, "help-desk/help"); m != "" {
		t.Errorf("--offline wrote the API's collection")
	}
	// exec --model test finds the offline collection indexed.
	_, errOut := mustRun(t, "exec", "--model", "test", "--intent", "faq", specPath, "如何退货")
	if strings.Contains(errOut, "indexed") || !strings.Contains(errOut, `cache hit  faq help-center/faq.yaml:3 "如何退货" score 1.00`) {
		t.Errorf("exec --model test:\n%s", errOut)
	}
}

// A collection indexed by another embedder: exec refuses with the command to run,
// and agentrun index rebuilds it.
func TestIndexEmbedderChanged(t *testing.T) {
	dir, index := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help.yaml")
	mustRun(t, "index", specPath)
	b, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "knowledge:\n", "embeddings: {dimensions: 512}\nknowledge:\n", 1)
	if err := os.WriteFile(specPath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}

	code, _, errOut := runCLI(t, "exec", "--model", "test", specPath, "怎么退货")
	want := "agentrun: knowledge collection help was indexed by local:v1:dim=256; this agent uses local:v1:dim=512: run agentrun index " + specPath + " to rebuild it\n"
	if code != 1 || errOut != want {
		t.Errorf("exec: exit %d, stderr %q, want 1 and %q", code, errOut, want)
	}

	out, _ := mustRun(t, "index", specPath)
	if !strings.Contains(out, "7 embedded, 0 kept, 0 deleted (10 vectors)") || !strings.Contains(out, "; embedder changed from local:v1:dim=256 to local:v1:dim=512\n") {
		t.Errorf("index after the change printed %s", out)
	}
	if _, emb := manifestOf(t, index, "help-desk/help"); emb != "local:v1:dim=512" {
		t.Errorf("collection embedder = %s after index", emb)
	}
	mustRun(t, "exec", "--model", "test", specPath, "怎么退货")
}

// A source that cannot be read is named; a binary one is skipped with a warning.
func TestIndexSources(t *testing.T) {
	dir, index := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help.yaml")
	if err := os.WriteFile(filepath.Join(dir, "help-center", "logo.md"), []byte("\x89PNG\x00\x00binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut := mustRun(t, "index", specPath)
	want := filepath.Join(dir, "help-center", "logo.md") + ": warning: binary file skipped\n"
	if !strings.Contains(errOut, want) || !strings.HasPrefix(out, "help: 4 files, 7 chunks") {
		t.Errorf("index with a binary source:\nstdout:\n%s\nstderr:\n%s\nwant the warning %q", out, errOut, want)
	}
	before, _ := manifestOf(t, index, "help-desk/help")

	if err := os.Remove(filepath.Join(dir, "help-center", "faq.yaml")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "index", specPath)
	if code != 1 || !strings.Contains(errOut, "faq.yaml") || !strings.Contains(errOut, "does not exist") {
		t.Errorf("index with a missing source: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if after, _ := manifestOf(t, index, "help-desk/help"); after != before {
		t.Errorf("a failed index changed the manifest")
	}
}

// exec indexes a collection never indexed, or whose sources changed, and says so.
func TestExecIndexesStale(t *testing.T) {
	dir, _ := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help.yaml")
	_, errOut := mustRun(t, "exec", "--model", "test", specPath, "怎么退货")
	if !strings.Contains(errOut, "indexed help: 3 files, 7 chunks — 7 embedded, 0 kept, 0 deleted (10 vectors) in ") {
		t.Errorf("first exec:\n%s", errOut)
	}
	if _, errOut = mustRun(t, "exec", "--model", "test", specPath, "怎么退货"); strings.Contains(errOut, "indexed") {
		t.Errorf("exec indexed unchanged sources:\n%s", errOut)
	}
	appendFile(t, filepath.Join(dir, "help-center", "returns.md"), "\nReturns are free for members.\n")
	if _, errOut = mustRun(t, "exec", "-q", "--model", "test", specPath, "怎么退货"); errOut != "" {
		t.Errorf("exec -q printed %q", errOut)
	}
	if _, errOut = mustRun(t, "exec", "--model", "test", specPath, "怎么退货"); strings.Contains(errOut, "indexed") {
		t.Errorf("exec -q left the edited source to the next run:\n%s", errOut)
	}
}

// exec shows cache hits, misses and retrieval, and --json carries them.
func TestExecKnowledgeEvents(t *testing.T) {
	dir, _ := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help.yaml")
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	out, errOut := mustRun(t, "exec", "--model", "test", "--json", "--trace", trace, specPath, "怎么退货")
	if !strings.Contains(errOut, "[0] cache hit  faq help-center/faq.yaml:3 \"怎么退货？\" score 1.00\n") {
		t.Errorf("cache hit progress:\n%s", errOut)
	}
	var res struct {
		Answer string `json:"answer"`
		Cache  string `json:"cache"`
		Cached struct {
			Kind, Entry string
			Score       float64
		} `json:"cached"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Cache != "hit" || res.Cached.Kind != "faq" || res.Cached.Entry != "help-center/faq.yaml:3" || !strings.Contains(res.Answer, "申请退货") {
		t.Errorf("--json = %s", out)
	}
	tb, err := os.ReadFile(trace)
	if err != nil || !bytes.Contains(tb, []byte(`"kind":"cache","run_id":"run_`)) || !bytes.Contains(tb, []byte(`"cache":"hit","cached"`)) {
		t.Errorf("trace (%v):\n%s", err, tb)
	}

	_, errOut = mustRun(t, "exec", "--model", "test", specPath, "退货 again please")
	if !strings.Contains(errOut, "[0] cache miss (best 0.") || !strings.Contains(errOut, "< 0.76) · nearest faq help-center/faq.yaml:3") ||
		!strings.Contains(errOut, "cache: not learned: the offline test model's answers are placeholders") {
		t.Errorf("cache miss progress:\n%s", errOut)
	}
	_, errOut = mustRun(t, "exec", "--model", "script:"+learnScript(t, dir), specPath, "退货 again please")
	if !strings.Contains(errOut, "cache: learned the answer") {
		t.Errorf("cache miss progress:\n%s", errOut)
	}

	out, errOut = mustRun(t, "exec", "--model", "test", "--json", specPath, "How do I return a shipping box?")
	if !strings.Contains(errOut, "[0] retrieved S1 help-center/") {
		t.Errorf("retrieve progress:\n%s", errOut)
	}
	var rag struct {
		Retrieved []struct{ ID, Source string } `json:"retrieved"`
	}
	if err := json.Unmarshal([]byte(out), &rag); err != nil || len(rag.Retrieved) == 0 || rag.Retrieved[0].ID != "S1" {
		t.Errorf("--json retrieved (%v): %s", err, out)
	}
}

// learnScript writes a model script whose one answer the cache may learn: the
// test model's placeholders never are.
func learnScript(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "learn.script.yaml")
	if err := os.WriteFile(path, []byte("turns:\n  - text: Send the parcel back from the order page.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cache list and clear act on the agent's learned entries.
func TestCacheListClear(t *testing.T) {
	dir, _ := knowledgeCopy(t)
	specPath := filepath.Join(dir, "help.yaml")
	if out, _ := mustRun(t, "cache", "list", specPath); out != "no learned entries\n" {
		t.Errorf("cache list of a new index = %q", out)
	}
	mustRun(t, "exec", "-q", "--model", "script:"+learnScript(t, dir), specPath, "退货 again please")

	out, _ := mustRun(t, "cache", "list", specPath)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID  INTENT  SCOPE   QUESTION") ||
		!strings.Contains(lines[1], "faq     shared  退货 again please") || !strings.Contains(lines[1], "Send the parcel back") {
		t.Errorf("cache list:\n%s", out)
	}
	out, _ = mustRun(t, "cache", "list", "--json", "--intent", "faq", specPath)
	var entries []struct {
		ID       int64  `json:"id"`
		Question string `json:"question"`
		Version  string `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil || len(entries) != 1 || entries[0].Question != "退货 again please" || entries[0].Version == "" {
		t.Errorf("cache list --json (%v): %s", err, out)
	}
	if out, _ := mustRun(t, "cache", "list", "--user", "u-1", specPath); out != "no learned entries\n" {
		t.Errorf("cache list --user u-1 = %q", out)
	}
	if out, _ := mustRun(t, "cache", "list", "--intent", "policy", specPath); out != "no learned entries\n" {
		t.Errorf("cache list --intent policy = %q", out)
	}
	if code, _, errOut := runCLI(t, "cache", "list", "--intent", "nope", specPath); code != 2 || !strings.Contains(errOut, "no such intent") {
		t.Errorf("cache list --intent nope: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "cache", "clear", "--user", "u", "--shared", specPath); code != 2 || !strings.Contains(errOut, "not both") {
		t.Errorf("cache clear --user --shared: exit %d, %s", code, errOut)
	}
	if out, _ := mustRun(t, "cache", "clear", "--user", "u-1", specPath); out != "removed 0 learned entries\n" {
		t.Errorf("cache clear --user u-1 = %q", out)
	}
	if out, _ := mustRun(t, "cache", "list", "--shared", specPath); !strings.Contains(out, "退货 again please") {
		t.Errorf("cache list --shared = %q", out)
	}
	if out, _ := mustRun(t, "cache", "clear", specPath); out != "removed 1 learned entry\n" {
		t.Errorf("cache clear = %q", out)
	}
	if out, _ := mustRun(t, "cache", "list", specPath); out != "no learned entries\n" {
		t.Errorf("cache list after clear = %q", out)
	}
}

// explain shows each intent's FAQ cache and retrieval budget.
func TestExplainKnowledge(t *testing.T) {
	specPath := filepath.Join(knowledgeDir, "help.yaml")
	out, _ := mustRun(t, "explain", specPath)
	for _, want := range []string{"SAVING   KNOWLEDGE\n", "  cache ≥0.76\n", "  rag ≤600 tokens\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain table lacks %q:\n%s", want, out)
		}
	}
	out, _ = mustRun(t, "explain", "--intent", "policy", specPath)
	for _, want := range []string{
		"rag: collection help · top_k 3 · min_score 0.30 · up to ~600 tokens of passages per run\n",
		"plus up to ~600 of passages\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain --intent policy lacks %q:\n%s", want, out)
		}
	}
	out, _ = mustRun(t, "explain", "--intent", "faq", specPath)
	if want := "faq cache: collection help · threshold 0.76 · scope shared · learn on (kept 168h0m0s) · verify none\n"; !strings.Contains(out, want) {
		t.Errorf("explain --intent faq lacks %q:\n%s", want, out)
	}
}

// On a terminal the progress is a bar redrawn in place, erased before a line.
func TestIndexProgressBar(t *testing.T) {
	var b bytes.Buffer
	p := &indexProgress{w: &b, tty: true}
	p.update("help", 0, 400)
	p.update("help", 120, 400)
	p.update("help", 400, 400)
	p.clear()
	want := "\rhelp  [>                             ] 0/400" +
		"\rhelp  [=========>                    ] 120/400" +
		"\rhelp  [==============================] 400/400" +
		"\r\033[K"
	if b.String() != want {
		t.Errorf("bar = %q\nwant  %q", b.String(), want)
	}
}
