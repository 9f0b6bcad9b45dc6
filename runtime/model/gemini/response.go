package gemini

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/agentrun/agentrun/runtime/model"
)

// madeIDPrefix starts the ids made up for function calls that came without one
// (the Gemini API often sends none): the runtime pairs results by id, and an id
// made here is never sent back.
const madeIDPrefix = "gemini_call_"

// accumulator assembles candidate 0 of a response from its chunks: one for
// generateContent, many for streamGenerateContent, where text comes in pieces,
// each function call whole, and the finish reason and the final usage in the
// last chunk.
type accumulator struct {
	chunks   int
	model    string
	content  strings.Builder
	thoughts strings.Builder
	texts    []*block // the text parts, consecutive pieces merged
	signed   bool     // a text part carried a thought signature, or was a thought
	calls    []model.ToolCall
	finish   genai.FinishReason
	blocked  genai.BlockedReason
	usage    *genai.GenerateContentResponseUsageMetadata
}

func (a *accumulator) add(r *genai.GenerateContentResponse, onDelta func(string)) {
	if r == nil {
		return
	}
	a.chunks++
	if r.ModelVersion != "" {
		a.model = r.ModelVersion
	}
	if r.UsageMetadata != nil { // each chunk carries the counts so far
		a.usage = r.UsageMetadata
	}
	if f := r.PromptFeedback; f != nil && f.BlockReason != "" {
		a.blocked = f.BlockReason
	}
	var cand *genai.Candidate
	for _, c := range r.Candidates {
		if c != nil && c.Index == 0 {
			cand = c
			break
		}
	}
	if cand == nil {
		return
	}
	if cand.Content != nil {
		for _, p := range cand.Content.Parts {
			a.addPart(p, onDelta)
		}
	}
	if cand.FinishReason != "" && cand.FinishReason != genai.FinishReasonUnspecified {
		a.finish = cand.FinishReason
	}
}

func (a *accumulator) addPart(p *genai.Part, onDelta func(string)) {
	if p == nil {
		return
	}
	var sig string
	if len(p.ThoughtSignature) > 0 {
		sig = base64.StdEncoding.EncodeToString(p.ThoughtSignature)
	}
	if fc := p.FunctionCall; fc != nil {
		a.addCall(fc, sig)
		return
	}
	if p.Text == "" && sig == "" {
		return // code execution, media and other parts this runtime does not use
	}
	if p.Thought {
		a.thoughts.WriteString(p.Text)
	} else if p.Text != "" {
		a.content.WriteString(p.Text)
		if onDelta != nil {
			onDelta(p.Text)
		}
	}
	a.signed = a.signed || p.Thought || sig != ""
	// A stream splits one part into pieces, its signature (if any) on the last
	// piece, which may have no text: pieces join until a signed one ends a part.
	if n := len(a.texts); n > 0 && a.texts[n-1].Thought == p.Thought && a.texts[n-1].ThoughtSignature == "" {
		b := a.texts[n-1]
		b.Text += p.Text
		b.ThoughtSignature = sig
		return
	}
	a.texts = append(a.texts, &block{Text: p.Text, Thought: p.Thought, ThoughtSignature: sig})
}

func (a *accumulator) addCall(fc *genai.FunctionCall, sig string) {
	args := "{}"
	if len(fc.Args) > 0 {
		b, err := json.Marshal(fc.Args)
		if err == nil {
			args = string(b)
		}
	}
	tc := model.ToolCall{ID: fc.ID, Name: fc.Name, Arguments: args}
	if tc.ID == "" {
		tc.ID = newCallID()
	}
	if sig != "" {
		raw, _ := json.Marshal(sig)
		tc.Extra = map[string]json.RawMessage{sigKey: raw}
	}
	a.calls = append(a.calls, tc)
}

// newCallID is a random call id: 96 bits make a repeat within one conversation
// practically impossible.
func newCallID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return madeIDPrefix + hex.EncodeToString(b[:])
}

func (a *accumulator) response() (*model.Response, error) {
	out := &model.Response{Model: a.model, Usage: usage(a.usage)}
	if a.blocked != "" && a.finish == "" {
		// A blocked prompt has no candidates: no text, a content filter stop.
		out.Message = model.Message{Role: model.RoleAssistant}
		out.FinishReason = model.FinishContentFilter
		return out, nil
	}
	if a.finish == "" {
		if a.chunks == 0 {
			return nil, &model.Error{Err: errors.New("the stream ended before any data came")}
		}
		if a.content.Len() == 0 && len(a.calls) == 0 {
			return nil, &model.Error{Err: errNoCandidates}
		}
		return nil, &model.Error{Err: errors.New("the response ended before it was complete (no finishReason)")}
	}
	msg := model.Message{Role: model.RoleAssistant, Content: a.content.String(), ToolCalls: a.calls}
	if a.signed {
		r := &model.Reasoning{Field: reasoningField, Text: a.thoughts.String(), Provider: model.ProviderGemini}
		for _, b := range a.texts {
			raw, _ := json.Marshal(b)
			r.Blocks = append(r.Blocks, raw)
		}
		msg.Reasoning = r
	}
	out.Message = msg
	out.FinishReason = finishReason(a.finish, len(a.calls) > 0)
	if out.FinishReason == model.FinishLength && len(a.calls) > 0 {
		// The API does not say whether a call written as the limit hit is whole:
		// running a tool on half its arguments is worse than failing the turn.
		return nil, &model.Error{Refused: true, Usage: out.Usage,
			Err: fmt.Errorf("the response was cut off at max_tokens (MAX_TOKENS) with %d tool call(s) whose arguments may be incomplete", len(a.calls))}
	}
	return out, nil
}

// finishReason maps Gemini's finish reasons onto the ones the runtime acts on;
// others (MALFORMED_FUNCTION_CALL, LANGUAGE, OTHER, …) are recorded as they came,
// in lower case.
func finishReason(f genai.FinishReason, calls bool) model.FinishReason {
	switch f {
	case genai.FinishReasonStop:
		if calls {
			return model.FinishToolCalls
		}
		return model.FinishStop
	case genai.FinishReasonMaxTokens:
		return model.FinishLength
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonBlocklist,
		genai.FinishReasonProhibitedContent, genai.FinishReasonSPII, genai.FinishReasonImageSafety,
		genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		return model.FinishContentFilter
	}
	return model.FinishReason(strings.ToLower(string(f)))
}

// usage reads the token counts: the prompt with the tool-use prompt (the
// results of built-in tools), the completion with the thinking, and the cached
// part of the prompt.
func usage(u *genai.GenerateContentResponseUsageMetadata) model.Usage {
	if u == nil {
		return model.Usage{}
	}
	out := model.Usage{
		PromptTokens:       int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount),
		CompletionTokens:   int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
		TotalTokens:        int64(u.TotalTokenCount),
		CachedPromptTokens: int64(u.CachedContentTokenCount),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}
