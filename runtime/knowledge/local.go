package knowledge

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/agentrun/agentrun/internal/words"
	"github.com/agentrun/agentrun/spec"
)

// DefaultLocalDimensions is the dimension of the zero Local. On
// testdata/faq_pairs.yaml every size from 128 to 2048 separates the pairs equally well
// (TestFAQDimensions), so speed decides: brute-force search is bound by memory
// bandwidth, and at 10k entries 256 dimensions take about half the time of 512
// (BenchmarkCacheHit10k). A collection of long chunks may want more (NewLocal), since
// hundreds of features per text collide more in fewer dimensions.
const DefaultLocalDimensions = spec.DefaultLocalDimensions

// DefaultCacheThreshold is the cosine similarity, under Local, at or above which a
// user's question is taken to be a known FAQ question; spec.DefaultCacheThreshold is
// the source of truth. Chosen by measurement on testdata/faq_pairs.yaml: the highest
// must-not pair scores 0.747, so 0.76 keeps a small margin above it; about three
// quarters of the must-hit pairs score higher (TestFAQCacheThreshold logs the curve).
const DefaultCacheThreshold float32 = spec.DefaultCacheThreshold

// localVersion changes whenever Local's features or weights change, so vectors made
// by an older Local are never compared with new ones (it is part of ID).
const localVersion = 1

// Local is a deterministic embedder with no network and no weights: signed feature
// hashing of word and character n-grams, for Chinese (and other CJK scripts) as
// well as English.
//
// A text is normalised (NFKC, lower case, punctuation and symbols as spaces, an
// apostrophe inside a word dropped) and split into runs of CJK characters and words
// of other letters and digits. Its features are:
//   - other words: the word, the pair of adjacent content words, and the character
//     trigrams of the word padded with boundaries (so a typo changes a few features,
//     not all of the word's);
//   - CJK runs: character unigrams, bigrams and trigrams (Chinese has no spaces; a
//     bigram is the usual stand-in for a word).
//
// Each feature's weight is its class weight times 1+ln(count) (sublinear, so a
// repeated word does not dominate). Function words and particles ("how", "do", "my",
// "的", "吗", "怎么", …) carry no topic: an English one is kept only as a word at a
// fifth of the weight (no pairs through it, no trigrams), and a CJK n-gram touching
// one gets a fifth of its weight. Words are crudely stemmed ("takes" → "take").
// The class weights were chosen by a grid search on the labelled set; a broad
// plateau of settings did equally well, and these sit in its middle. A feature is
// hashed (FNV-1a) to one dimension and a sign, and the vector is L2-normalised. An
// empty text (or one of punctuation only) is the zero vector, which scores 0 against
// everything.
//
// The zero Local is ready to use with DefaultLocalDimensions. Local is safe for
// concurrent use.
type Local struct {
	dims int
}

var _ Embedder = (*Local)(nil)

// NewLocal returns a Local with the given number of dimensions (at least 16).
func NewLocal(dimensions int) (*Local, error) {
	if dimensions < 16 {
		return nil, fmt.Errorf("local embedder: dimensions must be at least 16, got %d", dimensions)
	}
	return &Local{dims: dimensions}, nil
}

// Dimensions is the length of every vector Local returns.
func (l *Local) Dimensions() int {
	if l.dims == 0 {
		return DefaultLocalDimensions
	}
	return l.dims
}

// ID is "local:v<version>:dim=<dimensions>".
func (l *Local) ID() string {
	return fmt.Sprintf("local:v%d:dim=%d", localVersion, l.Dimensions())
}

// Embed returns one vector per text. It fails only when ctx is done.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = l.embed(t)
	}
	return out, nil
}

// Feature classes: the prefix byte keeps, say, the word "a" and the character "a"
// apart, and selects the class weight.
const (
	featWord byte = iota + 1
	featWordPair
	featWordTrigram
	featCJK1
	featCJK2
	featCJK3
)

var classWeight = [...]float32{
	featWord:        1.0,
	featWordPair:    1.0,
	featWordTrigram: 0.4,
	featCJK1:        0.7,
	featCJK2:        1.0,
	featCJK3:        0.25,
}

// stopWeight scales the features of function words and particles.
const stopWeight = 0.2

var englishStop = map[string]bool{
	"a": true, "an": true, "the": true, "i": true, "me": true, "my": true, "you": true,
	"your": true, "u": true, "we": true, "it": true, "is": true, "are": true, "was": true,
	"be": true, "do": true, "does": true, "did": true, "can": true, "could": true,
	"will": true, "would": true, "how": true, "what": true, "which": true, "to": true,
	"of": true, "for": true, "on": true, "in": true, "at": true, "and": true, "or": true,
	"please": true, "hey": true, "hi": true, "that": true, "this": true, "so": true,
}

var chineseStop = map[rune]bool{
	'的': true, '了': true, '吗': true, '呢': true, '啊': true, '呀': true, '吧': true,
	'呗': true, '么': true, '我': true, '你': true, '是': true, '一': true, '下': true,
	'怎': true, '如': true, '何': true, '样': true, '能': true, '可': true, '以': true,
	'都': true, '也': true, '还': true, '要': true, '想': true, '什': true, '啥': true,
	'咋': true, '哪': true, '些': true,
}

// segment is a run of CJK characters or one word of other letters and digits.
type segment struct {
	text string
	cjk  bool
}

// segments normalises text and splits it into words and CJK runs.
func segments(text string) []segment {
	text = strings.ToLower(norm.NFKC.String(text))
	var segs []segment
	var cur strings.Builder
	curCJK := false
	flush := func() {
		if cur.Len() > 0 {
			segs = append(segs, segment{text: cur.String(), cjk: curCJK})
			cur.Reset()
		}
	}
	for _, r := range text {
		switch {
		case words.IsCJK(r):
			if !curCJK {
				flush()
			}
			curCJK = true
			cur.WriteRune(r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			if curCJK {
				flush()
			}
			curCJK = false
			cur.WriteRune(r)
		case (r == '\'' || r == '’') && !curCJK && cur.Len() > 0:
			// "don't" and "dont" are the same word.
		case unicode.IsSpace(r) && curCJK:
			// A space does not end a CJK run: "取消 订单" is "取消订单" typed loosely.
		default:
			flush()
		}
	}
	flush()
	return segs
}

type featureCount struct {
	weight float32
	count  int
}

func (l *Local) embed(text string) []float32 {
	dims := l.Dimensions()
	vec := make([]float32, dims)
	feats := make(map[uint64]featureCount)
	add := func(class byte, s string, weight float32) {
		h := fnv1a(class, s)
		f := feats[h]
		f.weight = max(f.weight, weight)
		f.count++
		feats[h] = f
	}

	var prevWord string
	for _, seg := range segments(text) {
		if seg.cjk {
			prevWord = ""
			addCJK(seg.text, add)
			continue
		}
		w := seg.text
		if englishStop[w] {
			// A function word says little about the topic, and pairs through it would
			// make "the order I placed" differ from "my order" for no reason.
			add(featWord, w, classWeight[featWord]*stopWeight)
			continue
		}
		w = words.Stem(w)
		add(featWord, w, classWeight[featWord])
		if prevWord != "" {
			add(featWordPair, prevWord+" "+w, classWeight[featWordPair])
		}
		prevWord = w
		padded := []rune("<" + w + ">")
		for i := 0; i+3 <= len(padded); i++ {
			add(featWordTrigram, string(padded[i:i+3]), classWeight[featWordTrigram])
		}
	}

	// Sum in a fixed order: float addition is not associative, and map order varies,
	// so the same text would otherwise differ in the last bit from run to run.
	var sum float64
	for _, h := range slices.Sorted(maps.Keys(feats)) {
		f := feats[h]
		v := f.weight * (1 + float32(math.Log(float64(f.count))))
		if h>>63 == 1 {
			v = -v
		}
		vec[h%uint64(dims)] += v
	}
	for _, v := range vec {
		sum += float64(v) * float64(v)
	}
	if sum == 0 {
		return vec
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range vec {
		vec[i] *= inv
	}
	return vec
}

func addCJK(run string, add func(byte, string, float32)) {
	rs := []rune(run)
	// An n-gram touching a particle or question word ("怎么", "吗") mostly records
	// phrasing, not topic.
	weight := func(class byte, gram []rune) float32 {
		for _, r := range gram {
			if chineseStop[r] {
				return classWeight[class] * stopWeight
			}
		}
		return classWeight[class]
	}
	for i := range rs {
		add(featCJK1, string(rs[i]), weight(featCJK1, rs[i:i+1]))
		if i+2 <= len(rs) {
			add(featCJK2, string(rs[i:i+2]), weight(featCJK2, rs[i:i+2]))
		}
		if i+3 <= len(rs) {
			add(featCJK3, string(rs[i:i+3]), weight(featCJK3, rs[i:i+3]))
		}
	}
}

// fnv1a is 64-bit FNV-1a over the class byte and s, written out so that hashing a
// feature allocates nothing.
func fnv1a(class byte, s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	h ^= uint64(class)
	h *= prime
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}
