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

// FuzzLoadEvalFile feeds arbitrary bytes to the eval file loader as the file and as
// the datasets it may name (data.jsonl and data.csv beside it): it must never panic,
// and every diagnostic must point into one of those files.
//
//	go test ./spec -run '^$' -fuzz FuzzLoadEvalFile -fuzztime 5m
func FuzzLoadEvalFile(f *testing.F) {
	data := []byte("{\"input\": \"hi\", \"name\": \"row\"}\n")
	for _, pattern := range []string{"../examples/agents/*.evals.yaml", "testdata/evalfiles/*.yaml", "testdata/evalfiles/invalid/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src, data)
		}
	}
	f.Add([]byte("kind: eval\nversion: 1\ndatasets: [{file: data.jsonl}, {file: data.csv, map: {name: n}}]\n"), []byte("input,n\nx,y\n\"a\"b,c\n"))
	l := newTestLoader(f)
	f.Fuzz(func(t *testing.T, src, dataset []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "fuzz.evals.yaml")
		for name, content := range map[string][]byte{file: src, filepath.Join(dir, "data.jsonl"): dataset, filepath.Join(dir, "data.csv"): dataset} {
			if err := os.WriteFile(name, content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ef, diags := l.LoadEvalFile(file)
		if ef == nil && len(diags) == 0 {
			t.Fatal("no eval file and no diagnostic")
		}
		for _, d := range diags {
			if filepath.Dir(d.Pos.File) != dir || d.Pos.Line < 1 || d.Pos.Col < 1 || d.Message == "" {
				t.Fatalf("diagnostic without a place or a message: %+v", d)
			}
		}
	})
}
