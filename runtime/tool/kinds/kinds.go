package kinds

import (
	"strconv"

	"github.com/agentrun/agentrun/runtime/tool"
)

// Register adds the command and http kinds to a registry.
func Register(r tool.Registry) {
	r["command"] = NewCommand
	r["http"] = NewHTTP
}

// limitedBuffer keeps the first max bytes written to it and counts the rest, so a
// chatty tool cannot exhaust memory.
type limitedBuffer struct {
	buf     []byte
	max     int
	dropped int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		b.buf = append(b.buf, p[:room]...)
	}
	b.dropped += len(p) - max(room, 0)
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	if b.dropped == 0 {
		return string(b.buf)
	}
	return string(b.buf) + "\n[output cut: " + strconv.Itoa(b.dropped) + " more bytes not read]"
}
