package attach_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/attach"
)

var (
	png  = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 50)...)
	jpeg = append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), make([]byte, 50)...)
	gif  = []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")
	webp = []byte("RIFF\x24\x00\x00\x00WEBPVP8 \x18\x00\x00\x00")
	pdf  = []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\n")
	text = []byte("hello, world\n")
	zip  = []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00")
)

func TestFromBytes(t *testing.T) {
	lim := attach.Limits{MaxPart: 100}
	for _, tc := range []struct {
		name, file, declared string
		data                 []byte
		kind                 model.PartKind
		typ, wantName        string
		problem              attach.Problem
		err                  string
	}{
		{name: "png by content", file: "a.png", data: png, kind: model.PartImage, typ: "image/png"},
		{name: "jpeg with .jpg", file: "a.JPG", data: jpeg, kind: model.PartImage, typ: "image/jpeg"},
		{name: "gif", file: "a.gif", data: gif, kind: model.PartImage, typ: "image/gif"},
		{name: "webp", file: "a.webp", data: webp, kind: model.PartImage, typ: "image/webp"},
		{name: "pdf", file: "bill.pdf", data: pdf, kind: model.PartFile, typ: "application/pdf"},
		{name: "text", file: "notes.txt", data: text, kind: model.PartFile, typ: "text/plain"},
		{name: "markdown is text", file: "notes.md", data: []byte("# Title\n"), kind: model.PartFile, typ: "text/plain"},
		{name: "html named .txt is text", file: "page.txt", data: []byte("<html><body>x</body></html>"), kind: model.PartFile, typ: "text/plain"},
		{name: "no extension: the content decides", file: "scan", data: pdf, kind: model.PartFile, typ: "application/pdf"},
		{name: "unnamed gets a name", declared: "image/png", data: png, kind: model.PartImage, typ: "image/png", wantName: "image.png"},
		{name: "declared with parameters", file: "a.txt", declared: "text/plain; charset=utf-8", data: text, kind: model.PartFile, typ: "text/plain"},
		{name: "jpeg named .png", file: "photo.png", data: jpeg, problem: attach.Invalid,
			err: "attachment photo.png: its name says image/png but its content is image/jpeg"},
		{name: "declared png, content pdf", file: "x", declared: "image/png", data: pdf, problem: attach.Invalid,
			err: "attachment x: its declared type says image/png but its content is application/pdf"},
		{name: "binary named .txt", file: "a.txt", data: zip, problem: attach.Invalid,
			err: "attachment a.txt: its name says text/plain but its content is application/zip"},
		{name: "zip", file: "a.zip", data: zip, problem: attach.Unsupported,
			err: "attachment a.zip: application/zip is not a type that can be attached (accepted: image/png, image/jpeg, image/gif, image/webp, application/pdf, text/plain)"},
		{name: "too large", file: "big.txt", data: []byte(strings.Repeat("a", 101)), problem: attach.TooLarge,
			err: "attachment big.txt: 101 bytes is over the limit of 100 bytes a part"},
		{name: "empty", file: "e.txt", data: nil, problem: attach.Invalid, err: "attachment e.txt: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := attach.FromBytes(tc.file, tc.declared, tc.data, lim)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || attach.ProblemOf(err) != tc.problem {
					t.Fatalf("err = %v (%s), want %q (%s)", err, attach.ProblemOf(err), tc.err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name := tc.file
			if tc.wantName != "" {
				name = tc.wantName
			}
			if p.Kind != tc.kind || p.MediaType != tc.typ || p.Name != name || p.Size != int64(len(tc.data)) || string(p.Data) != string(tc.data) {
				t.Errorf("part = %+v, want %s %s named %s", p, tc.kind, tc.typ, name)
			}
		})
	}
}

func TestDataURLsAndBase64(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(png)
	lim := attach.Limits{MaxPart: 100}
	for _, tc := range []struct {
		name, url, err string
	}{
		{name: "base64 png", url: "data:image/png;base64," + b64},
		{name: "url-safe unpadded", url: "data:image/png;base64," + base64.RawURLEncoding.EncodeToString(png)},
		{name: "not base64", url: "data:image/png,abc", err: "attachment (data URL): only base64 data: URLs are taken (data:TYPE;base64,…)"},
		{name: "no comma", url: "data:image/png;base64", err: "attachment (data URL): a data: URL needs a comma before its data"},
		{name: "no type", url: "data:;base64," + b64, err: "attachment (data URL): the data: URL names no media type"},
		{name: "bad base64", url: "data:image/png;base64,!!!", err: "attachment (data URL): its data is not base64: illegal base64 data at input byte 0"},
		{name: "type disagrees", url: "data:image/jpeg;base64," + b64, err: "attachment (data URL): its declared type says image/jpeg but its content is image/png"},
		{name: "too large, refused before decoding", url: "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("a", 300))),
			err: "attachment (data URL): 300 bytes is over the limit of 100 bytes a part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := attach.FromDataURL(tc.url, "", lim)
			switch {
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Fatalf("err = %v, want %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && (p.MediaType != "image/png" || string(p.Data) != string(png) || p.Name != "image.png"):
				t.Errorf("part = %+v", p)
			}
		})
	}
}

func TestURLs(t *testing.T) {
	for _, tc := range []struct {
		name, url, declared string
		hint                model.PartKind
		want                model.Part
		err                 string
	}{
		{name: "https png", url: "https://example.com/i/cat.png?x=1",
			want: model.Part{Kind: model.PartImage, MediaType: "image/png", Name: "cat.png", URL: "https://example.com/i/cat.png?x=1"}},
		{name: "http pdf", url: "http://example.com/bill.pdf",
			want: model.Part{Kind: model.PartFile, MediaType: "application/pdf", Name: "bill.pdf", URL: "http://example.com/bill.pdf"}},
		{name: "declared type wins", url: "https://example.com/get?id=3", declared: "application/pdf",
			want: model.Part{Kind: model.PartFile, MediaType: "application/pdf", Name: "get", URL: "https://example.com/get?id=3"}},
		{name: "an image_url without extension", url: "https://example.com/avatar", hint: model.PartImage,
			want: model.Part{Kind: model.PartImage, Name: "avatar", URL: "https://example.com/avatar"}},
		{name: "no extension, no hint", url: "https://example.com/avatar",
			err: "attachment https://example.com/avatar: its media type cannot be told from its path: name a file ending in one of .png, .jpg, .jpeg, .gif, .webp, .pdf, .txt, .md, or attach the file itself"},
		{name: "ftp", url: "ftp://example.com/a.png", err: "attachment ftp://example.com/a.png: only http and https URLs (or data: URLs) can be attached"},
		{name: "file", url: "file:///etc/passwd", err: "attachment file:///etc/passwd: only http and https URLs (or data: URLs) can be attached"},
		{name: "unsupported extension", url: "https://example.com/a.exe", declared: "application/x-msdownload",
			err: "attachment https://example.com/a.exe: application/x-msdownload is not a type that can be attached (accepted: image/png, image/jpeg, image/gif, image/webp, application/pdf, text/plain)"},
		{name: "image_url of a pdf", url: "https://example.com/a.pdf", hint: model.PartImage, err: "attachment https://example.com/a.pdf: is application/pdf, not an image"},
		{name: "data URL", url: "data:image/png;base64," + base64.StdEncoding.EncodeToString(png), hint: model.PartImage,
			want: model.Part{Kind: model.PartImage, MediaType: "image/png", Name: "image.png", Data: png, Size: int64(len(png))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := attach.FromURL(tc.url, tc.declared, tc.hint)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Kind != tc.want.Kind || p.MediaType != tc.want.MediaType || p.Name != tc.want.Name || p.URL != tc.want.URL || string(p.Data) != string(tc.want.Data) {
				t.Errorf("part = %+v, want %+v", p, tc.want)
			}
		})
	}
}

func TestParseAFileArgument(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lim := attach.Limits{MaxPart: 80}
	photo := write("photo.png", png)
	big := write("big.txt", []byte(strings.Repeat("a", 1000)))
	for _, tc := range []struct {
		name, arg, err string
		want           model.PartKind
	}{
		{name: "file", arg: photo, want: model.PartImage},
		{name: "url", arg: "https://example.com/a.pdf", want: model.PartFile},
		{name: "data url", arg: "data:text/plain;base64," + base64.StdEncoding.EncodeToString(text), want: model.PartFile},
		{name: "missing", arg: filepath.Join(dir, "nope.png"), err: "attachment " + filepath.Join(dir, "nope.png") + ": no such file or directory"},
		{name: "directory", arg: dir, err: "attachment " + dir + ": is a directory, not a file"},
		{name: "over the limit: read no further", arg: big, err: "attachment big.txt: 81 bytes is over the limit of 80 bytes a part"},
		{name: "other scheme", arg: "s3://bucket/a.png", err: "attachment s3://bucket/a.png: only http and https URLs can be attached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := attach.Parse(tc.arg, lim)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || p.Kind != tc.want {
				t.Fatalf("part %+v, err %v; want a %s", p, err, tc.want)
			}
		})
	}
}

func TestRequestLimits(t *testing.T) {
	lim := attach.Limits{MaxPart: 100, MaxTotal: 150, MaxCount: 2}
	part := func(n int) model.Part { return model.Part{Data: make([]byte, n)} }
	for _, tc := range []struct {
		name  string
		parts []model.Part
		err   string
	}{
		{name: "within", parts: []model.Part{part(70), part(80)}},
		{name: "URLs weigh nothing", parts: []model.Part{{URL: "https://example.com/a.png"}, part(100)}},
		{name: "too many", parts: []model.Part{part(1), part(1), part(1)}, err: "attachment: 3 attachments are more than the limit of 2"},
		{name: "too much in all", parts: []model.Part{part(100), part(100)}, err: "attachment: the attachments total 200 bytes, over the limit of 150 bytes a request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lim.Check(tc.parts)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err || attach.ProblemOf(err) != attach.TooLarge) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
