// Package openai is the model provider for any OpenAI-compatible chat completions
// server (OpenAI, vLLM, Ollama, llama.cpp, DeepSeek, DashScope, Gemini, …), built on
// github.com/openai/openai-go/v3. It implements model.Model: it turns runtime
// messages and tools into a request, streams when asked, retries transient failures
// and reports the rest as *model.Error.
//
// With model.api: responses the same model speaks OpenAI's Responses API instead
// (responses.go, responses_stream.go): stateless (store: false), with the
// reasoning items of a tool round sent back byte for byte, encrypted, on the next
// request. Both APIs take images and PDFs (parts.go; model.PartTaker says which),
// and ask for strict structured output only where strict mode takes the schema
// (strict.go).
//
// What real servers send that the protocol does not say:
//   - Streamed tool calls are assembled by index, id and name: a new index, a new
//     id or — in a delta with neither — a function name for a call that has one
//     already starts a new call. Calls without an id get a random one.
//   - Reasoning text (reasoning_content, or reasoning) becomes Message.Reasoning,
//     never part of the content, and goes back under the same field; a tool call's
//     non-standard fields (Gemini's extra_content) go back on that call as they came.
//   - Finish reasons are passed on as the server sent them.
//
// Bounds: model.timeout bounds each attempt of a call as a whole — the wait for the
// headers and the whole body, streamed or not — so a server that trickles or never
// ends is cut off, and a streamed answer must finish within it too. The SDK retries
// an attempt that fails before its body (a connection failure, no headers in time,
// 408, 409, 429, 5xx); a body that fails is not retried. No response body may
// exceed MaxResponseBytes (16 MiB), which bounds the memory a call holds whatever
// the server sends.
//
// Embedder (embeddings.go) is the same server's embeddings API as a
// knowledge.Embedder.
//
// It lives outside package runtime so the core has no heavy imports. It imports
// runtime, runtime/knowledge and spec; it must not import cmd, builtin or skills.
package openai
