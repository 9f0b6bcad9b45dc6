// Package knowledge is what the engine asks of its knowledge — Knowledge: the FAQ
// cache's lookup and learning, and retrieval of passages — and what every index
// shares: sources read into chunks, and embedders that turn text into vectors. Local
// is the built-in embedder — no network, no weights, deterministic — so every
// knowledge feature works offline and in tests.
//
// The index lives beneath it: index holds the logic (ranking, fusion, the learned
// answers, updates) over a small storage interface, and index/sqlite and
// index/postgres hold only storage. knowledge imports spec and internal helpers; none
// of these packages imports the engine (internal/layering enforces it).
package knowledge
