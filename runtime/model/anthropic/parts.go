package anthropic

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/agentrun/agentrun/runtime/model"
)

// The largest parts the Messages API takes in a request.
const (
	MaxImageBytes = 5 << 20  // one image
	MaxPDFBytes   = 32 << 20 // one PDF (also the limit of a whole request)
)

// imageTypes are the image media types the API takes.
var imageTypes = map[string]sdk.Base64ImageSourceMediaType{
	"image/png":  sdk.Base64ImageSourceMediaTypeImagePNG,
	"image/jpeg": sdk.Base64ImageSourceMediaTypeImageJPEG,
	"image/gif":  sdk.Base64ImageSourceMediaTypeImageGIF,
	"image/webp": sdk.Base64ImageSourceMediaTypeImageWebP,
}

const (
	mediaPDF  = "application/pdf"
	mediaText = "text/plain"
)

// TakesPart says whether a user message may carry p: images (PNG, JPEG, GIF,
// WebP) up to 5 MiB, PDFs up to 32 MiB, as bytes or by URL, and plain text as
// bytes.
func (m *Model) TakesPart(p model.Part) error {
	size := p.Size
	if n := int64(len(p.Data)); n > size {
		size = n
	}
	what := p.Name
	if what == "" {
		what = "the " + string(p.Kind)
	}
	switch {
	case p.Kind == model.PartImage:
		if _, ok := imageTypes[p.MediaType]; !ok {
			return fmt.Errorf("%s is %s: Anthropic models take PNG, JPEG, GIF and WebP images", what, orUnknown(p.MediaType))
		}
		if size > MaxImageBytes {
			return model.PartTooLarge("%s is %.1f MiB: Anthropic models take images up to %d MiB", what, mib(size), MaxImageBytes>>20)
		}
	case p.Kind == model.PartFile && p.MediaType == mediaPDF:
		if size > MaxPDFBytes {
			return model.PartTooLarge("%s is %.1f MiB: Anthropic models take PDFs up to %d MiB", what, mib(size), MaxPDFBytes>>20)
		}
	case p.Kind == model.PartFile && p.MediaType == mediaText:
		if p.URL != "" && len(p.Data) == 0 {
			return fmt.Errorf("%s is plain text by URL: Anthropic models take plain text only as its bytes", what)
		}
		if size > MaxPDFBytes {
			return model.PartTooLarge("%s is %.1f MiB: a request to an Anthropic model holds at most %d MiB", what, mib(size), MaxPDFBytes>>20)
		}
	case p.Kind == model.PartFile:
		return fmt.Errorf("%s is %s: Anthropic models take PDF and plain text documents", what, orUnknown(p.MediaType))
	default:
		return fmt.Errorf("%s is a part of kind %q: Anthropic models take images and documents", what, p.Kind)
	}
	return nil
}

func orUnknown(mediaType string) string {
	if mediaType == "" {
		return "of no media type"
	}
	return mediaType
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// partBlock is a part as the API takes it: an image block, or a document block of
// a PDF or of plain text, from its bytes (base64) or its URL.
func partBlock(p model.Part) (sdk.ContentBlockParamUnion, error) {
	if err := (*Model)(nil).TakesPart(p); err != nil {
		return sdk.ContentBlockParamUnion{}, err
	}
	if len(p.Data) == 0 && p.URL == "" {
		return sdk.ContentBlockParamUnion{}, errors.New("a part has neither its bytes nor a URL")
	}
	data := base64.StdEncoding.EncodeToString(p.Data)
	if p.Kind == model.PartImage {
		src := sdk.ImageBlockParamSourceUnion{OfURL: &sdk.URLImageSourceParam{URL: p.URL}}
		if len(p.Data) > 0 {
			src = sdk.ImageBlockParamSourceUnion{OfBase64: &sdk.Base64ImageSourceParam{Data: data, MediaType: imageTypes[p.MediaType]}}
		}
		return sdk.ContentBlockParamUnion{OfImage: &sdk.ImageBlockParam{Source: src}}, nil
	}
	doc := &sdk.DocumentBlockParam{}
	switch {
	case p.MediaType == mediaText:
		if !utf8.Valid(p.Data) {
			return sdk.ContentBlockParamUnion{}, fmt.Errorf("the plain text part %q is not UTF-8", p.Name)
		}
		doc.Source = sdk.DocumentBlockParamSourceUnion{OfText: &sdk.PlainTextSourceParam{Data: string(p.Data)}}
	case len(p.Data) > 0:
		doc.Source = sdk.DocumentBlockParamSourceUnion{OfBase64: &sdk.Base64PDFSourceParam{Data: data}}
	default:
		doc.Source = sdk.DocumentBlockParamSourceUnion{OfURL: &sdk.URLPDFSourceParam{URL: p.URL}}
	}
	if p.Name != "" {
		doc.Title = param.NewOpt(p.Name)
	}
	return sdk.ContentBlockParamUnion{OfDocument: doc}, nil
}
