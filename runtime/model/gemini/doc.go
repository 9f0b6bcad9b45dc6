// Package gemini is the model provider for Google's Gemini models, on the Gemini
// API or on Vertex AI, built on the official SDK google.golang.org/genai. It
// implements model.Model and model.PartTaker: it turns runtime messages and tools
// into a generateContent request (streamGenerateContent with alt=sse when the
// caller streams), and reports failures as *model.Error.
//
// What the API requires that the runtime's messages do not say:
//   - Tool results answer a model turn in one user turn of functionResponse
//     parts, one per call, named after the call (found by its id) and with the
//     call's id when it had one. The API often sends calls without an id: they
//     get one made here (gemini_call_…), which never goes back.
//   - Every functionCall part's thoughtSignature, and a text part's, goes back
//     on the next request byte for byte: a call's in model.ToolCall.Extra
//     ("thoughtSignature", the JSON string as it came), thought summaries and
//     signed text parts in model.Message.Reasoning (Field "thought", Provider
//     gemini, Blocks the parts). Gemini 3 refuses a tool round whose signatures
//     are missing or altered with 400 INVALID_ARGUMENT.
//   - Finish reasons: STOP is stop (tool_calls when the turn made calls),
//     MAX_TOKENS is length (tool calls made as the limit hit are refused),
//     SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII and the image
//     filters are content_filter, a prompt blocked by promptFeedback is
//     content_filter with no text; others are recorded in lower case.
//   - A bad key is answered 400 API_KEY_INVALID; it is reported as a
//     configuration error (Status 401) like a refused key elsewhere.
//
// Settings come only from the spec and the environment New is given (the SDK's
// own reading of the process environment is bypassed by passing every setting
// explicitly): the key from model.api_key_env, else GEMINI_API_KEY, then
// GOOGLE_API_KEY; Vertex AI when GOOGLE_GENAI_USE_VERTEXAI is true, with
// GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, and Application Default
// Credentials; the base URL from model.base_url, else GOOGLE_GEMINI_BASE_URL
// (GOOGLE_VERTEX_BASE_URL on Vertex AI).
//
// Bounds: model.timeout bounds each attempt as a whole, headers and body,
// streamed or not. A failed connection, 408, 429 and 5xx are retried up to
// model.retries times, after the wait the server asks for (Retry-After, or the
// RetryInfo of Google's error) when it is at most a minute, else with backoff;
// the SDK's own retry, which honours neither, is not used. The SDK's automatic
// continuation is off: one call is one request. No response body may exceed
// MaxResponseBytes (16 MiB); inline files may add up to MaxInlineBytes (20 MiB).
//
// It imports runtime/model and spec; it must not import cmd, builtin or skills.
package gemini
