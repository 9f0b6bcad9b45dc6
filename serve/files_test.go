package serve_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentrun/agentrun/serve"
)

// TestServerFiles: what a watcher watches is the spec arguments and the files of
// the agents served now, which a reload changes.
func TestServerFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	specs := write("agents/a.yaml", "version: 1\nname: a\ndescription: d\ninstructions: i\n")
	specs = filepath.Dir(specs)
	write("agents/b.yaml", "version: 1\nname: b\ndescription: d\ninstructions: i\nskills: [../skills/s]\n")
	skill := write("skills/s/skill.yaml", "name: s\ndescription: A skill.\ninstructions: Be nice.\n")
	srv, err := serve.New(context.Background(), serve.Options{
		Config: serve.Config{Addr: "127.0.0.1:0"}, InsecureNoAuth: true, Specs: []string{specs},
		Store: "memory:", Model: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	want := []string{specs, filepath.Join(specs, "a.yaml"), filepath.Join(specs, "b.yaml"), skill}
	if got := srv.Files(); !slices.Equal(got, want) {
		t.Errorf("Files:\n got %q\nwant %q", got, want)
	}

	// b no longer uses the skill: after the reload it is not watched.
	write("agents/b.yaml", "version: 1\nname: b\ndescription: d\ninstructions: i\n")
	if err := srv.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = want[:3]
	if got := srv.Files(); !slices.Equal(got, want) {
		t.Errorf("Files after the reload:\n got %q\nwant %q", got, want)
	}
}
