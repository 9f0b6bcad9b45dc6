package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/tool"
)

// Unwrap lets model.TakesPart ask the recorded model which parts it takes.
func (r *recorder) Unwrap() model.Model { return r.model }

// pngBytes is a 1×1 PNG's header: enough for content sniffing.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 100)...)

const partsSpec = `
version: 1
name: t
instructions: "You look at pictures."
tools:
  - name: lookup
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "https://example.com/x"}
`

// tools are partsSpec's tools.
func tools() map[string]*funcTool { return map[string]*funcTool{"lookup": echo()} }

func photo() model.Part {
	return model.Part{Kind: model.PartImage, MediaType: "image/png", Name: "photo.png", Data: pngBytes, Size: int64(len(pngBytes))}
}

// userParts are the parts of a request's run message (the last user message that
// is not judge feedback: the first of this run's exchange).
func userParts(req model.Request, input string) []model.Part {
	for _, m := range req.Messages {
		if m.Role == model.RoleUser && m.Content == input {
			return m.Parts
		}
	}
	return nil
}

func TestPartsGoWithEveryModelCallOfTheRun(t *testing.T) {
	m := script(calls(tc("lookup", map[string]any{"id": "A1"})), say("It is a cat."))
	a := compile(t, partsSpec, m, tools())
	res, err := a.Run(context.Background(), runtime.Request{Input: "what is this?", Parts: []model.Part{photo()},
		User: tool.User{ID: "u-42"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != runtime.StopCompleted || len(m.requests) != 2 {
		t.Fatalf("stop %s after %d calls, want completed after 2", res.Stop, len(m.requests))
	}
	for i, req := range m.requests {
		ps := userParts(req, "what is this?")
		if len(ps) != 1 || ps[0].Name != "photo.png" || !bytes.Equal(ps[0].Data, pngBytes) {
			t.Errorf("call %d: the user's message carries %+v, want photo.png with its bytes", i+1, ps)
		}
	}
	if ps := res.Messages[0].Parts; len(ps) != 1 || ps[0].Data != nil || ps[0].Size != int64(len(pngBytes)) {
		t.Errorf("the result's user message has parts %+v, want photo.png by size, without bytes", ps)
	}
}

func TestHistoryKeepsAPartByRefAndLaterTurnsANote(t *testing.T) {
	st := memory.New()
	m := script(say("A cat."), say("Grey."))
	a := compileWith(t, partsSpec, nil, runtime.Options{Model: m, Store: st}, tools())
	user := tool.User{ID: "u-42"}
	ctx := context.Background()
	res, err := a.Run(ctx, runtime.Request{Input: "what is this?", Parts: []model.Part{photo()}, User: user, Conversation: "c-1"})
	if err != nil || res.MemoryError != "" {
		t.Fatalf("first run: %v %s", err, res.MemoryError)
	}
	conv, err := st.Conversation(ctx, "c-1", 10)
	if err != nil {
		t.Fatal(err)
	}
	stored := conv.Messages[0].Parts
	if len(stored) != 1 || stored[0].Data != nil || stored[0].Ref == "" || stored[0].Size != int64(len(pngBytes)) {
		t.Fatalf("stored parts %+v, want one with a Ref and a Size and no bytes", stored)
	}
	blob, err := st.Blob(ctx, stored[0].Ref)
	if err != nil || !bytes.Equal(blob, pngBytes) {
		t.Fatalf("blob %q: %v, want the photo's bytes", stored[0].Ref, err)
	}
	if _, err := a.Run(ctx, runtime.Request{Input: "what colour?", User: user, Conversation: "c-1"}); err != nil {
		t.Fatal(err)
	}
	second := m.requests[1]
	for _, msg := range second.Messages {
		if len(msg.Parts) > 0 {
			t.Errorf("the second turn sends parts again: %+v", msg.Parts)
		}
	}
	if earlier := second.Messages[1]; earlier.Role != model.RoleUser ||
		earlier.Content != "what is this?\n[earlier attachment: photo.png, image/png, 116 bytes]" {
		t.Errorf("the earlier turn is sent as %q, want its text and a note of the part", earlier.Content)
	}
}

// bare is a model without PartTaker: it takes no parts.
type bare struct{ calls int }

func (b *bare) Complete(context.Context, *model.Request) (*model.Response, error) {
	b.calls++
	return &model.Response{Message: model.Message{Content: "answer"}}, nil
}

// picky takes images only.
type picky struct{ bare }

func (*picky) TakesPart(p model.Part) error {
	if p.Kind != model.PartImage {
		return errors.New("it takes images only")
	}
	return nil
}

func TestAPartTheModelCannotTakeRefusesTheRunBeforeAnyCall(t *testing.T) {
	pdf := model.Part{Kind: model.PartFile, MediaType: "application/pdf", Name: "bill.pdf", Data: []byte("%PDF-1.4")}
	for _, tc := range []struct {
		name  string
		model interface {
			model.Model
			count() int
		}
		parts []model.Part
		want  string
	}{
		{"no PartTaker", &bare{}, []model.Part{photo()}, "attachment photo.png (image/png): the agent's model cannot take it: this model takes no attachments"},
		{"refused type", &picky{}, []model.Part{photo(), pdf}, "attachment bill.pdf (application/pdf): the agent's model cannot take it: it takes images only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := compile(t, partsSpec, tc.model, tools())
			res, err := a.Run(context.Background(), runtime.Request{Input: "look", Parts: tc.parts})
			var pe *runtime.PartError
			if !errors.As(err, &pe) || err.Error() != tc.want {
				t.Fatalf("Run = %v, %v; want the PartError %q", res, err, tc.want)
			}
			if pe.Part.Data != nil || tc.model.count() != 0 {
				t.Errorf("the error holds the part's bytes, or the model was called (%d)", tc.model.count())
			}
		})
	}
	// The same model runs a request without parts.
	b := &bare{}
	if res, err := compile(t, partsSpec, b, tools()).Run(context.Background(), runtime.Request{Input: "hi"}); err != nil || res.Stop != runtime.StopCompleted {
		t.Fatalf("a run without parts: %v %v", res, err)
	}
}

func (b *bare) count() int { return b.calls }

func TestEarlierPartsOfACallersHistoryAreNotes(t *testing.T) {
	m := script(say("ok"))
	a := compile(t, partsSpec, m, tools())
	history := []model.Message{
		{Role: model.RoleUser, Content: "see", Parts: []model.Part{{Kind: model.PartImage, URL: "https://example.com/a.png", MediaType: "image/png", Name: "a.png"}}},
		{Role: model.RoleAssistant, Content: "seen"},
	}
	if _, err := a.Run(context.Background(), runtime.Request{Input: "and?", History: history}); err != nil {
		t.Fatal(err)
	}
	got := m.requests[0].Messages[1]
	if len(got.Parts) != 0 || !strings.HasSuffix(got.Content, "[earlier attachment: a.png, image/png, https://example.com/a.png]") {
		t.Errorf("history message sent as %+v", got)
	}
	if len(history[0].Parts) != 1 {
		t.Error("the caller's history was changed")
	}
}
