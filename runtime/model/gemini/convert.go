package gemini

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/agentrun/agentrun/runtime/model"
)

// sigKey is the key of a thought signature in model.ToolCall.Extra: the wire
// name, its value the JSON string exactly as it came.
const sigKey = "thoughtSignature"

// reasoningField is model.Reasoning.Field for Gemini's thought parts.
const reasoningField = "thought"

// request builds the contents and the config for req.
func (m *Model) request(req *model.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	system, contents, err := convertMessages(req.Messages)
	if err != nil {
		return nil, nil, err
	}
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: system,
		Temperature:       m.temp,
		ThinkingConfig:    m.thinking,
		// The SDK would otherwise send the request again on its own when a
		// response carries a continuation token; one call is one request here.
		AutomaticContinuation: genai.Ptr(false),
	}
	if n := cmp.Or(req.MaxTokens, m.maxTokens); n > 0 {
		cfg.MaxOutputTokens = int32(min(n, 1<<30))
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(t.Parameters) > 0 {
				// parametersJsonSchema takes JSON Schema as it is; the older
				// parameters field takes only an OpenAPI subset.
				d.ParametersJsonSchema = t.Parameters
			}
			decls = append(decls, d)
		}
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	// Structured output: responseJsonSchema takes JSON Schema as it is, and
	// works together with function calling on the models that allow both.
	switch f := req.JSONSchema; {
	case f != nil && req.JSONObject:
		cfg.ResponseMIMEType = "application/json"
	case f != nil:
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = f.Schema
	case req.JSONObject:
		cfg.ResponseMIMEType = "application/json"
	}
	return contents, cfg, nil
}

// convertMessages turns runtime messages into Gemini contents: system messages
// into the system instruction, assistant messages into model turns, and the tool
// results that follow a model turn into one user turn of functionResponse parts,
// as the API requires (as many responses as the turn made calls).
func convertMessages(msgs []model.Message) (*genai.Content, []*genai.Content, error) {
	var system *genai.Content
	var out []*genai.Content
	calls := map[string]string{} // tool call id → tool name, for the responses
	inline := 0
	for i, msg := range msgs {
		switch msg.Role {
		case model.RoleSystem:
			if msg.Content == "" {
				continue
			}
			if system == nil {
				system = &genai.Content{Role: genai.RoleUser}
			}
			system.Parts = append(system.Parts, &genai.Part{Text: msg.Content})
		case model.RoleUser:
			if msg.Content == "" && len(msg.Parts) == 0 {
				continue // the API refuses a part without data
			}
			c, n, err := userContent(msg)
			if err != nil {
				return nil, nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			if inline += n; inline > MaxInlineBytes {
				return nil, nil, &model.Error{Refused: true, Err: fmt.Errorf("the files sent inline add up to more than %d MiB, the most one Gemini request takes", MaxInlineBytes>>20)}
			}
			out = append(out, c)
		case model.RoleAssistant:
			c, err := modelContent(msg)
			if err != nil {
				return nil, nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			for _, tc := range msg.ToolCalls {
				calls[tc.ID] = tc.Name
			}
			if len(c.Parts) > 0 { // an empty answer (a blocked one) has nothing to send
				out = append(out, c)
			}
		case model.RoleTool:
			part, err := functionResponse(msg, calls)
			if err != nil {
				return nil, nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			// Consecutive tool results share one user turn.
			if n := len(out); n > 0 && out[n-1].Role == genai.RoleUser && isResponses(out[n-1]) {
				out[n-1].Parts = append(out[n-1].Parts, part)
			} else {
				out = append(out, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{part}})
			}
		default:
			return nil, nil, fmt.Errorf("gemini: message %d has unknown role %q", i, msg.Role)
		}
	}
	return system, out, nil
}

func isResponses(c *genai.Content) bool {
	return len(c.Parts) > 0 && c.Parts[0].FunctionResponse != nil
}

// userContent is a user turn: its text, then its files. n is the bytes sent
// inline.
func userContent(msg model.Message) (c *genai.Content, n int, err error) {
	c = &genai.Content{Role: genai.RoleUser}
	if msg.Content != "" {
		c.Parts = append(c.Parts, &genai.Part{Text: msg.Content})
	}
	for _, p := range msg.Parts {
		if err := takes(p); err != nil {
			return nil, 0, &model.Error{Refused: true, Err: err}
		}
		switch {
		case len(p.Data) > 0:
			c.Parts = append(c.Parts, &genai.Part{InlineData: &genai.Blob{MIMEType: p.MediaType, Data: p.Data}})
			n += len(p.Data)
		case p.URL != "":
			c.Parts = append(c.Parts, &genai.Part{FileData: &genai.FileData{MIMEType: p.MediaType, FileURI: p.URL}})
		default:
			return nil, 0, &model.Error{Refused: true, Err: fmt.Errorf("the %s part %q has neither its bytes nor a URL", p.MediaType, p.Name)}
		}
	}
	return c, n, nil
}

// modelContent is an assistant message as a model turn. Gemini's own parts
// (thought summaries, and text that carried a thought signature) go back exactly
// as they came, from Reasoning.Blocks, in place of the text; every function call
// goes back with the signature it came with. Reasoning from other providers is
// not Gemini's to read and is left out.
func modelContent(msg model.Message) (*genai.Content, error) {
	c := &genai.Content{Role: genai.RoleModel}
	if r := msg.Reasoning; r != nil && r.Provider == model.ProviderGemini && len(r.Blocks) > 0 {
		for i, raw := range r.Blocks {
			p, err := blockPart(raw)
			if err != nil {
				return nil, fmt.Errorf("reasoning block %d: %w", i, err)
			}
			c.Parts = append(c.Parts, p)
		}
	} else if msg.Content != "" {
		c.Parts = append(c.Parts, &genai.Part{Text: msg.Content})
	}
	for _, tc := range msg.ToolCalls {
		p, err := callPart(tc)
		if err != nil {
			return nil, err
		}
		c.Parts = append(c.Parts, p)
	}
	return c, nil
}

// block is a text part of a model turn as stored in Reasoning.Blocks.
type block struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought,omitempty"`
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
}

func blockPart(raw json.RawMessage) (*genai.Part, error) {
	var b block
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("not a Gemini part: %v", err)
	}
	p := &genai.Part{Text: b.Text, Thought: b.Thought}
	if b.ThoughtSignature != "" {
		sig, err := base64.StdEncoding.DecodeString(b.ThoughtSignature)
		if err != nil {
			return nil, fmt.Errorf("its thought signature is not base64: %v", err)
		}
		p.ThoughtSignature = sig
	}
	return p, nil
}

func callPart(tc model.ToolCall) (*genai.Part, error) {
	fc := &genai.FunctionCall{Name: tc.Name}
	if !strings.HasPrefix(tc.ID, madeIDPrefix) {
		fc.ID = tc.ID
	}
	if args := strings.TrimSpace(tc.Arguments); args != "" {
		if err := json.Unmarshal([]byte(args), &fc.Args); err != nil {
			return nil, fmt.Errorf("the arguments of tool call %s (%s) are not a JSON object: %v", tc.ID, tc.Name, err)
		}
	}
	p := &genai.Part{FunctionCall: fc}
	if raw, ok := tc.Extra[sigKey]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("the thought signature of tool call %s is not a JSON string", tc.ID)
		}
		sig, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("the thought signature of tool call %s is not base64: %v", tc.ID, err)
		}
		p.ThoughtSignature = sig
	}
	return p, nil
}

// functionResponse is a tool result as a functionResponse part: named after the
// call it answers, with the call's id when it had one, and the result as the
// response object when it is a JSON object, else as {"result": text}.
func functionResponse(msg model.Message, calls map[string]string) (*genai.Part, error) {
	name, ok := calls[msg.ToolCallID]
	if !ok {
		return nil, fmt.Errorf("the tool result for call %q follows no call with that id", msg.ToolCallID)
	}
	fr := &genai.FunctionResponse{Name: name}
	if !strings.HasPrefix(msg.ToolCallID, madeIDPrefix) {
		fr.ID = msg.ToolCallID
	}
	var obj map[string]any
	if s := strings.TrimSpace(msg.Content); strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &obj) == nil && obj != nil {
		fr.Response = obj
	} else {
		fr.Response = map[string]any{"result": msg.Content}
	}
	return &genai.Part{FunctionResponse: fr}, nil
}

// MaxInlineBytes is the most a request may carry inline: the Gemini API takes
// requests of up to 20 MB; larger files go through the Files API (by URI).
const MaxInlineBytes = 20 << 20

// mediaTypes are the part types Gemini takes, by kind.
var mediaTypes = map[model.PartKind][]string{
	model.PartImage: {"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"},
	model.PartFile:  {"application/pdf", "text/plain"},
}

// TakesPart says whether Gemini takes p: images (PNG, JPEG, WebP, HEIC, HEIF),
// PDF and plain text, inline up to MaxInlineBytes, or by a URI Gemini reads
// itself (gs:// on Vertex AI, a Files API URI); it does not fetch web URLs.
func (m *Model) TakesPart(p model.Part) error { return takes(p) }

func takes(p model.Part) error {
	types, ok := mediaTypes[p.Kind]
	if !ok {
		return fmt.Errorf("gemini takes image and file parts, not %q", p.Kind)
	}
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(p.MediaType, ";", 2)[0]))
	found := false
	for _, t := range types {
		found = found || t == mt
	}
	if !found {
		return fmt.Errorf("gemini does not take %s %s parts: it takes %s", p.Kind, cmp.Or(p.MediaType, "untyped"), strings.Join(types, ", "))
	}
	size := max(p.Size, int64(len(p.Data)))
	switch {
	case p.URL != "" && len(p.Data) == 0:
		if !fileURI(p.URL) {
			return fmt.Errorf("gemini does not fetch %q: send the file itself, or a gs:// or Gemini Files API URI", clip(p.URL))
		}
	case size > MaxInlineBytes:
		return model.PartTooLarge("the %s part %q is %d MiB; gemini takes at most %d MiB inline (upload larger files to the Files API and send its URI)", p.MediaType, p.Name, size>>20, MaxInlineBytes>>20)
	}
	return nil
}

// fileURI reports whether Gemini reads u itself: a Cloud Storage object or a
// file uploaded to the Gemini Files API.
func fileURI(u string) bool {
	return strings.HasPrefix(u, "gs://") ||
		strings.HasPrefix(u, "https://generativelanguage.googleapis.com/") && strings.Contains(u, "/files/")
}

var errNoCandidates = errors.New("the response has no candidates")
