package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/agentrun/agentrun/runtime/model"
	"github.com/agentrun/agentrun/runtime/store"
)

// PartError is a run refused before its first model call: the agent's model
// cannot take one of the request's parts. It is the caller's error, not a stop of
// the run — no model was asked, so there is no fallback answer to give.
type PartError struct {
	Index int        // of the part in Request.Parts
	Part  model.Part // without its bytes
	Err   error      // the model's reason (model.TakesPart)
}

func (e *PartError) Error() string {
	name := e.Part.Name
	if name == "" {
		name = fmt.Sprintf("#%d", e.Index+1)
	}
	typ := e.Part.MediaType
	if typ == "" {
		typ = string(e.Part.Kind)
	}
	return fmt.Sprintf("attachment %s (%s): the agent's model cannot take it: %v", name, typ, e.Err)
}

func (e *PartError) Unwrap() error { return e.Err }

// CheckParts asks the agent's model about every part, through any wrapper: the
// PartError a Run with these parts would return before anything of the run
// happens. A caller that answers before the run starts (a server about to stream)
// asks first, to refuse the request rather than fail the run.
func (a *Agent) CheckParts(parts []model.Part) error {
	for i, p := range parts {
		if err := model.TakesPart(a.model, p); err != nil {
			p.Data = nil
			return &PartError{Index: i, Part: p, Err: err}
		}
	}
	return nil
}

// partBlobPrefix keys a part's bytes in the blob store by their SHA-256: the same
// file sent twice is stored once.
const partBlobPrefix = "part/sha256:"

// storeParts puts the bytes of every part of msgs in the blob store and returns
// msgs with each such part holding its Ref and Size instead of its Data: what the
// conversation keeps. A later turn sends a note in place of the part
// (model.WithNotes), never the bytes, so a history stays small however many files
// its turns carried; the bytes stay retrievable by Ref. msgs itself is not changed.
// A store without blobs, or a blob that cannot be written, keeps the part without
// a Ref: the note still says it was there.
func storeParts(ctx context.Context, s store.Store, msgs []model.Message, failed func(error)) []model.Message {
	blobs, _ := s.(store.Blobs)
	return mapParts(msgs, func(p model.Part) model.Part {
		if p.Data == nil {
			return p
		}
		if blobs != nil && p.Ref == "" {
			sum := sha256.Sum256(p.Data)
			key := partBlobPrefix + hex.EncodeToString(sum[:])
			if err := blobs.PutBlob(ctx, key, p.Data, 0); err != nil {
				failed(err)
			} else {
				p.Ref = key
			}
		}
		p.Size = int64(len(p.Data))
		p.Data = nil
		return p
	})
}

// withoutPartData is msgs with no part holding bytes: what a Result shows.
func withoutPartData(msgs []model.Message) []model.Message {
	return mapParts(msgs, func(p model.Part) model.Part {
		if p.Data != nil {
			p.Size = int64(len(p.Data))
			p.Data = nil
		}
		return p
	})
}

// mapParts is msgs with f applied to every part, copying only the messages that
// have parts.
func mapParts(msgs []model.Message, f func(model.Part) model.Part) []model.Message {
	var out []model.Message
	for i, m := range msgs {
		if len(m.Parts) == 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		parts := make([]model.Part, len(m.Parts))
		for j, p := range m.Parts {
			parts[j] = f(p)
		}
		out[i].Parts = parts
	}
	if out == nil {
		return msgs
	}
	return out
}
