package spec

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// minLocalDimensions is the smallest vector the local embedder makes useful: below
// it, hashed n-grams of unrelated texts collide too often to tell them apart.
const minLocalDimensions = 16

// collectionFacts is what the checker learned about a collection's sources.
type collectionFacts struct {
	faq bool // a source is a .yaml/.yml file: an FAQ list the cache can answer from
	// faqFiles are those files, as paths relative to the working directory.
	faqFiles []string
	// unsure means a source could not be expanded (a schema error, an unset variable,
	// a bad glob), so whether the collection has an FAQ file is not known.
	unsure bool
}

// checkKnowledge checks embeddings, knowledge collections and the intents' cache and
// rag against each other and against the files the sources name.
func (c *checker) checkKnowledge() {
	c.checkEmbeddings()
	facts := map[string]collectionFacts{}
	for i := range c.spec.Knowledge.Collections {
		col := &c.spec.Knowledge.Collections[i]
		facts[col.Name] = c.checkCollection(col)
	}
	used := map[string]bool{}
	for i := range c.spec.Intents {
		in := &c.spec.Intents[i]
		// A cache or rag of the wrong type was reported by the schema; it decoded as
		// the defaults, which checking would only make noise about.
		if in.RAG != nil && !c.failed[c.at("intents", in.Name, "rag").path] {
			if name, ok := c.intentCollection(in, "rag", in.RAG.Collection); ok {
				used[name] = true
			}
		}
		if in.Cache != nil && !c.failed[c.at("intents", in.Name, "cache").path] {
			name, ok := c.intentCollection(in, "cache", in.Cache.Collection)
			if ok {
				used[name] = true
			}
			c.checkCache(in, name, ok, facts[name])
			c.checkStarvedCache(in, facts[name])
		}
	}
	for _, col := range c.spec.Knowledge.Collections {
		if !used[col.Name] && !c.failed[c.at("knowledge", "collections", col.Name).path] {
			c.warnf(c.at("knowledge", "collections", col.Name).keyPos(c.file), "name it in an intent's cache or rag, or remove it",
				"collection %q is not used by any intent", col.Name)
		}
	}
	c.checkKnowledgeDurations()
}

func (c *checker) checkEmbeddings() {
	e := c.spec.Embeddings
	if cmp.Or(e.Provider, DefaultEmbeddings) != EmbeddingsLocal {
		return
	}
	for _, key := range []string{"model", "base_url", "api_key_env"} {
		if at := c.at("embeddings", key); at.node != nil {
			c.warnf(at.keyPos(c.file), "set provider: openai to call an embeddings API, or remove it", "%s has no effect with provider local", key)
		}
	}
	if at := c.at("embeddings", "dimensions"); e.Dimensions > 0 && e.Dimensions < minLocalDimensions && !c.failed[at.path] {
		c.errorf(at, "leave dimensions out for the default; fewer make unrelated texts look alike",
			"local embeddings need at least %d dimensions, got %d", minLocalDimensions, e.Dimensions)
	}
}

// checkCollection checks a collection's chunking and expands its sources relative to
// the spec's directory: a glob matching nothing is a warning, a missing file an error.
func (c *checker) checkCollection(col *Collection) collectionFacts {
	tokens := []string{"knowledge", "collections", col.Name}
	size, overlap := col.ChunkOptions()
	if overlap >= size {
		at := c.at(append(tokens, "chunk_overlap")...)
		hint := "a chunk repeats chunk_overlap runes of the one before, so the overlap must leave room for new text"
		if col.ChunkOverlap == nil {
			at = c.at(append(tokens, "chunk_size")...)
			hint = fmt.Sprintf("chunk_overlap defaults to %d: set a smaller one", DefaultChunkOverlap)
		}
		if !c.failed[at.path] {
			c.errorf(at, hint, "chunk_overlap (%d) must be less than chunk_size (%d)", overlap, size)
		}
	}
	var facts collectionFacts
	if c.failed[c.at(append(tokens, "sources")...).path] {
		facts.unsure = true
	}
	dir := filepath.Dir(c.file)
	for i, src := range col.Sources {
		at := c.at(append(tokens, "sources", strconv.Itoa(i))...)
		if at.node == nil || c.failed[at.path] || c.unset[at.node].vars != nil {
			facts.unsure = true
			continue
		}
		files, warnings, err := ExpandSources(dir, src)
		if err != nil {
			hint := ""
			if HasGlobMeta(src) {
				hint = `a glob has *, ? and [a-z] within a name, ** for any number of directories; \ escapes`
			}
			c.errorf(at, hint, "%v", err)
			facts.unsure = true
			continue
		}
		for _, w := range warnings {
			c.warnf(at, fmt.Sprintf("patterns are relative to the spec's directory (%s)", dir), "%s", w.Message)
		}
		if !HasGlobMeta(src) {
			c.checkSourceFile(at, dir, files[0])
		}
		for _, f := range files {
			if ext := strings.ToLower(path.Ext(f)); ext == ".yaml" || ext == ".yml" {
				facts.faq = true // a missing FAQ file is reported above, not as "no FAQ source" too
				facts.faqFiles = append(facts.faqFiles, filepath.Join(dir, f))
			}
		}
	}
	return facts
}

// checkSourceFile reports a source named by its path that is not there or is a
// directory; what else is wrong with a file, reading it when the index is built says.
func (c *checker) checkSourceFile(at location, dir, rel string) {
	info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.errorf(at, fmt.Sprintf("sources are relative to the spec's directory (%s)", dir), "source file %q does not exist", rel)
	case err != nil:
		c.errorf(at, "", "source file %q: %s", rel, ioMessage(err))
	case info.IsDir():
		c.errorf(at, fmt.Sprintf("write %s/** for every file in it", rel), "source %q is a directory, not a file", rel)
	}
}

// intentCollection resolves the collection an intent's cache or rag uses. ok is
// false when there is none to use (reported, except for a cache without any
// collection, which serves learned answers only).
func (c *checker) intentCollection(in *Intent, key, name string) (string, bool) {
	cols := c.spec.Knowledge.Collections
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = col.Name
	}
	if name != "" {
		at := c.at("intents", in.Name, key, "collection")
		if c.spec.Knowledge.Collection(name) != nil {
			return name, true
		}
		if c.failed[at.path] {
			return "", false
		}
		hint := suggest(name, names)
		switch {
		case len(names) == 0:
			hint = "declare it under knowledge.collections"
		case hint == "":
			hint = "collections: " + strings.Join(names, ", ")
		}
		c.errorf(at, hint, "unknown collection %q", name)
		return "", false
	}
	at := c.at("intents", in.Name, key).keyPos(c.file)
	switch len(cols) {
	case 0:
		if key == "rag" {
			c.errorf(at, "declare one under knowledge.collections", "rag needs a knowledge collection")
		}
		return "", false
	case 1:
		return cols[0].Name, true
	}
	c.errorf(at, fmt.Sprintf("name one, e.g. %s: {collection: %s}", key, names[0]),
		"%s needs a collection: this agent has several (%s)", key, strings.Join(names, ", "))
	return "", false
}

// checkCache finds caches that can never answer, verification that cannot run or is
// set up to never run, and learning that will not happen.
func (c *checker) checkCache(in *Intent, collection string, resolved bool, facts collectionFacts) {
	ch := in.Cache
	tokens := []string{"intents", in.Name, "cache"}
	at := func(key string) location { return c.at(append(tokens, key)...) }
	switch {
	case ch.Learn:
	case len(c.spec.Knowledge.Collections) == 0:
		c.errorf(c.at(tokens...).keyPos(c.file), "declare a collection with an FAQ file under knowledge.collections, or set learn: true",
			"this cache can never answer: there is no knowledge collection and learn is off")
	case resolved && !facts.faq && !facts.unsure:
		c.errorf(c.at(tokens...).keyPos(c.file), "add an FAQ .yaml file to the collection's sources, or set learn: true",
			"this cache can never answer: collection %s has no FAQ source (a .yaml file with a faq list) and learn is off", collection)
	}
	threshold := derefOr(ch.Threshold, DefaultCacheThreshold)
	below := derefOr(ch.VerifyBelow, DefaultVerifyBelow)
	switch verify := cmp.Or(ch.Verify, DefaultCacheVerify); {
	case c.failed[at("verify").path]:
	case verify == VerifyJudge:
		if c.spec.Judge == nil {
			c.errorf(at("verify"), "add a judge section (its model checks the hits), or set verify: none", "verify: judge needs a judge section")
		}
		if below <= threshold {
			where, hint := at("verify_below"), "the judge checks hits scoring from threshold up to verify_below; here that range is empty"
			if ch.VerifyBelow == nil {
				where, hint = at("threshold"), fmt.Sprintf("verify_below defaults to %g: set it above threshold", DefaultVerifyBelow)
			}
			if !c.failed[where.path] {
				c.errorf(where, hint, "verify_below (%g) must be more than threshold (%g)", below, threshold)
			}
		}
	default:
		if ch.VerifyBelow != nil && !c.failed[at("verify_below").path] {
			c.warnf(at("verify_below").keyPos(c.file), "set verify: judge, or remove it", "verify_below has no effect without verify: judge")
		}
	}
	if !ch.Learn {
		if ch.LearnedThreshold != nil {
			c.warnf(at("learned_threshold").keyPos(c.file), "set learn: true, or remove it", "learned_threshold has no effect without learn: true")
		}
		return
	}
	if ch.LearnedThreshold != nil && *ch.LearnedThreshold < threshold && !c.failed[at("learned_threshold").path] {
		c.warnf(at("learned_threshold"), "an answer learned from one run is riskier to serve than an FAQ entry someone wrote: keep learned_threshold at or above threshold",
			"learned_threshold (%g) is below threshold (%g)", *ch.LearnedThreshold, threshold)
	}
	if c.spec.Judge == nil {
		c.warnf(at("learn"), "add a judge section, so only answers it accepts are learned", "answers are learned without a judge's review")
	}
	if ch.Scope != CacheShared {
		return
	}
	level := cmp.Or(in.Memory, DefaultMemoryLevel)
	if level.Injects() {
		c.warnf(at("scope"), "use scope: auto to learn them for each user, or memory: none",
			"no answer of intent %q will ever be learned: memory %s makes every run depend on the user, and scope shared never learns those", in.Name, level)
		return
	}
	for _, name := range c.intentTools(in) {
		if i, ok := c.tools[name]; ok && len(c.spec.Tools[i].Bind) > 0 {
			c.warnf(at("scope"), "use scope: auto to learn them for each user",
				"no answer of intent %q that calls %s will ever be learned: the tool is bound to the user, and scope shared never learns runs that depend on the user", in.Name, name)
			return
		}
	}
}

// intentTools are the tools an intent may offer: for a task intent its domain's and
// its own, for the other kinds its own (as Resolve computes them).
func (c *checker) intentTools(in *Intent) []string {
	if cmp.Or(in.Kind, DefaultIntentKind) != IntentTask {
		return in.Tools
	}
	var out []string
	if i, ok := c.domains[in.Domain]; ok && in.Domain != "" {
		out = append(out, c.spec.Domains[i].Tools...)
	}
	return append(out, in.Tools...)
}

// checkKnowledgeDurations parses the knowledge durations again, as checkDurations
// does the others: the schema's pattern admits values that overflow.
func (c *checker) checkKnowledgeDurations() {
	paths := [][]string{{"embeddings", "timeout"}}
	for _, in := range c.spec.Intents {
		paths = append(paths, []string{"intents", in.Name, "cache", "ttl"})
	}
	for _, p := range paths {
		at := c.at(p...)
		if at.node == nil || c.failed[at.path] || at.node.Kind != yaml.ScalarNode {
			continue
		}
		if _, err := time.ParseDuration(at.node.Value); err != nil {
			c.errorf(at, "use a number with a unit: 500ms, 30s, 2m, 1h30m", "invalid duration %q: out of range", at.node.Value)
		}
	}
}

// maxStarvedShown is how many captured FAQ questions a warning names.
const maxStarvedShown = 3

// checkStarvedCache warns of routing rules that send FAQ questions of in's cache
// to another intent: rules go first, in spec order, so a keyword such as 取消 on an
// orders intent makes every phrasing of "How do I cancel an order?" unreachable
// from the cache that has its answer.
func (c *checker) checkStarvedCache(in *Intent, facts collectionFacts) {
	if c.loader == nil || c.loader.FAQQuestions == nil || c.spec.Routing.Recognizer == RecognizerOff || len(facts.faqFiles) == 0 {
		return
	}
	if c.rules == nil {
		c.rules = NewRules(c.spec.Intents)
	}
	type capture struct {
		m         RuleMatch
		questions []string
	}
	var captures []*capture
	byRule := map[RuleMatch]*capture{}
	for _, f := range facts.faqFiles {
		questions, err := c.loader.FAQQuestions(f)
		if err != nil {
			continue // the file's own problems are reported where its sources are read
		}
		for _, q := range questions {
			m, ok := c.rules.Match(q)
			if !ok || m.Intent == in.Name {
				continue
			}
			if byRule[m] == nil {
				byRule[m] = &capture{m: m}
				captures = append(captures, byRule[m])
			}
			byRule[m].questions = append(byRule[m].questions, q)
		}
	}
	for _, cp := range captures {
		shown := make([]string, 0, maxStarvedShown)
		for _, q := range cp.questions[:min(len(cp.questions), maxStarvedShown)] {
			shown = append(shown, strconv.Quote(q))
		}
		if more := len(cp.questions) - len(shown); more > 0 {
			shown = append(shown, fmt.Sprintf("%d more", more))
		}
		c.warnf(c.at("intents", cp.m.Intent, cp.m.Key, strconv.Itoa(cp.m.Index)),
			fmt.Sprintf("rules are tried in spec order: narrow the %s, or give intent %s a rule these questions match and declare it before %s",
				strings.TrimSuffix(cp.m.Key, "s"), in.Name, cp.m.Intent),
			"%s of intent %s routes %s of intent %s's cache away from it: %s",
			cp.m.Rule, cp.m.Intent, plural(len(cp.questions), "FAQ question"), in.Name, strings.Join(shown, ", "))
	}
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
