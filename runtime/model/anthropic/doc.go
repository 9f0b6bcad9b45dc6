// Package anthropic is the model provider for Anthropic's Messages API (Claude),
// built on the official SDK github.com/anthropics/anthropic-sdk-go/v2. It
// implements model.Model and model.PartTaker: it turns runtime messages, tools and
// parts into a Messages request, streams when asked, retries transient failures
// and reports the rest as *model.Error.
//
// What the Messages API requires that the runtime's messages do not say:
//   - System messages go in the request's system field; the results of one
//     round's tool calls go in one user message of tool_result blocks, since the
//     API wants every tool_use answered in the message right after it.
//   - Extended thinking (model.reasoning.budget_tokens) returns thinking and
//     redacted_thinking blocks with signatures. They become Message.Reasoning
//     (Provider "anthropic", Blocks as they came) and go back unchanged, before
//     the text and tool_use blocks of their message. A request whose last
//     assistant message made tool calls without them (another provider's fallback
//     wrote it) goes without thinking, which the API would otherwise refuse.
//   - Prompt caching is asked for, unless model.cache is false, by marking the
//     last system block and the last tool definition as cache breakpoints. Usage
//     counts cache reads and writes as prompt tokens, and apart
//     (CachedPromptTokens, CacheWriteTokens), since they are priced apart.
//   - A structured answer (Request.JSONSchema) is the input of a synthetic tool of
//     that name, which the model is made to call; its call becomes the answer's
//     text with FinishStop.
//   - Stop reasons: end_turn and stop_sequence are FinishStop, tool_use
//     FinishToolCalls, max_tokens FinishLength (tool calls whose input it cut off
//     are refused), refusal FinishContentFilter; pause_turn is sent back to be
//     continued, up to three times; others are passed on as they came.
//
// Bounds: model.timeout bounds each attempt as a whole, streamed or not. The SDK
// retries a connection failure, 408, 409, 429, 5xx and Anthropic's 529
// (overloaded), waiting as retry-after-ms or retry-after say; an error event in a
// stream that had begun (overloaded_error, …) is not retried and is reported with
// the status its type stands for. No response body may exceed MaxResponseBytes.
//
// Only what New is given is read: the key from model.api_key_env (default
// ANTHROPIC_API_KEY), the server from model.base_url or ANTHROPIC_BASE_URL; the
// SDK's own reading of the environment and its OpenTelemetry spans are off. The
// key never appears in an error.
//
// It lives outside package runtime so the core has no heavy imports. It imports
// runtime/model and spec; it must not import cmd, builtin or skills.
package anthropic
