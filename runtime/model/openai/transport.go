package openai

// MaxResponseBytes caps the body of one response, streamed or not: whatever a
// server sends, a model call holds at most this much. A real answer, even one with
// a thousand tool calls, is far smaller.
const MaxResponseBytes = 16 << 20
