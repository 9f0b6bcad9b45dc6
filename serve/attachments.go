package serve

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/model/attach"
)

// DefaultMaxAttachmentBytes is limits.max_attachment_bytes a config leaves out.
const DefaultMaxAttachmentBytes = 10 << 20

// attachLimits are the bounds of a request's attachments: max_attachment_bytes
// for each and for all of them, and attach's count.
func (l Limits) attachLimits() attach.Limits {
	return attach.Limits{MaxPart: l.MaxAttachmentBytes, MaxTotal: l.MaxAttachmentBytes, MaxCount: attach.DefaultMaxCount}
}

// attachmentBodyBytes caps the body of an endpoint that takes attachments:
// max_body_bytes for the rest of it, and room for max_attachment_bytes of files
// in base64, which JSON carries them as.
func (l Limits) attachmentBodyBytes() int64 {
	return l.MaxBodyBytes + int64(base64.StdEncoding.EncodedLen(int(l.MaxAttachmentBytes)))
}

// attachmentFailure is how an attachment's refusal is told: 413 for its size,
// 415 for a type the server or the agent's model does not take, 400 for one that
// is malformed or not what it says it is.
func attachmentFailure(err error) (status int, code string) {
	var pe *runtime.PartError
	switch {
	case errors.As(err, &pe) && errors.Is(err, model.ErrPartTooLarge):
		return http.StatusRequestEntityTooLarge, "attachment_too_large"
	case errors.As(err, &pe):
		return http.StatusUnsupportedMediaType, "unsupported_attachment"
	}
	switch attach.ProblemOf(err) {
	case attach.TooLarge:
		return http.StatusRequestEntityTooLarge, "attachment_too_large"
	case attach.Unsupported:
		return http.StatusUnsupportedMediaType, "unsupported_attachment"
	}
	return http.StatusBadRequest, "invalid_attachment"
}

// runAttachment is a file of the run API's attachments: its bytes in base64, or
// a URL (http, https, or a data: URL) the model's provider reads.
type runAttachment struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// runParts reads the run API's attachments.
func runParts(list []runAttachment, lim attach.Limits) ([]model.Part, error) {
	if lim.MaxCount > 0 && len(list) > lim.MaxCount {
		return nil, lim.Check(make([]model.Part, len(list))) // refused before any is decoded
	}
	parts := make([]model.Part, 0, len(list))
	for i, a := range list {
		shown := a.Name
		if shown == "" {
			shown = fmt.Sprintf("attachments[%d]", i)
		}
		var p model.Part
		var err error
		switch {
		case (a.Data == "") == (a.URL == ""):
			err = refuseFile(attach.Invalid, "give either data (base64) or url, not both or neither")
		case a.Data != "":
			p, err = attach.FromBase64(a.Name, a.MediaType, a.Data, lim)
		case strings.HasPrefix(a.URL, "data:"):
			p, err = attach.FromDataURL(a.URL, a.Name, lim)
		default:
			p, err = attach.FromURL(a.URL, a.MediaType, "")
		}
		if err != nil {
			return nil, shownAs(err, a.Name, shown)
		}
		parts = append(parts, p)
	}
	return parts, lim.Check(parts)
}

// chatPart is an OpenAI content part: of chat completions (text, image_url,
// file) or of the Responses API (input_text, input_image, input_file), which
// clients also send to chat completions.
type chatPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"` // {"url": …} in chat completions, a string in Responses
	File     *chatFile       `json:"file"`
	chatFile                 // input_file's fields are the part's own
}

type chatFile struct {
	FileData string `json:"file_data"`
	FileURL  string `json:"file_url"`
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
}

// content is a message's text and its files: a string, or the parts of a
// content array. An error is an *attach.Error for a file, else a malformed
// message.
func (m chatMessage) content(lim attach.Limits) (string, []model.Part, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil, nil
	}
	var parts []chatPart
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", nil, fmt.Errorf("content must be a string or an array of parts")
	}
	var b strings.Builder
	var files []model.Part
	for i, p := range parts {
		switch p.Type {
		case "text", "input_text":
			b.WriteString(p.Text)
			continue
		}
		f, err := p.part(lim)
		if err != nil {
			return "", nil, shownAs(err, p.filename(), fmt.Sprintf("content[%d]", i))
		}
		files = append(files, f)
	}
	return b.String(), files, nil
}

// filename is the name a file part gives its file.
func (p chatPart) filename() string {
	if p.File != nil {
		return p.File.Filename
	}
	return p.Filename
}

// part is a content part's file.
func (p chatPart) part(lim attach.Limits) (model.Part, error) {
	switch p.Type {
	case "image_url", "input_image":
		var u string
		var obj struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(p.ImageURL, &u) != nil && json.Unmarshal(p.ImageURL, &obj) == nil {
			u = obj.URL
		}
		if u == "" {
			return model.Part{}, refuseFile(attach.Invalid, "an %s part needs image_url with a url (https or a data: URL); file ids are not taken", p.Type)
		}
		if strings.HasPrefix(u, "data:") {
			part, err := attach.FromDataURL(u, "", lim)
			if err == nil && part.Kind != model.PartImage {
				return model.Part{}, refuseFile(attach.Invalid, "an %s part holds %s, not an image", p.Type, part.MediaType)
			}
			return part, err
		}
		return attach.FromURL(u, "", model.PartImage)
	case "file", "input_file":
		f := p.chatFile
		if p.File != nil {
			f = *p.File
		}
		return f.part(lim)
	}
	return model.Part{}, refuseFile(attach.Unsupported, "content parts of type %q are not taken (text, image_url, file and input_file are)", p.Type)
}

// part is a file part's file: its data (base64 or a data: URL) or its URL.
func (f chatFile) part(lim attach.Limits) (model.Part, error) {
	name := f.Filename
	switch {
	case f.FileData != "" && strings.HasPrefix(f.FileData, "data:"):
		return attach.FromDataURL(f.FileData, name, lim)
	case f.FileData != "":
		return attach.FromBase64(name, "", f.FileData, lim)
	case f.FileURL != "":
		return attach.FromURL(f.FileURL, "", "")
	case f.FileID != "":
		return model.Part{}, refuseFile(attach.Invalid, "file ids are not taken: this server keeps no uploaded files; send file_data")
	}
	return model.Part{}, refuseFile(attach.Invalid, "a file part needs file_data (base64 or a data: URL) or file_url")
}

// refuseFile is a part's refusal; shownAs names the part.
func refuseFile(p attach.Problem, format string, args ...any) error {
	return &attach.Error{Problem: p, Msg: fmt.Sprintf(format, args...)}
}

// shownAs names the file of an attachment error as shown when its sender gave it
// no name of its own: by where it is in the request.
func shownAs(err error, name, shown string) error {
	var e *attach.Error
	if errors.As(err, &e) && (name == "" || e.Name == "") {
		e.Name = shown
	}
	return err
}

// withoutData is parts as a history keeps them: what they were, not their bytes.
func withoutData(parts []model.Part) []model.Part {
	for i := range parts {
		if parts[i].Data != nil {
			parts[i].Size, parts[i].Data = int64(len(parts[i].Data)), nil
		}
	}
	return parts
}
