package postgres

import (
	"context"
	"math"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// requirePgvector skips where the server offers no vector extension (it is not in
// Debian's packages; CI has none): the index then scores in process, which the
// other tests cover.
func requirePgvector(t *testing.T, u string) {
	t.Helper()
	x, err := Open(context.Background(), u+"&"+vectorSearchParam+"="+string(VectorsInProcess))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if !x.VectorExtensionAvailable() {
		t.Skip("the server has no vector extension")
	}
}

// With pgvector the index scores in the server, over the embedding column filled
// from the bytea (also for vectors stored before it was used), and finds what the
// in-process search finds: the same chunks in the same order, the same scores but
// for float rounding, the same FAQ entries.
func TestPgvectorMatchesInProcess(t *testing.T) {
	u, _ := freshSchema(t)
	requirePgvector(t, u)
	ctx := t.Context()
	emb := &knowledge.Local{}
	chunks := helpCentre(t)
	local, err := Open(ctx, u+"&"+vectorSearchParam+"="+string(VectorsInProcess))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	half := len(chunks) / 2
	if _, err := local.Update(ctx, "help", chunks[:half], emb); err != nil { // stored before pgvector is used
		t.Fatal(err)
	}
	server, err := Open(ctx, u+"&"+vectorSearchParam+"="+string(VectorsPgvector))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if server.VectorSearch() != VectorsPgvector || local.VectorSearch() != VectorsInProcess {
		t.Fatalf("modes %s and %s", server.VectorSearch(), local.VectorSearch())
	}
	if _, err := server.Update(ctx, "help", chunks, emb); err != nil { // the rest, with the column
		t.Fatal(err)
	}
	var missing int
	server.db.Pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_vectors WHERE embedding IS NULL`).Scan(&missing)
	if missing != 0 {
		t.Fatalf("%d vectors without an embedding", missing)
	}
	for _, q := range questions(t) {
		a, err := local.Search(ctx, "help", q, emb, 5)
		if err != nil {
			t.Fatal(err)
		}
		b, err := server.Search(ctx, "help", q, emb, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Fatalf("%q: %d hits in process, %d with pgvector", q, len(a), len(b))
		}
		for i := range a {
			if chunkKey(a[i]) != chunkKey(b[i]) || a[i].Question != b[i].Question ||
				math.Abs(float64(a[i].VectorScore-b[i].VectorScore)) > 1e-5 {
				t.Fatalf("%q hit %d: in process %s %q %.6f, pgvector %s %q %.6f", q, i,
					chunkKey(a[i]), a[i].Question, a[i].VectorScore, chunkKey(b[i]), b[i].Question, b[i].VectorScore)
			}
		}
		fa, okA, err := local.FAQ(ctx, "help", q, emb)
		if err != nil {
			t.Fatal(err)
		}
		fb, okB, err := server.FAQ(ctx, "help", q, emb)
		if err != nil {
			t.Fatal(err)
		}
		if okA != okB || fa.Question != fb.Question || math.Abs(float64(fa.VectorScore-fb.VectorScore)) > 1e-5 {
			t.Fatalf("%q FAQ: in process %q %.6f, pgvector %q %.6f", q, fa.Question, fa.VectorScore, fb.Question, fb.VectorScore)
		}
	}
}

func TestVectorSearchParam(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://127.0.0.1/x?vector_search=gpu"); err == nil || !strings.Contains(err.Error(), "vector_search=gpu") {
		t.Errorf("a bad vector_search: %v", err)
	}
}

// In a database without the extension the index creates it (in its own schema,
// the first on its search path) when the server offers it and the role may.
func TestPgvectorCreatesTheExtension(t *testing.T) {
	u, db := freshSchema(t)
	requirePgvector(t, u)
	ctx := t.Context()
	name := db.Schema + "_db"
	if _, err := db.Pool.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Pool.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
	parsed, err := neturl.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Path = "/" + name
	x, err := Open(ctx, parsed.String()+"&"+vectorSearchParam+"="+string(VectorsPgvector))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var ns string
	if err := x.db.Pool.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`).Scan(&ns); err != nil {
		t.Fatal(err)
	}
	if x.VectorSearch() != VectorsPgvector || ns != db.Schema {
		t.Fatalf("mode %s, extension in %q", x.VectorSearch(), ns)
	}
	if _, err := x.Update(ctx, "help", helpCentre(t), &knowledge.Local{}); err != nil {
		t.Fatal(err)
	}
	if hits, err := x.Search(ctx, "help", "How much is the delivery fee?", &knowledge.Local{}, 3); err != nil || len(hits) != 3 {
		t.Fatalf("%v %d hits", err, len(hits))
	}
}
