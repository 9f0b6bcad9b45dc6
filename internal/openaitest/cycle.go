package openaitest

import (
	"sync"
	"sync/atomic"
)

// Cycle answers requests with replies in turn — the first with replies[0], the
// next with replies[1], and round again — so a case tried several times passes
// some tries and fails others. It is safe for concurrent requests: which request
// gets which reply depends on their order, how many get each does not.
func Cycle(replies ...Reply) func(Request) Reply {
	if len(replies) == 0 {
		panic("openaitest.Cycle: no replies")
	}
	var n atomic.Int64
	return func(Request) Reply {
		return replies[(n.Add(1)-1)%int64(len(replies))]
	}
}

// CycleBy is Cycle counted apart for each key of a request (LastUser, say, for
// the question): each key's requests get replies in turn, whatever other keys'
// requests come between them, as when cases run concurrently or an agent's calls
// and a grader's share one server.
func CycleBy(key func(Request) string, replies ...Reply) func(Request) Reply {
	if len(replies) == 0 {
		panic("openaitest.CycleBy: no replies")
	}
	var mu sync.Mutex
	counts := map[string]int{}
	return func(r Request) Reply {
		k := key(r)
		mu.Lock()
		i := counts[k]
		counts[k]++
		mu.Unlock()
		return replies[i%len(replies)]
	}
}

// LastUser is the text of the request's last user message ("" when none): the
// question, for an agent's call.
func LastUser(r Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i]["role"] == "user" {
			return Text(r.Messages[i])
		}
	}
	return ""
}

// Text is a message's text: its content as a string, or its text parts joined.
func Text(m map[string]any) string {
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var s string
		for _, p := range c {
			if part, ok := p.(map[string]any); ok {
				if t, ok := part["text"].(string); ok {
					s += t
				}
			}
		}
		return s
	}
	return ""
}
