package knowledge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/agentrun/agentrun/spec"
)

// Chunk sizes are counted in runes, not bytes, so a Chinese article gets as many
// characters per chunk as an English one. 800 runes is a few paragraphs — small enough
// for a precise citation, large enough to keep an answer's context together.
const (
	DefaultChunkSize    = spec.DefaultChunkSize
	DefaultChunkOverlap = spec.DefaultChunkOverlap
)

// HeadingSeparator joins the headings of a Markdown section's path: "Refunds › Timing".
const HeadingSeparator = " › "

// maxInvalidUTF8 is the share of bytes that may be invalid UTF-8 before a file counts
// as binary: one stray Latin-1 byte in a long article should not drop the article.
const maxInvalidUTF8 = 0.01

// ChunkKind says what a chunk is for; a closed vocabulary.
type ChunkKind string

const (
	// ChunkText is a passage for retrieval (RAG).
	ChunkText ChunkKind = "text"
	// ChunkFAQ is one FAQ entry: its Questions are what the FAQ cache matches, its
	// Text is the answer.
	ChunkFAQ ChunkKind = "faq"
)

// Chunk is one retrievable piece of a knowledge source with what a citation needs.
type Chunk struct {
	// Source is the file's path relative to the spec's directory, slash-separated.
	Source string `json:"source"`
	// Heading is the Markdown heading path ("Refunds › Timing") or an FAQ entry's
	// question; empty for plain text.
	Heading string `json:"heading,omitempty"`
	// StartLine and EndLine are 1-based and inclusive.
	StartLine int       `json:"start_line"`
	EndLine   int       `json:"end_line"`
	Text      string    `json:"text"`
	Kind      ChunkKind `json:"kind"`
	// Questions are an FAQ entry's question followed by its variants.
	Questions []string `json:"questions,omitempty"`
	// Hash identifies the content (see chunkHash): equal hashes mean the embedding
	// can be reused, whatever the file or line the chunk now sits at.
	Hash string `json:"hash"`
}

// ChunkOptions are the chunk size and overlap in runes. The zero value means
// DefaultChunkSize and DefaultChunkOverlap; otherwise 0 < Size and 0 ≤ Overlap < Size.
type ChunkOptions struct {
	Size    int
	Overlap int
}

func (o ChunkOptions) resolve() (ChunkOptions, error) {
	if o == (ChunkOptions{}) {
		return ChunkOptions{Size: DefaultChunkSize, Overlap: DefaultChunkOverlap}, nil
	}
	if o.Size <= 0 || o.Overlap < 0 || o.Overlap >= o.Size {
		return o, fmt.Errorf("chunk size %d and overlap %d: need size > 0 and 0 ≤ overlap < size", o.Size, o.Overlap)
	}
	return o, nil
}

// SourceError is a knowledge source that cannot be used: missing, unreadable, not a
// regular file, too large, or a malformed FAQ entry.
type SourceError struct {
	Source string // relative to the spec's directory, slash-separated
	Line   int    // 0 when the problem is the whole file
	Col    int    // 0 when Line is, or unknown
	Path   string // YAML path inside an FAQ file, e.g. faq[3].answer
	Hint   string // what to write instead, for validate
	Err    error
}

func (e *SourceError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": " + e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.message())
	return b.String()
}

// message is the problem without the source's name and position.
func (e *SourceError) message() string {
	var pathErr *fs.PathError
	var notRegular *spec.NotRegularError
	var tooLarge *spec.TooLargeError
	switch {
	case errors.As(e.Err, &notRegular):
		// Restate it with the relative name; the spec dir is noise in a message.
		c := *notRegular
		c.Path = "it"
		return c.Error()
	case errors.As(e.Err, &tooLarge):
		c := *tooLarge
		c.Path = "it"
		return c.Error()
	case errors.As(e.Err, &pathErr):
		return pathErr.Err.Error()
	default:
		return e.Err.Error()
	}
}

func (e *SourceError) Unwrap() error { return e.Err }

// diagnostic is the error as validate reports it, in the file under dir.
func (e *SourceError) diagnostic(dir string) spec.Diagnostic {
	return spec.Diagnostic{Severity: spec.Error, Pos: spec.Pos{File: filepath.Join(dir, filepath.FromSlash(e.Source)), Line: e.Line, Col: e.Col},
		Path: e.Path, Message: e.message(), Hint: e.Hint}
}

// ReadSources reads the files that patterns name, relative to dir (the spec's
// directory), and splits them into chunks. A pattern is a path or a filepath.Match
// glob; a segment "**" matches any number of directories (hidden ones, starting
// with ".", are not entered). Files are read once each, in pattern order and then
// name order, and chunked by extension: .md/.markdown by ATX headings, .yaml/.yml
// as an FAQ list, anything else as plain text by paragraphs.
//
// Warnings (a glob that matches nothing, a binary file skipped, an empty file, a
// YAML file without faq) come back as spec.Diagnostics whose Pos.File is the
// source; err joins a *SourceError for every source that cannot be used, and then
// chunks is nil, so a half-read collection is never indexed.
func ReadSources(dir string, patterns []string, opts ChunkOptions) (chunks []Chunk, warnings spec.Diagnostics, err error) {
	opts, err = opts.resolve()
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	seen := map[string]bool{}
	for _, pattern := range patterns {
		files, ws, err := expandPattern(dir, pattern)
		warnings = append(warnings, ws...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, rel := range files {
			if seen[rel] {
				continue
			}
			seen[rel] = true
			cs, ws, ferrs := readSource(dir, rel, opts)
			chunks = append(chunks, cs...)
			warnings = append(warnings, ws...)
			errs = append(errs, ferrs...)
		}
	}
	if len(errs) > 0 {
		return nil, warnings, errors.Join(errs...)
	}
	return chunks, warnings, nil
}

// CheckSources reads the files that patterns name as ReadSources does and returns
// every problem it would have, errors and warnings, as diagnostics in the files
// (Pos.File is the source under dir): validate's check that exec, index and serve
// can use a collection. A pattern that does not expand is left to the spec's
// checker, which reports it at the spec's line.
func CheckSources(dir string, patterns []string) spec.Diagnostics {
	var diags spec.Diagnostics
	seen := map[string]bool{}
	for _, pattern := range patterns {
		files, _, err := spec.ExpandSources(dir, pattern)
		if err != nil {
			continue
		}
		for _, rel := range files {
			if seen[rel] {
				continue
			}
			seen[rel] = true
			// Chunking Markdown and text cannot fail, so the default options do.
			_, warnings, errs := readSource(dir, rel, ChunkOptions{Size: DefaultChunkSize, Overlap: DefaultChunkOverlap})
			for _, w := range warnings {
				w.Pos.File = filepath.Join(dir, filepath.FromSlash(w.Pos.File))
				diags = append(diags, w)
			}
			for _, err := range errs {
				if se, ok := errors.AsType[*SourceError](err); ok {
					diags = append(diags, se.diagnostic(dir))
				}
			}
		}
	}
	return diags
}

func warn(source string, line int, format string, args ...any) spec.Diagnostic {
	return spec.Diagnostic{Severity: spec.Warning, Pos: spec.Pos{File: source, Line: line, Col: min(line, 1)}, Message: fmt.Sprintf(format, args...)}
}

// expandPattern returns the files pattern names, relative to dir and slash-separated
// (see spec.ExpandSources, which the checker shares), with an error as a *SourceError.
func expandPattern(dir, pattern string) ([]string, spec.Diagnostics, error) {
	files, warnings, err := spec.ExpandSources(dir, pattern)
	if err != nil {
		return nil, warnings, &SourceError{Source: pattern, Err: err}
	}
	return files, warnings, nil
}

func readSource(dir, rel string, opts ChunkOptions) ([]Chunk, spec.Diagnostics, []error) {
	data, err := spec.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)), spec.MaxFileSize)
	if err != nil {
		return nil, nil, []error{&SourceError{Source: rel, Err: err}}
	}
	text, ok := decodeText(data)
	if !ok {
		return nil, spec.Diagnostics{warn(rel, 0, "binary file skipped")}, nil
	}
	if strings.TrimSpace(text) == "" {
		return nil, spec.Diagnostics{warn(rel, 0, "empty file, no chunks")}, nil
	}
	switch strings.ToLower(path.Ext(rel)) {
	case ".md", ".markdown":
		return chunkMarkdown(rel, text, opts), nil, nil
	case ".yaml", ".yml":
		return chunkFAQ(rel, text)
	default:
		return chunkPlain(rel, text, opts), nil, nil
	}
}

// decodeText turns file bytes into text with "\n" line ends and no BOM; false means
// binary: a NUL byte, or more invalid UTF-8 than maxInvalidUTF8 (the rest is replaced
// by U+FFFD).
func decodeText(data []byte) (string, bool) {
	if bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	if !utf8.Valid(data) {
		invalid := 0
		for b := data; len(b) > 0; {
			r, n := utf8.DecodeRune(b)
			if r == utf8.RuneError && n == 1 {
				invalid++
			}
			b = b[n:]
		}
		if float64(invalid) > maxInvalidUTF8*float64(len(data)) {
			return "", false
		}
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	return strings.ReplaceAll(string(data), "\r\n", "\n"), true
}

// lineIndex maps byte offsets of a text to 1-based line numbers.
type lineIndex []int // byte offset where each line starts

func newLineIndex(text string) lineIndex {
	idx := lineIndex{0}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			idx = append(idx, i+1)
		}
	}
	return idx
}

func (li lineIndex) line(off int) int { return sort.SearchInts(li, off+1) }

// splitLines returns text's lines without their "\n".
func splitLines(text string) []string { return strings.Split(text, "\n") }

// section is a byte range of a file's text under one heading path.
type section struct {
	heading    string
	start, end int
}

func chunkPlain(source, text string, opts ChunkOptions) []Chunk {
	return chunkSection(source, text, newLineIndex(text), section{start: 0, end: len(text)}, opts)
}

// chunkMarkdown splits at ATX headings outside fenced code blocks (and skips a YAML
// front matter), then chunks each section on its own so an edit stays in its section.
func chunkMarkdown(source, text string, opts ChunkOptions) []Chunk {
	li := newLineIndex(text)
	lines := splitLines(text)
	var sections []section
	var headings []string // headings[i] is the heading of level i+1, "" if skipped
	cur := section{}
	first := 0
	if len(lines) > 1 && strings.TrimRight(lines[0], " \t") == "---" {
		for i := 1; i < len(lines); i++ {
			if t := strings.TrimRight(lines[i], " \t"); t == "---" || t == "..." {
				first = i + 1
				break
			}
		}
	}
	if first < len(li) {
		cur.start = li[first]
	} else {
		cur.start = len(text)
	}
	var fence string
	for i := first; i < len(lines); i++ {
		line := lines[i]
		if marker := fenceMarker(line); marker != "" {
			switch {
			case fence == "":
				fence = marker
			case marker[0] == fence[0] && len(marker) >= len(fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), marker[:1])) == "":
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		level, title, ok := atxHeading(line)
		if !ok {
			continue
		}
		cur.end = li[i]
		sections = append(sections, cur)
		for len(headings) < level {
			headings = append(headings, "")
		}
		headings = append(headings[:level-1], title)
		var parts []string
		for _, p := range headings {
			if p != "" {
				parts = append(parts, p)
			}
		}
		next := len(text)
		if i+1 < len(li) {
			next = li[i+1]
		}
		cur = section{heading: strings.Join(parts, HeadingSeparator), start: next}
	}
	cur.end = len(text)
	sections = append(sections, cur)
	var chunks []Chunk
	for _, s := range sections {
		chunks = append(chunks, chunkSection(source, text, li, s, opts)...)
	}
	return chunks
}

// fenceMarker returns the ``` or ~~~ run opening line, or "".
func fenceMarker(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return t[:n]
}

// atxHeading parses "## Title ##" (up to 3 spaces of indent, 1–6 #s, then a space).
func atxHeading(line string) (level int, title string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return 0, "", false
	}
	for level < len(t) && t[level] == '#' {
		level++
	}
	if level == 0 || level > 6 || (level < len(t) && t[level] != ' ' && t[level] != '\t') {
		return 0, "", false
	}
	title = strings.TrimSpace(t[level:])
	if trimmed := strings.TrimRight(title, "#"); trimmed == "" || strings.HasSuffix(trimmed, " ") || strings.HasSuffix(trimmed, "\t") {
		title = strings.TrimSpace(trimmed)
	}
	return level, title, true
}

// chunkSection packs a section's paragraphs into chunks of at most opts.Size runes.
// A paragraph longer than Size is cut into pieces of Size−Overlap at a line, sentence
// or word end (at a rune boundary if there is none). Each chunk after the first starts
// with up to Overlap runes of the previous one's end, moved to a word start, and less
// when the next piece would not fit. A chunk's text is the file's text verbatim.
func chunkSection(source, text string, li lineIndex, s section, opts ChunkOptions) []Chunk {
	var chunks []Chunk
	for _, span := range packSpans(text, s.start, s.end, opts) {
		chunks = append(chunks, newChunk(Chunk{
			Source:    source,
			Heading:   s.heading,
			StartLine: li.line(span[0]),
			EndLine:   li.line(span[1] - 1),
			Text:      text[span[0]:span[1]],
			Kind:      ChunkText,
		}))
	}
	return chunks
}

// packSpans returns the byte ranges of the chunks of text[start:end].
func packSpans(text string, start, end int, opts ChunkOptions) [][2]int {
	var pieces [][2]int
	for _, para := range paragraphs(text, start, end) {
		// A paragraph that fits a chunk stays whole (at the cost of overlap); a longer
		// one is cut so that each piece fits after a full overlap.
		if utf8.RuneCountInString(text[para[0]:para[1]]) <= opts.Size {
			pieces = append(pieces, para)
			continue
		}
		pieces = append(pieces, splitLong(text, para[0], para[1], opts.Size-opts.Overlap)...)
	}
	var spans [][2]int
	cur := [2]int{-1, -1}
	for _, p := range pieces {
		if cur[0] < 0 {
			cur = p
			continue
		}
		if utf8.RuneCountInString(text[cur[0]:p[1]]) <= opts.Size {
			cur[1] = p[1]
			continue
		}
		spans = append(spans, cur)
		// The whitespace between cur and p counts too; give up overlap until p fits.
		next := p[0]
		for overlap := opts.Overlap; overlap > 0; overlap-- {
			if q := overlapStart(text, cur[1], p[0], overlap); utf8.RuneCountInString(text[q:p[1]]) <= opts.Size {
				next = q
				break
			}
		}
		cur = [2]int{next, p[1]}
	}
	if cur[0] >= 0 {
		spans = append(spans, cur)
	}
	return spans
}

// paragraphs returns the byte ranges of runs of non-blank lines in text[start:end],
// without their final "\n".
func paragraphs(text string, start, end int) [][2]int {
	var out [][2]int
	paraStart := -1
	for pos := start; pos < end; {
		nl := strings.IndexByte(text[pos:end], '\n')
		lineEnd := end
		if nl >= 0 {
			lineEnd = pos + nl
		}
		blank := strings.TrimSpace(text[pos:lineEnd]) == ""
		switch {
		case blank && paraStart >= 0:
			out = append(out, [2]int{paraStart, trimRightSpace(text, paraStart, pos)})
			paraStart = -1
		case !blank && paraStart < 0:
			paraStart = pos + (len(text[pos:lineEnd]) - len(strings.TrimLeftFunc(text[pos:lineEnd], unicode.IsSpace)))
		}
		pos = lineEnd + 1
	}
	if paraStart >= 0 {
		out = append(out, [2]int{paraStart, trimRightSpace(text, paraStart, end)})
	}
	return out
}

func trimRightSpace(text string, start, end int) int {
	return start + len(strings.TrimRightFunc(text[start:end], unicode.IsSpace))
}

// splitLong cuts text[start:end] into pieces of at most max runes, preferring to cut
// after a line end, then a sentence end, then a space, in the second half of a piece.
func splitLong(text string, start, end, max int) [][2]int {
	var out [][2]int
	for start < end {
		// limit is the byte offset max runes after start.
		limit, n := start, 0
		for limit < end && n < max {
			_, size := utf8.DecodeRuneInString(text[limit:end])
			limit += size
			n++
		}
		if limit >= end {
			out = append(out, [2]int{start, end})
			break
		}
		cut := bestCut(text, start, limit)
		out = append(out, [2]int{start, trimRightSpace(text, start, cut)})
		start = cut
		for start < end {
			r, size := utf8.DecodeRuneInString(text[start:end])
			if !unicode.IsSpace(r) {
				break
			}
			start += size
		}
	}
	return out
}

// bestCut picks where to end a piece in text[start:limit]: after the last newline,
// sentence end or space in its second half, else at limit (a rune boundary).
func bestCut(text string, start, limit int) int {
	half := start + (limit-start)/2
	best := [3]int{-1, -1, -1} // newline, sentence end, space
	for i := start; i < limit; {
		r, size := utf8.DecodeRuneInString(text[i:limit])
		after := i + size
		if after > half {
			switch {
			case r == '\n':
				best[0] = after
			case isSentenceEnd(r):
				best[1] = after
			case unicode.IsSpace(r):
				best[2] = after
			}
		}
		i = after
	}
	for _, b := range best {
		if b > start {
			return b
		}
	}
	return limit
}

func isSentenceEnd(r rune) bool {
	switch r {
	case '.', '!', '?', ';', '。', '！', '？', '；', '…':
		return true
	}
	return false
}

// overlapStart returns where the next chunk starts: up to overlap runes before
// prevEnd, moved forward to the start of a word (or any Han character), never past
// next, the first new piece.
func overlapStart(text string, prevEnd, next, overlap int) int {
	if overlap == 0 {
		return next
	}
	p := prevEnd
	for n := 0; n < overlap && p > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:p])
		p -= size
	}
	exact := p
	for q := p; q < prevEnd; {
		r, size := utf8.DecodeRuneInString(text[q:])
		if unicode.IsSpace(r) {
			q += size
			continue
		}
		prev, _ := utf8.DecodeLastRuneInString(text[:q])
		if q == 0 || unicode.IsSpace(prev) || unicode.IsPunct(prev) || unicode.Is(unicode.Han, r) {
			return q
		}
		q += size
	}
	// No word start in the window: a single long word; cut it at a rune boundary.
	for exact < prevEnd {
		r, size := utf8.DecodeRuneInString(text[exact:])
		if !unicode.IsSpace(r) {
			break
		}
		exact += size
	}
	if exact >= prevEnd {
		return next
	}
	return exact
}

// chunkHash is the sha256 of a versioned JSON of what gets embedded: kind, heading,
// text and questions. The source and line numbers stay out, so moving a section or
// editing another one keeps this chunk's hash; the heading is in, because embedding
// it with the text is what makes "Refunds › Timing" findable.
func chunkHash(c Chunk) string {
	canonical, err := json.Marshal(struct {
		V         int       `json:"v"`
		Kind      ChunkKind `json:"kind"`
		Heading   string    `json:"heading"`
		Text      string    `json:"text"`
		Questions []string  `json:"questions"`
	}{1, c.Kind, c.Heading, c.Text, c.Questions})
	if err != nil {
		panic(err) // strings and a slice of strings always marshal
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

func newChunk(c Chunk) Chunk {
	c.Hash = chunkHash(c)
	return c
}

// noFAQList is the warning for a YAML source that is not an FAQ file.
const noFAQList = "no top-level faq list; a YAML source must be an FAQ file"

// chunkFAQ reads a YAML file with a top-level faq list of {question, variants,
// answer}: one chunk per entry. Every bad entry is reported with its line.
func chunkFAQ(source, text string) ([]Chunk, spec.Diagnostics, []error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		d := spec.YAMLSyntax(source, err)
		return nil, nil, []error{&SourceError{Source: source, Line: d.Pos.Line, Col: d.Pos.Col, Hint: d.Hint, Err: errors.New(d.Message)}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, spec.Diagnostics{warn(source, 1, noFAQList)}, nil
	}
	list, nextTop, warnings := faqList(source, doc.Content[0])
	if list == nil {
		return nil, spec.Diagnostics{warn(source, 1, noFAQList)}, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, warnings, []error{&SourceError{Source: source, Line: list.Line, Col: list.Column, Path: "faq", Hint: faqEntryHint,
			Err: errors.New("must be a list of {question, variants, answer}")}}
	}
	lines := splitLines(text)
	if nextTop == 0 {
		nextTop = len(lines) + 1
	}
	r := &faqReader{source: source}
	var chunks []Chunk
	for i, item := range list.Content {
		e, ok := r.entry(item, fmt.Sprintf("faq[%d]", i))
		if !ok {
			continue
		}
		end := nextTop - 1
		if i+1 < len(list.Content) {
			end = list.Content[i+1].Line - 1
		}
		chunks = append(chunks, newChunk(Chunk{
			Source:    source,
			Heading:   e.question,
			StartLine: item.Line,
			EndLine:   faqEntryEnd(lines, item.Line, end),
			Text:      e.answer,
			Kind:      ChunkFAQ,
			Questions: e.questions(),
		}))
	}
	if len(r.errs) > 0 {
		return nil, warnings, r.errs
	}
	return chunks, warnings, nil
}

// faqList finds the faq list among an FAQ file's top-level keys, warning about
// the others; nextTop is the line of the key after faq, where its last entry
// ends, or 0 when faq is the last.
func faqList(source string, root *yaml.Node) (list *yaml.Node, nextTop int, warnings spec.Diagnostics) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if list != nil && nextTop == 0 {
			nextTop = k.Line
		}
		if k.Value == "faq" {
			list = v
			continue
		}
		warnings = append(warnings, warn(source, k.Line, "unknown top-level key %q ignored; an FAQ file has only faq", k.Value))
	}
	return list, nextTop, warnings
}

// faqEntryEnd is the last line of an entry that starts at line start and ends at
// line end at the latest: trailing blank and comment lines are no entry's.
func faqEntryEnd(lines []string, start, end int) int {
	for end > start {
		t := strings.TrimSpace(lines[end-1])
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		end--
	}
	return end
}

// faqEntry is one entry of an FAQ file.
type faqEntry struct {
	question, answer string
	variants         []string
}

// questions are the entry's question followed by its distinct variants.
func (e faqEntry) questions() []string {
	questions := []string{e.question}
	for _, v := range e.variants {
		if !slices.Contains(questions, v) {
			questions = append(questions, v)
		}
	}
	return questions
}

// faqReader reads the entries of an FAQ file, collecting every bad one's error
// with its line.
type faqReader struct {
	source string
	errs   []error
}

// faqEntryHint shows an entry's shape; quoting keeps a question ending in "?" or
// holding ": " a plain string in flow lists and mappings.
const faqEntryHint = `an entry is - {question: "…?", variants: ["…?"], answer: "…"}; quote texts with ?, : or #`

func (r *faqReader) bad(n *yaml.Node, path, format string, args ...any) {
	r.errs = append(r.errs, &SourceError{Source: r.source, Line: n.Line, Col: n.Column, Path: path, Hint: faqEntryHint, Err: fmt.Errorf(format, args...)})
}

// entry reads the entry at path at; ok is false when it lacks a valid question or
// answer.
func (r *faqReader) entry(item *yaml.Node, at string) (e faqEntry, ok bool) {
	if item.Kind != yaml.MappingNode {
		r.bad(item, at, "must be a mapping with question, variants and answer")
		return faqEntry{}, false
	}
	var haveQ, haveA bool
	keys := map[string]bool{}
	for j := 0; j+1 < len(item.Content); j += 2 {
		k, v := item.Content[j], item.Content[j+1]
		keys[k.Value] = true
		switch k.Value {
		case "question", "answer":
			s, ok := r.text(v, at+"."+k.Value)
			if !ok {
				continue
			}
			if k.Value == "question" {
				e.question, haveQ = s, true
			} else {
				e.answer, haveA = s, true
			}
		case "variants":
			e.variants = append(e.variants, r.variants(v, at)...)
		default:
			r.bad(k, at+"."+k.Value, "unknown key; an FAQ entry has question, variants and answer")
		}
	}
	for _, key := range []string{"question", "answer"} {
		if !keys[key] {
			r.bad(item, at, "missing %s", key)
		}
	}
	return e, haveQ && haveA
}

// text is a non-empty string value, trimmed.
func (r *faqReader) text(v *yaml.Node, path string) (string, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || strings.TrimSpace(v.Value) == "" {
		r.bad(v, path, "must be a non-empty string")
		return "", false
	}
	return strings.TrimSpace(v.Value), true
}

// variants are the valid strings of an entry's variants list.
func (r *faqReader) variants(v *yaml.Node, at string) []string {
	if v.Kind != yaml.SequenceNode {
		r.bad(v, at+".variants", "must be a list of strings")
		return nil
	}
	var out []string
	for n, vv := range v.Content {
		if s, ok := r.text(vv, fmt.Sprintf("%s.variants[%d]", at, n)); ok {
			out = append(out, s)
		}
	}
	return out
}
