// Package knowledge is agentrun's knowledge layer: embedders that turn text into
// vectors, and (as issue 15 grows) the collections, the index and the FAQ semantic
// cache built on them. Local is the built-in embedder — no network, no weights,
// deterministic — so every knowledge feature works offline and in tests.
//
// knowledge may import runtime and spec; it must never import cmd, builtin, skills,
// scenario or the root package (internal/layering enforces it).
package knowledge
