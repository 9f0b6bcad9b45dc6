package knowledge

import (
	"reflect"
	"slices"
	"testing"
)

func TestChangeChunkRows(t *testing.T) {
	a := Chunk{Source: "a.md", StartLine: 1, EndLine: 4, Hash: "ha"}
	b := Chunk{Source: "b.md", StartLine: 1, EndLine: 2, Hash: "hb"}
	aMoved := Chunk{Source: "a.md", StartLine: 3, EndLine: 6, Hash: "ha"}
	aCopy := Chunk{Source: "copy.md", StartLine: 1, EndLine: 4, Hash: "ha"}
	row := func(id int64, c Chunk) StoredChunk {
		return StoredChunk{ID: id, Source: c.Source, StartLine: c.StartLine, EndLine: c.EndLine}
	}
	tests := []struct {
		name   string
		chunks []Chunk
		stored map[string][]StoredChunk
		want   ChunkRowChanges
	}{
		{name: "empty index", chunks: []Chunk{b, a},
			want: ChunkRowChanges{Added: []Chunk{b, a}}},
		{name: "unchanged", chunks: []Chunk{a, b},
			stored: map[string][]StoredChunk{"ha": {row(1, a)}, "hb": {row(2, b)}}},
		{name: "moved keeps its row", chunks: []Chunk{aMoved},
			stored: map[string][]StoredChunk{"ha": {row(1, a)}},
			want:   ChunkRowChanges{Moved: []MovedChunk{{ID: 1, Chunk: aMoved}}}},
		{name: "each row serves one chunk, the first row first", chunks: []Chunk{aCopy, a},
			stored: map[string][]StoredChunk{"ha": {row(1, a), row(5, aCopy)}},
			want:   ChunkRowChanges{Moved: []MovedChunk{{ID: 1, Chunk: aCopy}, {ID: 5, Chunk: a}}}},
		{name: "a repeated content beyond its rows is added", chunks: []Chunk{a, aCopy},
			stored: map[string][]StoredChunk{"ha": {row(1, a)}},
			want:   ChunkRowChanges{Added: []Chunk{aCopy}}},
		{name: "rows left over are removed", chunks: []Chunk{a},
			stored: map[string][]StoredChunk{"ha": {row(1, a), row(2, aCopy)}, "hb": {row(3, b)}},
			want:   ChunkRowChanges{Removed: []int64{2, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ChangeChunkRows(tt.chunks, tt.stored)
			slices.Sort(got.Removed) // the stored rows are a map: removal order is free
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ChangeChunkRows =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
