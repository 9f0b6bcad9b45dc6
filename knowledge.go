package agentrun

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/runtime/knowledge"
	kindex "github.com/agentrun/agentrun/runtime/knowledge/index"
	"github.com/agentrun/agentrun/runtime/model/openai"
	"github.com/agentrun/agentrun/runtime/telemetry"
	"github.com/agentrun/agentrun/spec"
)

// IndexPath is the knowledge index of a spec: AGENTRUN_INDEX (read through lookup;
// nil means the process environment), then knowledge.index relative to the spec's
// directory, then spec.DefaultIndexPath in the spec's project directory (ProjectDir),
// beside the memory store's default. A postgres:// (or postgresql://) URL is taken as
// it is.
func IndexPath(s *spec.Spec, lookup func(string) (string, bool)) string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if env, _ := lookup("AGENTRUN_INDEX"); env != "" {
		return env
	}
	if p := s.Knowledge.Index; p != "" {
		if filepath.IsAbs(p) || indexKindOf(p).url {
			return p
		}
		return filepath.Join(filepath.Dir(s.Pos.File), p)
	}
	return filepath.Join(ProjectDir(s.Pos.File), spec.DefaultIndexPath)
}

// KnowledgeIndex is a knowledge index as indexing (IndexSpec), runs
// (OpenKnowledge) and agentrun cache use it: *sqlite.Index, a file, or
// *postgres.Index, a schema of a PostgreSQL database. Both take the same chunks and
// give the same reports, errors (*kindex.EmbedderMismatchError) and runtime adapter.
type KnowledgeIndex interface {
	// Manifest returns the fingerprint and embedder ID collection was last indexed
	// with; ok is false when it was never indexed.
	Manifest(ctx context.Context, collection string) (manifest, embedder string, ok bool, err error)
	// UpdateWith makes collection hold exactly chunks, embedding only what the index
	// lacks, in one transaction.
	UpdateWith(ctx context.Context, collection string, chunks []knowledge.Chunk, emb knowledge.Embedder, opts kindex.UpdateOptions) (kindex.Stats, error)
	// Knowledge adapts the index to knowledge.Knowledge for an agent using emb.
	Knowledge(emb knowledge.Embedder, collections map[string]string) knowledge.Knowledge
	// ListLearned and ClearLearned list and delete learned FAQ-cache entries.
	ListLearned(ctx context.Context, f kindex.LearnedFilter) ([]kindex.LearnedEntry, error)
	ClearLearned(ctx context.Context, f kindex.LearnedFilter) (int, error)
	Close() error
}

// Offline reports whether a spec's model is an offline provider (test, script):
// such runs embed with the local embedder whatever the spec configures, so they
// never need the network.
func Offline(s *spec.Spec) bool {
	return s.Model.Provider == spec.ProviderTest || s.Model.Provider == spec.ProviderScript
}

// NewEmbedder builds the embedder the spec's embeddings section names: the local
// one (the default; embeddings.dimensions if set) or an OpenAI-compatible API with
// the chat model's environment fallbacks (LLM_BASE_URL, OPENAI_BASE_URL; LLM_API_KEY,
// OPENAI_API_KEY) and the model embeddings.model, else LLM_EMBEDDING_MODEL, else
// spec.DefaultEmbeddingsModel. offline always gives the local embedder.
func NewEmbedder(s *spec.Spec, offline bool, lookup func(string) (string, bool)) (knowledge.Embedder, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	e := s.Embeddings
	if offline || e.Provider == "" || e.Provider == spec.EmbeddingsLocal {
		if e.Dimensions == 0 || e.Provider == spec.EmbeddingsOpenAI {
			return &knowledge.Local{}, nil // an API model's dimension means nothing to Local
		}
		return knowledge.NewLocal(e.Dimensions)
	}
	if e.Provider != spec.EmbeddingsOpenAI {
		return nil, fmt.Errorf("unknown embeddings provider %q", e.Provider)
	}
	model := e.Model
	if model == "" {
		model, _ = lookup("LLM_EMBEDDING_MODEL")
	}
	retries := e.Retries
	if retries == nil {
		n := spec.DefaultModelRetries
		retries = &n
	}
	emb, err := openai.NewEmbedder(openai.EmbedderConfig{
		Model:      cmp.Or(model, spec.DefaultEmbeddingsModel),
		BaseURL:    e.BaseURL,
		APIKeyEnv:  e.APIKeyEnv,
		Dimensions: e.Dimensions,
		Timeout:    cmp.Or(e.Timeout.Duration, spec.DefaultModelTimeout),
		Retries:    retries,
	}, lookup)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	return emb, nil
}

// CollectionKey is the name a collection of an agent has in the index:
// "<agent>/<collection>", with "#local" when offline runs substitute the local
// embedder for a configured API one, so test runs never replace the real index.
func CollectionKey(s *spec.Spec, collection string, offline bool) string {
	key := s.Name + "/" + collection
	if offline && s.Embeddings.Provider == spec.EmbeddingsOpenAI {
		key += "#local"
	}
	return key
}

// IndexOptions tune IndexSpec.
type IndexOptions struct {
	// Index is the index file or postgres:// URL; "" means IndexPath.
	Index string
	// Rebuild embeds every chunk again.
	Rebuild bool
	// Offline uses the local embedder whatever the spec configures (and the
	// collections' "#local" keys; see CollectionKey), as runs of a spec whose model
	// is offline (test, script) always do.
	Offline bool
	// Progress, when set, is called with the texts of a collection embedded so far
	// and the number to embed: (0, total) first, then after each batch.
	Progress func(collection string, done, total int)
	// Done, when set, is called with each collection's report when it is indexed.
	Done func(CollectionReport)
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// IndexReport is what IndexSpec did.
type IndexReport struct {
	Index       string // the index file or URL
	Embedder    string // the embedder's ID
	Collections []CollectionReport
}

// CollectionReport is what indexing one collection did.
type CollectionReport struct {
	Collection string // its name in the spec
	Key        string // its name in the index (CollectionKey)
	Embedder   string // the ID of the embedder it was indexed with
	Files      int    // source files matched
	Chunks     int
	kindex.Stats
	Warnings spec.Diagnostics // positions relative to the spec's directory
	Duration time.Duration
	// Rebuilt is set when every chunk was embedded again: asked for, or because
	// the collection was indexed by another embedder, PreviousEmbedder.
	Rebuilt          bool
	PreviousEmbedder string
}

// Summary is the report in one line, e.g. "12 files, 48 chunks — 3 embedded, 45
// kept, 0 deleted (5 vectors) in 12ms", with why it was rebuilt.
func (r CollectionReport) Summary() string {
	s := fmt.Sprintf("%s, %s — %d embedded, %d kept, %d deleted (%s) in %s",
		plural(r.Files, "file"), plural(r.Chunks, "chunk"), r.Embedded, r.Kept, r.Deleted, plural(r.Vectors, "vector"), roundDuration(r.Duration))
	switch {
	case r.PreviousEmbedder != "":
		s += fmt.Sprintf("; embedder changed from %s to %s", r.PreviousEmbedder, r.Embedder)
	case r.Rebuilt:
		s += "; rebuilt"
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	case d > time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// IndexSpec brings the index of every collection of the spec up to date: it reads
// the sources, embeds only the chunks the index lacks and deletes the ones that are
// gone. A collection indexed by another embedder is rebuilt with this one. A
// source that cannot be read fails before anything is written, with an error naming
// it; an embedder's failure leaves its collection as it was (the report then holds
// the collections indexed before it).
func IndexSpec(ctx context.Context, s *spec.Spec, opts IndexOptions) (*IndexReport, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	opts.Offline = opts.Offline || Offline(s) // the keys runs of this spec use
	emb, err := NewEmbedder(s, opts.Offline, lookup)
	if err != nil {
		return nil, err
	}
	path := cmp.Or(opts.Index, IndexPath(s, lookup))
	report := &IndexReport{Index: path, Embedder: emb.ID()}
	// Read every collection first: a bad source fails before the index is touched.
	read := make([]sourceSet, len(s.Knowledge.Collections))
	for i := range s.Knowledge.Collections {
		if read[i], err = readCollection(s, &s.Knowledge.Collections[i]); err != nil {
			return nil, err
		}
	}
	if len(read) == 0 {
		return report, nil
	}
	idx, err := OpenIndex(ctx, path)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	for i := range read {
		r, err := indexCollection(ctx, idx, s, emb, read[i], opts)
		if err != nil {
			return report, err
		}
		report.Collections = append(report.Collections, r)
		if opts.Done != nil {
			opts.Done(r)
		}
	}
	return report, nil
}

// sourceSet is a collection's sources, read.
type sourceSet struct {
	coll     *spec.Collection
	files    int
	manifest string
	chunks   []knowledge.Chunk
	warnings spec.Diagnostics
	took     time.Duration
}

// readCollection reads and chunks a collection's sources. The manifest is taken
// before the files are read, so a file that changes meanwhile is seen as stale the
// next time.
func readCollection(s *spec.Spec, c *spec.Collection) (sourceSet, error) {
	start := time.Now()
	dir := filepath.Dir(s.Pos.File)
	files, manifest := Manifest(dir, c)
	size, overlap := c.ChunkOptions()
	chunks, warnings, err := knowledge.ReadSources(dir, c.Sources, knowledge.ChunkOptions{Size: size, Overlap: overlap})
	if err != nil {
		return sourceSet{}, fmt.Errorf("knowledge collection %s: %w", c.Name, err)
	}
	return sourceSet{coll: c, files: files, manifest: manifest, chunks: chunks, warnings: warnings, took: time.Since(start)}, nil
}

// indexCollection updates one read collection in the index.
func indexCollection(ctx context.Context, idx KnowledgeIndex, s *spec.Spec, emb knowledge.Embedder, src sourceSet, opts IndexOptions) (CollectionReport, error) {
	start := time.Now()
	key := CollectionKey(s, src.coll.Name, opts.Offline)
	r := CollectionReport{Collection: src.coll.Name, Key: key, Files: src.files, Chunks: len(src.chunks), Warnings: src.warnings, Rebuilt: opts.Rebuild, Embedder: emb.ID()}
	_, was, ok, err := idx.Manifest(ctx, key)
	if err != nil {
		return r, err
	}
	if ok && was != emb.ID() {
		r.Rebuilt, r.PreviousEmbedder = true, was
	}
	uo := kindex.UpdateOptions{Rebuild: r.Rebuilt, Manifest: src.manifest}
	if opts.Progress != nil {
		uo.Progress = func(done, total int) { opts.Progress(src.coll.Name, done, total) }
	}
	if r.Stats, err = idx.UpdateWith(ctx, key, src.chunks, emb, uo); err != nil {
		return r, err // it names the collection's key
	}
	r.Duration = src.took + time.Since(start)
	return r, nil
}

// Manifest fingerprints a collection's sources without reading them: a hash of the
// sorted relative path, size and modification time of every file its patterns
// match, of the patterns and of the chunk options. files is how many matched. A
// source that cannot be listed or stat'ed is hashed as missing, which makes the
// collection stale; indexing then reports the problem.
func Manifest(dir string, c *spec.Collection) (files int, manifest string) {
	h := sha256.New()
	size, overlap := c.ChunkOptions()
	fmt.Fprintf(h, "agentrun-manifest v1\x00size=%d overlap=%d\x00", size, overlap)
	for _, p := range c.Sources {
		fmt.Fprintf(h, "pattern %s\x00", p)
	}
	seen := map[string]bool{}
	var names []string
	for _, p := range c.Sources {
		matched, _, _ := spec.ExpandSources(dir, p) // a pattern that fails is reported by indexing
		for _, name := range matched {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	var buf [16]byte
	for _, name := range names {
		fmt.Fprintf(h, "file %s\x00", name)
		info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			h.Write([]byte("missing\x00"))
			continue
		}
		files++
		binary.LittleEndian.PutUint64(buf[:8], uint64(info.Size()))
		binary.LittleEndian.PutUint64(buf[8:], uint64(info.ModTime().UnixNano()))
		h.Write(buf[:])
	}
	return files, "v1:" + hex.EncodeToString(h.Sum(nil))
}

// SpecVersion is a short hash of the spec's file, of every skill pack file it
// loaded (skill.yaml and its instructions_file) and of its knowledge sources (their
// Manifest): editing any of them changes it. The FAQ cache keys its learned answers
// by it, so an edited agent — or an edited help article — starts afresh.
func SpecVersion(s *spec.Spec) string {
	h := sha256.New()
	hashSpecFiles(h, s, func(name string) string { return name })
	dir := filepath.Dir(s.Pos.File)
	for i := range s.Knowledge.Collections {
		_, manifest := Manifest(dir, &s.Knowledge.Collections[i])
		fmt.Fprintf(h, "collection %s %s\x00", s.Knowledge.Collections[i].Name, manifest)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// SpecDigest is a hash of what the agent is made of — its spec file, the skill
// pack files it loaded and its sub-agents' specs, by their content and their
// names relative to the spec's directory — wherever the files are: a durable
// engine's worker runs a run only on the spec the run was started with.
func SpecDigest(s *spec.Spec) string {
	h := sha256.New()
	var walk func(s *spec.Spec)
	walk = func(s *spec.Spec) {
		dir := filepath.Dir(s.Pos.File)
		hashSpecFiles(h, s, func(name string) string {
			if rel, err := filepath.Rel(dir, name); err == nil {
				return filepath.ToSlash(rel)
			}
			return name
		})
		for _, a := range s.Agents {
			fmt.Fprintf(h, "agent %s\x00", a.Name)
			if a.Loaded != nil {
				walk(a.Loaded)
			}
		}
	}
	walk(s)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// hashSpecFiles hashes the spec's file and the skill pack files it loaded, each
// under the name name gives it.
func hashSpecFiles(h hash.Hash, s *spec.Spec, name func(string) string) {
	add := func(file string) {
		fmt.Fprintf(h, "%s\x00", name(file))
		if b, err := os.ReadFile(file); err == nil {
			h.Write(b)
		}
		h.Write([]byte{0})
	}
	add(s.Pos.File)
	for _, ref := range s.Skills {
		p := ref.Pack
		if p == nil {
			continue
		}
		if strings.HasPrefix(p.Dir, spec.BundledPrefix) {
			// Bundled skills live in the binary: their text changes with it.
			fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", p.Dir, p.Version, p.Instructions.Source, p.InstructionsFile)
			continue
		}
		add(p.Pos.File)
		if p.InstructionsFile != "" {
			add(filepath.Join(p.Dir, p.InstructionsFile))
		}
	}
}

// ReindexError is a collection indexed by another embedder than the agent's: runs
// do not rebuild it silently (re-embedding a corpus through an API costs money and
// time, and a changed embeddings section is more often a mistake than a plan).
type ReindexError struct {
	Spec string
	Err  *kindex.EmbedderMismatchError
}

func (e *ReindexError) Error() string {
	return fmt.Sprintf("knowledge collection %s was indexed by %s; this agent uses %s: run agentrun index %s to rebuild it",
		e.Err.Collection, e.Err.Index, e.Err.Agent, e.Spec)
}

func (e *ReindexError) Unwrap() error { return e.Err }

// KnowledgeOptions say where OpenKnowledge finds the index and how it embeds.
type KnowledgeOptions struct {
	// Index is the index file or postgres:// URL; "" means IndexPath.
	Index string
	// Offline uses the local embedder whatever the spec configures (see CollectionKey).
	Offline bool
	// OnIndex is told of each collection indexed because it was missing or stale.
	OnIndex func(CollectionReport)
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Telemetry, when set, traces lookups, retrieval and embeddings.
	Telemetry        *telemetry.Telemetry
	TelemetryOptions []telemetry.Options
}

// OpenKnowledge opens the spec's knowledge index for runs: it indexes collections
// that are missing or stale (incrementally) and refuses one indexed by another
// embedder (*ReindexError: run agentrun index). close releases the index.
func OpenKnowledge(ctx context.Context, s *spec.Spec, o KnowledgeOptions) (k knowledge.Knowledge, close func() error, err error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	emb, err := NewEmbedder(s, o.Offline, lookup)
	if err != nil {
		return nil, nil, err
	}
	if o.Telemetry != nil && o.Telemetry.TracesEnabled() {
		emb = telemetry.WrapEmbedder(emb, o.Telemetry.TracerProvider())
	}
	idx, err := OpenIndex(ctx, cmp.Or(o.Index, IndexPath(s, lookup)))
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			idx.Close()
		}
	}()
	keys := map[string]string{}
	dir := filepath.Dir(s.Pos.File)
	for i := range s.Knowledge.Collections {
		c := &s.Knowledge.Collections[i]
		key := CollectionKey(s, c.Name, o.Offline)
		keys[c.Name] = key
		manifest, was, ok, err := idx.Manifest(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		if ok && was != emb.ID() {
			return nil, nil, &ReindexError{Spec: s.Pos.File, Err: &kindex.EmbedderMismatchError{Collection: c.Name, Index: was, Agent: emb.ID()}}
		}
		if _, now := Manifest(dir, c); ok && now == manifest {
			continue
		}
		src, err := readCollection(s, c)
		if err != nil {
			return nil, nil, err
		}
		r, err := indexCollection(ctx, idx, s, emb, src, IndexOptions{Offline: o.Offline})
		if err != nil {
			return nil, nil, err
		}
		if o.OnIndex != nil {
			o.OnIndex(r)
		}
	}
	k = idx.Knowledge(emb, keys)
	if o.Telemetry != nil && o.Telemetry.TracesEnabled() {
		k = telemetry.WrapKnowledge(k, o.Telemetry.TracerProvider(), o.TelemetryOptions...)
	}
	return k, idx.Close, nil
}

// faqQuestions reads the questions and variants of an FAQ file as the index does.
func faqQuestions(file string) ([]string, error) {
	chunks, _, err := knowledge.ReadSources(filepath.Dir(file), []string{filepath.Base(file)}, knowledge.ChunkOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range chunks {
		if c.Kind == knowledge.ChunkFAQ {
			out = append(out, c.Questions...)
		}
	}
	return out, nil
}
