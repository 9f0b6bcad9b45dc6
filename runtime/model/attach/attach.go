package attach

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentrun/agentrun/runtime/model"
)

// Accepted are the media types a part may have, in the order error messages list
// them: what every supported provider takes as an image or a document.
var Accepted = []string{"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf", "text/plain"}

// byExtension names the accepted type of each file extension; it is ours rather
// than the system's mime table, so a name means the same on every machine.
var byExtension = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
	".pdf": "application/pdf", ".txt": "text/plain", ".text": "text/plain", ".md": "text/plain", ".log": "text/plain",
}

// Limits bound what a request may attach.
type Limits struct {
	MaxPart  int64 // bytes of one part
	MaxTotal int64 // bytes of all of a request's parts
	MaxCount int   // parts of a request
}

// Default limits: 20 MiB is what OpenAI and Anthropic take for one image or
// document; ten parts of a request keep one question from becoming an upload.
const (
	DefaultMaxPart  = 20 << 20
	DefaultMaxTotal = 50 << 20
	DefaultMaxCount = 10
)

// DefaultLimits are the limits of exec and, unless configured, of serve.
var DefaultLimits = Limits{MaxPart: DefaultMaxPart, MaxTotal: DefaultMaxTotal, MaxCount: DefaultMaxCount}

// Problem is what is wrong with an attachment.
type Problem string

const (
	TooLarge    Problem = "too_large"   // over a size or count limit
	Unsupported Problem = "unsupported" // a media type that is not accepted
	Invalid     Problem = "invalid"     // unreadable, malformed, or not what it says it is
)

// Error is an attachment refused, naming it and saying why.
type Error struct {
	Problem Problem
	Name    string // the file, URL or part as its sender named it
	Msg     string
}

func (e *Error) Error() string {
	if e.Name == "" {
		return "attachment: " + e.Msg
	}
	return fmt.Sprintf("attachment %s: %s", e.Name, e.Msg)
}

func refuse(p Problem, name, format string, args ...any) *Error {
	return &Error{Problem: p, Name: name, Msg: fmt.Sprintf(format, args...)}
}

// ProblemOf is err's Problem when it is an attachment's Error, "" otherwise.
func ProblemOf(err error) Problem {
	var e *Error
	if errors.As(err, &e) {
		return e.Problem
	}
	return ""
}

// Parse reads one `--attach` argument: an http(s) URL stays a URL, a data: URL is
// decoded, anything else is a file path.
func Parse(arg string, lim Limits) (model.Part, error) {
	switch {
	case strings.HasPrefix(arg, "data:"):
		return FromDataURL(arg, "", lim)
	case strings.HasPrefix(arg, "http://"), strings.HasPrefix(arg, "https://"):
		return FromURL(arg, "", "")
	case strings.Contains(arg, "://"):
		return model.Part{}, refuse(Invalid, arg, "only http and https URLs can be attached")
	}
	return FromFile(arg, lim)
}

// FromFile reads a file, at most one byte past the limit so a huge file is refused
// without being read whole.
func FromFile(name string, lim Limits) (model.Part, error) {
	f, err := os.Open(name)
	if err != nil {
		return model.Part{}, refuse(Invalid, name, "%v", unwrapPath(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return model.Part{}, refuse(Invalid, name, "is a directory, not a file")
	}
	data, err := io.ReadAll(io.LimitReader(f, lim.MaxPart+1))
	if err != nil {
		return model.Part{}, refuse(Invalid, name, "%v", unwrapPath(err))
	}
	return FromBytes(filepath.Base(name), "", data, lim)
}

// unwrapPath drops the path an os error repeats: the message names the file once.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// FromBytes makes a part of data. Its type is what the content sniffs as; declared
// (a media type its sender gave) and the name's extension, when known, must agree.
func FromBytes(name, declared string, data []byte, lim Limits) (model.Part, error) {
	return fromBytes(name, shownAs(name, "(unnamed)"), declared, data, lim)
}

// shownAs is how errors name a part: its name, or what it came as.
func shownAs(name, otherwise string) string {
	if name == "" {
		return otherwise
	}
	return name
}

func fromBytes(name, shown, declared string, data []byte, lim Limits) (model.Part, error) {
	if lim.MaxPart > 0 && int64(len(data)) > lim.MaxPart {
		return model.Part{}, refuse(TooLarge, shown, "%s is over the limit of %s a part", sizeOver(len(data), lim.MaxPart), Size(lim.MaxPart))
	}
	if len(data) == 0 {
		return model.Part{}, refuse(Invalid, shown, "is empty")
	}
	sniffed := baseType(http.DetectContentType(data))
	claims := []struct{ what, typ string }{{"its declared type", baseType(declared)}, {"its name", byExtension[strings.ToLower(path.Ext(name))]}}
	typ := sniffed
	for _, c := range claims {
		if c.typ == "" {
			continue
		}
		if !agree(c.typ, sniffed) {
			return model.Part{}, refuse(Invalid, shown, "%s says %s but its content is %s", c.what, c.typ, sniffed)
		}
		typ = c.typ
	}
	if !accepted(typ) {
		return model.Part{}, unsupported(shown, typ)
	}
	if name == "" {
		name = defaultName(typ)
	}
	return model.Part{Kind: kindOf(typ), MediaType: typ, Name: name, Data: data, Size: int64(len(data))}, nil
}

// sizeOver shows a size that broke a limit: in bytes when it is close enough to
// the limit that rounded units would read as the limit itself.
func sizeOver(n int, limit int64) string {
	if int64(n) < limit+limit/20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return Size(int64(n))
}

// agree reports whether a claimed type fits the content: the same type, or text
// declared plain whatever text it sniffs as (a .txt of HTML is still text).
func agree(claimed, sniffed string) bool {
	return claimed == sniffed || claimed == "text/plain" && strings.HasPrefix(sniffed, "text/")
}

// FromBase64 decodes standard (or URL-safe) base64 data of the given media type.
func FromBase64(name, mediaType, data string, lim Limits) (model.Part, error) {
	return fromBase64(name, shownAs(name, "(unnamed)"), mediaType, data, lim)
}

func fromBase64(name, shown, mediaType, data string, lim Limits) (model.Part, error) {
	if lim.MaxPart > 0 && int64(base64.StdEncoding.DecodedLen(len(data))) > lim.MaxPart+2 {
		// Refused before decoding: the decoded bytes would be over the limit anyway.
		return model.Part{}, refuse(TooLarge, shown, "%s is over the limit of %s a part",
			Size(int64(base64.StdEncoding.DecodedLen(len(data)))), Size(lim.MaxPart))
	}
	b, err := decodeBase64(data)
	if err != nil {
		return model.Part{}, refuse(Invalid, shown, "its data is not base64: %v", err)
	}
	return fromBytes(name, shown, mediaType, b, lim)
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	_, err := base64.StdEncoding.DecodeString(s)
	return nil, err
}

// FromDataURL decodes a data: URL (data:image/png;base64,…). Only base64 data URLs
// are taken: a percent-encoded one is text no client sends for a file.
func FromDataURL(raw, name string, lim Limits) (model.Part, error) {
	shown := shownAs(name, "(data URL)")
	rest, ok := strings.CutPrefix(raw, "data:")
	if !ok {
		return model.Part{}, refuse(Invalid, shown, "is not a data: URL")
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return model.Part{}, refuse(Invalid, shown, "a data: URL needs a comma before its data")
	}
	typ, isBase64 := strings.CutSuffix(meta, ";base64")
	if !isBase64 {
		return model.Part{}, refuse(Invalid, shown, "only base64 data: URLs are taken (data:TYPE;base64,…)")
	}
	if typ == "" {
		return model.Part{}, refuse(Invalid, shown, "the data: URL names no media type")
	}
	return fromBase64(name, shown, typ, data, lim)
}

// FromURL makes a part the provider fetches. Only http and https URLs are taken; a
// data: URL is decoded instead (FromDataURL with DefaultLimits — call it yourself
// for others). The type is declared, or the path's extension's; without either an
// image hint (an OpenAI image_url) makes an image of unknown type, anything else is
// refused, since nothing would tell the provider what it is.
func FromURL(raw, declared string, hint model.PartKind) (model.Part, error) {
	if strings.HasPrefix(raw, "data:") {
		return FromDataURL(raw, "", DefaultLimits)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return model.Part{}, refuse(Invalid, clip(raw), "only http and https URLs (or data: URLs) can be attached")
	}
	name := path.Base(u.Path)
	if name == "/" || name == "." {
		name = ""
	}
	typ := baseType(declared)
	if typ == "" {
		typ = byExtension[strings.ToLower(path.Ext(u.Path))]
	}
	switch {
	case typ == "" && hint == model.PartImage:
		return model.Part{Kind: model.PartImage, Name: name, URL: raw}, nil
	case typ == "":
		return model.Part{}, refuse(Unsupported, clip(raw), "its media type cannot be told from its path: name a file ending in one of %s, or attach the file itself", extensions())
	case !accepted(typ):
		return model.Part{}, unsupported(clip(raw), typ)
	case hint != "" && kindOf(typ) != hint:
		return model.Part{}, refuse(Invalid, clip(raw), "is %s, not an %s", typ, hint)
	}
	return model.Part{Kind: kindOf(typ), MediaType: typ, Name: name, URL: raw}, nil
}

// Check applies the limits that concern all of a request's parts together.
func (l Limits) Check(parts []model.Part) error {
	if l.MaxCount > 0 && len(parts) > l.MaxCount {
		return refuse(TooLarge, "", "%d attachments are more than the limit of %d", len(parts), l.MaxCount)
	}
	var total int64
	for _, p := range parts {
		total += int64(len(p.Data))
	}
	if l.MaxTotal > 0 && total > l.MaxTotal {
		return refuse(TooLarge, "", "the attachments total %s, over the limit of %s a request", Size(total), Size(l.MaxTotal))
	}
	return nil
}

func unsupported(name, typ string) *Error {
	return refuse(Unsupported, name, "%s is not a type that can be attached (accepted: %s)", typ, strings.Join(Accepted, ", "))
}

func accepted(typ string) bool {
	for _, a := range Accepted {
		if a == typ {
			return true
		}
	}
	return false
}

func kindOf(typ string) model.PartKind {
	if strings.HasPrefix(typ, "image/") {
		return model.PartImage
	}
	return model.PartFile
}

// baseType is a media type without its parameters (text/plain; charset=utf-8 →
// text/plain), lower-cased.
func baseType(t string) string {
	if t == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(t))
}

func defaultName(typ string) string {
	for _, ext := range []string{".png", ".jpg", ".gif", ".webp", ".pdf", ".txt"} {
		if byExtension[ext] == typ {
			return string(kindOf(typ)) + ext
		}
	}
	return "attachment"
}

func extensions() string {
	return ".png, .jpg, .jpeg, .gif, .webp, .pdf, .txt, .md"
}

// clip keeps a long URL readable in a message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// Size shows a byte count for people (model.ByteSize).
func Size(n int64) string { return model.ByteSize(n) }
