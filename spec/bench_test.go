package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkValidate1000 loads and checks 1000 spec files (the two examples, renamed)
// from disk, as `agentrun validate dir/` does.
func BenchmarkValidate1000(b *testing.B) {
	dir := b.TempDir()
	examples := agentFiles("../examples/agents/*.yaml")
	if len(examples) == 0 {
		b.Fatal("no examples")
	}
	var files []string
	for i := range 1000 {
		src, err := os.ReadFile(examples[i%len(examples)])
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("agent-%04d", i)
		src = []byte(strings.Replace(string(src), "\nname: ", "\nname: "+name+"-", 1))
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, src, 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, file)
	}
	if err := os.CopyFS(filepath.Join(dir, "skills"), os.DirFS("../examples/agents/skills")); err != nil {
		b.Fatal(err) // the local skill packs the examples use
	}
	l := newTestLoader(b)
	b.ResetTimer()
	for b.Loop() {
		for _, r := range l.LoadFiles(files) {
			if r.Diagnostics.HasErrors() {
				b.Fatalf("%s: %v", r.File, r.Diagnostics)
			}
		}
	}
}

// BenchmarkLoadShopSupport is one load of the larger example, for allocations.
func BenchmarkLoadShopSupport(b *testing.B) {
	src, err := os.ReadFile("../examples/agents/shop-support.yaml")
	if err != nil {
		b.Fatal(err)
	}
	l := newTestLoader(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := l.Load("../examples/agents/shop-support.yaml", src); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}
