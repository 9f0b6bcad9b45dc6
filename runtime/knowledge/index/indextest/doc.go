// Package indextest holds the synthetic corpus the knowledge index's tests and
// benchmarks share (the engine's, and each storage's), so that every one of them
// ranks the very same chunks and questions: same seed, same texts.
package indextest
