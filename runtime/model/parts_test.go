package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentrun/agentrun/runtime/model"
)

type plain struct{}

func (plain) Complete(context.Context, *model.Request) (*model.Response, error) { return nil, nil }

type images struct{ plain }

func (images) TakesPart(p model.Part) error {
	if p.Kind != model.PartImage {
		return errors.New("images only")
	}
	return nil
}

type wrapper struct{ next model.Model }

func (w wrapper) Complete(ctx context.Context, r *model.Request) (*model.Response, error) {
	return w.next.Complete(ctx, r)
}
func (w wrapper) Unwrap() model.Model { return w.next }

func TestTakesPartThroughWrappers(t *testing.T) {
	img := model.Part{Kind: model.PartImage, MediaType: "image/png"}
	doc := model.Part{Kind: model.PartFile, MediaType: "application/pdf"}
	for _, tc := range []struct {
		name string
		m    model.Model
		p    model.Part
		want string
	}{
		{"a taker", images{}, img, ""},
		{"a taker refusing", images{}, doc, "images only"},
		{"no taker", plain{}, img, model.ErrTakesNoParts.Error()},
		{"wrapped twice", wrapper{wrapper{images{}}}, img, ""},
		{"wrapped refusing", wrapper{images{}}, doc, "images only"},
		{"wrapping no taker", wrapper{plain{}}, img, model.ErrTakesNoParts.Error()},
		{"nil", nil, img, model.ErrTakesNoParts.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := model.TakesPart(tc.m, tc.p)
			if got := ""; err != nil {
				got = err.Error()
				if got != tc.want {
					t.Fatalf("TakesPart = %q, want %q", got, tc.want)
				}
			} else if tc.want != "" {
				t.Fatalf("TakesPart = nil, want %q", tc.want)
			}
		})
	}
}

func TestNotesReplaceParts(t *testing.T) {
	msgs := []model.Message{
		{Role: model.RoleUser, Content: "look", Parts: []model.Part{
			{Kind: model.PartImage, MediaType: "image/png", Name: "photo.png", Size: 120 << 10, Ref: "part/x"},
			{Kind: model.PartFile, MediaType: "application/pdf", Name: "bill.pdf", Size: 3<<20 + 400<<10},
		}},
		{Role: model.RoleAssistant, Content: "seen"},
		{Role: model.RoleUser, Parts: []model.Part{{Kind: model.PartImage, URL: "https://example.com/a"}}},
	}
	got := model.WithNotes(msgs)
	want := []string{
		"look\n[earlier attachment: photo.png, image/png, 120 KB]\n[earlier attachment: bill.pdf, application/pdf, 3.4 MB]",
		"seen",
		"[earlier attachment: image, https://example.com/a]",
	}
	for i, m := range got {
		if m.Content != want[i] || len(m.Parts) != 0 {
			t.Errorf("message %d = %q with %d parts, want %q and none", i, m.Content, len(m.Parts), want[i])
		}
	}
	if len(msgs[0].Parts) != 2 || msgs[0].Content != "look" {
		t.Error("WithNotes changed its argument")
	}
}
