package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// Diagnostics made after loading carry only a start; FillEnds finds the end from the
// file, as the loader's own diagnostics have it, and leaves alone what it cannot.
func TestFillEnds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	src := "name: shop\ntools:\n  - builtin: read_file\n    with: {root: \"/数据\"}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	at := func(line, col int) Pos { return Pos{File: path, Line: line, Col: col} }
	ds := FillEnds(Diagnostics{
		{Pos: at(3, 14)},               // a plain scalar
		{Pos: at(4, 18)},               // a quoted CJK scalar in a flow mapping
		{Pos: at(1, 1), End: at(1, 3)}, // an end already set stays
		{Pos: Pos{File: path}},         // no line: nothing to find
		{Pos: Pos{File: filepath.Join(dir, "missing.yaml"), Line: 1, Col: 1}}, // no file
	})
	want := []Pos{at(3, 23), at(4, 23), at(1, 3), {}, {}}
	for i, d := range ds {
		if d.End != want[i] {
			t.Errorf("diagnostic %d at %v: end %v, want %v", i, d.Pos, d.End, want[i])
		}
	}
}
