package index

import "github.com/agentrun/agentrun/runtime/knowledge/index/indextest"

// The synthetic corpus of every storage's benchmarks (same seed, same chunks).
var (
	synthetic     = indextest.Synthetic
	benchQueries  = indextest.Queries
	benchQuestion = indextest.Question
)
