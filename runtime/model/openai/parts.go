package openai

import (
	"encoding/base64"
	"fmt"
	"math"

	oai "github.com/openai/openai-go/v3"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/spec"
)

// The largest parts OpenAI takes: 20 MiB an image, 32 MiB a PDF (its documented
// limits for images and for file inputs).
const (
	MaxImageBytes = 20 << 20
	MaxPDFBytes   = 32 << 20
)

// imageTypes are the image media types OpenAI's vision models read.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

var _ model.PartTaker = (*Model)(nil)

// TakesPart says whether this model can be sent p: an image (png, jpeg, gif,
// webp; at most 20 MiB) as bytes or a URL, or a PDF (at most 32 MiB) as bytes,
// or also by URL on the Responses API — chat completions take a file only as
// data.
func (m *Model) TakesPart(p model.Part) error {
	size := p.Size
	if n := int64(len(p.Data)); n > size {
		size = n
	}
	if len(p.Data) == 0 && p.URL == "" && p.Ref == "" {
		return fmt.Errorf("part %s has neither data nor a URL", partName(p))
	}
	switch p.Kind {
	case model.PartImage:
		if !imageTypes[p.MediaType] {
			return fmt.Errorf("image %s is %s; OpenAI takes png, jpeg, gif or webp images", partName(p), orUnknown(p.MediaType))
		}
		if size > MaxImageBytes {
			return model.PartTooLarge("image %s is %.1f MiB; OpenAI takes images of at most %d MiB", partName(p), mib(size), MaxImageBytes>>20)
		}
	case model.PartFile:
		if p.MediaType != "application/pdf" {
			return fmt.Errorf("file %s is %s; OpenAI takes PDF files only", partName(p), orUnknown(p.MediaType))
		}
		if size > MaxPDFBytes {
			return model.PartTooLarge("file %s is %.1f MiB; OpenAI takes PDFs of at most %d MiB", partName(p), mib(size), MaxPDFBytes>>20)
		}
		if len(p.Data) == 0 && p.Ref == "" && m.api != spec.APIResponses {
			return fmt.Errorf("file %s comes by URL; chat completions take files only as data (send its bytes, or set model.api: responses)", partName(p))
		}
	default:
		return fmt.Errorf("part %s is of kind %q; OpenAI takes images and PDF files", partName(p), orUnknown(string(p.Kind)))
	}
	return nil
}

// checkParts refuses a request with a part this model cannot take, or one whose
// bytes were not loaded from the blob store, before anything is sent.
func (m *Model) checkParts(msgs []model.Message) error {
	for i, msg := range msgs {
		for _, p := range msg.Parts {
			err := m.TakesPart(p)
			if err == nil && len(p.Data) == 0 && p.URL == "" {
				err = fmt.Errorf("part %s is only a reference (%s): its bytes were not loaded", partName(p), p.Ref)
			}
			if err == nil && msg.Role != model.RoleUser {
				err = fmt.Errorf("part %s is on a message of role %s; only user messages carry parts", partName(p), msg.Role)
			}
			if err != nil {
				return &model.Error{Err: fmt.Errorf("message %d: %w", i, err), Refused: true}
			}
		}
	}
	return nil
}

func partName(p model.Part) string {
	if p.Name != "" {
		return fmt.Sprintf("%q", p.Name)
	}
	if p.URL != "" {
		return clip(p.URL)
	}
	return "(unnamed)"
}

func orUnknown(s string) string {
	if s == "" {
		return "of no stated type"
	}
	return s
}

// mib is n bytes in MiB, rounded up so that a size just past a limit never
// reads as the limit.
func mib(n int64) float64 { return math.Ceil(float64(n)*10/(1<<20)) / 10 }

// dataURL is p's bytes as a data: URL, the form both APIs take inline files in.
func dataURL(p model.Part) string {
	return "data:" + p.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Data)
}

// partURL is where the provider reads p: its URL, or its bytes as a data: URL.
func partURL(p model.Part) string {
	if len(p.Data) == 0 {
		return p.URL
	}
	return dataURL(p)
}

// userMessage is a user message for chat completions: plain text, or, when it
// carries parts, a content array of its text, image_url and file parts.
func userMessage(msg model.Message) oai.ChatCompletionMessageParamUnion {
	if len(msg.Parts) == 0 {
		return oai.UserMessage(msg.Content)
	}
	content := make([]oai.ChatCompletionContentPartUnionParam, 0, len(msg.Parts)+1)
	if msg.Content != "" {
		content = append(content, oai.TextContentPart(msg.Content))
	}
	for _, p := range msg.Parts {
		switch p.Kind {
		case model.PartImage:
			content = append(content, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: partURL(p)}))
		case model.PartFile: // checkParts let through only files with data
			f := oai.ChatCompletionContentPartFileFileParam{FileData: oai.String(dataURL(p))}
			if p.Name != "" {
				f.Filename = oai.String(p.Name)
			}
			content = append(content, oai.FileContentPart(f))
		}
	}
	return oai.UserMessage(content)
}
