package offline

import "github.com/agentrun/agentrun/runtime/model"

// The offline models take every part: they read none of its bytes, and a run
// tested offline must not be refused for a part the real provider would take.
var (
	_ model.PartTaker = Test{}
	_ model.PartTaker = (*Script)(nil)
	_ model.PartTaker = (*recording)(nil)
)

func (Test) TakesPart(model.Part) error    { return nil }
func (*Script) TakesPart(model.Part) error { return nil }

// TakesPart: a recording takes what the model it records takes.
func (w *recording) TakesPart(p model.Part) error { return model.TakesPart(w.m, p) }
