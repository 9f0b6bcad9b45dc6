package knowledge

// StoredChunk is a chunk row an index holds: its id and where its content sat
// when it was stored.
type StoredChunk struct {
	ID                 int64
	Source             string
	StartLine, EndLine int
}

// MovedChunk is a stored row kept for a chunk of its content that now sits
// elsewhere: the row's place becomes the chunk's.
type MovedChunk struct {
	ID    int64
	Chunk Chunk
}

// ChunkRowChanges are the changes that make an index's chunk rows hold a
// collection's chunks without rewriting the rows that stay.
type ChunkRowChanges struct {
	Moved   []MovedChunk
	Added   []Chunk // in the chunks' order, so new rows' ids follow it
	Removed []int64
}

// ChangeChunkRows pairs each chunk with a stored row of the same content (stored
// maps a hash to its rows in id order, each used once); the chunks left over are
// added, the rows left over removed. Both indexes update their rows this way.
func ChangeChunkRows(chunks []Chunk, stored map[string][]StoredChunk) ChunkRowChanges {
	var ch ChunkRowChanges
	used := map[string]int{} // hash → rows of stored[hash] paired so far
	for _, c := range chunks {
		rs := stored[c.Hash]
		if used[c.Hash] == len(rs) {
			ch.Added = append(ch.Added, c)
			continue
		}
		r := rs[used[c.Hash]]
		used[c.Hash]++
		if r.Source != c.Source || r.StartLine != c.StartLine || r.EndLine != c.EndLine {
			ch.Moved = append(ch.Moved, MovedChunk{ID: r.ID, Chunk: c})
		}
	}
	for h, rs := range stored {
		for _, r := range rs[used[h]:] {
			ch.Removed = append(ch.Removed, r.ID)
		}
	}
	return ch
}
