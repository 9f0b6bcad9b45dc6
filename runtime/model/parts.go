package model

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
)

// ErrTakesNoParts is the refusal of a model that does not implement PartTaker.
var ErrTakesNoParts = errors.New("this model takes no attachments")

// ErrPartTooLarge is in the refusal of a part a model would take but for its
// size (see PartTooLarge): a server answers it 413, where another refusal is 415.
var ErrPartTooLarge = errors.New("the part is larger than the model takes")

// PartTooLarge is a PartTaker's refusal of a part for its size.
func PartTooLarge(format string, args ...any) error {
	return partTooLarge{fmt.Errorf(format, args...)}
}

type partTooLarge struct{ error }

func (e partTooLarge) Is(target error) bool { return target == ErrPartTooLarge }
func (e partTooLarge) Unwrap() error        { return e.error }

// TakesPart asks m whether it takes p: m's own TakesPart, or that of the model a
// wrapper wraps (a wrapper's Unwrap() Model: telemetry, a recorder, a fallback
// chain), or ErrTakesNoParts when no model on the way answers.
func TakesPart(m Model, p Part) error {
	for m != nil {
		switch w := m.(type) {
		case PartTaker:
			return w.TakesPart(p)
		case interface{ Unwrap() Model }:
			m = w.Unwrap()
		default:
			return ErrTakesNoParts
		}
	}
	return ErrTakesNoParts
}

// Note is what a later turn sends in place of a part of an earlier one: a line
// that says it was there, not its bytes, so a conversation's history does not
// resend every file with every question (the bytes stay in the blob store, by Ref).
func (p Part) Note() string {
	fields := []string{cmp.Or(p.Name, string(p.Kind))}
	if p.MediaType != "" {
		fields = append(fields, p.MediaType)
	}
	switch {
	case p.URL != "":
		fields = append(fields, clipURL(p.URL))
	case p.Size > 0:
		fields = append(fields, ByteSize(p.Size))
	}
	return "[earlier attachment: " + strings.Join(fields, ", ") + "]"
}

func clipURL(s string) string {
	if len(s) > 200 {
		return s[:197] + "..."
	}
	return s
}

// WithNotes is msgs with every part replaced by its Note at the end of its
// message's text: what an earlier turn's parts become in a later request.
func WithNotes(msgs []Message) []Message {
	var out []Message
	for i, m := range msgs {
		if len(m.Parts) == 0 {
			continue
		}
		if out == nil {
			out = append([]Message(nil), msgs...)
		}
		for _, p := range m.Parts {
			if m.Content != "" {
				m.Content += "\n"
			}
			m.Content += p.Note()
		}
		m.Parts = nil
		out[i] = m
	}
	if out == nil {
		return msgs
	}
	return out
}

// ByteSize shows a byte count for people: 812 bytes, 120 KB, 3.4 MB.
func ByteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", (n+512)>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
