package knowledge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrun/agentrun/spec"
)

const sourcesDir = "testdata/sources"

// chunkView is a chunk without its hash, for exact comparisons.
type chunkView struct {
	Source, Heading string
	Start, End      int
	Kind            ChunkKind
	Text            string
	Questions       []string
}

func views(cs []Chunk) []chunkView {
	out := make([]chunkView, len(cs))
	for i, c := range cs {
		out[i] = chunkView{c.Source, c.Heading, c.StartLine, c.EndLine, c.Kind, c.Text, c.Questions}
	}
	return out
}

func warningLines(ds spec.Diagnostics) []string {
	var out []string
	for _, d := range ds {
		if d.Severity != spec.Warning {
			panic("ReadSources returned a non-warning diagnostic: " + d.String())
		}
		out = append(out, d.String())
	}
	return out
}

func mustRead(t *testing.T, dir string, patterns []string, opts ChunkOptions) ([]Chunk, []string) {
	t.Helper()
	cs, ws, err := ReadSources(dir, patterns, opts)
	if err != nil {
		t.Fatalf("ReadSources(%q): %v", patterns, err)
	}
	return cs, warningLines(ws)
}

func TestReadSourcesTestdata(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		want     []chunkView
		warnings []string
	}{
		{
			name:     "markdown english: heading paths, front matter and code fences",
			patterns: []string{"help/refunds.md"},
			want: []chunkView{
				{"help/refunds.md", "", 4, 4, ChunkText, "Intro text before any heading.", nil},
				{"help/refunds.md", "Refunds", 8, 8, ChunkText, "You can ask for a refund on any order.", nil},
				{"help/refunds.md", "Refunds › Timing", 12, 13, ChunkText, "Refunds reach your card in 3-5 working days.\nBank holidays can add a day.", nil},
				{"help/refunds.md", "Refunds › How to ask", 17, 22, ChunkText, "Open the order and tap \"Refund\".\n\n```bash\n# this is a comment, not a heading\necho refund\n```", nil},
				{"help/refunds.md", "Refunds › How to ask › Partial refunds", 26, 26, ChunkText, "Only some items? Pick them before you tap \"Refund\".", nil},
				{"help/refunds.md", "Contact", 30, 30, ChunkText, "Write to help@example.com.", nil},
			},
		},
		{
			name:     "markdown chinese",
			patterns: []string{"help/shipping_zh.md"},
			want: []chunkView{
				{"help/shipping_zh.md", "配送", 3, 3, ChunkText, "我们在全国范围内配送。", nil},
				{"help/shipping_zh.md", "配送 › 配送时间", 7, 7, ChunkText, "订单通常在下单后三十分钟内送达。高峰时段可能需要更长时间，请耐心等待。", nil},
				{"help/shipping_zh.md", "配送 › 运费", 11, 11, ChunkText, "满三十元免运费，不满三十元收取五元运费。", nil},
			},
		},
		{
			name:     "plain text fits one chunk",
			patterns: []string{"notes.txt"},
			want: []chunkView{
				{"notes.txt", "", 1, 6, ChunkText, "Opening hours are 9:00 to 21:00 every day.\n\nThe shop is closed on New Year's Day.\nHoliday hours are posted a week ahead.\n\nDeliveries stop thirty minutes before closing.", nil},
			},
		},
		{
			name:     "plain text by paragraphs",
			patterns: []string{"notes.txt"},
			want: []chunkView{
				{"notes.txt", "", 1, 1, ChunkText, "Opening hours are 9:00 to 21:00 every day.", nil},
				{"notes.txt", "", 3, 4, ChunkText, "The shop is closed on New Year's Day.\nHoliday hours are posted a week ahead.", nil},
				{"notes.txt", "", 6, 6, ChunkText, "Deliveries stop thirty minutes before closing.", nil},
			},
		},
		{
			name:     "faq yaml",
			patterns: []string{"faq.yaml"},
			want: []chunkView{
				{"faq.yaml", "How long does a refund take?", 3, 7, ChunkFAQ, "Refunds reach your card in 3-5 working days.",
					[]string{"How long does a refund take?", "When will I get my money back?", "refund timing"}},
				{"faq.yaml", "怎么取消订单？", 9, 13, ChunkFAQ, "未支付的订单可以在订单页点击\"取消\"。\n已支付的订单请联系客服。",
					[]string{"怎么取消订单？", "如何取消订单", "订单可以取消吗"}},
			},
		},
		{
			name:     "glob with a binary file and a glob matching nothing",
			patterns: []string{"help/*.png", "nothing/*.md", "*.pdf"},
			warnings: []string{
				"help/logo.png: warning: binary file skipped",
				`nothing/*.md: warning: glob "nothing/*.md" matches no file`,
				`*.pdf: warning: glob "*.pdf" matches no file`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := ChunkOptions{}
			if tt.name == "plain text by paragraphs" {
				opts = ChunkOptions{Size: 80, Overlap: 0}
			}
			cs, ws := mustRead(t, sourcesDir, tt.patterns, opts)
			if got := views(cs); !slices.EqualFunc(got, tt.want, func(a, b chunkView) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
				t.Errorf("chunks:\n got %+v\nwant %+v", got, tt.want)
			}
			if !slices.Equal(ws, tt.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", ws, tt.warnings)
			}
			for _, c := range cs {
				if c.Hash != chunkHash(c) || len(c.Hash) != 64 {
					t.Errorf("%s:%d: hash %q is not the chunk's content hash", c.Source, c.StartLine, c.Hash)
				}
			}
		})
	}
}

func TestReadSourcesOrderAndDedup(t *testing.T) {
	cs, ws := mustRead(t, sourcesDir, []string{"notes.txt", "**/*.md", "help/refunds.md", "*.txt"}, ChunkOptions{})
	var sources []string
	for _, c := range cs {
		if len(sources) == 0 || sources[len(sources)-1] != c.Source {
			sources = append(sources, c.Source)
		}
	}
	want := []string{"notes.txt", "help/refunds.md", "help/shipping_zh.md"}
	if !slices.Equal(sources, want) || len(ws) != 0 {
		t.Errorf("sources %q, warnings %q; want %q and none", sources, ws, want)
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadSourcesGlobs(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.md":           "a",
		"docs/b.md":      "b",
		"docs/x/c.md":    "c",
		"docs/x/d.txt":   "d",
		"docs/.git/e.md": "e",
		"docs/y.md/f.md": "f", // a directory named like a file: not a source itself
		"other/g.md":     "g",
	})
	tests := []struct {
		patterns []string
		want     []string
	}{
		{[]string{"*.md"}, []string{"a.md"}},
		{[]string{"docs/*.md"}, []string{"docs/b.md"}},
		{[]string{"docs/*/*"}, []string{"docs/.git/e.md", "docs/x/c.md", "docs/x/d.txt", "docs/y.md/f.md"}},
		{[]string{"**/*.md"}, []string{"a.md", "docs/b.md", "docs/x/c.md", "docs/y.md/f.md", "other/g.md"}},
		{[]string{"docs/**/*.md"}, []string{"docs/b.md", "docs/x/c.md", "docs/y.md/f.md"}},
		{[]string{"docs/**"}, []string{"docs/b.md", "docs/x/c.md", "docs/x/d.txt", "docs/y.md/f.md"}},
		{[]string{"./docs/../a.md"}, []string{"a.md"}},
		{[]string{"docs/x/../b.md", "docs/b.md"}, []string{"docs/b.md"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.patterns, ","), func(t *testing.T) {
			cs, ws := mustRead(t, dir, tt.patterns, ChunkOptions{})
			var got []string
			for _, c := range cs {
				got = append(got, c.Source)
			}
			if !slices.Equal(got, tt.want) || len(ws) != 0 {
				t.Errorf("sources %q, warnings %q; want %q and none", got, ws, tt.want)
			}
		})
	}
}

func TestReadSourcesFileWarnings(t *testing.T) {
	long := strings.Repeat("A long line of text that is quite ordinary. ", 10)
	dir := writeFiles(t, map[string]string{
		"empty.md":       " \n\n",
		"config.yaml":    "name: x\n",
		"list.yaml":      "- a\n- b\n",
		"nul.txt":        "text\x00more",
		"latin1.txt":     "caf\xe9 au lait \xe0 la carte",
		"one-stray.txt":  long + "\xff" + long,
		"extra-key.yaml": "title: x\nfaq:\n  - {question: q, answer: a}\n",
	})
	tests := []struct {
		file    string
		chunks  int
		warning string
	}{
		{"empty.md", 0, "empty.md: warning: empty file, no chunks"},
		{"config.yaml", 0, "config.yaml:1:1: warning: no top-level faq list; a YAML source must be an FAQ file"},
		{"list.yaml", 0, "list.yaml:1:1: warning: no top-level faq list; a YAML source must be an FAQ file"},
		{"nul.txt", 0, "nul.txt: warning: binary file skipped"},
		{"latin1.txt", 0, "latin1.txt: warning: binary file skipped"},
		{"one-stray.txt", 1, ""},
		{"extra-key.yaml", 1, `extra-key.yaml:1:1: warning: unknown top-level key "title" ignored; an FAQ file has only faq`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cs, ws := mustRead(t, dir, []string{tt.file}, ChunkOptions{Size: 2000, Overlap: 0})
			var want []string
			if tt.warning != "" {
				want = []string{tt.warning}
			}
			if len(cs) != tt.chunks || !slices.Equal(ws, want) {
				t.Errorf("%d chunks, warnings %q; want %d and %q", len(cs), ws, tt.chunks, want)
			}
			for _, c := range cs {
				if !utf8.ValidString(c.Text) {
					t.Errorf("chunk text is not valid UTF-8: %q", c.Text)
				}
			}
		})
	}
}

func TestReadSourcesCRLFAndBOM(t *testing.T) {
	dir := writeFiles(t, map[string]string{"win.md": "\uFEFF# Title\r\n\r\nLine one.\r\nLine two.\r\n"})
	cs, _ := mustRead(t, dir, []string{"win.md"}, ChunkOptions{})
	want := []chunkView{{"win.md", "Title", 3, 4, ChunkText, "Line one.\nLine two.", nil}}
	if got := views(cs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// longText is a section of numbered, distinct words and sentences, so a chunk's place
// in it is unambiguous.
func longText(lang string, paragraphs, sentences int) string {
	var b strings.Builder
	for p := range paragraphs {
		for s := range sentences {
			if lang == "zh" {
				fmt.Fprintf(&b, "第%d段第%d句说明配送和退款的规则。", p, s)
			} else {
				fmt.Fprintf(&b, "Paragraph %d sentence %d explains delivery rules. ", p, s)
			}
			if s%3 == 2 {
				b.WriteString("\n")
			}
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

func TestChunkSizeAndOverlap(t *testing.T) {
	files := map[string]string{
		"en.md":      "# Rules\n\n" + longText("en", 6, 7) + "## More\n\n" + longText("en", 3, 20),
		"zh.md":      "# 规则\n\n" + longText("zh", 6, 7) + "## 更多\n\n" + longText("zh", 3, 20),
		"en.txt":     longText("en", 8, 5),
		"zh.txt":     longText("zh", 4, 30),
		"word.txt":   "x" + strings.Repeat("长", 500) + "y\n\nshort\n",
		"spaces.txt": strings.Repeat("a ", 300) + "\n" + strings.Repeat("abcdefghij", 30),
	}
	dir := writeFiles(t, files)
	opts := []ChunkOptions{{}, {Size: 50, Overlap: 10}, {Size: 120, Overlap: 30}, {Size: 200, Overlap: 0}, {Size: 30, Overlap: 29}, {Size: 1, Overlap: 0}}
	for name, content := range files {
		lines := strings.Split(content, "\n")
		for _, o := range opts {
			t.Run(fmt.Sprintf("%s/%d-%d", name, o.Size, o.Overlap), func(t *testing.T) {
				cs, _ := mustRead(t, dir, []string{name}, o)
				o, _ := o.resolve()
				for i, c := range cs {
					if n := utf8.RuneCountInString(c.Text); n > o.Size || n == 0 {
						t.Fatalf("chunk %d has %d runes, size is %d: %q", i, n, o.Size, c.Text)
					}
					if !utf8.ValidString(c.Text) {
						t.Fatalf("chunk %d splits a character: %q", i, c.Text)
					}
					checkLineRange(t, lines, c)
				}
				checkSpans(t, content, o)
			})
		}
	}
}

// checkSpans checks the chunks of content as one section: each at most Size runes,
// overlapping the previous by at most Overlap runes (and by some, when allowed and
// there is room), starting on a rune boundary, and together covering every
// non-space character.
func checkSpans(t *testing.T, content string, o ChunkOptions) {
	t.Helper()
	spans := packSpans(content, 0, len(content), o)
	covered := 0 // content[:covered] is covered
	sawOverlap := false
	for i, s := range spans {
		if !utf8.RuneStart(content[s[0]]) || (s[1] < len(content) && !utf8.RuneStart(content[s[1]])) {
			t.Fatalf("span %d %v is not on rune boundaries", i, s)
		}
		if n := utf8.RuneCountInString(content[s[0]:s[1]]); n > o.Size {
			t.Fatalf("span %d has %d runes, size is %d", i, n, o.Size)
		}
		if i > 0 {
			prev := spans[i-1]
			if s[0] <= prev[0] || s[1] <= prev[1] {
				t.Fatalf("span %d %v does not move on from %v", i, s, prev)
			}
			if s[0] < prev[1] {
				sawOverlap = true
				if n := utf8.RuneCountInString(content[s[0]:prev[1]]); n > o.Overlap {
					t.Fatalf("spans %d and %d overlap by %d runes, overlap is %d", i-1, i, n, o.Overlap)
				}
			}
		}
		if gap := content[covered:max(covered, s[0])]; strings.TrimSpace(gap) != "" {
			t.Fatalf("text before span %d is in no chunk: %q", i, gap)
		}
		covered = max(covered, s[1])
	}
	if rest := content[covered:]; strings.TrimSpace(rest) != "" {
		t.Fatalf("text after the last span is in no chunk: %q", rest)
	}
	if o.Overlap > 1 && len(spans) > 2 && !sawOverlap {
		t.Errorf("no spans overlap with overlap %d", o.Overlap)
	}
}

// checkLineRange checks that the chunk's text is the file's text from its start line
// to its end line: it begins in StartLine and ends in EndLine.
func checkLineRange(t *testing.T, lines []string, c Chunk) {
	t.Helper()
	if c.StartLine < 1 || c.EndLine < c.StartLine || c.EndLine > len(lines) {
		t.Fatalf("bad line range %d-%d", c.StartLine, c.EndLine)
	}
	textLines := strings.Split(c.Text, "\n")
	if len(textLines) != c.EndLine-c.StartLine+1 {
		t.Fatalf("lines %d-%d for a text of %d lines: %q", c.StartLine, c.EndLine, len(textLines), c.Text)
	}
	for i, tl := range textLines {
		fl := lines[c.StartLine-1+i]
		switch {
		case len(textLines) == 1 && strings.Contains(fl, tl):
		case i == 0 && strings.HasSuffix(fl, tl):
		case i == len(textLines)-1 && strings.HasPrefix(fl, tl):
		case i > 0 && i < len(textLines)-1 && fl == tl:
		default:
			t.Fatalf("line %d is %q, chunk has %q", c.StartLine+i, fl, tl)
		}
	}
}

func TestChunkHashes(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(sourcesDir, "help/refunds.md"))
	if err != nil {
		t.Fatal(err)
	}
	faq, err := os.ReadFile(filepath.Join(sourcesDir, "faq.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := mustRead(t, sourcesDir, []string{"help/refunds.md", "faq.yaml"}, ChunkOptions{})
	again, _ := mustRead(t, sourcesDir, []string{"help/refunds.md", "faq.yaml"}, ChunkOptions{})
	if fmt.Sprint(base) != fmt.Sprint(again) {
		t.Fatal("re-reading unchanged sources gave different chunks")
	}
	hashes := func(cs []Chunk) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Hash)
		}
		return out
	}
	tests := []struct {
		name    string
		md, faq string
		changed []int // indexes into base whose hash must change
	}{
		{"unchanged", string(orig), string(faq), nil},
		{"edit one section", strings.Replace(string(orig), "3-5 working days", "5 working days", 1), string(faq), []int{2}},
		{"lines shift above", strings.Replace(string(orig), "Intro text", "\n\nIntro text", 1), string(faq), nil},
		{"rename a heading", strings.Replace(string(orig), "## Timing", "## When", 1), string(faq), []int{2}},
		{"edit an faq variant", string(orig), strings.Replace(string(faq), "refund timing", "refund time", 1), []int{6}},
		{"edit an faq answer", string(orig), strings.Replace(string(faq), "已支付的订单", "已付款的订单", 1), []int{7}},
		{"crlf line ends", strings.ReplaceAll(string(orig), "\n", "\r\n"), string(faq), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"help/refunds.md": tt.md, "faq.yaml": tt.faq})
			cs, _ := mustRead(t, dir, []string{"help/refunds.md", "faq.yaml"}, ChunkOptions{})
			got, want := hashes(cs), hashes(base)
			if len(got) != len(want) {
				t.Fatalf("%d chunks, want %d", len(got), len(want))
			}
			var changed []int
			for i := range got {
				if got[i] != want[i] {
					changed = append(changed, i)
				}
			}
			if !slices.Equal(changed, tt.changed) {
				t.Errorf("changed hashes %v, want %v", changed, tt.changed)
			}
		})
	}
}

func TestReadSourcesErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"ok.md": "# A\n\ntext\n",
		"bad.yaml": `faq:
  - question: Where is my order?
    answer: On its way.
  - question: Missing answer
    variants: [x]
  - question: ""
    answer: empty question
  - question: q
    variants: not a list
    answer: a
  - question: q2
    answers: typo
    answer: a
  - just a string
`,
		"syntax.yaml":  "faq:\n  - question: [unclosed\n",
		"notlist.yaml": "faq: {question: q}\n",
		"huge.txt":     strings.Repeat("x", spec.MaxFileSize+1),
	})
	tests := []struct {
		name     string
		patterns []string
		want     []string // lines of the error
		is       error
	}{
		{"missing file", []string{"ok.md", "docs/missing.md"}, []string{"docs/missing.md: no such file or directory"}, fs.ErrNotExist},
		{"missing in a missing directory", []string{"nope/x.md"}, []string{"nope/x.md: no such file or directory"}, fs.ErrNotExist},
		{"every bad faq entry with its line", []string{"bad.yaml"}, []string{
			"bad.yaml:4: faq[1]: missing answer",
			"bad.yaml:6: faq[2].question: must be a non-empty string",
			"bad.yaml:9: faq[3].variants: must be a list of strings",
			"bad.yaml:12: faq[4].answers: unknown key; an FAQ entry has question, variants and answer",
			"bad.yaml:14: faq[5]: must be a mapping with question, variants and answer",
		}, nil},
		{"yaml syntax at the line the list starts on", []string{"syntax.yaml"}, []string{"syntax.yaml:2: YAML syntax: did not find expected ',' or ']'"}, nil},
		{"faq not a list", []string{"notlist.yaml"}, []string{"notlist.yaml:1: faq: must be a list of {question, variants, answer}"}, nil},
		{"too large", []string{"huge.txt"}, []string{"huge.txt: it is larger than 4 MiB, the most agentrun reads"}, nil},
		{"a directory named directly", []string{"."}, []string{".: it is a directory, not a regular file; agentrun reads only regular files"}, nil},
		{"absolute path", []string{"/etc/passwd"}, []string{"/etc/passwd: a knowledge source must be a path relative to the spec's directory"}, nil},
		{"bad glob", []string{"docs/[.md"}, []string{"docs/[.md: bad glob: syntax error in pattern"}, nil},
		{"all problems at once", []string{"a.md", "ok.md", "b.md"}, []string{"a.md: no such file or directory", "b.md: no such file or directory"}, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _, err := ReadSources(dir, tt.patterns, ChunkOptions{})
			if err == nil {
				t.Fatalf("no error, %d chunks", len(cs))
			}
			if cs != nil {
				t.Errorf("%d chunks returned with an error", len(cs))
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tt.want) {
				t.Errorf("error:\n got %q\nwant %q", got, tt.want)
			}
			var se *SourceError
			if !errors.As(err, &se) {
				t.Errorf("%T is not a *SourceError", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error is not %v", tt.is)
			}
		})
	}
}

func TestChunkOptionsInvalid(t *testing.T) {
	for _, o := range []ChunkOptions{{Size: -1}, {Size: 10, Overlap: 10}, {Size: 10, Overlap: -1}, {Overlap: 5}} {
		if _, _, err := ReadSources(sourcesDir, []string{"notes.txt"}, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
