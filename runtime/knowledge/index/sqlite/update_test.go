package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
	"github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/model/openai"
)

// fake is an Embedder that answers with Local's vectors, except that call bad
// (from 1; 0 never) gives what spoil makes of them.
type fake struct {
	local knowledge.Local
	bad   int
	spoil func(vecs [][]float32) ([][]float32, error)
	calls int
}

func (f *fake) ID() string      { return f.local.ID() }
func (f *fake) Dimensions() int { return f.local.Dimensions() }
func (f *fake) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls++
	vecs, err := f.local.Embed(ctx, texts)
	if err != nil || f.calls != f.bad {
		return vecs, err
	}
	return f.spoil(vecs)
}

// dump is every row of the index's tables, and the FTS vocabulary, as text.
func dump(t *testing.T, x *Index) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT name, embedder, dimensions, generation, chunks, updated_at, manifest FROM collections ORDER BY name`,
		`SELECT id, collection, hash, kind, source, heading, start_line, end_line, text, questions FROM chunks ORDER BY id`,
		`SELECT collection, hash, seq, embedder, dimensions, hex(vector) FROM vectors ORDER BY collection, hash, seq`,
		`SELECT rowid FROM chunks_fts ORDER BY rowid`,
		`SELECT term, doc, cnt FROM chunks_terms ORDER BY term`,
	} {
		rows, err := x.read.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		b.WriteString("--\n")
	}
	return b.String()
}

// extraChunks are n new text chunks: with index.EmbedBatch < n, two or more batches.
func extraChunks(n int) []knowledge.Chunk {
	out := make([]knowledge.Chunk, n)
	for i := range out {
		out[i] = knowledge.Chunk{Source: "extra.txt", StartLine: i + 1, EndLine: i + 1,
			Text: fmt.Sprintf("extra passage %d about parcels", i), Kind: knowledge.ChunkText, Hash: fmt.Sprintf("extra-%d", i)}
	}
	return out
}

func TestUpdateWithManifestAndProgress(t *testing.T) {
	x, _ := openIndex(t)
	ctx := t.Context()
	emb := &knowledge.Local{}
	if m, e, ok, err := x.Manifest(ctx, "help"); ok || err != nil || m != "" || e != "" {
		t.Errorf("Manifest of a collection never indexed: %q %q %v %v", m, e, ok, err)
	}
	chunks := append(readChunks(t, sourcesDir, patterns), extraChunks(2*index.EmbedBatch)...)
	var calls [][2]int
	st, err := x.UpdateWith(ctx, "help", chunks, emb, index.UpdateOptions{
		Manifest: "m1",
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := 1 + (st.Vectors+index.EmbedBatch-1)/index.EmbedBatch
	if len(calls) != wantCalls || calls[0] != [2]int{0, st.Vectors} || calls[len(calls)-1] != [2]int{st.Vectors, st.Vectors} {
		t.Errorf("progress %v, want %d calls from 0 to %d", calls, wantCalls, st.Vectors)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] <= calls[i-1][0] || calls[i][0]-calls[i-1][0] > index.EmbedBatch {
			t.Errorf("progress %v does not grow by batches", calls)
		}
	}
	if m, e, ok, err := x.Manifest(ctx, "help"); !ok || err != nil || m != "m1" || e != emb.ID() {
		t.Errorf("Manifest = %q %q %v %v, want m1 %s", m, e, ok, err, emb.ID())
	}

	// Nothing to embed: one call with (0, 0); the manifest still changes.
	calls = nil
	if _, err := x.UpdateWith(ctx, "help", chunks, emb, index.UpdateOptions{
		Manifest: "m2",
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) },
	}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0] != [2]int{0, 0} {
		t.Errorf("progress with nothing to embed: %v", calls)
	}
	if m, _, _, _ := x.Manifest(ctx, "help"); m != "m2" {
		t.Errorf("Manifest = %q, want m2", m)
	}
	// Update (no options) clears it: the manifest describes the last indexing.
	if _, err := x.Update(ctx, "help", chunks, emb); err != nil {
		t.Fatal(err)
	}
	if m, _, ok, _ := x.Manifest(ctx, "help"); m != "" || !ok {
		t.Errorf("Manifest after Update = %q, %v", m, ok)
	}
}

func TestUpdateBadEmbedderOutputLeavesIndex(t *testing.T) {
	nan := float32(math.NaN())
	spoilers := map[string]func([][]float32) ([][]float32, error){
		"error": func([][]float32) ([][]float32, error) {
			return nil, errors.New("embeddings server: 500 Internal Server Error")
		},
		"short vector":    func(v [][]float32) ([][]float32, error) { v[3] = v[3][:10]; return v, nil },
		"long vector":     func(v [][]float32) ([][]float32, error) { v[0] = append(v[0], 1); return v, nil },
		"nil vector":      func(v [][]float32) ([][]float32, error) { v[1] = nil; return v, nil },
		"NaN":             func(v [][]float32) ([][]float32, error) { v[2][5] = nan; return v, nil },
		"infinity":        func(v [][]float32) ([][]float32, error) { v[2][0] = float32(math.Inf(-1)); return v, nil },
		"one vector less": func(v [][]float32) ([][]float32, error) { return v[1:], nil },
		"one vector more": func(v [][]float32) ([][]float32, error) { return append(v, v[0]), nil },
		"no vectors":      func([][]float32) ([][]float32, error) { return nil, nil },
	}
	chunks := readChunks(t, sourcesDir, patterns)
	more := append(chunks[1:len(chunks):len(chunks)], extraChunks(index.EmbedBatch+10)...)
	for name, spoil := range spoilers {
		for _, bad := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s on call %d", name, bad), func(t *testing.T) {
				x, _ := openIndex(t)
				ctx := t.Context()
				if _, err := x.UpdateWith(ctx, "help", chunks, &knowledge.Local{}, index.UpdateOptions{Manifest: "before"}); err != nil {
					t.Fatal(err)
				}
				before := dump(t, x)
				for _, rebuild := range []bool{false, true} {
					_, err := x.UpdateWith(ctx, "help", more, &fake{bad: bad, spoil: spoil}, index.UpdateOptions{Rebuild: rebuild, Manifest: "after"})
					if err == nil {
						t.Fatalf("rebuild=%v: no error", rebuild)
					}
					if !strings.Contains(err.Error(), "knowledge index: collection help: embedder local:v1:dim=256") {
						t.Errorf("rebuild=%v: error %q does not name the collection and the embedder", rebuild, err)
					}
					if got := dump(t, x); got != before {
						t.Errorf("rebuild=%v: the index changed:\n%s\nwant\n%s", rebuild, got, before)
					}
				}
				// A collection indexed for the first time is not created.
				if _, err := x.UpdateWith(ctx, "new", more, &fake{bad: bad, spoil: spoil}, index.UpdateOptions{Manifest: "x"}); err == nil {
					t.Fatal("no error")
				}
				if _, _, ok, err := x.Manifest(ctx, "new"); ok || err != nil {
					t.Errorf("a failed first update left the collection: %v, %v", ok, err)
				}
				if got := dump(t, x); got != before {
					t.Errorf("a failed first update changed the index")
				}
			})
		}
	}
}

// embedServer is an OpenAI-compatible /embeddings endpoint whose behaviour a test
// switches: "good" answers 4-dimensional vectors hashed from each input.
type embedServer struct {
	*httptest.Server
	mode     atomic.Value // string
	requests atomic.Int64
}

func newEmbedServer(t *testing.T) *embedServer {
	s := &embedServer{}
	s.mode.Store("good")
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := jsonDecode(r, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		dims := 4
		switch s.mode.Load().(string) {
		case "500":
			http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, 500)
			return
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"not a vector`)
			return
		case "wrong dimension":
			dims = 3
		}
		var data []string
		for i, in := range req.Input {
			sum := sha256.Sum256([]byte(in))
			vals := make([]string, dims)
			for j := range vals {
				vals[j] = fmt.Sprint(int(binary.LittleEndian.Uint16(sum[2*j:])) - 32768)
			}
			data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[%s]}`, i, strings.Join(vals, ",")))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[%s],"model":%q,"usage":{"prompt_tokens":1,"total_tokens":1}}`, strings.Join(data, ","), req.Model)
	}))
	t.Cleanup(s.Close)
	return s
}

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

func newOpenAIEmbedder(t *testing.T, s *embedServer, dims int) *openai.Embedder {
	t.Helper()
	zero := 0
	e, err := openai.NewEmbedder(openai.EmbedderConfig{Model: "emb", BaseURL: s.URL, APIKeyEnv: "KEY", Dimensions: dims, Retries: &zero},
		func(k string) (string, bool) { return "sk-test", k == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestUpdateOpenAIEmbedderFailuresLeaveIndex(t *testing.T) {
	s := newEmbedServer(t)
	x, _ := openIndex(t)
	ctx := t.Context()
	chunks := readChunks(t, sourcesDir, patterns)
	if _, err := x.UpdateWith(ctx, "help", chunks, newOpenAIEmbedder(t, s, 4), index.UpdateOptions{Manifest: "before"}); err != nil {
		t.Fatal(err)
	}
	before := dump(t, x)
	more := append(chunks[1:len(chunks):len(chunks)], extraChunks(10)...)
	for _, mode := range []string{"500", "wrong dimension", "garbage"} {
		s.mode.Store(mode)
		_, err := x.UpdateWith(ctx, "help", more, newOpenAIEmbedder(t, s, 4), index.UpdateOptions{Manifest: "after"})
		if err == nil {
			t.Errorf("%s: no error", mode)
			continue
		}
		t.Logf("%s: %v", mode, err)
		if got := dump(t, x); got != before {
			t.Errorf("%s: the index changed", mode)
		}
	}
	s.mode.Store("good")
	if _, err := x.UpdateWith(ctx, "help", more, newOpenAIEmbedder(t, s, 4), index.UpdateOptions{}); err != nil {
		t.Errorf("after the server recovered: %v", err)
	}
}

// An embedder of the model's native dimension learns it from its first answer;
// the collection records it.
func TestUpdateNativeDimension(t *testing.T) {
	s := newEmbedServer(t)
	x, _ := openIndex(t)
	ctx := t.Context()
	chunks := readChunks(t, sourcesDir, patterns)
	emb := newOpenAIEmbedder(t, s, 0)
	if emb.Dimensions() != 0 {
		t.Fatalf("Dimensions before the first call = %d", emb.Dimensions())
	}
	if _, err := x.Update(ctx, "help", chunks, emb); err != nil {
		t.Fatal(err)
	}
	var dims int
	x.read.QueryRow(`SELECT dimensions FROM collections WHERE name = 'help'`).Scan(&dims)
	if dims != 4 {
		t.Errorf("collection of dimension %d, want 4", dims)
	}
	// A new process: nothing to embed, the dimension is the collection's.
	fresh := newOpenAIEmbedder(t, s, 0)
	if st, err := x.Update(ctx, "help", chunks, fresh); err != nil || st.Embedded != 0 {
		t.Errorf("second update: %+v, %v", st, err)
	}
	x.read.QueryRow(`SELECT dimensions FROM collections WHERE name = 'help'`).Scan(&dims)
	if dims != 4 {
		t.Errorf("collection of dimension %d after the second update, want 4", dims)
	}
	if hits, err := x.Search(ctx, "help", "refund", fresh, 3); err != nil || len(hits) == 0 {
		t.Errorf("search: %v, %v", hits, err)
	}
}
