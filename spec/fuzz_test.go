package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and every
// diagnostic it reports must point into the file.
//
//	go test ./spec -run '^$' -fuzz FuzzLoad -fuzztime 5m
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"../examples/agents/*.yaml", "testdata/invalid/*.yaml", "testdata/valid/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
		}
	}
	l := newTestLoader(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		spec, diags := l.Load("fuzz.yaml", src)
		if spec == nil && len(diags) == 0 {
			t.Fatal("no spec and no diagnostic")
		}
		for _, d := range diags {
			if d.Pos.File != "fuzz.yaml" || d.Pos.Line < 1 || d.Pos.Col < 1 || d.Message == "" {
				t.Fatalf("diagnostic without a place or a message: %+v", d)
			}
		}
	})
}
