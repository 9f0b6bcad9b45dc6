package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/agentrun/agentrun/internal/words"
)

// A learned answer was written for one question; a similar question may name
// another thing — another parcel, account, person or address — and need another
// answer. SameSpecifics is the rule a learned entry must pass besides its score.

// SameSpecifics reports whether a learned answer written for learned may answer
// asked: both name the same specific things (numbers, codes, e-mail addresses,
// links, names, quoted words), and neither puts another word where the other has
// one ("registered as alice" against "registered as bob"): a question that differs
// from another only in one slot is the same question about another thing.
func SameSpecifics(asked, learned string) bool {
	a, b := analyse(asked), analyse(learned)
	// What one spelling marks as specific (KXPQRT) is specific in the other too,
	// however it is written there (kxpqrt).
	for _, s := range []map[string]bool{a.specific, b.specific} {
		for t := range s {
			if !a.tokens[t] || !b.tokens[t] {
				return false
			}
		}
	}
	return !substitutes(a.content, b.content)
}

// analysed is a question as the rule sees it: its tokens and those of them that
// are specific (lower case), and its content words in order (stemmed, function
// words left out), with each as written (in lower case).
type analysed struct {
	tokens, specific map[string]bool
	content, written []string
}

// word is one word of a question with what its spelling says of it.
type word struct {
	text     string // as written
	initial  bool   // it starts a sentence
	quoted   bool
	cjk      bool
	isSymbol bool // an address, a link or a path: one token with its punctuation
}

func analyse(text string) analysed {
	ws := splitWords(norm.NFKC.String(text))
	q := analysed{tokens: map[string]bool{}, specific: map[string]bool{}}
	var letters, capitalized, upper int
	for _, w := range ws {
		if w.cjk || w.isSymbol || !strings.ContainsFunc(w.text, unicode.IsLetter) {
			continue
		}
		letters++
		r, _ := utf8.DecodeRuneInString(w.text)
		if unicode.IsUpper(r) {
			capitalized++
		}
		if isAllUpper(w.text) {
			upper++
		}
	}
	// In a text typed in capitals or in title case, case says nothing of names.
	caseShouts := letters >= 3 && upper*5 >= letters*3
	caseTitles := letters >= 3 && capitalized*5 >= letters*3
	for _, w := range ws {
		lower := strings.ToLower(w.text)
		q.tokens[lower] = true
		if w.isSymbol || w.quoted || isSpecific(w, caseShouts, caseTitles) {
			q.specific[lower] = true
		}
		if w.isSymbol || functionWord(lower, w.cjk) {
			continue
		}
		q.content = append(q.content, words.Stem(lower))
		q.written = append(q.written, lower)
	}
	return q
}

// isSpecific reports whether a word's spelling marks it as naming one thing: a
// number or code with digits, a code in capitals (KXPQRT), a word with a capital
// inside (iPhone), or a capitalised word inside a sentence (Alice, Paris).
func isSpecific(w word, caseShouts, caseTitles bool) bool {
	if w.cjk || firstPerson[w.text] {
		return false
	}
	if strings.ContainsFunc(w.text, unicode.IsDigit) {
		return true
	}
	n := utf8.RuneCountInString(w.text)
	if n < 2 || caseShouts {
		return false
	}
	if isAllUpper(w.text) {
		return true
	}
	first, size := utf8.DecodeRuneInString(w.text)
	if strings.ContainsFunc(w.text[size:], unicode.IsUpper) {
		return true
	}
	return unicode.IsUpper(first) && !w.initial && !caseTitles
}

// firstPerson are "I" and its contractions as splitWords leaves them: capitalised
// inside a sentence, and no name.
var firstPerson = map[string]bool{"I": true, "Im": true, "Ill": true, "Ive": true, "Id": true}

func isAllUpper(s string) bool {
	return strings.ContainsFunc(s, unicode.IsLetter) && !strings.ContainsFunc(s, unicode.IsLower)
}

// splitWords cuts text into words of letters and digits and single CJK
// characters, keeping e-mail addresses, links and paths whole.
func splitWords(text string) []word {
	var out []word
	initial, quoted := true, false
	for _, chunk := range strings.Fields(text) {
		core := strings.TrimFunc(chunk, isEdgePunct)
		lead := chunk[:strings.Index(chunk, core)]
		if strings.ContainsFunc(lead, isQuote) {
			quoted = !quoted
		}
		if symbolLike(core) {
			out = append(out, word{text: core, isSymbol: true, quoted: quoted})
			initial = false
		} else {
			out, initial = appendWords(out, core, initial, quoted)
		}
		trail := chunk[len(lead)+len(core):]
		if strings.ContainsFunc(trail, isQuote) {
			quoted = !quoted
		}
		if strings.ContainsAny(trail, ".!?。！？") || strings.ContainsAny(core, "。！？") {
			initial = true
		}
	}
	return out
}

func appendWords(out []word, core string, initial, quoted bool) ([]word, bool) {
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, word{text: cur.String(), initial: initial, quoted: quoted})
			initial = false
			cur.Reset()
		}
	}
	for _, r := range core {
		switch {
		case words.IsCJK(r):
			flush()
			out = append(out, word{text: string(r), cjk: true, quoted: quoted})
			initial = false
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			cur.WriteRune(r)
		case r == '\'' || r == '’':
			// "don't" is one word
		default:
			flush()
			if strings.ContainsRune("。！？.!?", r) {
				initial = true
			}
		}
	}
	flush()
	return out, initial
}

// symbolLike reports whether a token is an e-mail address, a handle, a link, a
// domain or a path: punctuation inside it is part of what it names.
func symbolLike(s string) bool {
	if strings.Contains(s, "://") || strings.HasPrefix(s, "@") && len(s) > 1 {
		return true
	}
	if at := strings.IndexByte(s, '@'); at > 0 && at < len(s)-1 {
		return true
	}
	if strings.ContainsAny(s, "/_#\\") && strings.ContainsFunc(s, isWordRune) {
		return true
	}
	if strings.ContainsAny(s, "-.:") && strings.ContainsFunc(s, unicode.IsDigit) {
		return true // A-1001, v2.1, 12:30: a code, whole
	}
	// example.com, shop.example.org: a dot between letters, ending in letters.
	if dot := strings.LastIndexByte(s, '.'); dot > 0 && dot < len(s)-2 {
		before, after := s[:dot], s[dot+1:]
		r, _ := utf8.DecodeLastRuneInString(before)
		return isWordRune(r) && !strings.ContainsFunc(after, func(r rune) bool { return !unicode.IsLetter(r) })
	}
	return false
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func isEdgePunct(r rune) bool {
	return !isWordRune(r) && r != '@' && !words.IsCJK(r)
}

func isQuote(r rune) bool { return strings.ContainsRune("\"'“”‘’«»「」『』", r) }

// functionWord reports whether a word only shapes the question ("how", "my",
// "could", "的", "吗"): two questions may differ in those and ask the same thing.
func functionWord(w string, cjk bool) bool {
	if cjk {
		return strings.Contains(chineseFunction, w)
	}
	return englishFunction[w]
}

var englishFunction = func() map[string]bool {
	m := map[string]bool{}
	for w := range strings.FieldsSeq(`a an the i me my mine you your yours u we us our it its is are was were be
		been am do does did done can could will would shall should may might must how what what's whats which
		who whom whose when where why to of for on in at by from with about into and or but if then so than
		please pls hey hi hello thanks thank that this these those there here some any ever also just really
		tell know let get got give show find check want need like say see im i'm there's is it's its
		usually usual normally typically generally still already actually maybe ok okay anything something
		someone somewhere info information`) {
		m[w] = true
	}
	return m
}()

const chineseFunction = "的了吗呢啊呀吧呗么嘛哦哈啦哇哟我你您是一下怎如何样能可以都也还要想什啥咋哪些请问个才再就又把被给让这那得过着已经般来"

// substitutes reports whether aligning two content-word sequences leaves a place
// where each has words the other lacks: a word replaced by another.
func substitutes(a, b []string) bool {
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	gapA, gapB := false, false
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			if gapA && gapB {
				return true
			}
			gapA, gapB = false, false
			i, j = i+1, j+1
		case j == len(b) || i < len(a) && lcs[i+1][j] >= lcs[i][j+1]:
			gapA = true
			i++
		default:
			gapB = true
			j++
		}
	}
	return gapA && gapB
}
